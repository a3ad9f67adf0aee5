// s8_tile.h on AVX-512 (F, BW, DQ, CD, VL, VNNI). The tile builder's scalar
// parts (group terms, the fallback codes) are plain C++; the code readers
// are the exact tile's (exact_tile_codes); the dot product is compiled for
// the AVX-512 target below and reached only when s8_tile_supported() found
// the CPU has it. Every float step is grit::s8::dot's, in its order.
#include "kernels/cpu/s8_tile.h"

#include <cmath>
#include <cstring>

#include "grit/exact_linear.h"
#include "grit/format.h"
#include "kernels/cpu/exact_tile.h"

namespace grit {
namespace cpu {
namespace {

const float* binary16_values() {
  static const std::vector<float> t = [] {
    std::vector<float> v(65536);
    for (uint32_t c = 0; c < 65536; ++c) v[c] = fmt_decode(kBinary16, c);
    return v;
  }();
  return t.data();
}

// width: the stored bits per value (the decode's: padded for s0 and zp,
// dense for s1).
S8ValueReader value_reader(fmt_t f, int width, const uint8_t* p) {
  S8ValueReader r;
  r.p = p;
  if (width == 8) {
    for (uint32_t c = 0; c < 256; ++c) r.table[c] = fmt_decode(f, c);
    r.bytes = 1;
    r.ok = true;
  } else if (width == 16 && f == kBinary16) {
    r.wide = binary16_values();
    r.bytes = 2;
    r.ok = true;
  } else if (width == 32 && f == kBinary32) {
    r.bytes = 4;
    r.ok = true;
  }
  return r;
}

int padded_width(fmt_t f) { return fmt_width(f) <= 8 ? 8 : fmt_width(f); }

// Value i of a reader whose width is known at compile time.
template <int kBytes>
inline float value_at(const S8ValueReader& R, uint64_t i) {
  if (kBytes == 1) return R.table[R.p[i]];
  if (kBytes == 2) return R.wide[static_cast<uint32_t>(R.p[2 * i]) | static_cast<uint32_t>(R.p[2 * i + 1]) << 8];
  float f;
  std::memcpy(&f, R.p + 4 * i, 4);
  return f;
}

// fn(value_at<width>) for a reader's width, chosen once outside the loops.
template <class Fn>
inline void with_reader(const S8ValueReader& R, Fn&& fn) {
  if (R.bytes == 1)
    fn([&R](uint64_t i) { return value_at<1>(R, i); });
  else if (R.bytes == 2)
    fn([&R](uint64_t i) { return value_at<2>(R, i); });
  else
    fn([&R](uint64_t i) { return value_at<4>(R, i); });
}

// The group terms of rows r0 .. r0 + rows - 1 into the tile, as
// decode_terms_range computes them (S = s1 * s0, O = -(s1' * z), zi = z *
// 2^-qe: the same operations on the same values), one plane at a time so
// each loop reads one width; false where a plane's width has no reader.
bool tile_terms(const S8Terms& R, const Grade& g, const s8::Law& L, int64_t r0, int rows, int64_t k, S8Tile* t) {
  if (!R.ok) return false;
  const int64_t G = k / L.k0;
  const uint64_t per = g.zp_l1 ? 2 : 1;
  const bool walk = g.k1 != 0;  // k1 = 0: one level-1 group (g1 = 0 throughout)
  const float p2 = std::ldexp(1.0f, -L.qe);
  for (int r = 0; r < rows; ++r) {
    const uint64_t base = static_cast<uint64_t>((r0 + r) * G);
    float* S_out = t->S.data() + r;
    float* O_out = t->O.data() + r;
    int32_t* zi_out = t->zi.data() + r;
    with_reader(R.s0, [&](auto s0) {
      for (int64_t q = 0; q < G; ++q) S_out[q * kS8TileRows] = s0(base + static_cast<uint64_t>(q));
    });
    // level-1 group of g0 = base + q: g1 = g0 / k1, walked without a division per group
    const uint64_t g1_first = walk ? base / g.k1 : 0, in1_first = walk ? base % g.k1 : 0;
    if (g.has_l1)
      with_reader(R.s1, [&](auto s1) {
        uint64_t g1 = g1_first, in1 = in1_first;
        for (int64_t q = 0; q < G; ++q) {
          S_out[q * kS8TileRows] = s1(per * g1) * S_out[q * kS8TileRows];
          if (walk && ++in1 == g.k1) in1 = 0, ++g1;
        }
      });
    if (!g.has_zp) continue;
    with_reader(R.zp, [&](auto zp) {
      if (g.zp_l1) {
        with_reader(R.s1, [&](auto s1) {
          uint64_t g1 = g1_first, in1 = in1_first;
          for (int64_t q = 0; q < G; ++q) {
            float z = zp(base + static_cast<uint64_t>(q));
            if (g.zp_minus1) z = z + 1.0f;
            O_out[q * kS8TileRows] = -(s1(per * g1 + 1) * z);
            if (walk && ++in1 == g.k1) in1 = 0, ++g1;
          }
        });
      } else {
        for (int64_t q = 0; q < G; ++q) {
          float z = zp(base + static_cast<uint64_t>(q));
          if (g.zp_minus1) z = z + 1.0f;
          zi_out[q * kS8TileRows] = static_cast<int32_t>(z * p2);
        }
      }
    });
  }
  return true;
}

// The exact mode's code layout view of the s8 law (for exact_tile_codes).
exact::Law code_layout(const s8::Law& L) {
  exact::Law e;
  e.k0 = L.k0;
  e.elem_bits = L.elem_bits;
  e.msb = L.msb;
  e.sp_n = L.sp_n;
  e.sp_m = L.sp_m;
  e.sp_meta_bits = L.sp_meta_bits;
  std::memcpy(e.code, L.code, sizeof(e.code));
  return e;
}

bool vnni_cpu() {
  __builtin_cpu_init();
  static const bool cpu = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512cd") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  return cpu;
}

}  // namespace

void s8_terms_plan(const Grade& g, const Plane planes[4], S8Terms* out) {
  out->s0 = value_reader(g.scale0, padded_width(g.scale0), planes[1].data);
  if (g.has_l1) out->s1 = value_reader(g.scale1, fmt_width(g.scale1), planes[2].data);
  if (g.has_zp) out->zp = value_reader(g.zp, padded_width(g.zp), planes[3].data);
  out->ok = out->s0.ok && (!g.has_l1 || out->s1.ok) && (!g.has_zp || out->zp.ok);
}

bool s8_tile_supported(const s8::Law& L, int64_t k) {
#if defined(__x86_64__)
  return vnni_cpu() && L.kb % 2 == 0 && k % 2 == 0;
#else
  (void)L;
  (void)k;
  return false;
#endif
}

void s8_activation(const s8::Law& L, const int8_t* codes, const float* scales, int64_t k, S8Activation* out) {
  out->pairs.resize(static_cast<size_t>(k / 2));
  for (int64_t p = 0; p < k / 2; ++p)
    out->pairs[p] = static_cast<int32_t>(static_cast<uint16_t>(static_cast<int16_t>(codes[2 * p]))) |
                    static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(static_cast<int16_t>(codes[2 * p + 1]))) << 16);
  const int64_t B = k / L.kb;
  out->sums.resize(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    int32_t A = 0;
    for (int32_t t = 0; t < L.kb; ++t) A += codes[b * L.kb + t];
    out->sums[b] = A;
  }
  out->scales = scales;
}

