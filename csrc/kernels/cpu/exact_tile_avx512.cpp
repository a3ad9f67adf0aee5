// exact_tile.h on AVX-512 (F, BW, DQ, CD, VL, VNNI). Compiled for that
// target by the pragma below and reached only when exact_tile_supported()
// found the CPU has it. Every step is grit::exact's (exact_linear.h step 3):
//   pass 1, per block: P = ma * mw (int64 lanes), its term bound
//     bd + bitlen|P| + xa + xw, the largest over P != 0 -> G;
//   pass 2, per block: D_b by vpdpwssd over the block's column pairs, then
//     D_b * P put on the grid 2^G with one half-to-even rounding, summed in
//     int64 (exact, so the order cannot matter);
//   per row: the bias term and the one rounding to binary32, by the core's
//     own scalar functions.
#include "kernels/cpu/exact_tile.h"

#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

namespace grit {
namespace cpu {

bool exact_tile_supported(const exact::Law& L) {
  __builtin_cpu_init();
  static const bool cpu = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512cd") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  return cpu && L.k0 > 0 && L.k0 % 2 == 0 && L.bd <= 31;
}

}  // namespace cpu
}  // namespace grit

#pragma GCC push_options
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512cd,avx512vl,avx512vnni,avx512vbmi2,avx2,bmi,bmi2,popcnt")
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512dq,avx512cd,avx512vl,avx512vnni,avx512vbmi2,avx2,bmi,bmi2,popcnt"))), apply_to = function)
#endif

#include "kernels/cpu/avx512_transpose.h"

