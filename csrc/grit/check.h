// The boundary check (GRIT SPEC 7). Defined for every possible 64 input
// bytes and every shape: no undefined behaviour, no allocation, no read of a
// plane at level 1. The evaluation order is normative and the first failure
// wins, so two implementations report the same status for the same input:
//   1 frame      -> GradeUnknown
//   2 grade      -> GradeUnknown
//   3 placement  -> PlacementUnknown
//   4 sizes      -> SizeMismatch
//   5 content    -> DigestMismatch (level 2 only)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "descriptor.h"

namespace grit {

enum class CheckStatus : uint8_t {
  kOk = 0, kSizeMismatch = 1, kGradeUnknown = 2, kPlacementUnknown = 3, kDigestMismatch = 4
};
// "Ok", "SizeMismatch", "GradeUnknown", "PlacementUnknown", "DigestMismatch".
const char* check_status_name(CheckStatus s);

// Which field or rule failed.
enum class CheckField : uint8_t {
  kNone, kMagic, kHdrBytes, kVersion, kNLevels, kFlags, kFrameRsvd, kContainer,
  kLevel1Only, kSparseAndZp, kZpL1NeedsZp, kZpL1NeedsTwoLevels, kElemBiasOvr,
  kNanEncElem, kNanEncScale0, kNanEncScale1, kNanEncZp,
  kGradeId, kGradeFrame,
  kPlacementData, kPlacementScale, kPlacementMeta, kPlacementMetaMissing, kPlacementMetaStray,
  kShape, kGroupAxis, kK0, kSpM, kK1, kSpMetaFmt, kPlaneBytes,
  kDigest, kSpOrder
};
const char* check_field_name(CheckField f);

struct CheckResult {
  CheckStatus status = CheckStatus::kOk;
  CheckField field = CheckField::kNone;
  int8_t plane = -1;       // plane index for kPlaneBytes / kSpOrder
  int8_t frame_field = -1; // FrameField for kGradeFrame
  uint64_t expected = 0;   // what the contract requires (when a number says it)
  uint64_t found = 0;      // what the input holds
  bool ok() const { return status == CheckStatus::kOk; }
};

// The five size equations (SPEC 7.3 step 4). Values that do not fit in 64
// bits saturate to UINT64_MAX here; check_level1 compares the exact values,
// so no u64 plane length (UINT64_MAX included) matches them.
struct PlaneSizes {
  uint64_t numel = 0, nnz = 0, n_groups0 = 0, n_groups1 = 0;
  uint64_t bytes[4] = {0, 0, 0, 0};
};
CheckResult expected_plane_bytes(const Descriptor& d, const int64_t* dims, size_t rank,
                                 PlaneSizes* out);

// Level 1: frame, grade, placement, sizes. `grade` is the contract the
// caller claims; nullptr means "one of the reference grades", looked up by
// grade_id (what any consumer without extra knowledge can verify).
CheckResult check_level1(const Descriptor& d, const int64_t* dims, size_t rank,
                         const uint64_t plane_bytes[4], const Grade* grade = nullptr);

// Level 1, then (level >= 2) content: the plane digest against
// `expected_digest` when given, and ascending sparsity metadata when the
// descriptor declares SPORDER_ASC_LSB.
CheckResult check(const Descriptor& d, const int64_t* dims, size_t rank, const Plane planes[4],
                  int level, const Id128* expected_digest = nullptr, const Grade* grade = nullptr);

// True iff every quad's survivor indices are strictly increasing and < M.
bool meta_is_ascending(const uint8_t* meta, uint64_t meta_bytes, uint64_t numel, uint32_t sp_n,
                       uint32_t sp_m, uint32_t bits);

// A sentence for people: what failed, what was expected, what was found.
std::string describe(const CheckResult& r, const Descriptor& d);

}  // namespace grit
