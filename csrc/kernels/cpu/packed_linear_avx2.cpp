// packed_linear for AVX2 (+FMA, F16C): a 16-row column is
// two ymm halves (rows 0-7, 8-15); the 16-entry code table is two vpermps
// lookups and a blend on the code's bit 3. The algorithm is
// packed_linear_simd.inc; this file supplies the vocabulary. Compiled for
// its target by the pragma below, reached only through avx2_kernels() when
// the CPU has AVX2.
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/packed_linear_cpu.h"
#include "kernels/cpu/packed_linear_int4g.h"
#include "kernels/cpu/nibble_tiles.h"

#if defined(__x86_64__) || defined(__i386__)

#pragma GCC push_options
// GCC 12 reports its own _mm512_undefined_* helpers as maybe-uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#pragma GCC target("avx2,fma,f16c,bmi,bmi2,popcnt")
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,bmi,bmi2,popcnt"))), apply_to = function)
#endif

namespace grit {
namespace cpu {
namespace {

struct VF {
  __m256 a, b;
};
struct VI {
  __m256i a, b;
};
struct VM {
  __m256i a, b;  // all-ones lanes where true
};

inline VF f_zero() { return VF{_mm256_setzero_ps(), _mm256_setzero_ps()}; }
inline VF f_set1(float v) { return VF{_mm256_set1_ps(v), _mm256_set1_ps(v)}; }
inline VF f_load(const float* p) { return VF{_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
inline VM first_n(int n) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return VM{_mm256_cmpgt_epi32(_mm256_set1_epi32(n), lanes),
            _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 8), lanes)};
}
inline VF f_load_n(const float* p, int n) {
  const VM m = first_n(n);
  return VF{_mm256_maskload_ps(p, m.a), _mm256_maskload_ps(p + 8, m.b)};
}
inline void f_store(float* p, VF v) {
  _mm256_storeu_ps(p, v.a);
  _mm256_storeu_ps(p + 8, v.b);
}
inline void f_store_n(float* p, VF v, int n) {
  const VM m = first_n(n);
  _mm256_maskstore_ps(p, m.a, v.a);
  _mm256_maskstore_ps(p + 8, m.b, v.b);
}
inline VF f_bcast(const float* p) {
  const __m256 v = _mm256_broadcast_ss(p);
  return VF{v, v};
}
inline VF f_add(VF x, VF y) { return VF{_mm256_add_ps(x.a, y.a), _mm256_add_ps(x.b, y.b)}; }
inline VF f_sub(VF x, VF y) { return VF{_mm256_sub_ps(x.a, y.a), _mm256_sub_ps(x.b, y.b)}; }
inline VF f_mul(VF x, VF y) { return VF{_mm256_mul_ps(x.a, y.a), _mm256_mul_ps(x.b, y.b)}; }
// x*y + c, one rounding.
inline VF f_fma(VF x, VF y, VF c) { return VF{_mm256_fmadd_ps(x.a, y.a, c.a), _mm256_fmadd_ps(x.b, y.b, c.b)}; }

inline VI i_set1(int32_t v) { return VI{_mm256_set1_epi32(v), _mm256_set1_epi32(v)}; }
inline VI i_load(const int32_t* p) {
  return VI{_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8))};
}
inline VI i_and(VI x, VI y) { return VI{_mm256_and_si256(x.a, y.a), _mm256_and_si256(x.b, y.b)}; }
inline VI i_or(VI x, VI y) { return VI{_mm256_or_si256(x.a, y.a), _mm256_or_si256(x.b, y.b)}; }
inline VI i_xor(VI x, VI y) { return VI{_mm256_xor_si256(x.a, y.a), _mm256_xor_si256(x.b, y.b)}; }
inline VI i_add(VI x, VI y) { return VI{_mm256_add_epi32(x.a, y.a), _mm256_add_epi32(x.b, y.b)}; }
template <int n> inline VI i_srli(VI x) { return VI{_mm256_srli_epi32(x.a, n), _mm256_srli_epi32(x.b, n)}; }
template <int n> inline VI i_slli(VI x) { return VI{_mm256_slli_epi32(x.a, n), _mm256_slli_epi32(x.b, n)}; }
template <int n> inline VI i_srai(VI x) { return VI{_mm256_srai_epi32(x.a, n), _mm256_srai_epi32(x.b, n)}; }
inline VI i_srl(VI x, int n) {
  const __m128i c = _mm_cvtsi32_si128(n);
  return VI{_mm256_srl_epi32(x.a, c), _mm256_srl_epi32(x.b, c)};
}
inline VI i_min_u(VI x, VI y) { return VI{_mm256_min_epu32(x.a, y.a), _mm256_min_epu32(x.b, y.b)}; }
inline VI i_max_u(VI x, VI y) { return VI{_mm256_max_epu32(x.a, y.a), _mm256_max_epu32(x.b, y.b)}; }
inline VI i_select(VM m, VI x, VI y) {
  return VI{_mm256_blendv_epi8(y.a, x.a, m.a), _mm256_blendv_epi8(y.b, x.b, m.b)};
}
inline VF i_as_f(VI x) { return VF{_mm256_castsi256_ps(x.a), _mm256_castsi256_ps(x.b)}; }
inline bool i_all_eq(VI x, VI y) {
  return (_mm256_movemask_epi8(_mm256_cmpeq_epi32(x.a, y.a)) &
          _mm256_movemask_epi8(_mm256_cmpeq_epi32(x.b, y.b))) == -1;
}
inline VF cvt_i32(VI x) { return VF{_mm256_cvtepi32_ps(x.a), _mm256_cvtepi32_ps(x.b)}; }
inline VM eq(VI x, VI y) { return VM{_mm256_cmpeq_epi32(x.a, y.a), _mm256_cmpeq_epi32(x.b, y.b)}; }
inline VF select(VM m, VF x, VF y) {
  return VF{_mm256_blendv_ps(y.a, x.a, _mm256_castsi256_ps(m.a)),
            _mm256_blendv_ps(y.b, x.b, _mm256_castsi256_ps(m.b))};
}
inline VF maskz(VM m, VF x) {
  return VF{_mm256_and_ps(_mm256_castsi256_ps(m.a), x.a), _mm256_and_ps(_mm256_castsi256_ps(m.b), x.b)};
}