namespace grit {
namespace cpu {
namespace {

// One block's rescaled terms for eight rows (int64 lanes): D * P on the
// grid 2^G, rounded half to even where the grid is coarser (to_grid).
inline __m512i grid_terms(__m512i D, __m512i P, __m512i x, __m512i G) {
  const __m512i zero = _mm512_setzero_si512(), one = _mm512_set1_epi64(1);
  const __m512i V = _mm512_mullo_epi64(D, P);
  const __m512i s = _mm512_sub_epi64(G, x);
  // s <= 0: V * 2^-s, exact (< 2^62 by the choice of G). A count past 63
  // (s > 0 read as unsigned) gives 0, and those lanes take the other side.
  const __m512i left = _mm512_sllv_epi64(V, _mm512_sub_epi64(zero, s));
  // s > 0: |V| / 2^s half to even; s >= 64 acts as 64 (|V| < 2^63 rounds to 0).
  const __m512i u = _mm512_abs_epi64(V);
  const __m512i sc = _mm512_min_epi64(s, _mm512_set1_epi64(64));
  __m512i q = _mm512_srlv_epi64(u, sc);
  const __m512i rem = _mm512_and_si512(u, _mm512_sub_epi64(_mm512_sllv_epi64(one, sc), one));
  const __m512i half = _mm512_sllv_epi64(one, _mm512_sub_epi64(sc, one));
  const __mmask8 up = _mm512_cmpgt_epu64_mask(rem, half) |
                      (_mm512_cmpeq_epi64_mask(rem, half) & _mm512_test_epi64_mask(q, one));
  q = _mm512_mask_add_epi64(q, up, q, one);
  q = _mm512_mask_sub_epi64(q, _mm512_cmplt_epi64_mask(V, zero), zero, q);
  return _mm512_mask_blend_epi64(_mm512_cmple_epi64_mask(s, zero), q, left);
}

inline __m512i lo8(__m512i v) { return _mm512_cvtepi32_epi64(_mm512_castsi512_si256(v)); }
inline __m512i hi8(__m512i v) { return _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(v, 1)); }

// Block b's scale product P = ma * mw and exponent x = xa + xw for rows
// 0-7 ([0]) and 8-15 ([1]) in int64 lanes (|ma| < 2^24, |mw| < 2^11).
struct BlockScales {
  __m512i P[2], x[2];
  BlockScales(const ExactActivation& a, const ExactTile& t, int64_t b) {
    const __m512i ma = _mm512_set1_epi64(a.ma[b]), xa = _mm512_set1_epi64(a.xa[b]);
    const __m512i mw = _mm512_loadu_si512(t.mw.data() + b * kExactTileRows);
    const __m512i xw = _mm512_loadu_si512(t.xw.data() + b * kExactTileRows);
    P[0] = _mm512_mul_epi32(ma, lo8(mw));
    P[1] = _mm512_mul_epi32(ma, hi8(mw));
    x[0] = _mm512_add_epi64(xa, lo8(xw));
    x[1] = _mm512_add_epi64(xa, hi8(xw));
  }
};

// 8-bit codes whose integer code is the byte read as int8.
bool signed_byte_codes(const exact::Law& L) {
  if (L.elem_bits != 8) return false;
  for (int c = 0; c < 256; ++c)
    if (L.code[c] != static_cast<int16_t>(static_cast<int8_t>(static_cast<uint8_t>(c)))) return false;
  return true;
}

// An empty tile for `rows` rows: codes to be written, scales 0 (so rows past
// `rows` add nothing).
void start_tile(const exact::Law& L, int rows, int64_t k, ExactTile* t) {
  t->rows = rows;
  t->nan_rows = 0;
  t->pairs.resize(static_cast<size_t>(k / 2 * kExactTileRows));
  t->mw.assign(static_cast<size_t>(k / L.k0 * kExactTileRows), 0);
  t->xw.assign(static_cast<size_t>(k / L.k0 * kExactTileRows), 0);
}

// Row r's block b scale into the tile.
inline void put_scale(ExactTile* t, int r, int64_t b, const exact::WScale& s) {
  if (!s.finite) t->nan_rows |= 1u << r;
  t->mw[b * kExactTileRows + r] = s.m;
  t->xw[b * kExactTileRows + r] = s.x;
}

// Every block scale of rows r0 .. r0 + rows - 1, from the scale plane.
void tile_scales(const exact::Law& L, const uint8_t* s0, int64_t r0, int rows, int64_t k, ExactTile* t) {
  const int64_t B = k / L.k0;
  for (int r = 0; r < rows; ++r)
    for (int64_t b = 0; b < B; ++b)
      put_scale(t, r, b, exact::block_scale(L, s0, static_cast<uint64_t>((r0 + r) * B + b)));
}

}  // namespace

void exact_tile_pack(const exact::Law& L, const int16_t* w, const exact::WScale* ws, int rows, int64_t k,
                     ExactTile* t) {
  const int64_t np = k / 2, B = k / L.k0;
  start_tile(L, rows, k, t);
  for (int64_t p0 = 0; p0 < np; p0 += 16) {
    const int n = np - p0 < 16 ? static_cast<int>(np - p0) : 16;
    const __mmask16 m = static_cast<__mmask16>((1u << n) - 1u);
    __m512i v[16];
    for (int r = 0; r < 16; ++r)
      v[r] = r < rows ? _mm512_maskz_loadu_epi32(m, w + r * k + 2 * p0) : _mm512_setzero_si512();
    transpose16(v);
    store_pairs(t->pairs.data() + p0 * kExactTileRows, v, n);
  }
  for (int r = 0; r < rows; ++r)
    for (int64_t b = 0; b < B; ++b) put_scale(t, r, b, ws[r * B + b]);
}

namespace {

// 8-bit codes read as int8, dense or 2-of-4 sparse with 2-bit positions: a
// row's 64 columns at a time, the stored codes expanded into their kept
// positions (vpexpandb; the others 0), widened to int16 (a column pair per
// dword), transposed 16 rows at a time.
void bytes_tile(const exact::Law& L, const uint8_t* data, const uint8_t* meta, const uint64_t* cursor, int64_t r0,
                int rows, int64_t k, int32_t* pairs) {
  const bool sparse = L.sp_m != 0;
  uint64_t at[16] = {};
  for (int r = 0; r < rows; ++r) at[r] = sparse ? cursor[r] : static_cast<uint64_t>((r0 + r) * k);
  const int64_t quads = k / 4;
  for (int64_t c0 = 0; c0 < k; c0 += 64) {
    const int ncols = k - c0 < 64 ? static_cast<int>(k - c0) : 64;
    __m512i v0[16], v1[16];
    for (int r = 0; r < 16; ++r) {
      if (r >= rows) {
        v0[r] = v1[r] = _mm512_setzero_si512();
        continue;
      }
      uint64_t keep;
      if (sparse) {
        keep = 0;
        const uint64_t Q0 = static_cast<uint64_t>((r0 + r) * quads + c0 / 4);
        if (ncols == 64 && Q0 % 2 == 0) {  // 8 whole metadata bytes
          const uint8_t* mb = meta + Q0 / 2;
          for (int i = 0; i < 8; ++i) keep |= static_cast<uint64_t>(kKept.m[mb[i]]) << (8 * i);
        } else {
          for (int q = 0; q < ncols / 4; ++q) {
            const uint64_t Q = Q0 + static_cast<uint64_t>(q);
            keep |= static_cast<uint64_t>(kept(meta[Q >> 1] >> (4 * (Q & 1)))) << (4 * q);
          }
        }
      } else {
        keep = ncols == 64 ? ~uint64_t{0} : (uint64_t{1} << ncols) - 1u;
      }
      // The stored codes loaded, then expanded in a register: the memory form
      // of vpexpandb is microcoded and far slower on some cores (Zen 4).
      const int kept_n = __builtin_popcountll(keep);
      const __mmask64 run = kept_n == 64 ? ~uint64_t{0} : (uint64_t{1} << kept_n) - 1u;
      const __m512i raw = _mm512_maskz_loadu_epi8(sparse ? run : keep, data + at[r]);
      const __m512i b = sparse ? _mm512_maskz_expand_epi8(keep, raw) : raw;
      at[r] += static_cast<uint64_t>(kept_n);
      v0[r] = _mm512_cvtepi8_epi16(_mm512_castsi512_si256(b));
      v1[r] = _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(b, 1));
    }
    const int npairs = ncols / 2, n0 = npairs < 16 ? npairs : 16, n1 = npairs - n0;
    transpose16(v0);
    store_pairs(pairs + c0 / 2 * kExactTileRows, v0, n0);
    if (n1 > 0) {
      transpose16(v1);
      store_pairs(pairs + (c0 / 2 + 16) * kExactTileRows, v1, n1);
    }
  }
}

// Dense 4-bit codes: byte p of a row holds the row's codes 2p and 2p + 1,
// one column pair, each code through the law's table (vpermd).
void nibbles_tile(const exact::Law& L, const uint8_t* data, int64_t r0, int rows, int64_t k, int32_t* pairs) {
  const int64_t np = k / 2;
  alignas(64) int32_t table[16];
  for (int c = 0; c < 16; ++c) table[c] = L.code[c];
  const __m512i T = _mm512_load_si512(table), low16 = _mm512_set1_epi32(0xFFFF), nib = _mm512_set1_epi32(15);
  for (int64_t p0 = 0; p0 < np; p0 += 16) {
    const int n = np - p0 < 16 ? static_cast<int>(np - p0) : 16;
    const __mmask16 m = static_cast<__mmask16>((1u << n) - 1u);
    __m512i v[16];
    for (int r = 0; r < 16; ++r) {
      if (r >= rows) {
        v[r] = _mm512_setzero_si512();
        continue;
      }
      const uint8_t* row = data + (r0 + r) * np;  // k / 2 bytes per row
      const __m512i b = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, row + p0));
      const __m512i lo = _mm512_and_si512(b, nib), hi = _mm512_srli_epi32(b, 4);
      const __m512i first = L.msb ? hi : lo, second = L.msb ? lo : hi;
      v[r] = _mm512_or_si512(_mm512_and_si512(_mm512_permutexvar_epi32(first, T), low16),
                             _mm512_slli_epi32(_mm512_permutexvar_epi32(second, T), 16));
    }
    transpose16(v);
    store_pairs(pairs + p0 * kExactTileRows, v, n);
  }
}

}  // namespace

