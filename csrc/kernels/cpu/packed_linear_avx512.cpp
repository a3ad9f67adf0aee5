// packed_linear for AVX-512 (F, BW, VL, DQ): one zmm per 16-row column,
// 4-bit codes through a 16-entry vpermps table, scale codes through
// vgatherdps or arithmetic, binary16 through vcvtph2ps. The algorithm is
// packed_linear_simd.inc; this file supplies the vocabulary. Compiled for
// its target by the pragma below (no per-file compiler flags needed), and
// reached only through avx512_kernels() when the CPU has AVX-512, or
// through avx512_bf16_kernels() (the same code plus the pair path, whose
// vdpbf16ps runs only there) when it also has AVX512_BF16.
#include <immintrin.h>

#include <cmath>
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

// avx512bf16: only the pair path's vdpbf16ps uses it (nothing here has a
// bfloat16 type for the compiler to convert), and only avx512_bf16_kernels()
// reaches that path.
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,f16c,bmi,bmi2,popcnt")
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,f16c,bmi,bmi2,popcnt"))), apply_to = function)
#endif

namespace grit {
namespace cpu {
namespace {

using VF = __m512;
using VI = __m512i;
using VM = __mmask16;

inline VF f_zero() { return _mm512_setzero_ps(); }
inline VF f_set1(float v) { return _mm512_set1_ps(v); }
inline VF f_load(const float* p) { return _mm512_loadu_ps(p); }
inline __mmask16 first_n(int n) { return static_cast<__mmask16>((1u << n) - 1u); }
inline VF f_load_n(const float* p, int n) { return _mm512_maskz_loadu_ps(first_n(n), p); }
inline void f_store(float* p, VF v) { _mm512_storeu_ps(p, v); }
inline void f_store_n(float* p, VF v, int n) { _mm512_mask_storeu_ps(p, first_n(n), v); }
inline VF f_bcast(const float* p) { return _mm512_set1_ps(*p); }
inline VF f_add(VF a, VF b) { return _mm512_add_ps(a, b); }
inline VF f_sub(VF a, VF b) { return _mm512_sub_ps(a, b); }
inline VF f_mul(VF a, VF b) { return _mm512_mul_ps(a, b); }
// a*b + c, one rounding.
inline VF f_fma(VF a, VF b, VF c) { return _mm512_fmadd_ps(a, b, c); }

inline VI i_set1(int32_t v) { return _mm512_set1_epi32(v); }
inline VI i_load(const int32_t* p) { return _mm512_loadu_si512(p); }
inline VI i_and(VI a, VI b) { return _mm512_and_si512(a, b); }
inline VI i_or(VI a, VI b) { return _mm512_or_si512(a, b); }
inline VI i_xor(VI a, VI b) { return _mm512_xor_si512(a, b); }
inline VI i_add(VI a, VI b) { return _mm512_add_epi32(a, b); }
template <int n> inline VI i_srli(VI a) { return _mm512_srli_epi32(a, n); }
template <int n> inline VI i_slli(VI a) { return _mm512_slli_epi32(a, n); }
template <int n> inline VI i_srai(VI a) { return _mm512_srai_epi32(a, n); }
inline VI i_srl(VI a, int n) { return _mm512_srl_epi32(a, _mm_cvtsi32_si128(n)); }
inline VI i_min_u(VI a, VI b) { return _mm512_min_epu32(a, b); }
inline VI i_max_u(VI a, VI b) { return _mm512_max_epu32(a, b); }
inline VI i_select(VM m, VI a, VI b) { return _mm512_mask_blend_epi32(m, b, a); }
inline VF i_as_f(VI a) { return _mm512_castsi512_ps(a); }
inline bool i_all_eq(VI a, VI b) { return _mm512_cmpneq_epi32_mask(a, b) == 0; }
inline VF cvt_i32(VI a) { return _mm512_cvtepi32_ps(a); }
inline VM eq(VI a, VI b) { return _mm512_cmpeq_epi32_mask(a, b); }
inline VF select(VM m, VF a, VF b) { return _mm512_mask_blend_ps(m, b, a); }
inline VF maskz(VM m, VF a) { return _mm512_maskz_mov_ps(m, a); }

struct Lut16 {
  __m512 t;
};
inline Lut16 make_lut16(const float* v) { return Lut16{_mm512_loadu_ps(v)}; }
inline VF lut16(VI idx, const Lut16& l) { return _mm512_permutexvar_ps(idx, l.t); }  // low 4 bits
// Pairs (AVX512_BF16): 32 bfloat16 words, word i the value of code i & 15.
#define GRIT_SIMD_PAIR_DOT 1
struct LutW {
  __m512i t;
};
inline LutW make_lutw(const uint16_t w[32]) { return LutW{_mm512_loadu_si512(w)}; }
inline VI lutw16(VI idx, const LutW& l) { return _mm512_permutexvar_epi16(idx, l.t); }  // low 5 bits
inline VI i_rol16(VI a) { return _mm512_rol_epi32(a, 16); }
inline void pw_store(uint32_t* p, VI v) { _mm512_storeu_si512(p, v); }
inline VI pw_load(const uint32_t* p) { return _mm512_loadu_si512(p); }
// c + hi(e)*hi(xp) + lo(e)*lo(xp), lane by lane: two FMAs, the high words'
// first, each rounded to nearest even (DAZ on the words, FTZ on the sums).
inline VF pair_fma(VI e, const uint32_t* xp, VF c) {
  return _mm512_dpbf16_ps(c, (__m512bh)e, (__m512bh)_mm512_set1_epi32(static_cast<int>(*xp)));
}
inline VF gather_f32(const float* table, VI idx) { return _mm512_i32gather_ps(idx, table, 4); }
inline VI gather_u32(const uint8_t* base, VI byte_off) {
  return _mm512_i32gather_epi32(byte_off, static_cast<const void*>(base), 1);
}
inline VF f16_lo(VI a) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(a)); }
inline VF f16_hi(VI a) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(a, 16))); }
// NaN (quiet or signalling) or an infinity in any lane.
inline VM nonfinite(VF v) { return _mm512_fpclass_ps_mask(v, 0x99); }
inline bool any_nonfinite(VF v) { return nonfinite(v) != 0; }
inline bool any_byte_equal(VI v, int t) {
  return _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(static_cast<char>(t))) != 0;
}
// Whether any byte (unsigned) is >= t, 0 < t < 256.
inline bool any_byte_at_least(VI v, int t) {
  return _mm512_cmpge_epu8_mask(v, _mm512_set1_epi8(static_cast<char>(t))) != 0;
}
inline VF canon(VF v) {
  return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q),
                            _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000)));
}

