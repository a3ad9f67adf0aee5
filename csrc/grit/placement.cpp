#include "placement.h"

#include <cstdio>

namespace grit {
namespace {
constexpr PlacementRow kWellKnown[] = {
    {kRowMajor, "ROW_MAJOR"},       {kColMajor, "COL_MAJOR"},
    {kSwizzle128x4B, "SWIZZLE_128x4B"}, {kTile16x16, "TILE_16x16"},
    {kBlockAos, "BLOCK_AOS"},       {kLinearMeta, "LINEAR_META"},
    {kMetaM16N8K32, "META_M16N8K32"}, {kPackK4_12B, "PACK_K4_12B"},
};
}  // namespace

const PlacementRow* well_known_placements(size_t* count) {
  *count = sizeof(kWellKnown) / sizeof(kWellKnown[0]);
  return kWellKnown;
}

bool placement_known(uint64_t w) {
  if (w == kPlacementUnspecified) return true;
  const unsigned c = placement_class(w);
  if (c == kClassWellKnown) {
    for (const auto& r : kWellKnown)
      if (r.word == w) return true;
    return false;
  }
  return c == kClassLocalHash || c == kClassOpaque;
}

std::string placement_name(uint64_t w) {
  if (w == kPlacementUnspecified) return "PLACEMENT_UNSPECIFIED";
  for (const auto& r : kWellKnown)
    if (r.word == w) return r.name;
  char buf[64];
  const unsigned c = placement_class(w);
  const unsigned long long payload = w & ((1ull << 60) - 1);
  if (c == kClassLocalHash) {
    std::snprintf(buf, sizeof buf, "LOCAL_HASH(0x%015llx)", payload);
  } else if (c == kClassOpaque) {
    std::snprintf(buf, sizeof buf, "OPAQUE(0x%015llx)", payload);
  } else {
    std::snprintf(buf, sizeof buf, "RESERVED_CLASS_0x%x(0x%016llx)", c,
                  static_cast<unsigned long long>(w));
  }
  return buf;
}

bool placement_by_name(const std::string& name, uint64_t* out) {
  for (const auto& r : kWellKnown) {
    if (name == r.name) {
      *out = r.word;
      return true;
    }
  }
  if (name == "PLACEMENT_UNSPECIFIED") {
    *out = kPlacementUnspecified;
    return true;
  }
  return false;
}

}  // namespace grit
