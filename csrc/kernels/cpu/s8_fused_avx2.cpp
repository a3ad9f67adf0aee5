// The fused s8 tile kernel (s8_tile.h) for CPUs with AVX2 and no VNNI: the
// AVX-512 kernel's structure on 8-lane vectors, a 16-row tile as two halves
// of 8 rows. Without vpdpbusd, each 4-column product step is vpmaddubsw
// (u8 x s8 -> pairs summed to int16) then vpmaddwd by 1 (-> int32); the
// int16 sums never saturate because every u8 operand is at most 128
// (2 * 128 * 127 < 2^15): 4-bit codes as offset-binary bytes u = c + off
// (the plan asks hi - lo <= 63, so the low and high nibbles' pair sums add
// in int16 too), 8-bit codes as |c'| with c's sign moved
// onto the activation byte (vpsignb), c' = c for int8 codes and c - 128 for
// uint8 codes (their sum put back as 128 A_b). D_b is the law's exact
// integer either way; the float steps after it are s8_dot_tile's.
#include <cmath>
#include <cstring>

#include "kernels/cpu/exact_tile.h"
#include "kernels/cpu/s8_tile.h"

namespace grit {
namespace cpu {

bool s8_fused_plan_avx2(const s8::Law& L, int64_t k, S8Fused* f) {
#if defined(__x86_64__)
  static const bool cpu = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  if (!cpu || L.kb <= 0) return false;
  const S8CodeShape c = s8_code_shape(L);
  S8Fused out;
  if (L.sp_m != 0) {
    // I8S24's layout (int8 codes, 2 of 4 kept, 2-bit positions, no zero point): each tile's rows
    // expanded into dense int8 codes (s8_sparse_tile_avx2), then the 8-bit kernel
    if (!s8_i8s24_layout(L, c) || k % 16 != 0 || L.kb % 4 != 0) return false;
    out.sparse = 1;
  } else if (L.elem_bits == 4) {
    // two pair sums added in int16: 2 * 2 * 63 * 127 < 2^15
    if (k % 32 != 0 || L.kb % 8 != 0 || c.hi - c.lo > 63) return false;
    out.nibbles = 1;
    out.off = -c.lo;
    for (int i = 0; i < 16; ++i) out.lut[i] = static_cast<uint8_t>(L.code[i] + out.off);
  } else if (L.elem_bits == 8) {
    if (k % 16 != 0 || L.kb % 4 != 0 || (!c.as_int8 && !c.as_uint8)) return false;
    // the signed byte is c - off: off 0 for int8 codes, -128 for uint8 (c' = byte ^ 0x80)
    out.flip = c.as_uint8;
    out.off = c.as_uint8 ? -128 : 0;
  } else {
    return false;
  }
  *f = out;
  return true;
#else
  (void)L;
  (void)k;
  (void)f;
  return false;
#endif
}

}  // namespace cpu
}  // namespace grit

#if defined(__x86_64__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC target("avx2,fma")
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#endif