Status s8_tile_from_planes(const S8Terms& terms, const Grade& g, const s8::Law& L, const Plane planes[4],
                           uint64_t numel, const uint64_t* cursor, int64_t r0, int rows, int64_t k, S8Tile* t) {
  const int64_t G = k / L.k0;
  t->rows = rows;
  t->pairs.assign(static_cast<size_t>(k / 2 * kS8TileRows), 0);
  t->S.assign(static_cast<size_t>(G * kS8TileRows), 0.0f);
  t->O.assign(static_cast<size_t>(G * kS8TileRows), 0.0f);
  t->zi.assign(static_cast<size_t>(G * kS8TileRows), 0);
  const exact::Law layout = code_layout(L);
  const bool codes = exact_tile_codes(layout, planes[0].data, planes[3].data, cursor, r0, rows, k, t->pairs.data());
  if (codes && tile_terms(terms, g, L, r0, rows, k, t)) return Status::Ok();
  // The core's terms, row by row (any layout, any plane width).
  std::vector<int16_t> c(static_cast<size_t>(k));
  std::vector<float> S(static_cast<size_t>(G)), O(static_cast<size_t>(G));
  std::vector<int32_t> zi(static_cast<size_t>(G));
  for (int r = 0; r < rows; ++r) {
    uint64_t stored = cursor[r];
    const Status st = s8::weight_row_terms(g, L, planes, numel, r0 + r, k, &stored, c.data(), S.data(), O.data(),
                                           zi.data());
    if (!st.ok()) return st;
    for (int64_t p = 0; p < k / 2; ++p)
      t->pairs[p * kS8TileRows + r] =
          static_cast<int32_t>(static_cast<uint16_t>(c[2 * p])) |
          static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(c[2 * p + 1])) << 16);
    for (int64_t q = 0; q < G; ++q) {
      t->S[q * kS8TileRows + r] = S[q];
      t->O[q * kS8TileRows + r] = O[q];
      t->zi[q * kS8TileRows + r] = zi[q];
    }
  }
  return Status::Ok();
}