// kBytes (16 or 8; 0: nbytes <= 16) bytes of one row; bytes past them are
// zero and never read.
template <int kBytes>
inline __m128i row_bytes(const uint8_t* p, int nbytes) {
  if constexpr (kBytes == 16) return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if constexpr (kBytes == 8) return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  return _mm_maskz_loadu_epi8(static_cast<__mmask16>((1u << nbytes) - 1u), p);
}
// z[a] holds rows a, a+4, a+8, a+12 (one per 128-bit lane); a 4x4 dword
// transpose inside each lane then gives out[j] lane r = dword j of row r.
inline __attribute__((always_inline)) void transpose_lanes(const VI z[4], VI out[4]) {
  const VI t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
  const VI t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
  out[0] = _mm512_unpacklo_epi64(t0, t2);
  out[1] = _mm512_unpackhi_epi64(t0, t2);
  out[2] = _mm512_unpacklo_epi64(t1, t3);
  out[3] = _mm512_unpackhi_epi64(t1, t3);
}
template <int kBytes>
inline __attribute__((always_inline)) VI four_rows(const uint8_t* p0, const uint8_t* p1,
                                                   const uint8_t* p2, const uint8_t* p3,
                                                   int nbytes) {
  VI v = _mm512_castsi128_si512(row_bytes<kBytes>(p0, nbytes));
  v = _mm512_inserti32x4(v, row_bytes<kBytes>(p1, nbytes), 1);
  v = _mm512_inserti32x4(v, row_bytes<kBytes>(p2, nbytes), 2);
  return _mm512_inserti32x4(v, row_bytes<kBytes>(p3, nbytes), 3);
}
// Rows at p + r*stride, r = 0..15.
template <int kBytes>
inline __attribute__((always_inline)) void load_t16_affine(const uint8_t* p, int64_t stride,
                                                           int nbytes, VI out[4]) {
  const int64_t s4 = 4 * stride, s8 = 8 * stride, s12 = 12 * stride;
  VI z[4];
  for (int a = 0; a < 4; ++a) {
    const uint8_t* q = p + a * stride;
    z[a] = four_rows<kBytes>(q, q + s4, q + s8, q + s12, nbytes);
  }
  transpose_lanes(z, out);
}
// 64 bytes of each of the 16 rows at p + r*stride, transposed: out[j] lane r
// = dword j of row r. For each 16-byte chunk c, a_i's 128-bit lane L holds
// chunk c of row 4L + i (a load and three inserts from memory, which
// Zen 4 runs beside its shuffles), then a 4x4 dword transpose inside every
// 128-bit lane gives out[4c .. 4c+3]: 32 in-lane shuffles for the 16
// vectors instead of 64, 11% faster in a register-only probe of the pair
// loop (27.8 against 31.8 ps per weight).
inline __attribute__((always_inline)) VI four_chunks(const uint8_t* q, int64_t stride) {
  VI a = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
  a = _mm512_inserti32x4(a, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 4 * stride)), 1);
  a = _mm512_inserti32x4(a, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 8 * stride)), 2);
  return _mm512_inserti32x4(a, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 12 * stride)), 3);
}
inline __attribute__((always_inline)) void load_t16x64_affine(const uint8_t* p, int64_t stride,
                                                              VI out[16]) {
  for (int c = 0; c < 4; ++c) {
    const uint8_t* q = p + 16 * c;
    const VI a0 = four_chunks(q, stride), a1 = four_chunks(q + stride, stride);
    const VI a2 = four_chunks(q + 2 * stride, stride), a3 = four_chunks(q + 3 * stride, stride);
    const VI t0 = _mm512_unpacklo_epi32(a0, a1), t1 = _mm512_unpackhi_epi32(a0, a1);
    const VI t2 = _mm512_unpacklo_epi32(a2, a3), t3 = _mm512_unpackhi_epi32(a2, a3);
    out[4 * c] = _mm512_unpacklo_epi64(t0, t2);
    out[4 * c + 1] = _mm512_unpackhi_epi64(t0, t2);
    out[4 * c + 2] = _mm512_unpacklo_epi64(t1, t3);
    out[4 * c + 3] = _mm512_unpackhi_epi64(t1, t3);
  }
}
// Rows at base + off[r].
template <int kBytes>
inline __attribute__((always_inline)) void load_t16_listed(const uint8_t* base, const int64_t off[16],
                                                           int nbytes, VI out[4]) {
  VI z[4];
  for (int a = 0; a < 4; ++a)
    z[a] = four_rows<kBytes>(base + off[a], base + off[a + 4], base + off[a + 8], base + off[a + 12],
                             nbytes);
  transpose_lanes(z, out);
}

