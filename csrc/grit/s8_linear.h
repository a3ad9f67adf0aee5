// The s8 activation law: y = x W^T + b with every row of x packed to int8
// (activations="s8", W4A8 / W8A8). Integer block sums, float32 scales
// applied once per block. This header defines the bits; the CPU kernels
// (kernels/cpu/s8_tile.h) are fast copies, tested equal to it.
//
// 1. The activation block kb = activation_block(k0): the weight's k0 when
//    k0 <= 256, else the largest power of two <= 256 dividing k0 (a
//    per-channel grade's k0 = in_features splits into blocks of 256, 128,
//    ...). Each row of x and each block of kb consecutive values is packed
//    by the exact mode's packing (exact_linear.h step 1): a = max|x|,
//    s = f32(a / 127) (1 for a zero block, 2^-149 where it underflows),
//    codes round_half_even(x / s) clamped to [-127, 127]. Non-finite x is
//    refused.
//
// 2. The weight, per k0-group g, as the decode gives it (decode_terms_range):
//    the group scale S_g, element values e, and the zero point: the law
//    takes integer codes c = e * 2^-qe (qe: the largest power of two that
//    every finite element value is a multiple of: 0 for integers, -1 for
//    e2m1), under zps=shared the integer zi_g = z_g * 2^-qe, under zps=l1 the
//    offset O_g = -Z_g (binary32, as the decode rounds it).
//
// 3. Per output (i, j), blocks b ascending (g the group block b lies in):
//      D_b = sum_t a_t c_t - zi_g * A_b   (exact integers; A_b = sum_t a_t)
//      acc = fma(f32(sa_b * S_g), f32(D_b) * 2^qe, acc)        (acc from +0.0)
//      zps=l1 only: acc = fma(f32(sa_b * O_g), f32(A_b), acc)
//    y = acc + bias (if any), a NaN result the canonical 0x7FC00000.
//    |D_b| <= kb * 127 * max|c - zi| < 2^24 (s8_law refuses a grade that
//    would break it), so f32(D_b) and its product with 2^qe are exact: the
//    only roundings are the scale products and the FMAs, in this order.
//
// Why this law: the exact mode (exact_linear.h) puts every block term on an
// int64 fixed-point grid, which costs more per block than the block's whole
// integer dot product; here a block costs one multiply and one FMA per
// output, as ggml's q8 kernels spend, and the result is still a pure
// function of the codes and scales: the same bits for every thread count,
// every kernel variant and every batch composition. The error the packing
// adds is what the report measures (|x - s * codes| <= s / 2 per value);
// the float rounding is within the float32 summation bound over k / kb
// terms. Grades whose element values are not small integers times a power
// of two (e4m3, e5m2, bf16 elements), or with non-finite element codes, are
// refused with the reason; so is a zps=shared zero point that is not an
// integer format.
#pragma once

#include <cmath>
#include <cstdint>

#include "descriptor.h"
#include "format.h"
#include "grade.h"
#include "status.h"

namespace grit {
namespace s8 {

enum ZeroKind : int32_t { kZpNone = 0, kZpShared = 1, kZpOffset = 2 };

constexpr int32_t kMaxBlock = 256;

// The law of one grade, plain data.
struct Law {
  int32_t k0 = 0;          // weight group
  int32_t kb = 0;          // activation block (divides k0)
  int32_t elem_bits = 0;   // stored bits per element code (after pad8)
  int32_t msb = 0;         // sub-byte codes high bits first
  int32_t qe = 0;          // element value = c * 2^qe
  int32_t zero = kZpNone;  // ZeroKind
  int32_t sp_n = 0, sp_m = 0, sp_meta_bits = 0;  // sp_m == 0: dense
  int16_t code[256] = {};  // stored element code -> integer code c
};

// kb for a weight group of k0.
int32_t activation_block(uint32_t k0);

// The law of grade `g`, or the reason it has none (kInexpressible).
Status s8_law(const Grade& g, Law* out);

// Weight row terms of one row: codes c (k of them), per group S, O (0 unless
// zps=l1) and zi (0 unless zps=shared). `stored` is the sparse data cursor
// at the row's start, advanced past the row. Plane lengths are checked.
Status weight_row_terms(const Grade& g, const Law& L, const Plane planes[4], uint64_t numel, int64_t row,
                        int64_t k, uint64_t* stored, int16_t* c, float* S, float* O, int32_t* zi);

// One output by the law: activation row a (k codes, k / kb scales sa),
// weight row terms as weight_row_terms gives them, bias null or one value.
inline float dot(const Law& L, const int8_t* a, const float* sa, const int16_t* c, const float* S,
                 const float* O, const int32_t* zi, int64_t k, const float* bias) {
  const int64_t B = k / L.kb, per = L.k0 / L.kb;
  const float p2 = std::ldexp(1.0f, L.qe);
  float acc = 0.0f;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t g = b / per;
    int32_t D = 0, A = 0;
    const int8_t* ab = a + b * L.kb;
    const int16_t* cb = c + b * L.kb;
    for (int32_t t = 0; t < L.kb; ++t) {
      D += static_cast<int32_t>(ab[t]) * cb[t];
      A += ab[t];
    }
    if (L.zero == kZpShared) D -= zi[g] * A;
    const float w = sa[b] * S[g];
    acc = std::fma(w, static_cast<float>(D) * p2, acc);
    if (L.zero == kZpOffset) acc = std::fma(sa[b] * O[g], static_cast<float>(A), acc);
  }
  const float y = bias != nullptr ? acc + *bias : acc;
  return std::isnan(y) ? canonical_nan() : y;
}

// Host reference: y [m, n] from packed activations (codes [m, k], scales
// [m, k / kb]) and the weight planes ([n, k], checked here), bias null or [n].
Status linear(const Grade& g, const Law& L, const int8_t* codes, const float* scales, int64_t m,
              const Plane planes[4], int64_t n, int64_t k, const float* bias, float* y);

}  // namespace s8
}  // namespace grit