Status s8_tile_terms(const S8Terms& terms, const Grade& g, const s8::Law& L, const Plane planes[4],
                     uint64_t numel, const uint64_t* cursor, int64_t r0, int rows, int64_t k, S8Tile* t) {
  const int64_t G = k / L.k0;
  t->rows = rows;
  t->S.assign(static_cast<size_t>(G * kS8TileRows), 0.0f);
  t->O.assign(static_cast<size_t>(G * kS8TileRows), 0.0f);
  t->zi.assign(static_cast<size_t>(G * kS8TileRows), 0);
  if (tile_terms(terms, g, L, r0, rows, k, t)) return Status::Ok();
  // The core's terms, row by row (any plane width); the codes it reads are dropped.
  std::vector<int16_t> c(static_cast<size_t>(k));
  std::vector<float> S(static_cast<size_t>(G)), O(static_cast<size_t>(G));
  std::vector<int32_t> zi(static_cast<size_t>(G));
  for (int r = 0; r < rows; ++r) {
    uint64_t stored = cursor[r];
    const Status st = s8::weight_row_terms(g, L, planes, numel, r0 + r, k, &stored, c.data(), S.data(), O.data(),
                                           zi.data());
    if (!st.ok()) return st;
    for (int64_t q = 0; q < G; ++q) {
      t->S[q * kS8TileRows + r] = S[q];
      t->O[q * kS8TileRows + r] = O[q];
      t->zi[q * kS8TileRows + r] = zi[q];
    }
  }
  return Status::Ok();
}

}  // namespace cpu
}  // namespace grit

#if defined(__x86_64__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512cd,avx512vl,avx512vnni,avx2,fma")
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512dq,avx512cd,avx512vl,avx512vnni,avx2,fma"))), apply_to = function)
#endif

namespace grit {
namespace cpu {
namespace {

template <int R>
void dot_rows(const s8::Law& L, const S8Activation* const* a, const S8Tile& t, int64_t k, const float* bias,
              float* y, int64_t ldy) {
  const int64_t B = k / L.kb, per = L.k0 / L.kb, np = L.kb / 2;
  const __m512 p2 = _mm512_set1_ps(std::ldexp(1.0f, L.qe));
  __m512 acc[R];
  for (int i = 0; i < R; ++i) acc[i] = _mm512_setzero_ps();
  const int32_t* wp = t.pairs.data();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t g = b / per, p0 = b * np;
    __m512i d[R];
    for (int i = 0; i < R; ++i) d[i] = _mm512_setzero_si512();
    for (int64_t q = 0; q < np; ++q) {
      const __m512i w = _mm512_loadu_si512(wp + (p0 + q) * kS8TileRows);
      for (int i = 0; i < R; ++i) d[i] = _mm512_dpwssd_epi32(d[i], w, _mm512_set1_epi32(a[i]->pairs[p0 + q]));
    }
    const __m512 S = _mm512_loadu_ps(t.S.data() + g * kS8TileRows);
    if (L.zero == s8::kZpShared) {
      const __m512i zi = _mm512_loadu_si512(t.zi.data() + g * kS8TileRows);
      for (int i = 0; i < R; ++i)
        d[i] = _mm512_sub_epi32(d[i], _mm512_mullo_epi32(zi, _mm512_set1_epi32(a[i]->sums[b])));
    }
    for (int i = 0; i < R; ++i) {
      const __m512 sa = _mm512_set1_ps(a[i]->scales[b]);
      const __m512 P = _mm512_mul_ps(_mm512_cvtepi32_ps(d[i]), p2);
      acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(sa, S), P, acc[i]);
    }
    if (L.zero == s8::kZpOffset) {
      const __m512 O = _mm512_loadu_ps(t.O.data() + g * kS8TileRows);
      for (int i = 0; i < R; ++i) {
        const __m512 sa = _mm512_set1_ps(a[i]->scales[b]);
        acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(sa, O), _mm512_set1_ps(static_cast<float>(a[i]->sums[b])), acc[i]);
      }
    }
  }
  const __mmask16 m = static_cast<__mmask16>((1u << t.rows) - 1u);
  const __m512 nan = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000));
  const __m512 bv = bias ? _mm512_maskz_loadu_ps(m, bias) : _mm512_setzero_ps();
  for (int i = 0; i < R; ++i) {
    __m512 v = bias ? _mm512_add_ps(acc[i], bv) : acc[i];
    v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), v, nan);
    _mm512_mask_storeu_ps(y + i * ldy, m, v);
  }
}

}  // namespace

void s8_dot_tile(const s8::Law& L, const S8Activation* const* a, int na, const S8Tile& t, int64_t k,
                 const float* bias, float* y, int64_t ldy) {
  switch (na) {
    case 4: return dot_rows<4>(L, a, t, k, bias, y, ldy);
    case 3: return dot_rows<3>(L, a, t, k, bias, y, ldy);
    case 2: return dot_rows<2>(L, a, t, k, bias, y, ldy);
    default: return dot_rows<1>(L, a, t, k, bias, y, ldy);
  }
}

}  // namespace cpu
}  // namespace grit

#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC diagnostic pop
#pragma GCC pop_options

#else  // not x86: never supported, never called.

namespace grit {
namespace cpu {
void s8_dot_tile(const s8::Law&, const S8Activation* const*, int, const S8Tile&, int64_t, const float*, float*,
                 int64_t) {}
}  // namespace cpu
}  // namespace grit

#endif
