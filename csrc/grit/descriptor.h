// The 64-byte descriptor (GRIT SPEC 3) and its fingerprints (SPEC 6).
// Fixed little-endian offsets, no padding, no variable-length anything.
// Bytes [0,28) and [32,64) are the frame (hashed); [28,32) is the note
// (never hashed: annotating a file never changes its identity).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "grade.h"

namespace grit {

constexpr uint32_t kMagic = 0x31545247;  // "GRT1" on disk
constexpr uint8_t kHdrBytes = 64;
constexpr uint8_t kVersion = 1;
constexpr size_t kMaxRank = 8;

constexpr uint8_t kFlagHasZp = 0x01, kFlagZpMinus1 = 0x02, kFlagSparse = 0x04,
                  kFlagMsbFirst = 0x08, kFlagInterleaved = 0x10, kFlagZpL1Scaled = 0x20,
                  kFlagReservedMask = 0xC0;
constexpr uint8_t kContainerDense = 0, kContainerPad8 = 1;
constexpr uint8_t kSpMetaNone = 0, kSpMetaU2 = 1, kSpMetaU4 = 2;
constexpr uint8_t kSpOrderUnordered = 0, kSpOrderAscLsb = 1;
constexpr uint32_t kNoteAssumed = 0x1;

struct Descriptor {
  uint32_t magic = kMagic;            // [0,4)
  uint8_t hdr_bytes = kHdrBytes;      // 4
  uint8_t version = kVersion;         // 5
  uint8_t n_levels = 1;               // 6
  uint8_t flags = 0;                  // 7
  uint16_t elem = 0;                  // [8,10)
  uint16_t scale0 = 0;                // [10,12)
  uint16_t scale1 = 0;                // [12,14)
  uint16_t zp_fmt = 0;                // [14,16)
  int16_t group_axis = 0;             // [16,18)
  uint16_t k0 = 0;                    // [18,20)
  uint16_t k1 = 0;                    // [20,22)
  uint8_t sp_n = 0, sp_m = 0;         // 22, 23
  uint8_t sp_meta_fmt = 0;            // 24
  uint8_t sp_order = 0;               // 25
  uint8_t container = 0;              // 26
  uint8_t frame_rsvd = 0;             // 27
  uint32_t note = 0;                  // [28,32) not hashed
  uint64_t placement_data = 0;        // [32,40)
  uint64_t placement_scale = 0;       // [40,48)
  uint64_t placement_meta = 0;        // [48,56)
  uint64_t grade_id = 0;              // [56,64)
};
static_assert(sizeof(Descriptor) == 64, "the descriptor is exactly 64 bytes");
static_assert(offsetof(Descriptor, note) == 28, "note sits at [28,32)");
static_assert(offsetof(Descriptor, grade_id) == 56, "grade_id sits at [56,64)");

using Bytes64 = std::array<uint8_t, 64>;
using Id128 = std::array<uint8_t, 16>;

Bytes64 to_bytes(const Descriptor& d);
// No validation: that is the check's job, and it must take any 64 bytes.
Descriptor from_bytes(const uint8_t* b64);

// The frame fields a descriptor must carry to claim a grade.
struct DescFrame {
  uint8_t n_levels, flags;
  uint16_t elem, scale0, scale1, zp_fmt, k0, k1;
  uint8_t sp_n, sp_m, sp_meta_fmt, sp_order, container;
};
DescFrame frame_of(const Grade& g);
enum FrameField : int {
  kFfNLevels, kFfFlags, kFfElem, kFfScale0, kFfScale1, kFfZpFmt, kFfK0, kFfK1,
  kFfSpN, kFfSpM, kFfSpMetaFmt, kFfSpOrder, kFfContainer, kNumFrameFields
};
const char* frame_field_name(int f);
uint64_t frame_field_value(const Descriptor& d, int f);
uint64_t frame_field_value(const DescFrame& f, int field);
// First field where d disagrees with f, or -1.
int frame_mismatch(const Descriptor& d, const DescFrame& f);

struct Placements {
  uint64_t data = 0, scale = 0, meta = 0;
};
// Row-major data and scales; metadata LINEAR_META for sparse grades,
// ROW_MAJOR for a zero-point plane, unspecified when there is no aux plane.
// These are the placements of the reference descriptors of SPEC 10.
Placements default_placements(const Grade& g);
Descriptor descriptor_for(const Grade& g, const Placements& p, int16_t group_axis = 0,
                          uint32_t note = 0);

// gid = FNV-1a-128(canonical || 0x00 || frame(60) || u32le(rank) || i64le(dims)).
Id128 gid_of(const Descriptor& d, std::string_view canonical, const int64_t* dims, size_t rank);

struct Plane {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
};
// digest = FNV-1a-128 over u64le(len) || bytes, for the four planes in order.
Id128 digest_of(const Plane planes[4]);

// Field-by-field difference, one line per field that differs.
std::string explain(const Descriptor& a, const Descriptor& b);
std::string flags_name(uint8_t flags);

}  // namespace grit
