// The s8 law's activation packing (grit::exact::pack_block, step 1 of
// grit/s8_linear.h) eight values at a time on AVX-512: the block's max|x|
// as a vector max (exact), the scale by the core's own scalar division, each
// x / s in binary64 (vdivpd: correctly rounded, as the core's division) and
// rounded half to even by vrndscalepd, which is the core's rhe_f64 for every
// |x / s| < 2^52; then the same clamp to [-127, 127]. Blocks whose length
// is not a multiple of 8 take the core's own loop.
#include "kernels/cpu/s8_tile.h"

#include "grit/exact_linear.h"

namespace grit {
namespace cpu {
namespace {

bool pack_cpu() {
#if defined(__x86_64__)
  static const bool cpu = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
  }();
  return cpu;
#else
  return false;
#endif
}

}  // namespace
}  // namespace cpu
}  // namespace grit

#if defined(__x86_64__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC diagnostic push
// GCC 12's own intrinsic headers start some vectors from _mm*_undefined_*()
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma")
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma"))), apply_to = function)
#endif

namespace grit {
namespace cpu {
namespace {

float pack_block8(const float* x, int64_t len, int8_t* q) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF);
  __m512 m = _mm512_setzero_ps();
  int64_t t = 0;
  for (; t + 16 <= len; t += 16)
    m = _mm512_max_ps(m, _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(x + t)), abs_mask)));
  __m256 m8 = _mm256_max_ps(_mm512_castps512_ps256(m), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(m), 1)));
  for (; t < len; t += 8)
    m8 = _mm256_max_ps(m8, _mm256_castsi256_ps(_mm256_and_si256(_mm256_castps_si256(_mm256_loadu_ps(x + t)),
                                                                 _mm256_set1_epi32(0x7FFFFFFF))));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m8);
  float a = 0.0f;
  for (float v : lanes) a = v > a ? v : a;
  if (a == 0.0f) {
    for (int64_t i = 0; i < len; ++i) q[i] = 0;
    return 1.0f;
  }
  float s = exact::f32_div(a, 127.0f);
  if (s == 0.0f) s = exact::bits_to_f32(1u);
  const __m512d ds = _mm512_set1_pd(static_cast<double>(s));
  const __m512d hi = _mm512_set1_pd(127.0), lo = _mm512_set1_pd(-127.0);
  for (int64_t i = 0; i < len; i += 8) {
    const __m512d v = _mm512_div_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x + i)), ds);
    const __m512d r = _mm512_roundscale_pd(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i c = _mm512_cvtpd_epi32(_mm512_min_pd(_mm512_max_pd(r, lo), hi));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(q + i), _mm256_cvtepi32_epi8(c));
  }
  return s;
}

}  // namespace

bool s8_pack_block(const float* x, int64_t len, int8_t* q, float* scale) {
  if (!pack_cpu() || len % 8 != 0) return false;
  *scale = pack_block8(x, len, q);
  return true;
}

}  // namespace cpu
}  // namespace grit

#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC diagnostic pop
#pragma GCC pop_options

#else

namespace grit {
namespace cpu {
bool s8_pack_block(const float*, int64_t, int8_t*, float*) { return false; }
}  // namespace cpu
}  // namespace grit

#endif
