#include "kernels/cpu/exact_decode.h"

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

// Codes stored for the two quads of each metadata byte.
struct ByteStored {
  uint8_t n[256];
  constexpr ByteStored() : n() {
    for (uint32_t b = 0; b < 256; ++b) n[b] = static_cast<uint8_t>(nibble_stored(b & 15u) + nibble_stored(b >> 4));
  }
};
constexpr ByteStored kByteStored;

}  // namespace

uint64_t exact_row_stored(const Law& L, const uint8_t* meta, int64_t r, int64_t k) {
  if (L.sp_m == 0) return static_cast<uint64_t>(k);
  if (!fast_sparse(L)) return exact::row_stored(L, meta, r, k);
  const uint64_t quads = static_cast<uint64_t>(k / 4), Q0 = static_cast<uint64_t>(r) * quads;
  uint64_t c = 0, Q = Q0;
  if (Q % 2 != 0 && Q < Q0 + quads) c += nibble_stored(quad_nibble(meta, Q++));
  for (; Q + 2 <= Q0 + quads; Q += 2) c += kByteStored.n[meta[Q >> 1]];  // a metadata byte: two quads
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
