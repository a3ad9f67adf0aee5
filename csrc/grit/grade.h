// The Grade: the complete numeric contract (GRIT SPEC 4). One canonical
// string, a 64-bit id = FNV-1a-64 of it. esr has no default and is always
// emitted; unknown keys are refused, never ignored.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "format.h"
#include "status.h"

namespace grit {

enum GradeKey : int {
  kKeyE, kKeyK0, kKeyS0, kKeyK1, kKeyS1, kKeyZp, kKeyZpc, kKeyZps, kKeySp,
  kKeyCt, kKeyPo, kKeyEr, kKeyEs, kKeyEsr, kKeyEsn, kKeyDr, kKeyDs, kKeyDt,
  kKeyAo, kKeyAp, kKeyAb, kKeyAi, kKeyAn, kNumGradeKeys
};
// Key names in canonical (not alphabetical) order.
const char* grade_key_name(int key);

struct Grade {
  // Canonical token of every key, defaults filled in.
  std::array<std::string, kNumGradeKeys> field;
  bool has_l1 = false, has_zp = false, has_sp = false;
  std::string canonical;
  uint64_t id = 0;

  // The same contract as numbers, for the check, the decoder and encoders.
  fmt_t elem = kFmtAbsent, scale0 = kFmtAbsent, scale1 = kFmtAbsent, zp = kFmtAbsent;
  uint32_t k0 = 0, k1 = 0;
  uint32_t sp_n = 0, sp_m = 0, sp_meta_bits = 0;
  bool sp_ascending = false;
  bool zp_minus1 = false, zp_l1 = false, pad8 = false, msb_first = false;

  const std::string& esr() const { return field[kKeyEsr]; }
  const std::string& er() const { return field[kKeyEr]; }
  int n_levels() const { return has_l1 ? 2 : 1; }
};

// Parse any accepted spelling. Whitespace is ignored, keys and values are
// case-free, field order is free. On failure the Status names the error
// class, the token and its byte offset in `text`.
Status grade_parse(std::string_view text, Grade* out);

// The decode-relevant projection, every field explicit ("gritdec1(...)").
// Two grades decode alike iff their projections are equal.
std::string decode_projection(const Grade& g);

// The reference grades of SPEC 10 and their esr/er siblings.
struct ReferenceGrade {
  const char* name;       // "GRADE_MXFP4"
  const char* short_name; // "MXFP4"
  const Grade* grade;
};
const ReferenceGrade* reference_grades(size_t* count);
// By "GRADE_MXFP4" or "MXFP4" (case-insensitive); nullptr if none.
const ReferenceGrade* reference_grade(std::string_view name);
const ReferenceGrade* reference_grade_by_id(uint64_t id);

}  // namespace grit