struct Lut16 {
  __m256 lo, hi;  // codes 0-7, 8-15
};
inline Lut16 make_lut16(const float* v) { return Lut16{_mm256_loadu_ps(v), _mm256_loadu_ps(v + 8)}; }
inline __m256 lut16_half(__m256i idx, const Lut16& l) {
  // vpermps reads the low 3 bits; bit 3 moved to the sign bit picks the half.
  return _mm256_blendv_ps(_mm256_permutevar8x32_ps(l.lo, idx), _mm256_permutevar8x32_ps(l.hi, idx),
                          _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
}
inline VF lut16(VI idx, const Lut16& l) { return VF{lut16_half(idx.a, l), lut16_half(idx.b, l)}; }
inline VF gather_f32(const float* table, VI idx) {
  return VF{_mm256_i32gather_ps(table, idx.a, 4), _mm256_i32gather_ps(table, idx.b, 4)};
}
inline VI gather_u32(const uint8_t* base, VI off) {
  const int* p = reinterpret_cast<const int*>(base);
  return VI{_mm256_i32gather_epi32(p, off.a, 1), _mm256_i32gather_epi32(p, off.b, 1)};
}
// The low 16 bits of each lane as binary16.
inline __m256 f16_low_half(__m256i x) {
  const __m256i pick = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1,
                                        0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(x, pick), 0x08);
  return _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
}
inline VF f16_lo(VI x) { return VF{f16_low_half(x.a), f16_low_half(x.b)}; }
inline VF f16_hi(VI x) {
  return VF{f16_low_half(_mm256_srli_epi32(x.a, 16)), f16_low_half(_mm256_srli_epi32(x.b, 16))};
}
// Lanes holding NaN (quiet or signalling) or an infinity.
inline VM nonfinite(VF v) {
  const __m256i e = _mm256_set1_epi32(0x7F800000);
  return VM{_mm256_cmpeq_epi32(_mm256_and_si256(_mm256_castps_si256(v.a), e), e),
            _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_castps_si256(v.b), e), e)};
}
inline bool any_nonfinite(VF v) {
  const VM m = nonfinite(v);
  return !_mm256_testz_si256(_mm256_or_si256(m.a, m.b), _mm256_or_si256(m.a, m.b));
}
inline bool any_byte_equal(VI v, int t) {
  const __m256i tt = _mm256_set1_epi8(static_cast<char>(t));
  const __m256i a = _mm256_cmpeq_epi8(v.a, tt), b = _mm256_cmpeq_epi8(v.b, tt);
  return !_mm256_testz_si256(_mm256_or_si256(a, b), _mm256_or_si256(a, b));
}
// Whether any byte (unsigned) is >= t, 0 < t < 256.
inline bool any_byte_at_least(VI v, int t) {
  const __m256i tt = _mm256_set1_epi8(static_cast<char>(t));
  const __m256i a = _mm256_cmpeq_epi8(_mm256_max_epu8(v.a, tt), v.a);
  const __m256i b = _mm256_cmpeq_epi8(_mm256_max_epu8(v.b, tt), v.b);
  return !_mm256_testz_si256(_mm256_or_si256(a, b), _mm256_or_si256(a, b));
}
inline VF canon(VF v) {
  const __m256 nan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000));
  return VF{_mm256_blendv_ps(v.a, nan, _mm256_cmp_ps(v.a, v.a, _CMP_UNORD_Q)),
            _mm256_blendv_ps(v.b, nan, _mm256_cmp_ps(v.b, v.b, _CMP_UNORD_Q))};
}

