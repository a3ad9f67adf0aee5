// Placement: the physical layout as a 64-bit value (GRIT SPEC 5), separate
// from the numeric contract. Bits 63..60 are the class, 59..0 the payload.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace grit {

constexpr uint64_t kPlacementUnspecified = 0;
constexpr uint64_t kClassWellKnown = 0x1, kClassLocalHash = 0x8, kClassOpaque = 0xF;

constexpr uint64_t kRowMajor = 0x1000000000000001ull;
constexpr uint64_t kColMajor = 0x1000000000000002ull;
constexpr uint64_t kSwizzle128x4B = 0x1000000000000003ull;
constexpr uint64_t kTile16x16 = 0x1000000000000004ull;
constexpr uint64_t kBlockAos = 0x1000000000000005ull;
constexpr uint64_t kLinearMeta = 0x1000000000000011ull;
constexpr uint64_t kMetaM16N8K32 = 0x1000000000000012ull;
constexpr uint64_t kPackK4_12B = 0x1000000000000020ull;

constexpr unsigned placement_class(uint64_t w) { return static_cast<unsigned>(w >> 60); }
// True iff the level-1 check accepts the word (unspecified, a well-known
// constant, a local hash or an opaque value).
bool placement_known(uint64_t w);
// Diagnostic name: "ROW_MAJOR", "LOCAL_HASH(0x...)", "RESERVED_CLASS_0x3(...)".
std::string placement_name(uint64_t w);
struct PlacementRow {
  uint64_t word;
  const char* name;
};
const PlacementRow* well_known_placements(size_t* count);
// A well-known constant by name ("ROW_MAJOR"); false if none.
bool placement_by_name(const std::string& name, uint64_t* out);

}  // namespace grit