// 16 binary64 lanes (packed_linear_int4g_simd.inc): two zmm, rows 0-7 and
// 8-15.
struct VD {
  __m512d a, b;
};
inline VD d_from_i32(VI x) {
  return VD{_mm512_cvtepi32_pd(_mm512_castsi512_si256(x)), _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(x, 1))};
}
inline VD d_load(const double* p) { return VD{_mm512_loadu_pd(p), _mm512_loadu_pd(p + 8)}; }
inline VD d_bcast(const double* p) {
  const __m512d v = _mm512_set1_pd(*p);
  return VD{v, v};
}
inline VD d_mul(VD x, VD y) { return VD{_mm512_mul_pd(x.a, y.a), _mm512_mul_pd(x.b, y.b)}; }
inline VF d_to_f(VD x) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(x.a)), _mm512_cvtpd_ps(x.b), 1);
}
inline bool d_scales_ok(VD s) {
  const __m512d zero = _mm512_setzero_pd(), seven = _mm512_set1_pd(7.0), top = _mm512_set1_pd(1.7976931348623157e308);
  auto ok = [&](__m512d v) {
    return _mm512_cmp_pd_mask(v, zero, _CMP_GT_OQ) & _mm512_cmp_pd_mask(_mm512_mul_pd(v, seven), top, _CMP_LE_OQ);
  };
  return (ok(s.a) & ok(s.b)) == 0xFF;
}

