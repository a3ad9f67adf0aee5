// The packed_linear law: how y = x W^T + b is summed on the packed weight.
// Every CPU kernel variant (scalar, AVX2, AVX-512, any thread count, any
// batch size) returns these bits; this header is where they are defined.
//
// W takes exactly the values the contract's decode gives (its roundings
// included); the law only chooses how they are summed. decode_factors_range
// (decode.h) hands each k0-group of a row of W over in one of two forms:
//   factored:   w = S * e exactly, for every element of the group (e the
//               element's value, S the group's scale). Only grades where
//               that product is exact whenever it is finite qualify
//               (law_factors_grade), and only groups whose S is finite with
//               S * max|v| finite over the element format's values v;
//   unfactored: e = the decoded weight w itself (canonical NaN), S = 1.
// For one batch row x and one row of W:
//
//   P_g = e.x over the group: one chain from +0.0 in ascending column
//         order, c = fma(e, x, c) per column; P_g = c;
//   acc = +0.0; for g ascending: acc = fma(S_g, P_g, acc);
//   y   = acc + bias (if any); a NaN result is the canonical 0x7FC00000.
//
// A chain split at a group boundary and continued from the first part's
// acc gives the same bits: acc after groups [0, g1) is the start of groups
// [g1, G). So a weight cut by columns on group boundaries (a tensor-parallel
// row-wise shard) can reproduce the whole weight's y exactly when each part
// continues the previous part's acc (law_dot_from, in part order) and only
// the last adds the bias.
//
// Why this law: for a factored group the scale is applied once per group
// instead of once per weight, so a kernel spends one FMA per weight (the
// batch-1 GEMV of MXFP4 then runs near the memory limit); each product is
// exact inside its FMA. The error is within the float32 recursive-summation
// bound gamma_k * sum |x| |w|. NaN and infinite weights and activations
// act as they do in a float32 sum of the decoded weights' products.
// One chain per group, and a group's only extra step one FMA: a kernel
// takes its parallelism across outputs, batch rows and groups (every
// group's chain starts from +0.0, independent of the others until the
// fold), so a register-blocked GEMM holds one accumulator per output and
// spends k0 + 1 FMAs per k0 products. (An earlier form of the law split a
// group over four chains, column mod 4, and paid three adds and four
// accumulators per output for it: that capped a GEMM near 0.89x its FMA
// rate at k0 = 32 and 0.80x at k0 = 16.)
#pragma once

#include <cmath>
#include <cstdint>

#include "format.h"
#include "grade.h"

namespace grit {

// P = e.x over len columns (len > 0), in the law's one chain.
inline float law_block_dot(const float* e, const float* x, uint32_t len) {
  float c = 0.0f;
  for (uint32_t t = 0; t < len; ++t) c = std::fma(e[t], x[t], c);
  return c;
}

// acc for one batch row x and one row of W, continuing from acc0: e holds
// the row's k element values (or weights), S one value per group.
inline float law_dot_from(float acc0, const float* e, const float* S, const float* x, int64_t k, uint32_t k0) {
  float acc = acc0;
  for (int64_t g = 0; g * k0 < k; ++g) acc = std::fma(S[g], law_block_dot(e + g * k0, x + g * k0, k0), acc);
  return acc;
}

// The law's acc from +0.0.
inline float law_dot(const float* e, const float* S, const float* x, int64_t k, uint32_t k0) {
  return law_dot_from(0.0f, e, S, x, k, k0);
}

// y from acc: the bias added last, NaN canonical.
inline float law_finish(float acc, const float* bias) {
  const float y = bias != nullptr ? acc + *bias : acc;
  return std::isnan(y) ? canonical_nan() : y;
}

// Whether the law may factor a grade's groups: one scale level, no zero
// point, and S * v exact in binary32 for every finite product of a scale
// value S and an element value v. That holds for an E8M0 scale (a power of
// two) with element values whose nonzero magnitudes are at least 2^-22
// (the product's last bit stays at or above binary32's 2^-149), and for a
// binary16 scale with integer elements of at most 8 bits (11 + 8 bits of
// significand). *maxabs gets the largest finite |v| (the per-group test
// S * maxabs finite rules out overflow).
bool law_factors_grade(const Grade& g, float* maxabs);

// The per-group test: S finite and S * maxabs finite.
inline bool law_group_factored(float S, float maxabs) {
  return std::isfinite(S) && std::isfinite(S * maxabs);
}

}  // namespace grit
