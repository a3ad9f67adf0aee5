// The packed_linear law: how y = x W^T + b is summed on the packed weight.
// Every CPU kernel variant (scalar, AVX2, AVX-512, any thread count, any
// batch size) returns these bits; this header is where they are defined.
//
// W is never formed. decode_factors_range (decode.h) gives, per k0-group g
// of a row of W, its scale S_g, its offset Z_g (zps=l1 grades only) and the
// group's element values e; the contract's decode is w = S_g*e - Z_g. For
// one batch row x and one row of W:
//
//   P_g = e.x over the group: chain c = (column mod 4) takes fma(e, x, c),
//         four chains from +0.0, P_g = (c0 + c1) + (c2 + c3);
//   X_g = the same sum of x alone, plain adds (only for grades with Z);
//   acc = +0.0; for g ascending: acc = fma(S_g, P_g, acc), then, with Z,
//         acc = fma(-Z_g, X_g, acc);
//   y   = acc + bias (if any); a NaN result is the canonical 0x7FC00000.
//
// Why this law: the scale is applied once per group instead of once per
// weight, so a kernel does one FMA per weight (the batch-1 GEMV then runs
// near the memory limit), and it is closer to exact than rounding every
// S*e: each product e*x is exact inside its FMA. Its error is bounded by
// the float32 recursive-summation bound gamma_k * sum |x| (|S e| + |Z|).
// A NaN scale, offset, element or activation makes the output NaN, as the
// decoded weight would. Four chains let a vector unit hide FMA latency; the
// order inside each chain is ascending column.
#pragma once

#include <cmath>
#include <cstdint>

#include "format.h"
#include "grade.h"

namespace grit {

constexpr uint32_t kLawChains = 4;

// P = e.x over len columns (len > 0), in the law's four chains.
inline float law_block_dot(const float* e, const float* x, uint32_t len) {
  float c[kLawChains] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (uint32_t t = 0; t < len; ++t) c[t % kLawChains] = std::fma(e[t], x[t], c[t % kLawChains]);
  return (c[0] + c[1]) + (c[2] + c[3]);
}

// X = the sum of x over len columns, in the same four chains.
inline float law_block_sum(const float* x, uint32_t len) {
  float c[kLawChains] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (uint32_t t = 0; t < len; ++t) c[t % kLawChains] = c[t % kLawChains] + x[t];
  return (c[0] + c[1]) + (c[2] + c[3]);
}

// X_g for every group of one batch row of k columns (k a multiple of k0).
inline void law_group_sums(const float* x, int64_t k, uint32_t k0, float* out) {
  for (int64_t g = 0; g * k0 < k; ++g) out[g] = law_block_sum(x + g * k0, k0);
}

// acc for one batch row x and one row of W: e holds the row's k element
// values, S (and Z, null for grades without an offset) one value per group,
// xsum the row's X_g (read only when Z is given).
inline float law_dot(const float* e, const float* S, const float* Z, const float* x,
                     const float* xsum, int64_t k, uint32_t k0) {
  float acc = 0.0f;
  for (int64_t g = 0; g * k0 < k; ++g) {
    acc = std::fma(S[g], law_block_dot(e + g * k0, x + g * k0, k0), acc);
    if (Z != nullptr) acc = std::fma(-Z[g], xsum[g], acc);
  }
  return acc;
}

// y from acc: the bias added last, NaN canonical.
inline float law_finish(float acc, const float* bias) {
  const float y = bias != nullptr ? acc + *bias : acc;
  return std::isnan(y) ? canonical_nan() : y;
}

// Whether a grade's law has the Z term (zero points applied after the scale).
inline bool law_has_offset(const Grade& g) { return g.has_zp && g.zp_l1; }

}  // namespace grit
