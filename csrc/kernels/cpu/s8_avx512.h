// Pieces of the s8 kernels on AVX-512: how they read 16 weight rows' codes
// (dense bytes transposed 16 at a time, load_unit; I8S24's 2:4 codes expanded
// into their columns and transposed, SparseRows) and the law's float steps
// per block for 16 rows at once (Batch). Shared by the VNNI kernel
// (s8_fused_avx512.cpp) and the AMX kernel (s8_amx.cpp). Include only inside
// a region compiled for avx512f, avx512bw and avx512vbmi2 (the kernels'
// target pragmas); torch-free.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/avx512_transpose.h"
#include "kernels/cpu/exact_tile.h"
#include "kernels/cpu/s8_tile.h"

namespace grit {
namespace cpu {
namespace s8rows {

// The 16 rows of a tile: affine (row r at base + r * stride: whole tiles,
// no pointer table in the loop) or listed (a partial tile, its last row
// repeated).
template <bool kAffine>
struct Rows;
template <>
struct Rows<true> {
  const uint8_t* base;
  int64_t stride;
  const uint8_t* at(int r, int64_t off) const { return base + r * stride + off; }
};
template <>
struct Rows<false> {
  const uint8_t* row[16];
  const uint8_t* at(int r, int64_t off) const { return row[r] + off; }
};

// 16 bytes at `off` of each of 16 rows, transposed: out[j] lane r = bytes
// 4j .. 4j + 3 of row r. Register q's 128-bit lane i takes row 4i + q, so
// the two unpack levels leave the rows in lane order.
template <bool kAffine>
inline void load_unit(const Rows<kAffine>& rows, int64_t off, __m512i out[4]) {
  __m512i z[4];
  for (int q = 0; q < 4; ++q) {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows.at(q, off))));
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows.at(q + 4, off))), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows.at(q + 8, off))), 2);
    z[q] = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows.at(q + 12, off))), 3);
  }
  const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
  out[0] = _mm512_unpacklo_epi64(t0, t2);
  out[1] = _mm512_unpackhi_epi64(t0, t2);
  out[2] = _mm512_unpacklo_epi64(t1, t3);
  out[3] = _mm512_unpackhi_epi64(t1, t3);
}

// I8S24's 2:4 int8 codes of a tile's rows (no zero point): per row and 64
// columns, the 16 metadata nibbles' kept positions expand the row's stored
// codes into their columns in a register (vpexpandb; the others 0, which
// the law multiplies like any code), and the 16 rows are transposed so that
// lane r holds 4 columns of row r. Columns are taken in order, 64 at a time.
struct SparseRows {
  uint64_t at[16];
  const uint8_t* mrow[16];
  const uint8_t* data;
  __m512i kept_lut, low4;

  // rows: the tile's rows (1..16; rows past it repeat its last); cursor[r]:
  // the data-plane index of row r0 + r's first stored code; meta: the aux
  // plane, quads_per_row = k / 4 a multiple of 16.
  SparseRows(int rows, const uint8_t* data_plane, const uint8_t* meta, const uint64_t* cursor, int64_t r0,
             int64_t quads_per_row)
      : data(data_plane) {
    for (int r = 0; r < 16; ++r) {
      const int rr = r < rows ? r : rows - 1;
      at[r] = cursor[rr];
      mrow[r] = meta + (r0 + rr) * quads_per_row / 2;
    }
    // kept() of a nibble by vpshufb from a 16-entry table
    alignas(64) uint8_t table[64];
    for (int i = 0; i < 64; ++i) table[i] = static_cast<uint8_t>(kept(static_cast<uint32_t>(i & 15)));
    kept_lut = _mm512_load_si512(table);
    low4 = _mm512_set1_epi8(0x0F);
  }

  // v[j] lane r: the int8 codes of columns c0 + 4j .. c0 + 4j + 3 of row r.
  __attribute__((always_inline)) void unit(int64_t c0, __m512i v[16]) {
    // keeps[r] byte t = kept(low nibble) | kept(high nibble) << 4 of the
    // row's metadata byte t, formed for the 16 rows' 8 bytes at once
    alignas(64) uint64_t keeps[16];
    for (int r = 0; r < 16; ++r) std::memcpy(&keeps[r], mrow[r] + c0 / 8, 8);  // 8 metadata bytes: 16 quads
    for (int h = 0; h < 2; ++h) {
      const __m512i m = _mm512_load_si512(keeps + 8 * h);
      const __m512i lo = _mm512_shuffle_epi8(kept_lut, _mm512_and_si512(m, low4));
      const __m512i hi = _mm512_shuffle_epi8(kept_lut, _mm512_and_si512(_mm512_srli_epi16(m, 4), low4));
      _mm512_store_si512(keeps + 8 * h, _mm512_or_si512(lo, _mm512_slli_epi16(hi, 4)));  // hi <= 15: no carry
    }
    for (int r = 0; r < 16; ++r) {
      const uint64_t keep = keeps[r];
      const int kept_n = __builtin_popcountll(keep);
      const __mmask64 run = kept_n == 64 ? ~uint64_t{0} : (uint64_t{1} << kept_n) - 1u;
      // the stored codes loaded, then expanded in a register (the memory form is slow on some cores)
      v[r] = _mm512_maskz_expand_epi8(keep, _mm512_maskz_loadu_epi8(run, data + at[r]));
      at[r] += static_cast<uint64_t>(kept_n);
    }
    transpose16(v);
  }
};

