// 16 x 16 dword transposes for the AVX-512 tile builders (lane = row).
// Include only inside a region compiled for avx512f (the kernels' target
// pragmas); torch-free.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace grit {
namespace cpu {

// out[j] lane r = in[r] lane j (16 x 16 dwords).
inline void transpose16(__m512i v[16]) {
  __m512i t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    v[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    v[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    v[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    v[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  // v[4i + c] 128-bit lane L: rows 4i..4i+3, column 4L + c.
  for (int c = 0; c < 4; ++c) {
    const __m512i a = _mm512_shuffle_i32x4(v[c], v[4 + c], 0x44), b = _mm512_shuffle_i32x4(v[c], v[4 + c], 0xEE);
    const __m512i e = _mm512_shuffle_i32x4(v[8 + c], v[12 + c], 0x44);
    const __m512i d = _mm512_shuffle_i32x4(v[8 + c], v[12 + c], 0xEE);
    t[c] = _mm512_shuffle_i32x4(a, e, 0x88);
    t[4 + c] = _mm512_shuffle_i32x4(a, e, 0xDD);
    t[8 + c] = _mm512_shuffle_i32x4(b, d, 0x88);
    t[12 + c] = _mm512_shuffle_i32x4(b, d, 0xDD);
  }
  for (int i = 0; i < 16; ++i) v[i] = t[i];
}

// Stores the first n (<= 16) of v at dst, dst + 16, ...: a whole set in an
// unrolled loop, so v stays in registers.
inline void store_pairs(int32_t* dst, const __m512i v[16], int n) {
  if (n == 16) {
    for (int q = 0; q < 16; ++q) _mm512_storeu_si512(dst + q * 16, v[q]);
  } else {
    for (int q = 0; q < n; ++q) _mm512_storeu_si512(dst + q * 16, v[q]);
  }
}

}  // namespace cpu
}  // namespace grit
