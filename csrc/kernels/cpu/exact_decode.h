// The exact integer mode's weight rows, decoded a byte at a time: the same
// integer codes and block scales as the core's grit::exact::weight_row and
// the same data-plane cursors as its row_stored (csrc/grit/exact_linear.h,
// which defines them bit by bit), for 4-bit codes (either nibble order; two
// per byte where a row starts on one) and 8-bit codes, dense or 2-of-4
// sparse with 2-bit positions. Any other layout runs the core's functions. Torch-free; tests/cpp/kernels/test_exact_decode.cpp
// holds the two equal on random planes.
#pragma once

#include <cstdint>

#include "grit/exact_linear.h"

namespace grit {
namespace cpu {

// The stored codes of row r (row_stored's value).
uint64_t exact_row_stored(const exact::Law& L, const uint8_t* meta, int64_t r, int64_t k);

// Row r of the weight as k integer codes and k / k0 block scales, its first
// stored code at data-plane index `cursor` (weight_row's output).
void exact_weight_row(const exact::Law& L, const uint8_t* data, const uint8_t* s0, const uint8_t* meta,
                      int64_t r, int64_t k, uint64_t cursor, int16_t* codes, exact::WScale* scales);

}  // namespace cpu
}  // namespace grit