// R batch rows over one tile: their activation words, block sums and
// scales, the integer block sums D (lane = weight row) and the law's
// accumulators; finish() takes block b's steps as s8_dot_tile does, store()
// the bias, the canonical NaN and the tile's rows. The AMX kernel has no
// activation words (quads null) and hands finish() its block sums from
// memory.
template <int R, int kZero>
struct Batch {
  const int32_t* qa[R];
  const int32_t* sums[R];
  const float* scales[R];
  __m512 acc[R];
  __m512i D[R];
  __m512 p2;
  int64_t b = 0, g = 0, in_g = 0, per;  // block b lies in group g = b / per

  __attribute__((always_inline)) Batch(const s8::Law& L, const int32_t* const* quads,
                                       const S8Activation* const* a)
      : p2(_mm512_set1_ps(std::ldexp(1.0f, L.qe))), per(L.k0 / L.kb) {
    for (int i = 0; i < R; ++i) {
      qa[i] = quads != nullptr ? quads[i] : nullptr;
      sums[i] = a[i]->sums.data();
      scales[i] = a[i]->scales;
      acc[i] = _mm512_setzero_ps();
      D[i] = _mm512_setzero_si512();
    }
  }

  // Block b ends: D_b = D - off * A_b (- zi * A_b), then the law's products and FMAs.
  // always inlined: acc and D then stay in registers across the kernel's loops.
  // The AMX kernel's form (kStored): D_b of batch row i and weight row r at
  // dt[16 * i + r], the block's activation scales and sums at sat[i] and
  // At[i] (Aft[i]: the same sums as floats, exact), off 0. kP2 false: the law's 2^qe is 1 (qe = 0), whose product
  // changes no integer-valued float, so it is left out.
  template <bool kP2 = true, bool kStored = false>
  __attribute__((always_inline)) void finish(const S8Tile& t, int32_t off, const int32_t* dt = nullptr,
                                             const float* sat = nullptr, const int32_t* At = nullptr,
                                             const float* Aft = nullptr) {
    const __m512 S = _mm512_loadu_ps(t.S.data() + g * kS8TileRows);
    __m512i zi = _mm512_setzero_si512();
    if (kZero == s8::kZpShared) zi = _mm512_loadu_si512(t.zi.data() + g * kS8TileRows);
    for (int i = 0; i < R; ++i) {
      const int32_t A = kStored ? At[i] : sums[i][b];
      __m512i d;
      if (kStored) {
        d = _mm512_load_si512(dt + 16 * i);
      } else {
        d = _mm512_sub_epi32(D[i], _mm512_set1_epi32(off * A));
        D[i] = _mm512_setzero_si512();
      }
      if (kZero == s8::kZpShared) d = _mm512_sub_epi32(d, _mm512_mullo_epi32(zi, _mm512_set1_epi32(A)));
      const __m512 sa = _mm512_set1_ps(kStored ? sat[i] : scales[i][b]);
      const __m512 P = kP2 ? _mm512_mul_ps(_mm512_cvtepi32_ps(d), p2) : _mm512_cvtepi32_ps(d);
      acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(sa, S), P, acc[i]);
    }
    if (kZero == s8::kZpOffset) {
      const __m512 O = _mm512_loadu_ps(t.O.data() + g * kS8TileRows);
      for (int i = 0; i < R; ++i) {
        const __m512 sa = _mm512_set1_ps(kStored ? sat[i] : scales[i][b]);
        const __m512 A = _mm512_set1_ps(kStored ? Aft[i] : static_cast<float>(sums[i][b]));
        acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(sa, O), A, acc[i]);
      }
    }
    ++b;
    if (++in_g == per) in_g = 0, ++g;
  }

  // The AMX kernel runs a tile's columns in chunks: it parks the
  // accumulators between them (acc_mem[16 * i + r]) and resumes at block b.
  __attribute__((always_inline)) void seek(int64_t block) {
    b = block;
    g = block / per;
    in_g = block % per;
  }
  __attribute__((always_inline)) void park(float* acc_mem) const {
    for (int i = 0; i < R; ++i) _mm512_store_ps(acc_mem + 16 * i, acc[i]);
  }
  __attribute__((always_inline)) void resume(const float* acc_mem) {
    for (int i = 0; i < R; ++i) acc[i] = _mm512_load_ps(acc_mem + 16 * i);
  }

  // The first `rows` batch rows' outputs (all R by default).
  __attribute__((always_inline)) void store(const S8Tile& t, const float* bias, float* y, int64_t ldy,
                                            int rows = R) const {
    const __mmask16 m = static_cast<__mmask16>((1u << t.rows) - 1u);
    const __m512 nan = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000));
    const __m512 bv = bias ? _mm512_maskz_loadu_ps(m, bias) : _mm512_setzero_ps();
    for (int i = 0; i < R; ++i) {
      if (i >= rows) break;
      __m512 v = bias ? _mm512_add_ps(acc[i], bv) : acc[i];
      v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), v, nan);
      _mm512_mask_storeu_ps(y + i * ldy, m, v);
    }
  }
};

}  // namespace s8rows
}  // namespace cpu
}  // namespace grit
