// The exact integer mode of packed_linear (seed 002's packed compute): int8
// activations times integer weight codes, integer accumulation, one
// documented rounding per block, so y is a pure function of the integer
// codes and the scales: the same bits for any thread count, any run, CPU or
// CUDA. The numbers are defined here, once; the functions marked GRIT_HD are
// compiled unchanged into the CPU op and the CUDA kernels (nvcc with
// -fmad=false, C++ with -ffp-contract=off: every float step is one IEEE
// rounding, no FMA).
//
// 1. pack_activations, block K0 (the weight grade's k0; the ops take it from
//    the grade). Per row and per block of K0 consecutive values along k:
//      a = max|x| (binary32, exact);  a == 0: scale 1, codes 0;
//      s = f32(a / 127) (one binary32 division, RNE); s == 0 (a subnormal
//      a): s = 2^-149, the smallest binary32;
//      q = round_half_even(x / s) clamped to [-127, 127], x / s taken in
//      binary64 (exact enough that the result is the half-even rounding of
//      the real quotient: x and s have 24-bit significands, so a quotient
//      that is not a half-integer is at least 2^-27 away from one, far above
//      the binary64 error 2^-46 near 128).
//    Non-finite x is refused (the reason names its index). Codes int8,
//    scales binary32, one per (row, block).
//
// 2. The weight: grades whose decode law is w = S * v with v an integer
//    code times 2^qe and one block scale S (no second level, no zero point;
//    exact_law() says why any other grade is refused). Codes c = v * 2^-qe
//    are integers with |c| <= cmax; a masked sparse position is code 0.
//    S is binary16 or e8m0, S = mw * 2^xw with an integer mw of at most 11
//    (binary16) or 1 (e8m0) significant bits; the law's product S * v is then
//    exact in binary32, so these are exactly the contract's decoded weights.
//
// 3. exact_dot, for output (i, j) over the B = k / K0 blocks b:
//      D_b = sum_t a_code[i, t] * c[j, t]      (int64; |D_b| <= K0*128*cmax)
//      sa = ma * 2^xa (activation scale, ma its 24-bit significand)
//      N_b = D_b * ma * mw  (int64, exact: the bound below), at 2^(xa+xw+qe)
//    The bound: K0*128*cmax < 2^bd, and bd + 24 + sig(S) <= 63, so |N_b| <
//    2^63. A grade that breaks it is refused by exact_law() with the numbers.
//    The rescale: every term (and the bias, a binary32 m_b * 2^x_b) is put on
//    one fixed-point grid 2^G, G = Tmax - 62 + L, where Tmax is the largest
//    term bound bd + bitlen(|ma*mw|) + xa + xw + qe (bitlen(|m_b|) + x_b for
//    the bias) over the terms with a non-zero scale product, and
//    2^L >= B + 1. Each term is rounded to the grid ONCE, half to even; the
//    grid integers then sum exactly in int64 (|sum| <= (B+1) * 2^(62-L) <=
//    2^62), so the order of the sum cannot matter. The sum times 2^G is
//    rounded to binary32 once (half to even, subnormals included; beyond the
//    binary32 range it is +-inf, as IEEE conversion gives).
//    A NaN or infinite weight or activation scale makes the output NaN
//    (0x7FC00000, the decode law's poison rule); a NaN bias gives NaN and an
//    infinite bias gives that infinity. No terms with a non-zero scale
//    product and a zero bias: +0.0.
//
// The output is binary32. There is no gradient: this is an inference mode.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "grade.h"
#include "hd.h"
#include "status.h"