// Blocking: 32 zmm registers. Batch 1: one tile at a time (its four
// chains hide the FMA latency; two tiles in flight measured slower, 353 us
// against 295 us for MXFP4 4096x4096 on 2 threads). Larger batches: one
// tile x 6 batch rows x 4 chains = 24 accumulating registers over each
// decoded chunk (b = 32: 2864 us, against 3153 us for 4 rows and 3898 us
// for 2 tiles x 2 rows).
constexpr int kGemvTiles = 1;
constexpr int kGemmBatch = 6;
constexpr int kGemmTiles = 1;
// grad_x: 6 batch rows x 4 vectors (64 columns) = 24 accumulators, 4 for W,
// the broadcast folded into the multiply.
constexpr int kGradBatch = 6;
constexpr int kGradVecs = 4;

#include "kernels/cpu/packed_linear_simd.inc"
#include "kernels/cpu/packed_linear_int4g_simd.inc"
#include "kernels/cpu/grad_input_simd.inc"

// bfloat16 bits of a random value for the pair check: x-like (exponent
// -60..60, 8 significant bits) or e-like (an FP4 value or an int8).
uint16_t pair_check_bf16(uint32_t r, bool e_like) {
  if (!e_like)
    return static_cast<uint16_t>(((r & 1u) << 15) | (((r >> 1) % 121u + 67u) << 7) | ((r >> 9) & 0x7Fu));
  static const float fp4[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  float v = (r & 2u) ? static_cast<float>(static_cast<int>((r >> 8) % 255u) - 127) : fp4[(r >> 8) & 7u];
  if (r & 1u) v = -v;
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return static_cast<uint16_t>(u >> 16);
}

float pair_check_f32(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint64_t pair_mismatches(uint64_t lanes, uint64_t seed) {
  uint64_t s = seed, bad = 0;
  auto next = [&s] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(s >> 32);
  };
  for (uint64_t done = 0; done < lanes; done += 16) {
    alignas(64) uint16_t e[32], x[32];
    alignas(64) float c[16], r[16];
    for (int i = 0; i < 32; ++i) {
      e[i] = pair_check_bf16(next(), true);
      x[i] = pair_check_bf16(next(), false);
    }
    for (int i = 0; i < 16; ++i) {
      const uint32_t q = next();
      c[i] = (q & 7u) == 0 ? 0.0f : std::ldexp(static_cast<float>((q >> 8) | 1u), static_cast<int>(q % 141u) - 94);
    }
    const __m512 acc = _mm512_dpbf16_ps(_mm512_load_ps(c), (__m512bh)_mm512_load_si512(e),
                                        (__m512bh)_mm512_load_si512(x));
    _mm512_store_ps(r, acc);
    for (int i = 0; i < 16; ++i) {
      float t = std::fma(pair_check_f32(e[2 * i + 1]), pair_check_f32(x[2 * i + 1]), c[i]);
      t = std::fma(pair_check_f32(e[2 * i]), pair_check_f32(x[2 * i]), t);
      uint32_t a, b;
      std::memcpy(&a, &t, 4);
      std::memcpy(&b, &r[i], 4);
      bad += a != b;
    }
  }
  return bad;
}

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

const KernelTable kTable{Isa::kAvx512, &simd_linear_entry, &simd_decode_entry, &simd_int4g_entry, true,
                         &simd_grad_input_rows};
const KernelTable kBf16Table{Isa::kAvx512Bf16, &simd_linear_pairs_entry, &simd_decode_entry,
                              &simd_int4g_entry, true, &simd_grad_input_rows, &simd_grad_input_pairs};

}  // namespace

const KernelTable& avx512_kernels() { return kTable; }
const KernelTable& avx512_bf16_kernels() { return kBf16Table; }

uint64_t avx512_bf16_pair_mismatches(uint64_t lanes, uint64_t seed) { return pair_mismatches(lanes, seed); }

}  // namespace cpu
}  // namespace grit

#else  // not x86: the variant is never supported, and never called.

namespace grit {
namespace cpu {
const KernelTable& avx512_kernels() { return scalar_kernels(); }
const KernelTable& avx512_bf16_kernels() { return scalar_kernels(); }
uint64_t avx512_bf16_pair_mismatches(uint64_t, uint64_t) { return 0; }
}  // namespace cpu
}  // namespace grit

#endif
