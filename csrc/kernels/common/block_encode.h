// The reference encoders of csrc/grit/encode.cpp, one block at a time, as
// functions that compile for the host (the parallel CPU quantize) and for
// the device (the CUDA quantize). A copy, not a definition: every function
// here is tested against the core's encoder and fmt_encode bit for bit
// (tests/cpp/kernels/test_block_encode.cpp), on finite, zero, subnormal,
// tie, huge, NaN and Inf inputs.
//
// Each block function writes every byte of its block of each plane, so the
// planes need no clearing first. Only binary32 and binary64 arithmetic, one
// rounding per operation: the host files build with -ffp-contract=off and
// the device files with -fmad=false.
#pragma once

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "grit/hd.h"


namespace grit {
namespace blockenc {

// Values per block (the unit one call encodes) of each family, in the order
// of grit::EncoderFamily.
enum Family : int { kMxfp4 = 0, kQ4ks = 1, kNvf4 = 2, kI8s24 = 3, kS8Dense = 4 };
GRIT_HD int unit_of(int family) { return family == kQ4ks ? 256 : (family == kNvf4 ? 16 : 32); }

// MXFP4 scale rules, in the order of grit::ScaleRule.
enum Rule : int { kFloor = 0, kCeil = 1, kRne = 2 };

GRIT_HD uint32_t bits_of(float x) {
  uint32_t b;
  memcpy(&b, &x, 4);
  return b;
}
GRIT_HD float float_of(uint32_t b) {
  float x;
  memcpy(&x, &b, 4);
  return x;
}
GRIT_HD bool finite(float x) { return (bits_of(x) & 0x7F800000u) != 0x7F800000u; }
GRIT_HD bool is_nan(float x) { return (bits_of(x) & 0x7FFFFFFFu) > 0x7F800000u; }
GRIT_HD bool negative(float x) { return (bits_of(x) >> 31) != 0; }
GRIT_HD float magnitude(float x) { return float_of(bits_of(x) & 0x7FFFFFFFu); }
GRIT_HD double inf64() {
  const uint64_t b = 0x7FF0000000000000ull;
  double d;
  memcpy(&d, &b, 8);
  return d;
}
GRIT_HD void put_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v & 0xFF);
  p[1] = static_cast<uint8_t>(v >> 8);
}

// Magnitude of the sign-cleared e2m1 code i (0..7) and e4m3 code i
// (0..126): the formats' ladders, ascending in i.
GRIT_HD double e2m1_mag(int i) {
  const int e = i >> 1, m = i & 1;
  return e == 0 ? 0.5 * m : (1.0 + 0.5 * m) * static_cast<double>(1 << (e - 1));
}
GRIT_HD double e4m3_mag(int i) {
  const int e = i >> 3, m = i & 7;
  return static_cast<double>(e == 0 ? m : (8 + m) << (e - 1)) * 0x1p-9;  // exact
}

// fmt_encode's ladder walk on e4m3 (code = ladder index) without the walk:
// round to nearest even on the grid of |x|'s binade (subnormal quantum
// 2^-9 below 2^-6), saturating at 448 (code 126); an even code is an even
// mantissa, so ties go where the walk sends them.
GRIT_HD uint32_t e4m3_ladder_code(double a) {
  if (a >= 448.0) return 126;
  if (a < 0x1p-6) return static_cast<uint32_t>(rint(a * 0x1p9));  // 8 is 2^-6, code 8
  int e;
  const double m = frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const int q = static_cast<int>(rint((2.0 * m - 1.0) * 8.0));
  return static_cast<uint32_t>(((e - 1 + 7) << 3) + q);  // q == 8 carries into the exponent
}