// kBytes (16 or 8; 0: nbytes <= 16) bytes of one row; bytes past them are
// zero and never read (AVX2 has no byte-masked load: a short copy).
template <int kBytes>
inline __m128i row_bytes(const uint8_t* p, int nbytes) {
  if constexpr (kBytes == 16) return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if constexpr (kBytes == 8) return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  alignas(16) uint8_t tmp[16] = {};
  std::memcpy(tmp, p, static_cast<size_t>(nbytes));
  return _mm_load_si128(reinterpret_cast<const __m128i*>(tmp));
}
// z[a] holds rows a and a+4 of 8 (one per 128-bit lane); a 4x4 dword
// transpose inside each lane gives out[j] lane r = dword j of row r.
inline __attribute__((always_inline)) void transpose_lanes(const __m256i z[4], __m256i out[4]) {
  const __m256i t0 = _mm256_unpacklo_epi32(z[0], z[1]), t1 = _mm256_unpackhi_epi32(z[0], z[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(z[2], z[3]), t3 = _mm256_unpackhi_epi32(z[2], z[3]);
  out[0] = _mm256_unpacklo_epi64(t0, t2);
  out[1] = _mm256_unpackhi_epi64(t0, t2);
  out[2] = _mm256_unpacklo_epi64(t1, t3);
  out[3] = _mm256_unpackhi_epi64(t1, t3);
}
template <int kBytes>
inline __attribute__((always_inline)) __m256i two_rows(const uint8_t* p0, const uint8_t* p1, int nbytes) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(row_bytes<kBytes>(p0, nbytes)),
                                 row_bytes<kBytes>(p1, nbytes), 1);
}
// Rows at p + r*stride, r = 0..15.
template <int kBytes>
inline __attribute__((always_inline)) void load_t16_affine(const uint8_t* p, int64_t stride,
                                                           int nbytes, VI out[4]) {
  __m256i z[4], lo[4], hi[4];
  const int64_t s4 = 4 * stride, s8 = 8 * stride;
  for (int a = 0; a < 4; ++a) z[a] = two_rows<kBytes>(p + a * stride, p + a * stride + s4, nbytes);
  transpose_lanes(z, lo);
  for (int a = 0; a < 4; ++a)
    z[a] = two_rows<kBytes>(p + s8 + a * stride, p + s8 + a * stride + s4, nbytes);
  transpose_lanes(z, hi);
  for (int j = 0; j < 4; ++j) out[j] = VI{lo[j], hi[j]};
}
// Rows at base + off[r].
template <int kBytes>
inline __attribute__((always_inline)) void load_t16_listed(const uint8_t* base, const int64_t off[16],
                                                           int nbytes, VI out[4]) {
  __m256i z[4], lo[4], hi[4];
  for (int a = 0; a < 4; ++a) z[a] = two_rows<kBytes>(base + off[a], base + off[a + 4], nbytes);
  transpose_lanes(z, lo);
  for (int a = 0; a < 4; ++a) z[a] = two_rows<kBytes>(base + off[a + 8], base + off[a + 12], nbytes);
  transpose_lanes(z, hi);
  for (int j = 0; j < 4; ++j) out[j] = VI{lo[j], hi[j]};
}