namespace grit {
namespace exact {

enum ScaleKind : int32_t { kScaleBinary16 = 1, kScaleE8M0 = 2 };

// The integer law of one grade, plain data (passed by value to CUDA kernels).
struct Law {
  int32_t k0 = 0;          // block length along k (the activation block too)
  int32_t elem_bits = 0;   // stored bits per element code (after pad8)
  int32_t msb = 0;         // sub-byte codes high bits first (po=msb)
  int32_t qe = 0;          // element value = code * 2^qe
  int32_t cmax = 0;        // max |code|
  int32_t scale = 0;       // ScaleKind
  int32_t scale_sig = 0;   // significant bits of a block scale (11 or 1)
  int32_t bd = 0;          // bitlen(k0 * 128 * cmax): |D_b| < 2^bd
  int32_t sp_n = 0, sp_m = 0, sp_meta_bits = 0;  // sp_m == 0: dense
  int16_t code[256] = {};  // stored element code -> integer code c
};

// The per-block weight scale as an integer significand and exponent
// (qe folded in): S * 2^qe = m * 2^x. finite == 0 poisons the block.
struct WScale {
  int32_t m, x, finite;
};

// The law of grade `g`, or the reason it has none (kInexpressible), or the
// overflow bound it breaks (kOutOfRange, naming the bound and the largest k0
// that would fit).
Status exact_law(const Grade& g, Law* out);

// ---------------------------------------------------------------------------
// Arithmetic shared bit for bit by the CPU op and the CUDA kernels.

GRIT_HD int bitlen64(uint64_t v) {
#if defined(__CUDA_ARCH__)
  return 64 - __clzll(static_cast<long long>(v));
#else
  return v ? 64 - __builtin_clzll(v) : 0;
#endif
}

GRIT_HD uint32_t f32_to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
#endif
}

GRIT_HD float bits_to_f32(uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  float f;
  std::memcpy(&f, &b, 4);
  return f;
#endif
}

// binary32 -> signed significand m and exponent x with f = m * 2^x; false
// for NaN and infinities.
GRIT_HD bool f32_parts(float f, int64_t* m, int32_t* x) {
  const uint32_t b = f32_to_bits(f);
  const uint32_t e = (b >> 23) & 0xFF, frac = b & 0x7FFFFF;
  if (e == 0xFF) return false;
  const int64_t mag = e == 0 ? frac : (frac | 0x800000u);
  *x = e == 0 ? -149 : static_cast<int32_t>(e) - 150;
  *m = (b >> 31) ? -mag : mag;
  return true;
}

// round_half_even(v / 2^s) for s >= 1, |v| < 2^63.
GRIT_HD int64_t shift_rhe(int64_t v, int s) {
  const bool neg = v < 0;
  const uint64_t u = neg ? static_cast<uint64_t>(-v) : static_cast<uint64_t>(v);
  uint64_t q;
  if (s >= 64) {
    q = 0;  // u < 2^63 <= half of 2^s
  } else {
    q = u >> s;
    const uint64_t rem = u & ((uint64_t{1} << s) - 1), half = uint64_t{1} << (s - 1);
    if (rem > half || (rem == half && (q & 1))) ++q;
  }
  return neg ? -static_cast<int64_t>(q) : static_cast<int64_t>(q);
}

// v * 2^(x - G) on the grid, one half-even rounding (exact when x >= G).
GRIT_HD int64_t to_grid(int64_t v, int32_t x, int32_t G) {
  const int s = G - x;
  if (v == 0) return 0;
  if (s <= 0) return v * (int64_t{1} << (-s));  // < 2^62 by the choice of G
  return shift_rhe(v, s);
}

// The binary32 nearest (ties to even) to S * 2^G, |S| <= 2^62.
GRIT_HD float fixed_to_f32(int64_t S, int32_t G) {
  if (S == 0) return 0.0f;
  const bool neg = S < 0;
  const uint64_t u = neg ? static_cast<uint64_t>(-S) : static_cast<uint64_t>(S);
  const int32_t e = bitlen64(u) - 1 + G;  // 2^e <= value < 2^(e+1)
  int32_t lsb = e - 23 > -149 ? e - 23 : -149;
  const int32_t s = lsb - G;
  uint64_t mant;
  if (s <= 0)
    mant = u << (-s);
  else
    mant = static_cast<uint64_t>(shift_rhe(static_cast<int64_t>(u), s));
  if (mant == (uint64_t{1} << 24)) {
    mant >>= 1;
    ++lsb;
  }
  uint32_t bits;
  if (mant >= (uint64_t{1} << 23)) {
    const int32_t E = lsb + 150;
    bits = E >= 255 ? 0x7F800000u : (static_cast<uint32_t>(E) << 23) | static_cast<uint32_t>(mant - (uint64_t{1} << 23));
  } else {
    bits = static_cast<uint32_t>(mant);  // subnormal (lsb == -149) or zero
  }
  return bits_to_f32(bits | (neg ? 0x80000000u : 0u));
}

GRIT_HD float f32_div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

GRIT_HD double f64_div(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}

// round_half_even(q) for |q| < 2^52, by exact binary64 steps.
GRIT_HD int64_t rhe_f64(double q) {
  const double f = floor(q);
  const double d = q - f;  // exact
  int64_t r = static_cast<int64_t>(f);
  if (d > 0.5 || (d == 0.5 && (r & 1))) ++r;
  return r;
}

// Pack one block of `len` finite values: codes into q, returns the scale.
GRIT_HD float pack_block(const float* x, int64_t len, int8_t* q) {
  float a = 0.0f;
  for (int64_t t = 0; t < len; ++t) {
    const float v = fabsf(x[t]);
    if (v > a) a = v;
  }
  if (a == 0.0f) {
    for (int64_t t = 0; t < len; ++t) q[t] = 0;
    return 1.0f;
  }
  float s = f32_div(a, 127.0f);
  if (s == 0.0f) s = bits_to_f32(1u);
  const double ds = static_cast<double>(s);
  for (int64_t t = 0; t < len; ++t) {
    int64_t c = rhe_f64(f64_div(static_cast<double>(x[t]), ds));
    c = c > 127 ? 127 : (c < -127 ? -127 : c);
    q[t] = static_cast<int8_t>(c);
  }
  return s;
}

GRIT_HD uint32_t read_code(const uint8_t* p, uint64_t i, int w, bool msb) {
  const uint64_t off = i * static_cast<uint64_t>(w);
  uint32_t v = 0;
  if (msb) {
    for (int t = 0; t < w; ++t) {
      const uint64_t b = off + t;
      v = (v << 1) | ((p[b >> 3] >> (7 - (b & 7))) & 1u);
    }
  } else {
    for (int t = 0; t < w; ++t) {
      const uint64_t b = off + t;
      v |= ((p[b >> 3] >> (b & 7)) & 1u) << t;
    }
  }
  return v;
}

// Survivor mask of sparse quad q (positions named by its metadata).
GRIT_HD uint32_t survivors(const Law& L, const uint8_t* meta, uint64_t q) {
  uint32_t keep = 0;
  for (int n = 0; n < L.sp_n; ++n) {
    const uint32_t idx = read_code(meta, q * L.sp_n + n, L.sp_meta_bits, false);
    if (idx < static_cast<uint32_t>(L.sp_m)) keep |= 1u << idx;
  }
  return keep;
}

// Stored codes of weight row r (the data-plane cursor moves by this much).
GRIT_HD uint64_t row_stored(const Law& L, const uint8_t* meta, int64_t r, int64_t k) {
  if (L.sp_m == 0) return static_cast<uint64_t>(k);
  const int64_t quads = k / L.sp_m;
  uint64_t c = 0;
  for (int64_t q = 0; q < quads; ++q) {
    const uint32_t keep = survivors(L, meta, static_cast<uint64_t>(r * quads + q));
    for (int j = 0; j < L.sp_m; ++j) c += (keep >> j) & 1u;
  }
  return c;
}

GRIT_HD WScale block_scale(const Law& L, const uint8_t* s0, uint64_t g0) {
  WScale w{0, 0, 0};
  if (L.scale == kScaleE8M0) {
    const uint32_t E = s0[g0];
    if (E == 255) return w;
    w.m = 1;
    w.x = static_cast<int32_t>(E) - 127 + L.qe;
  } else {
    const uint32_t h = static_cast<uint32_t>(s0[2 * g0]) | (static_cast<uint32_t>(s0[2 * g0 + 1]) << 8);
    const uint32_t e = (h >> 10) & 31, frac = h & 1023;
    if (e == 31) return w;
    const int32_t mag = static_cast<int32_t>(e == 0 ? frac : (frac | 1024u));
    w.m = (h >> 15) ? -mag : mag;
    w.x = (e == 0 ? -24 : static_cast<int32_t>(e) - 25) + L.qe;
  }
  w.finite = 1;
  return w;
}

// Weight row r as integer codes (k of them) and its k/k0 block scales;
// `cursor` is the data-plane index of the row's first stored code.
GRIT_HD void weight_row(const Law& L, const uint8_t* data, const uint8_t* s0, const uint8_t* meta,
                        int64_t r, int64_t k, uint64_t cursor, int16_t* codes, WScale* scales) {
  for (int64_t b = 0; b < k / L.k0; ++b)
    scales[b] = block_scale(L, s0, static_cast<uint64_t>(r * (k / L.k0) + b));
  if (L.sp_m == 0) {
    for (int64_t t = 0; t < k; ++t)
      codes[t] = L.code[read_code(data, static_cast<uint64_t>(r * k + t), L.elem_bits, L.msb != 0)];
    return;
  }
  const int64_t quads = k / L.sp_m;
  for (int64_t q = 0; q < quads; ++q) {
    const uint32_t keep = survivors(L, meta, static_cast<uint64_t>(r * quads + q));
    for (int j = 0; j < L.sp_m; ++j)
      codes[q * L.sp_m + j] =
          ((keep >> j) & 1u) ? L.code[read_code(data, cursor++, L.elem_bits, L.msb != 0)] : int16_t{0};
  }
}

// y[i, j] by the law above: activation row a (k int8 codes, k/k0 scales),
// weight row w (k integer codes, k/k0 WScale), optional bias.
GRIT_HD float exact_dot(const Law& L, const int8_t* a, const float* as, const int16_t* w,
                        const WScale* ws, int64_t k, bool has_bias, float bias) {
  const int64_t B = k / L.k0;
  const float nan = bits_to_f32(0x7FC00000u);
  int32_t tmax = 0;
  bool any = false;
  for (int64_t b = 0; b < B; ++b) {
    int64_t ma = 0;
    int32_t xa = 0;
    if (!f32_parts(as[b], &ma, &xa) || !ws[b].finite) return nan;
    const int64_t p = ma * ws[b].m;
    if (p == 0) continue;
    const int32_t top = L.bd + bitlen64(static_cast<uint64_t>(p < 0 ? -p : p)) + xa + ws[b].x;
    if (!any || top > tmax) tmax = top;
    any = true;
  }
  int64_t mb = 0;
  int32_t xb = 0;
  if (has_bias) {
    if (!f32_parts(bias, &mb, &xb)) return bias != bias ? nan : bias;
    if (mb != 0) {
      const int32_t top = bitlen64(static_cast<uint64_t>(mb < 0 ? -mb : mb)) + xb;
      if (!any || top > tmax) tmax = top;
      any = true;
    }
  }
  if (!any) return 0.0f;
  const int32_t G = tmax - 62 + bitlen64(static_cast<uint64_t>(B) + 1);
  int64_t sum = 0;
  for (int64_t b = 0; b < B; ++b) {
    int64_t ma = 0;
    int32_t xa = 0;
    f32_parts(as[b], &ma, &xa);
    const int64_t p = ma * ws[b].m;
    if (p == 0) continue;
    int64_t D = 0;
    const int8_t* ab = a + b * L.k0;
    const int16_t* wb = w + b * L.k0;
    for (int32_t t = 0; t < L.k0; ++t) D += static_cast<int64_t>(ab[t]) * wb[t];
    sum += to_grid(D * p, xa + ws[b].x, G);
  }
  if (mb != 0) sum += to_grid(mb, xb, G);
  return fixed_to_f32(sum, G);
}

// ---------------------------------------------------------------------------
// Host reference entry points (serial; the ops parallelise the same steps).

// x [m, k] -> codes [m, k], scales [m, k / block]. Fails (kNonFinite, the
// index named) on a non-finite x, (kOutOfRange) when k % block != 0.
Status pack_activations(const float* x, int64_t m, int64_t k, int64_t block, int8_t* codes,
                        float* scales);

// y [m, n] = the exact product of packed activations with the weight
// planes of `law` ([n, k], planes as decode takes them, their lengths
// already checked: this reads them unchecked), optional bias [n].
Status exact_linear(const Law& law, const int8_t* codes, const float* scales, int64_t m,
                    const uint8_t* data, const uint8_t* s0, const uint8_t* meta, int64_t n,
                    int64_t k, const float* bias, float* y);

}  // namespace exact
}  // namespace grit
