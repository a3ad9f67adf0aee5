// packed_linear for AVX-512: INT4G at batches of many rows
// (int4g_batch_simd.inc). A file of its own so that a parallel build
// compiles it beside packed_linear_avx512.cpp, which calls it.
#include <algorithm>

#include "kernels/cpu/packed_linear_cpu.h"

#if defined(__x86_64__) || defined(__i386__)

#include "kernels/cpu/simd_avx512.inc"

// Blocking: batch rows side by side, and grad_x's 16-column vectors per row
// (their sums and W's binary64 rows in registers). With i4b_nibbles16
// below, what int4g_batch_simd.inc asks of each instruction set.
constexpr int kI4bRows = 4;
constexpr int kI4bGradVecs = 4;

// The 16 signed codes of 8 code bytes (low nibble first), in column order:
// each nibble x as (x ^ 8) - 8.
inline VI i4b_nibbles16(const uint8_t* p) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  const __m128i mask = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
  const __m128i lo = _mm_and_si128(b, mask), hi = _mm_and_si128(_mm_srli_epi16(b, 4), mask);
  const __m128i v = _mm_sub_epi8(_mm_xor_si128(_mm_unpacklo_epi8(lo, hi), eight), eight);
  return _mm512_cvtepi8_epi32(v);
}

#include "kernels/cpu/int4g_batch_simd.inc"
#include "kernels/cpu/simd_end.inc"

#endif