bool exact_tile_codes(const exact::Law& L, const uint8_t* data, const uint8_t* meta, const uint64_t* cursor,
                      int64_t r0, int rows, int64_t k, int32_t* pairs) {
  static const bool vbmi2 = __builtin_cpu_supports("avx512vbmi2");
  const bool sparse_ok = L.sp_m == 0 || (L.sp_m == 4 && L.sp_n == 2 && L.sp_meta_bits == 2);
  const bool bytes = L.elem_bits == 8 && vbmi2 && signed_byte_codes(L);
  const bool nibbles = L.elem_bits == 4 && L.sp_m == 0;
  if (k % 2 != 0 || !sparse_ok || !(bytes || nibbles)) return false;
  if (bytes)
    bytes_tile(L, data, meta, cursor, r0, rows, k, pairs);
  else
    nibbles_tile(L, data, r0, rows, k, pairs);
  return true;
}

bool exact_tile_from_planes(const exact::Law& L, const uint8_t* data, const uint8_t* s0, const uint8_t* meta,
                            const uint64_t* cursor, int64_t r0, int rows, int64_t k, ExactTile* t) {
  t->pairs.resize(static_cast<size_t>(k / 2 * kExactTileRows));
  if (!exact_tile_codes(L, data, meta, cursor, r0, rows, k, t->pairs.data())) return false;
  start_tile(L, rows, k, t);
  tile_scales(L, s0, r0, rows, k, t);
  return true;
}

