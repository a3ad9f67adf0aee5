#include "kernels/cpu/exact_decode.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace grit {
namespace cpu {
namespace {

using exact::Law;

// Code widths read here without the core's bit loop.
bool fast_width(const Law& L) { return L.elem_bits == 4 || L.elem_bits == 8; }
// 2-of-4 sparsity with 2-bit positions: a quad's metadata is one nibble.
bool fast_sparse(const Law& L) { return L.sp_m == 4 && L.sp_n == 2 && L.sp_meta_bits == 2; }

// Stored code i (read_code's value for 4- and 8-bit codes).
inline uint32_t code_at(const Law& L, const uint8_t* data, uint64_t i) {
  if (L.elem_bits == 8) return data[i];
  const uint32_t b = data[i >> 1];
  const bool high = ((i & 1) != 0) != (L.msb != 0);  // lsb-first: odd i is the high nibble
  return high ? b >> 4 : b & 15u;
}

// Quad Q's metadata nibble: positions a = bits 0-1, b = bits 2-3 (the two
// 2-bit indices survivors() reads); the survivors are {a, b}, one if a == b.
inline uint32_t quad_nibble(const uint8_t* meta, uint64_t Q) { return (meta[Q >> 1] >> (4 * (Q & 1))) & 15u; }
constexpr uint32_t nibble_stored(uint32_t nib) { return (nib & 3u) == (nib >> 2) ? 1u : 2u; }

// How many of the 2 * n quads in n metadata bytes keep one position, not two.
uint64_t coinciding_scalar(const uint8_t* bytes, uint64_t n) {
  uint64_t same = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const uint32_t x = bytes[i] ^ (bytes[i] >> 2);  // bits 0-1: a ^ b of the low quad; bits 4-5: the high quad's
    same += ((x & 0x03u) == 0) + ((x & 0x30u) == 0);
  }
  return same;
}

#if defined(__x86_64__)
// The same 64 bytes at a time on AVX-512 (BW): two mask tests and popcounts.
__attribute__((target("avx512f,avx512bw,popcnt"))) uint64_t coinciding_avx512(const uint8_t* bytes, uint64_t n) {
  const __m512i low6 = _mm512_set1_epi8(0x3F), q0 = _mm512_set1_epi8(0x03), q1 = _mm512_set1_epi8(0x30);
  uint64_t same = 0, i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512i b = _mm512_loadu_si512(bytes + i);
    const __m512i x = _mm512_xor_si512(b, _mm512_and_si512(_mm512_srli_epi16(b, 2), low6));  // b ^ (b >> 2) per byte
    same += static_cast<uint64_t>(__builtin_popcountll(_mm512_testn_epi8_mask(x, q0)));
    same += static_cast<uint64_t>(__builtin_popcountll(_mm512_testn_epi8_mask(x, q1)));
  }
  return same + coinciding_scalar(bytes + i, n - i);
}
#endif

uint64_t coinciding(const uint8_t* bytes, uint64_t n) {
#if defined(__x86_64__)
  static const bool avx512 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  }();
  if (avx512) return coinciding_avx512(bytes, n);
#endif
  return coinciding_scalar(bytes, n);
}

}  // namespace

uint64_t exact_row_stored(const Law& L, const uint8_t* meta, int64_t r, int64_t k) {
  if (L.sp_m == 0) return static_cast<uint64_t>(k);
  if (!fast_sparse(L)) return exact::row_stored(L, meta, r, k);
  const uint64_t quads = static_cast<uint64_t>(k / 4), Q0 = static_cast<uint64_t>(r) * quads;
  uint64_t c = 0, Q = Q0;
  if (Q % 2 != 0 && Q < Q0 + quads) c += nibble_stored(quad_nibble(meta, Q++));
  // whole metadata bytes (two quads each): 4 codes less one per quad whose two positions coincide
  const uint64_t whole = (Q0 + quads - Q) / 2;
  c += 4 * whole - coinciding(meta + (Q >> 1), whole);
  Q += 2 * whole;
  if (Q < Q0 + quads) c += nibble_stored(quad_nibble(meta, Q));
  return c;
}

void exact_weight_row(const Law& L, const uint8_t* data, const uint8_t* s0, const uint8_t* meta, int64_t r,
                      int64_t k, uint64_t cursor, int16_t* codes, exact::WScale* scales) {
  const bool sparse_ok = L.sp_m == 0 || fast_sparse(L);
  if (!fast_width(L) || !sparse_ok) {
    exact::weight_row(L, data, s0, meta, r, k, cursor, codes, scales);
    return;
  }
  const int64_t nb = k / L.k0;
  for (int64_t b = 0; b < nb; ++b) scales[b] = exact::block_scale(L, s0, static_cast<uint64_t>(r * nb + b));
  if (L.sp_m == 0) {
    const uint64_t first = static_cast<uint64_t>(r) * static_cast<uint64_t>(k);
    if (L.elem_bits == 8) {
      const uint8_t* p = data + first;
      for (int64_t t = 0; t < k; ++t) codes[t] = L.code[p[t]];
    } else if (first % 2 == 0 && k % 2 == 0) {  // whole bytes: two codes each
      const uint8_t* p = data + first / 2;
      const int lo = L.msb ? 4 : 0, hi = L.msb ? 0 : 4;
      for (int64_t t = 0; t < k / 2; ++t) {
        codes[2 * t] = L.code[(p[t] >> lo) & 15u];
        codes[2 * t + 1] = L.code[(p[t] >> hi) & 15u];
      }
    } else {
      for (int64_t t = 0; t < k; ++t) codes[t] = L.code[code_at(L, data, first + static_cast<uint64_t>(t))];
    }
    return;
  }
  // Survivors take the stored codes in ascending position, the rest code 0.
  const int64_t quads = k / 4;
  for (int64_t q = 0; q < quads; ++q) {
    const uint32_t nib = quad_nibble(meta, static_cast<uint64_t>(r * quads + q));
    const uint32_t a = nib & 3u, b = nib >> 2, lo = a < b ? a : b, hi = a < b ? b : a;
    int16_t* c = codes + q * 4;
    c[0] = c[1] = c[2] = c[3] = 0;
    c[lo] = L.code[code_at(L, data, cursor++)];
    if (a != b) c[hi] = L.code[code_at(L, data, cursor++)];
  }
}

}  // namespace cpu
}  // namespace grit