// fmt_encode(kE2M1 / kE4M3, x, rne or rtz, satfinite) for a non-NaN x.
// e2m1 without the search: rtz counts the ladder points at or below |x|;
// rne counts the midpoints below |x|, a midpoint itself going up only from
// an odd code (0.75 -> 1.0, 1.75 -> 2.0, 3.5 -> 4.0), which is the ladder
// walk's tie rule; every point and midpoint is exact in binary32.
GRIT_HD uint32_t e2m1_code(float x, bool rtz = false) {
  const float a = magnitude(x);
  const int c = rtz ? (a >= 0.5f) + (a >= 1.0f) + (a >= 1.5f) + (a >= 2.0f) + (a >= 3.0f) + (a >= 4.0f) + (a >= 6.0f)
                    : (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) + (a > 5.0f);
  return negative(x) ? (static_cast<uint32_t>(c) | 0x8u) : static_cast<uint32_t>(c);
}
GRIT_HD uint32_t e4m3_code(float x) {
  const uint32_t c = e4m3_ladder_code(static_cast<double>(magnitude(x)));
  return negative(x) ? (c | 0x80u) : c;
}
GRIT_HD float e4m3_value(uint32_t positive_code) { return static_cast<float>(e4m3_mag(static_cast<int>(positive_code))); }

// fmt_encode(kS8, x, rne, satfinite) for a non-NaN x: never -128.
GRIT_HD uint8_t s8_code(float x) {
  const double r = rint(static_cast<double>(x));
  const int q = r <= -127.0 ? -127 : (r >= 127.0 ? 127 : static_cast<int>(r));
  return static_cast<uint8_t>(q & 0xFF);
}

// The encoder's round-half-even into [lo, hi]; false when x is not finite.
GRIT_HD bool rne_clamp(float x, int lo, int hi, int* out) {
  if (!finite(x)) return false;
  const double r = rint(static_cast<double>(x));
  *out = r < lo ? lo : (r > hi ? hi : static_cast<int>(r));
  return true;
}

// f16_bits_of(x, sat_finite = true) and f16_value.
GRIT_HD uint16_t f16_bits(float x) {
  if (is_nan(x)) return 0x7E00;
  const uint16_t sign = negative(x) ? 0x8000 : 0x0000;
  const double a = static_cast<double>(magnitude(x));
  if (!finite(x)) return sign | 0x7C00;
  if (a >= 65520.0) return sign | 0x7BFF;
  if (a < 0x1p-14) return sign | static_cast<uint16_t>(rint(a * 0x1p24));
  int e;
  const double m = frexp(a, &e);
  double mant = rint((2.0 * m - 1.0) * 1024.0);
  int biased = e - 1 + 15;
  if (mant >= 1024.0) {
    mant = 0.0;
    ++biased;
  }
  return sign | static_cast<uint16_t>((biased << 10) | static_cast<int>(mant));
}
GRIT_HD float f16_float(uint16_t bits) {
  const int e = (bits >> 10) & 0x1F, m = bits & 0x3FF;
  double v;
  if (e == 0x1F) {
    if (m != 0) return float_of(0x7FC00000u);
    v = inf64();
  } else if (e == 0) {
    v = ldexp(static_cast<double>(m), -24);
  } else {
    v = ldexp(static_cast<double>(m | 0x400), e - 25);
  }
  return static_cast<float>((bits >> 15) ? -v : v);
}

// shared_exp2_exponent: rounded log2 of a finite amax > 0.
GRIT_HD int exp2_exponent(float amax, int rule) {
  int e;
  const double f = 2.0 * frexp(static_cast<double>(amax), &e);
  const int e_floor = e - 1;
  if (rule == kCeil) return f == 1.0 ? e_floor : e_floor + 1;
  if (rule == kRne) {
    const double ff = f * f;
    if (ff > 2.0) return e_floor + 1;
    if (ff < 2.0) return e_floor;
    return (e_floor % 2 == 0) ? e_floor : e_floor + 1;
  }
  return e_floor;
}

GRIT_HD bool all_finite(const float* v, int n) {
  for (int i = 0; i < n; ++i)
    if (!finite(v[i])) return false;
  return true;
}