// 64 bytes of each of the 16 rows at p + r*stride, transposed (out[j] lane
// r = dword j of row r): four 16-byte loads here.
inline __attribute__((always_inline)) void load_t16x64_affine(const uint8_t* p, int64_t stride,
                                                              VI out[16]) {
  for (int q = 0; q < 4; ++q) load_t16_affine<16>(p + 16 * q, stride, 16, out + 4 * q);
}

// 16 binary64 lanes (packed_linear_int4g_simd.inc): four ymm, rows 0-3,
// 4-7, 8-11, 12-15.
struct VD {
  __m256d a, b, c, d;
};
inline VD d_from_i32(VI x) {
  return VD{_mm256_cvtepi32_pd(_mm256_castsi256_si128(x.a)), _mm256_cvtepi32_pd(_mm256_extracti128_si256(x.a, 1)),
            _mm256_cvtepi32_pd(_mm256_castsi256_si128(x.b)), _mm256_cvtepi32_pd(_mm256_extracti128_si256(x.b, 1))};
}
inline VD d_load(const double* p) {
  return VD{_mm256_loadu_pd(p), _mm256_loadu_pd(p + 4), _mm256_loadu_pd(p + 8), _mm256_loadu_pd(p + 12)};
}
inline VD d_bcast(const double* p) {
  const __m256d v = _mm256_broadcast_sd(p);
  return VD{v, v, v, v};
}
inline VD d_mul(VD x, VD y) {
  return VD{_mm256_mul_pd(x.a, y.a), _mm256_mul_pd(x.b, y.b), _mm256_mul_pd(x.c, y.c), _mm256_mul_pd(x.d, y.d)};
}
inline VF d_to_f(VD x) {
  return VF{_mm256_set_m128(_mm256_cvtpd_ps(x.b), _mm256_cvtpd_ps(x.a)),
            _mm256_set_m128(_mm256_cvtpd_ps(x.d), _mm256_cvtpd_ps(x.c))};
}
inline bool d_scales_ok(VD s) {
  const __m256d zero = _mm256_setzero_pd(), seven = _mm256_set1_pd(7.0), top = _mm256_set1_pd(1.7976931348623157e308);
  auto ok = [&](__m256d v) {
    return _mm256_movemask_pd(_mm256_and_pd(_mm256_cmp_pd(v, zero, _CMP_GT_OQ),
                                            _mm256_cmp_pd(_mm256_mul_pd(v, seven), top, _CMP_LE_OQ)));
  };
  return (ok(s.a) & ok(s.b) & ok(s.c) & ok(s.d)) == 0xF;
}

// Blocking: 16 ymm registers, two per 16-lane vector: the four chains of
// one tile and one batch row already take eight.
constexpr int kGemvTiles = 1;
constexpr int kGemmBatch = 1;
constexpr int kGemmTiles = 1;

// grad_x: 4 batch rows x 1 vector = 8 ymm accumulators, 2 for W, 1 for the
// broadcast.
constexpr int kGradBatch = 4;
constexpr int kGradVecs = 1;

#include "kernels/cpu/packed_linear_simd.inc"
#include "kernels/cpu/packed_linear_int4g_simd.inc"
#include "kernels/cpu/grad_input_simd.inc"

}  // namespace
}  // namespace cpu
}  // namespace grit

#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC diagnostic pop
#pragma GCC pop_options

namespace grit {
namespace cpu {
namespace {

const KernelTable kTable{Isa::kAvx2, &simd_linear_entry, &simd_decode_entry, &simd_int4g_entry, true,
                         &simd_grad_input_rows};

}  // namespace

const KernelTable& avx2_kernels() { return kTable; }

}  // namespace cpu
}  // namespace grit

#else  // not x86: the variant is never supported, and never called.

namespace grit {
namespace cpu {
const KernelTable& avx2_kernels() { return scalar_kernels(); }
}  // namespace cpu
}  // namespace grit

#endif