void exact_dot_tile(const exact::Law& L, const ExactActivation& a, const ExactTile& t, int64_t k,
                    const float* bias, float* y) {
  const int64_t B = k / L.k0, np_block = L.k0 / 2;
  const float nan = exact::bits_to_f32(0x7FC00000u);
  if (!a.finite) {
    for (int r = 0; r < t.rows; ++r) y[r] = nan;
    return;
  }
  // Per row: settled outputs (a poisoned weight row, a non-finite bias) and
  // the bias term's parts and bound.
  constexpr int64_t kNone = INT64_MIN / 4;
  alignas(64) int64_t tmax0[16], mb[16];
  int32_t xb[16] = {};
  uint32_t settled = 0, any0 = 0;
  for (int r = 0; r < 16; ++r) {
    tmax0[r] = kNone;
    mb[r] = 0;
    if (r >= t.rows) continue;
    if (t.nan_rows >> r & 1u) {
      y[r] = nan;
      settled |= 1u << r;
      continue;
    }
    if (bias == nullptr) continue;
    if (!exact::f32_parts(bias[r], &mb[r], &xb[r])) {
      y[r] = bias[r] != bias[r] ? nan : bias[r];
      settled |= 1u << r;
      continue;
    }
    if (mb[r] != 0) {
      tmax0[r] = exact::bitlen64(static_cast<uint64_t>(mb[r] < 0 ? -mb[r] : mb[r])) + xb[r];
      any0 |= 1u << r;
    }
  }
  if (settled == (1u << t.rows) - 1u) return;

  // Pass 1: the largest term bound of each row.
  const __m512i bd64 = _mm512_set1_epi64(L.bd + 64);
  __m512i tmax[2] = {_mm512_load_si512(tmax0), _mm512_load_si512(tmax0 + 8)};
  __mmask8 any[2] = {static_cast<__mmask8>(any0), static_cast<__mmask8>(any0 >> 8)};
  for (int64_t b = 0; b < B; ++b) {
    const BlockScales bs(a, t, b);
    for (int h = 0; h < 2; ++h) {
      const __mmask8 nz = _mm512_test_epi64_mask(bs.P[h], bs.P[h]);
      // bd + bitlen|P| + xa + xw, bitlen = 64 - lzcnt.
      const __m512i top = _mm512_add_epi64(_mm512_sub_epi64(bd64, _mm512_lzcnt_epi64(_mm512_abs_epi64(bs.P[h]))),
                                           bs.x[h]);
      tmax[h] = _mm512_mask_max_epi64(tmax[h], nz, tmax[h], top);
      any[h] |= nz;
    }
  }
  const __m512i lb = _mm512_set1_epi64(62 - exact::bitlen64(static_cast<uint64_t>(B) + 1));
  const __m512i G[2] = {_mm512_sub_epi64(tmax[0], lb), _mm512_sub_epi64(tmax[1], lb)};

  // Pass 2: D_b (lane = row) and its term on the grid.
  __m512i sum[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
  const int16_t* ac = a.codes.data();
  const int32_t* wp = t.pairs.data();
  for (int64_t b = 0; b < B; ++b) {
    __m512i d0 = _mm512_setzero_si512(), d1 = _mm512_setzero_si512();
    const int64_t p0 = b * np_block;
    int64_t q = 0;
    for (; q + 1 < np_block; q += 2) {
      int32_t x0, x1;
      std::memcpy(&x0, ac + 2 * (p0 + q), 4);
      std::memcpy(&x1, ac + 2 * (p0 + q + 1), 4);
      d0 = _mm512_dpwssd_epi32(d0, _mm512_loadu_si512(wp + (p0 + q) * kExactTileRows), _mm512_set1_epi32(x0));
      d1 = _mm512_dpwssd_epi32(d1, _mm512_loadu_si512(wp + (p0 + q + 1) * kExactTileRows), _mm512_set1_epi32(x1));
    }
    if (q < np_block) {
      int32_t x0;
      std::memcpy(&x0, ac + 2 * (p0 + q), 4);
      d0 = _mm512_dpwssd_epi32(d0, _mm512_loadu_si512(wp + (p0 + q) * kExactTileRows), _mm512_set1_epi32(x0));
    }
    const __m512i D = _mm512_add_epi32(d0, d1);
    const BlockScales bs(a, t, b);
    sum[0] = _mm512_add_epi64(sum[0], grid_terms(lo8(D), bs.P[0], bs.x[0], G[0]));
    sum[1] = _mm512_add_epi64(sum[1], grid_terms(hi8(D), bs.P[1], bs.x[1], G[1]));
  }

  alignas(64) int64_t s[16], g[16];
  _mm512_store_si512(s, sum[0]);
  _mm512_store_si512(s + 8, sum[1]);
  _mm512_store_si512(g, G[0]);
  _mm512_store_si512(g + 8, G[1]);
  const uint32_t any_rows = static_cast<uint32_t>(any[0]) | static_cast<uint32_t>(any[1]) << 8;
  for (int r = 0; r < t.rows; ++r) {
    if (settled >> r & 1u) continue;
    if (!(any_rows >> r & 1u)) {
      y[r] = 0.0f;
      continue;
    }
    const int32_t Gr = static_cast<int32_t>(g[r]);
    int64_t total = s[r];
    if (mb[r] != 0) total += exact::to_grid(mb[r], xb[r], Gr);
    y[r] = exact::fixed_to_f32(total, Gr);
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
bool exact_tile_supported(const exact::Law&) { return false; }
void exact_tile_pack(const exact::Law&, const int16_t*, const exact::WScale*, int, int64_t, ExactTile*) {}
bool exact_tile_from_planes(const exact::Law&, const uint8_t*, const uint8_t*, const uint8_t*, const uint64_t*, int64_t,
                            int, int64_t, ExactTile*) {
  return false;
}
bool exact_tile_codes(const exact::Law&, const uint8_t*, const uint8_t*, const uint64_t*, int64_t, int, int64_t,
                      int32_t*) {
  return false;
}
void exact_dot_tile(const exact::Law&, const ExactActivation&, const ExactTile&, int64_t, const float*, float*) {}
}  // namespace cpu
}  // namespace grit

#endif