GRIT_HD float max_magnitude(const float* v, int n) {
  float m = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float a = magnitude(v[i]);
    if (a > m) m = a;
  }
  return m;
}

// NVFP4's amax: the largest finite magnitude of n values.
GRIT_HD float finite_max_magnitude(const float* v, uint64_t n) {
  float m = 0.0f;
  for (uint64_t i = 0; i < n; ++i) {
    const float a = magnitude(v[i]);
    if (finite(a) && a > m) m = a;
  }
  return m;
}

// ---- One block of each family. ----

// 32 values -> 16 data bytes (two e2m1 codes each, low nibble first) and one
// e8m0 scale byte.
GRIT_HD void mxfp4_block(const float* v, int rule, uint8_t* data, uint8_t* scale) {
  if (!all_finite(v, 32)) {
    for (int i = 0; i < 16; ++i) data[i] = 0;
    *scale = 0xFF;  // e2m1 has no NaN: the scale carries the poison
    return;
  }
  const float amax = max_magnitude(v, 32);
  if (amax == 0.0f) {
    *scale = 0x7F;  // 2^0: a zero block keeps its signed zeros
  } else {
    int x = exp2_exponent(amax, rule) - 2;  // e2m1 emax = 2
    x = x < -127 ? -127 : (x > 127 ? 127 : x);
    *scale = static_cast<uint8_t>(x + 127);
  }
  // Dividing by the power of two S is multiplying by its exact inverse
  // (2^-x is a binary32 for x in [-127, 127]): one rounding of the same value.
  const float inv = static_cast<float>(ldexp(1.0, amax == 0.0f ? 0 : 127 - *scale));
  for (int i = 0; i < 16; ++i)
    data[i] = static_cast<uint8_t>(e2m1_code(v[2 * i] * inv) | (e2m1_code(v[2 * i + 1] * inv) << 4));
}

// NVFP4's binary32 tensor scale from the largest finite magnitude.
GRIT_HD float nvf4_tensor_scale(float amax) {
  if (amax == 0.0f) return 1.0f;
  const float s = (amax / 6.0f) / 448.0f;
  return s == 0.0f ? float_of(1u) : s;  // the smallest positive binary32
}

// 16 values -> 8 data bytes and one e4m3 scale byte, under tensor scale sT.
GRIT_HD void nvf4_block(const float* v, float sT, bool rtz, uint8_t* data, uint8_t* scale) {
  if (!all_finite(v, 16)) {
    for (int i = 0; i < 8; ++i) data[i] = 0;
    *scale = 0x7F;  // e4m3 NaN
    return;
  }
  const float bamax = max_magnitude(v, 16);
  const uint32_t bs = bamax == 0.0f ? e4m3_code(1.0f) : e4m3_code((bamax / 6.0f) / sT);
  *scale = static_cast<uint8_t>(bs);
  const float S = sT * e4m3_value(bs);
  if (S == 0.0f) {  // NVFP4's range limit: the block decodes to signed zeros
    for (int i = 0; i < 8; ++i)
      data[i] = static_cast<uint8_t>((negative(v[2 * i]) ? 0x8 : 0) | (negative(v[2 * i + 1]) ? 0x80 : 0));
    return;
  }
  for (int i = 0; i < 8; ++i)
    data[i] = static_cast<uint8_t>(e2m1_code(v[2 * i] / S, rtz) | (e2m1_code(v[2 * i + 1] / S, rtz) << 4));
}

