// The exact integer mode's dot product (grit::exact::exact_dot, which
// csrc/grit/exact_linear.h defines bit by bit) with the activation row taken
// apart once per batch row instead of once per output: its codes widened to
// int16, each block scale split into significand and exponent. The block
// sums D_b run in int32 where the law's bound allows (|D_b| < 2^bd, bd <=
// 31), else in int64. Same result bits as exact_dot for every input:
// tests/cpp/kernels/test_exact_dot.cpp holds the two equal on random codes,
// scales (NaN, infinities, zeros, subnormals) and biases. Torch-free.
#pragma once

#include <cstdint>
#include <vector>

#include "grit/exact_linear.h"

namespace grit {
namespace cpu {

// One batch row of packed activations (k int8 codes, k / k0 scales).
struct ExactActivation {
  std::vector<int16_t> codes;
  std::vector<int64_t> ma;  // block scale significands
  std::vector<int32_t> xa;  // and exponents: scale = ma * 2^xa
  bool finite = true;       // false: some block scale is NaN or infinite
};

void exact_activation(const exact::Law& L, const int8_t* codes, const float* scales, int64_t k,
                      ExactActivation* out);

// exact_dot(L, codes, scales, w, ws, k, has_bias, bias) for the row `a` was
// made from. `p` is scratch for k / k0 values.
float exact_dot_row(const exact::Law& L, const ExactActivation& a, const int16_t* w, const exact::WScale* ws,
                    int64_t k, bool has_bias, float bias, int64_t* p);

}  // namespace cpu
}  // namespace grit
