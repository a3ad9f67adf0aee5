// Signed 4-bit row groups with binary64 scales (seed 001), torch_grit's
// "INT4G<g>" grade. For an R x C matrix and group size g, each row splits
// into ceil(C/g) contiguous groups (a short final group keeps its own scale;
// groups never cross rows). Per group: a = max|w|, s = a/7 (s = 1 for an
// all-zero group), q = clamp(round_half_away(w/s), -7, 7), w' = q*s, all in
// binary64. Codes are two's-complement nibbles in one row-major stream, low
// nibble first; an odd count leaves a zero high nibble. Nibble 8 (-8) is
// reserved and refused on read.
//
// GRIT v1 cannot carry this grade: its widest scale format is binary32 and
// its size equations need C % g == 0. Export as GRIT is refused with that
// reason (int4g_grit_inexpressible), never approximated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "status.h"

namespace grit {

// The grade name "INT4G<g>": ASCII, case-insensitive, surrounding ASCII
// whitespace ignored, g a decimal without a leading zero. kMalformed when the
// text is not of that form (it may be a GRIT grade), kOutOfRange when g
// exceeds 2^62.
Status int4g_parse_name(const char* text, size_t len, uint64_t* group);

// N = R*C codes and G = R*ceil(C/g) groups; fails on empty or overflowing
// shapes and g == 0.
Status int4g_layout(uint64_t rows, uint64_t cols, uint64_t group, uint64_t* count,
                    uint64_t* groups);

// One code under a supplied scale: refuses a non-finite value and a scale
// that is not finite and > 0; a finite ratio beyond the range saturates.
Status int4g_code(double value, double scale, int* code);

Status int4g_encode(const double* w, uint64_t rows, uint64_t cols, uint64_t group,
                    std::vector<uint8_t>* packed, std::vector<double>* scales);

// The reader's checks that read no byte: layout, payload length, scale
// count.
Status int4g_validate_lengths(uint64_t rows, uint64_t cols, uint64_t group, uint64_t packed_len,
                              uint64_t n_scales);

// Those, then the one byte holding the padding nibble.
Status int4g_validate_layout(uint64_t rows, uint64_t cols, uint64_t group, const uint8_t* packed,
                             uint64_t packed_len, uint64_t n_scales);

// The reader: int4g_validate_layout, then the scales, reserved codes and
// finite reconstructions, each refused with its own error class (the
// first offender of the first failing check).
Status int4g_validate(uint64_t rows, uint64_t cols, uint64_t group, const uint8_t* packed,
                      uint64_t packed_len, const double* scales, uint64_t n_scales);

// Validate, then reconstruct w' = q*s into out[R*C] (row-major).
Status int4g_decode(uint64_t rows, uint64_t cols, uint64_t group, const uint8_t* packed,
                    uint64_t packed_len, const double* scales, uint64_t n_scales, double* out);

// Reconstruct rows [row_begin, row_end) only, into out[(row_end-row_begin)*C].
// No checks: the planes must have passed int4g_validate for this shape and
// group, and row_begin <= row_end <= rows. int4g_decode runs this after
// validating, so both give the same values.
void int4g_decode_rows(uint64_t rows, uint64_t cols, uint64_t group, const uint8_t* packed,
                       const double* scales, uint64_t row_begin, uint64_t row_end, double* out);

// Why the grade cannot be exported as a GRIT v1 descriptor.
const char* int4g_grit_inexpressible();

}  // namespace grit