// 256 values -> 128 data bytes (u4, low nibble first), 8 sub-block scales,
// 8 sub-block mins and d, dmin (binary16, little-endian, 4 bytes). False
// when a step leaves binary32 (the core's encoder fails the tensor then).
GRIT_HD bool q4ks_block(const float* v, uint8_t* data, uint8_t* sc, uint8_t* dd, uint8_t* mm) {
  if (!all_finite(v, 256)) {
    for (int i = 0; i < 128; ++i) data[i] = 0;
    for (int s = 0; s < 8; ++s) sc[s] = mm[s] = 0;
    put_u16(dd, 0x7E00);  // a NaN d poisons the super-block
    put_u16(dd + 2, 0x0000);
    return true;
  }
  float steps[8], offs[8];
  for (int s = 0; s < 8; ++s) {
    const float* sub = v + 32 * s;
    float mn = sub[0], mx = sub[0];  // the first of equal values stays
    for (int i = 1; i < 32; ++i) {
      if (sub[i] < mn) mn = sub[i];
      if (sub[i] > mx) mx = sub[i];
    }
    const float lo = mn < 0.0f ? mn : 0.0f;
    const float hi = mx > 0.0f ? mx : 0.0f;
    steps[s] = (hi - lo) / 15.0f;
    offs[s] = -lo;
  }
  float smax = steps[0], omax = offs[0];
  for (int s = 1; s < 8; ++s) {
    if (steps[s] > smax) smax = steps[s];
    if (offs[s] > omax) omax = offs[s];
  }
  const uint16_t d_bits = f16_bits(smax / 63.0f);
  const uint16_t dmin_bits = f16_bits(omax / 63.0f);
  const float d = f16_float(d_bits);
  const float dmin = f16_float(dmin_bits);
  put_u16(dd, d_bits);
  put_u16(dd + 2, dmin_bits);
  for (int s = 0; s < 8; ++s) {
    int q_sc = 0, q_m = 0;
    if (d != 0.0f && !rne_clamp(steps[s] / d, 0, 63, &q_sc)) return false;
    if (dmin != 0.0f && !rne_clamp(offs[s] / dmin, 0, 63, &q_m)) return false;
    sc[s] = static_cast<uint8_t>(q_sc);
    mm[s] = static_cast<uint8_t>(q_m);
  }
  for (int s = 0; s < 8; ++s) {
    const float S = d * static_cast<float>(sc[s]);
    const float Z = dmin * static_cast<float>(mm[s]);
    for (int i = 0; i < 16; ++i) {
      int q[2] = {0, 0};
      for (int j = 0; j < 2; ++j)
        if (S != 0.0f && !rne_clamp((v[32 * s + 2 * i + j] + Z) / S, 0, 15, &q[j])) return false;
      data[16 * s + i] = static_cast<uint8_t>(q[0] | (q[1] << 4));
    }
  }
  return true;
}

// The n values of one s8 group -> n codes and its binary16 scale, ratiomaxabs:
// S = binary16(amax / 127) (1.0 for all zeros, never 0), codes s8(v / S); a
// group holding NaN or Inf gets the NaN scale and zero codes.
GRIT_HD void s8_ratio_group(const float* v, int n, uint8_t* data, uint8_t* scale) {
  if (!all_finite(v, n)) {
    put_u16(scale, 0x7E00);
    for (int i = 0; i < n; ++i) data[i] = 0;
    return;
  }
  const float amax = max_magnitude(v, n);
  uint16_t sb = amax == 0.0f ? f16_bits(1.0f) : f16_bits(amax / 127.0f);
  if (f16_float(sb) == 0.0f) sb = 0x0001;  // a zero scale is never emitted
  put_u16(scale, sb);
  const float S = f16_float(sb);
  for (int i = 0; i < n; ++i) data[i] = s8_code(v[i] / S);
}