namespace grit {
namespace cpu {
namespace {

// 16 bytes at `off` of 8 rows (row[0..7]), transposed: out[j] lane r =
// bytes 4j .. 4j + 3 of row r. Register q takes rows q (low half) and q + 4
// (high half), so the unpacks leave the rows in lane order.
inline void load_unit8(const uint8_t* const* row, int64_t off, __m256i out[4]) {
  __m256i z[4];
  for (int q = 0; q < 4; ++q)
    z[q] = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row[q] + off))),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(row[q + 4] + off)), 1);
  const __m256i t0 = _mm256_unpacklo_epi32(z[0], z[1]), t1 = _mm256_unpackhi_epi32(z[0], z[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(z[2], z[3]), t3 = _mm256_unpackhi_epi32(z[2], z[3]);
  out[0] = _mm256_unpacklo_epi64(t0, t2);
  out[1] = _mm256_unpackhi_epi64(t0, t2);
  out[2] = _mm256_unpacklo_epi64(t1, t3);
  out[3] = _mm256_unpackhi_epi64(t1, t3);
}

template <int R, bool kNib, int kZero>
void fused_half(const s8::Law& L, const S8Fused& f, const int32_t* const* quads, const S8Activation* const* a,
                const S8Tile& t, const uint8_t* const* row, int h, int64_t k, const float* bias, float* y,
                int64_t ldy) {
  constexpr int64_t kUnitCols = kNib ? 32 : 16, kSliceCols = kUnitCols / 4;
  const int64_t per = L.k0 / L.kb, slices_per_block = L.kb / kSliceCols;
  const __m256 p2 = _mm256_set1_ps(std::ldexp(1.0f, L.qe));
  const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(f.lut)));
  const __m256i nib = _mm256_set1_epi8(0x0F), flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i ones = _mm256_set1_epi16(1);
  const int32_t* qa[R];
  const int32_t* sums[R];
  const float* scales[R];
  __m256 acc[R];
  __m256i D[R];
  for (int i = 0; i < R; ++i) {
    qa[i] = quads[i];
    sums[i] = a[i]->sums.data();
    scales[i] = a[i]->scales;
    acc[i] = _mm256_setzero_ps();
    D[i] = _mm256_setzero_si256();
  }
  const int64_t units = k / kUnitCols;
  int64_t left = slices_per_block, b = 0, g = 0, in_g = 0;  // block b lies in group g = b / per
  for (int64_t u = 0; u < units; ++u) {
    __m256i w[4];
    load_unit8(row, u * 16, w);
    for (int j = 0; j < 4; ++j) {
      const int64_t s = u * 4 + j;
      if (kNib) {
        const __m256i lo = _mm256_shuffle_epi8(lut, _mm256_and_si256(w[j], nib));
        const __m256i hi = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(w[j], 4), nib));
        for (int i = 0; i < R; ++i) {
          const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_set1_epi32(qa[i][2 * s])),
                                             _mm256_maddubs_epi16(hi, _mm256_set1_epi32(qa[i][2 * s + 1])));
          D[i] = _mm256_add_epi32(D[i], _mm256_madd_epi16(p, ones));
        }
      } else {
        const __m256i c = f.flip ? _mm256_xor_si256(w[j], flip) : w[j];  // the signed byte c - off
        const __m256i mag = _mm256_abs_epi8(c);                           // |c - off| <= 128 as u8
        for (int i = 0; i < R; ++i) {
          const __m256i sa = _mm256_sign_epi8(_mm256_set1_epi32(qa[i][s]), c);
          D[i] = _mm256_add_epi32(D[i], _mm256_madd_epi16(_mm256_maddubs_epi16(mag, sa), ones));
        }
      }
      if (--left != 0) continue;
      left = slices_per_block;
      const __m256 S = _mm256_loadu_ps(t.S.data() + g * kS8TileRows + 8 * h);
      __m256i zi = _mm256_setzero_si256();
      if (kZero == s8::kZpShared)
        zi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.zi.data() + g * kS8TileRows + 8 * h));
      for (int i = 0; i < R; ++i) {
        const int32_t A = sums[i][b];
        __m256i d = _mm256_sub_epi32(D[i], _mm256_set1_epi32(f.off * A));
        if (kZero == s8::kZpShared) d = _mm256_sub_epi32(d, _mm256_mullo_epi32(zi, _mm256_set1_epi32(A)));
        const __m256 sa = _mm256_set1_ps(scales[i][b]);
        const __m256 P = _mm256_mul_ps(_mm256_cvtepi32_ps(d), p2);
        acc[i] = _mm256_fmadd_ps(_mm256_mul_ps(sa, S), P, acc[i]);
        D[i] = _mm256_setzero_si256();
      }
      if (kZero == s8::kZpOffset) {
        const __m256 O = _mm256_loadu_ps(t.O.data() + g * kS8TileRows + 8 * h);
        for (int i = 0; i < R; ++i) {
          const __m256 sa = _mm256_set1_ps(scales[i][b]);
          acc[i] = _mm256_fmadd_ps(_mm256_mul_ps(sa, O), _mm256_set1_ps(static_cast<float>(sums[i][b])), acc[i]);
        }
      }
      ++b;
      if (++in_g == per) in_g = 0, ++g;
    }
  }
  // rows 8h .. 8h + 7 of the tile; lanes past t.rows are not stored
  const int n = t.rows - 8 * h < 8 ? t.rows - 8 * h : 8;
  alignas(32) float v[8], bv[8] = {};
  if (bias)
    for (int r = 0; r < n; ++r) bv[r] = bias[8 * h + r];
  for (int i = 0; i < R; ++i) {
    _mm256_store_ps(v, acc[i]);
    for (int r = 0; r < n; ++r) {
      const float out = bias ? v[r] + bv[r] : v[r];
      y[i * ldy + 8 * h + r] = std::isnan(out) ? canonical_nan() : out;
    }
  }
}

template <int R, bool kNib>
void fused_tile(const s8::Law& L, const S8Fused& f, const int32_t* const* quads, const S8Activation* const* a,
                const S8Tile& t, const uint8_t* data, int64_t r0, int64_t k, const float* bias, float* y,
                int64_t ldy) {
  const int64_t row_bytes = kNib ? k / 2 : k;
  for (int h = 0; h < 2 && 8 * h < t.rows; ++h) {
    const uint8_t* row[8];
    for (int r = 0; r < 8; ++r) {
      const int at = 8 * h + r < t.rows ? 8 * h + r : t.rows - 1;  // rows past the tile repeat its last
      row[r] = data + (r0 + at) * row_bytes;
    }
    switch (L.zero) {
      case s8::kZpShared: fused_half<R, kNib, s8::kZpShared>(L, f, quads, a, t, row, h, k, bias, y, ldy); break;
      case s8::kZpOffset: fused_half<R, kNib, s8::kZpOffset>(L, f, quads, a, t, row, h, k, bias, y, ldy); break;
      default: fused_half<R, kNib, s8::kZpNone>(L, f, quads, a, t, row, h, k, bias, y, ldy); break;
    }
  }
}

