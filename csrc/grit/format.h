// The 16-bit format word (GRIT SPEC 2) and exact scalar encode/decode.
//
//  bit 15     14        13     12..11   10       9..5   4..0
//     bias_ovr unsigned szero  nan_enc  has_inf  p      width-1
//
// p == 0 is exponent-only, p == 31 is integer, 1..30 is floating point with
// p-1 stored mantissa bits. A format is a table row; registered rows are the
// v1 ladder. Decode of any registered code is exact in binary32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "status.h"

namespace grit {

using fmt_t = uint16_t;

constexpr int kPExponentOnly = 0;
constexpr int kPInteger = 31;
enum NanEnc : int { kNanNone = 0, kNanOne = 1, kNanAll = 2, kNanReserved = 3 };

constexpr fmt_t fmt_pack(int width, int p, int has_inf = 0, int nan_enc = 0, int szero = 0,
                         int is_unsigned = 0, int bias_ovr = 0) {
  return static_cast<fmt_t>(((width - 1) & 0x1F) | ((p & 0x1F) << 5) | ((has_inf & 1) << 10) |
                            ((nan_enc & 3) << 11) | ((szero & 1) << 13) |
                            ((is_unsigned & 1) << 14) | ((bias_ovr & 1) << 15));
}

constexpr fmt_t kFmtAbsent = 0x0000;
constexpr fmt_t kE2M1 = fmt_pack(4, 2, 0, kNanNone, 1);
constexpr fmt_t kE4M3 = fmt_pack(8, 4, 0, kNanOne, 1);
constexpr fmt_t kE8M0 = fmt_pack(8, 0, 0, kNanOne, 0, 1);
constexpr fmt_t kBinary16 = fmt_pack(16, 11, 1, kNanAll, 1);
constexpr fmt_t kBinary32 = fmt_pack(32, 24, 1, kNanAll, 1);
constexpr fmt_t kU2 = fmt_pack(2, kPInteger, 0, 0, 0, 1);
constexpr fmt_t kU4 = fmt_pack(4, kPInteger, 0, 0, 0, 1);
constexpr fmt_t kU6 = fmt_pack(6, kPInteger, 0, 0, 0, 1);
constexpr fmt_t kU8 = fmt_pack(8, kPInteger, 0, 0, 0, 1);
constexpr fmt_t kS4 = fmt_pack(4, kPInteger, 0, 0, 0, 0);
constexpr fmt_t kS8 = fmt_pack(8, kPInteger, 0, 0, 0, 0);

struct FmtInfo {
  int width, p, has_inf, nan_enc, szero, is_unsigned, bias_ovr;
  bool is_integer() const { return p == kPInteger; }
  bool is_exponent_only() const { return p == kPExponentOnly; }
  int sign_bits() const { return is_unsigned ? 0 : 1; }
  int mantissa_bits() const { return p - 1; }
  int exponent_bits() const { return width - sign_bits() - mantissa_bits(); }
};

constexpr FmtInfo fmt_unpack(fmt_t w) {
  return FmtInfo{(w & 0x1F) + 1,     (w >> 5) & 0x1F,  (w >> 10) & 1, (w >> 11) & 3,
                 (w >> 13) & 1,      (w >> 14) & 1,    (w >> 15) & 1};
}
constexpr int fmt_width(fmt_t w) { return (w & 0x1F) + 1; }

// One row of the v1 ladder.
struct FormatRow {
  const char* name;
  fmt_t word;
};
const FormatRow* registered_formats(size_t* count);
// Canonical name of a registered word, or nullptr.
const char* format_name(fmt_t word);
// Registered word for a canonical name; false if none.
bool format_by_name(std::string_view name, fmt_t* out);

// Exact value of one stored code. NaN comes back as the canonical quiet NaN
// (0x7FC00000). A word with no exponent field decodes to NaN.
float fmt_decode(fmt_t word, uint32_t code);

enum class Rounding { kRne, kRna, kRtz, kRtp, kRtn };
enum class Saturation { kSatFinite, kSatMax, kOvfInf };

// binary32 -> stored code. Fails (kBadValue) for NaN into a format without a
// NaN encoding, and for ovfinf overflow into a narrow format with infinities.
// Signed integers under satfinite never produce the asymmetric minimum.
Status fmt_encode(fmt_t word, float x, Rounding rnd, Saturation sat, uint32_t* code);

// The canonical NaN code of a format; false if it has none.
bool fmt_nan_code(fmt_t word, uint32_t* code);

// binary16 helpers (round to nearest even; overflow saturates to +-65504
// when sat_finite, else becomes +-inf; an infinite input stays infinite).
uint16_t f16_bits_of(float x, bool sat_finite = true);
float f16_value(uint16_t bits);

// Canonical binary32 NaN, and a binary32 bit view that canonicalises NaN.
float canonical_nan();
uint32_t f32_bits(float x);
float f32_from_bits(uint32_t bits);

// Magnitude ladder of a narrow (width <= 8) format: finite magnitudes of the
// sign-cleared codes, ascending, ties by code.
struct Ladder {
  std::vector<double> mags;
  std::vector<uint32_t> codes;
};
Ladder make_ladder(fmt_t word);
double fmt_maxnorm(fmt_t word);

}  // namespace grit