// 32 logical values (8 quads) -> 16 kept s8 codes, one binary16 scale
// (2 bytes) and 4 aux bytes (per quad the two kept positions, 2 bits each,
// least significant first).
GRIT_HD void i8s24_block(const float* v, uint8_t* data, uint8_t* scale, uint8_t* aux) {
  float kept[16];
  for (int q = 0; q < 8; ++q) {
    // Rank by magnitude, NaN largest, ties to the lower index; keep two.
    double key[4];
    for (int j = 0; j < 4; ++j) {
      const float x = v[4 * q + j];
      key[j] = is_nan(x) ? inf64() : static_cast<double>(magnitude(x));
    }
    int a = 0;
    for (int j = 1; j < 4; ++j)
      if (key[j] > key[a]) a = j;
    int b = -1;
    for (int j = 0; j < 4; ++j)
      if (j != a && (b < 0 || key[j] > key[b])) b = j;
    const int lo = a < b ? a : b, hi = a < b ? b : a;
    kept[2 * q] = v[4 * q + lo];
    kept[2 * q + 1] = v[4 * q + hi];
    const uint8_t bits = static_cast<uint8_t>(lo | (hi << 2));
    if (q % 2 == 0) aux[q / 2] = bits;
    else aux[q / 2] = static_cast<uint8_t>(aux[q / 2] | (bits << 4));
  }
  s8_ratio_group(kept, 16, data, scale);
}

// 32 values -> 32 s8 codes and one binary16 scale (ggml's Q8_0 grade).
GRIT_HD void s8_dense_block(const float* v, uint8_t* data, uint8_t* scale) { s8_ratio_group(v, 32, data, scale); }

// ---- A whole tensor: the planes' byte offsets of block b. ----

struct Planes {
  const float* v;
  uint64_t n;       // values; a multiple of unit_of(family)
  uint8_t* p[4];    // data, scale0, scale1, aux (sized by the size equations)
  int family;
  int rule;         // kMxfp4
  bool rtz;         // kNvf4
  float tensor_scale;  // kNvf4: nvf4_tensor_scale of the largest finite |v|
};

GRIT_HD uint64_t block_count(const Planes& P) { return P.n / unit_of(P.family); }

// Bytes of plane i the blocks of n values fill (the size equations' answer
// for the canonical layout; the ops check that they agree before writing).
GRIT_HD uint64_t plane_bytes(int family, uint64_t n, int i) {
  switch (family) {
    case kMxfp4: return i == 0 ? n / 2 : (i == 1 ? n / 32 : 0);
    case kQ4ks: return i == 0 ? n / 2 : (i == 2 ? n / 64 : n / 32);
    case kNvf4: return i == 0 ? n / 2 : (i == 1 ? n / 16 : (i == 2 ? 4 : 0));
    case kI8s24: return i == 0 ? n / 2 : (i == 1 ? n / 16 : (i == 3 ? n / 8 : 0));
    case kS8Dense: return i == 0 ? n : (i == 1 ? n / 16 : 0);
  }
  return 0;
}

// Encodes block b; false where the core's encoder would fail the tensor.
GRIT_HD bool encode_block(const Planes& P, uint64_t b) {
  const float* v = P.v + b * unit_of(P.family);
  switch (P.family) {
    case kMxfp4:
      mxfp4_block(v, P.rule, P.p[0] + 16 * b, P.p[1] + b);
      return true;
    case kQ4ks:
      return q4ks_block(v, P.p[0] + 128 * b, P.p[1] + 8 * b, P.p[2] + 4 * b, P.p[3] + 8 * b);
    case kNvf4:
      nvf4_block(v, P.tensor_scale, P.rtz, P.p[0] + 8 * b, P.p[1] + b);
      return true;
    case kI8s24:
      i8s24_block(v, P.p[0] + 16 * b, P.p[1] + 2 * b, P.p[3] + 4 * b);
      return true;
    case kS8Dense:
      s8_dense_block(v, P.p[0] + 32 * b, P.p[1] + 2 * b);
      return true;
  }
  return false;
}

// NVF4's plane 2: the tensor scale's binary32 bits, little-endian.
GRIT_HD void put_tensor_scale(const Planes& P) {
  const uint32_t b = bits_of(P.tensor_scale);
  for (int k = 0; k < 4; ++k) P.p[2][k] = static_cast<uint8_t>(b >> (8 * k));
}

}  // namespace blockenc
}  // namespace grit