template <bool kNib>
void fused_rows_n(const s8::Law& L, const S8Fused& f, const int32_t* const* quads, const S8Activation* const* a,
                  int na, const S8Tile& t, const uint8_t* data, int64_t r0, int64_t k, const float* bias, float* y,
                  int64_t ldy) {
  switch (na) {  // the caller passes 1-4
    case 4: return fused_tile<4, kNib>(L, f, quads, a, t, data, r0, k, bias, y, ldy);
    case 3: return fused_tile<3, kNib>(L, f, quads, a, t, data, r0, k, bias, y, ldy);
    case 2: return fused_tile<2, kNib>(L, f, quads, a, t, data, r0, k, bias, y, ldy);
    default: return fused_tile<1, kNib>(L, f, quads, a, t, data, r0, k, bias, y, ldy);
  }
}

}  // namespace

void s8_fused_tile_avx2(const s8::Law& L, const S8Fused& f, const int32_t* const* quads,
                        const S8Activation* const* a, int na, const S8Tile& t, const uint8_t* data, int64_t r0,
                        int64_t k, const float* bias, float* y, int64_t ldy) {
  if (f.nibbles)
    fused_rows_n<true>(L, f, quads, a, na, t, data, r0, k, bias, y, ldy);
  else
    fused_rows_n<false>(L, f, quads, a, na, t, data, r0, k, bias, y, ldy);
}

namespace {

// For the 8 kept-position bits of a metadata byte (two quads), the vpshufb
// control that puts the stored bytes, in order, at their positions (0x80:
// a zero byte).
struct ExpandByte {
  uint8_t c[256][8];
  constexpr ExpandByte() : c() {
    for (int m = 0; m < 256; ++m) {
      int next = 0;
      for (int p = 0; p < 8; ++p) c[m][p] = (m >> p & 1) ? static_cast<uint8_t>(next++) : 0x80;
    }
  }
};
constexpr ExpandByte kExpand;

}  // namespace

void s8_sparse_tile_avx2(const s8::Law& L, const S8Fused& f, const int32_t* const* quads,
                         const S8Activation* const* a, int na, const S8Tile& t, const uint8_t* data,
                         const uint8_t* meta, const uint64_t* cursor, int64_t r0, int64_t k, bool fresh,
                         const float* bias, float* y, int64_t ldy, std::vector<uint8_t>* scratch) {
  // t.rows rows of k dense int8 codes, then one row's stored run, padded for 8-byte loads
  const size_t most = static_cast<size_t>(k / 2);  // a row keeps at most 2 of every 4
  scratch->resize(static_cast<size_t>(16 * k) + most + 16);
  uint8_t* dense = scratch->data();
  uint8_t* run = dense + 16 * k;
  for (int r = 0; fresh && r < t.rows; ++r) {
    const uint8_t* mb = meta + (r0 + r) * (k / 8);  // one metadata byte per 8 columns
    size_t n = 0;
    for (int64_t q = 0; q < k / 8; ++q) n += static_cast<size_t>(__builtin_popcount(kKept.m[mb[q]]));
    std::memcpy(run, data + cursor[r], n);
    std::memset(run + n, 0, 16);
    uint8_t* out = dense + r * k;
    size_t at = 0;
    for (int64_t q = 0; q < k / 8; ++q) {
      const uint8_t m = kKept.m[mb[q]];
      const __m128i ctrl = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(kExpand.c[m]));
      const __m128i src = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(run + at));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out + 8 * q), _mm_shuffle_epi8(src, ctrl));
      at += static_cast<size_t>(__builtin_popcount(m));
    }
  }
  S8Fused dense_plan = f;  // the expanded rows are dense int8 codes
  dense_plan.sparse = 0;
  dense_plan.nibbles = 0;
  dense_plan.flip = 0;
  dense_plan.off = 0;
  fused_rows_n<false>(L, dense_plan, quads, a, na, t, dense, 0, k, bias, y, ldy);
}

}  // namespace cpu
}  // namespace grit

#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC diagnostic pop
#pragma GCC pop_options

#else  // not x86: s8_fused_plan_avx2 is always false, so this is never called.

namespace grit {
namespace cpu {
void s8_fused_tile_avx2(const s8::Law&, const S8Fused&, const int32_t* const*, const S8Activation* const*, int,
                        const S8Tile&, const uint8_t*, int64_t, int64_t, const float*, float*, int64_t) {}
void s8_sparse_tile_avx2(const s8::Law&, const S8Fused&, const int32_t* const*, const S8Activation* const*, int,
                         const S8Tile&, const uint8_t*, const uint8_t*, const uint64_t*, int64_t, int64_t, bool,
                         const float*, float*, int64_t, std::vector<uint8_t>*) {}
}  // namespace cpu
}  // namespace grit

#endif
