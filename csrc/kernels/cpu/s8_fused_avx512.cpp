// The fused s8 tile kernel (s8_tile.h) on AVX-512 (F, BW, VL, VNNI): the
// weight codes of 16 rows are read from the data plane 16 bytes a row at a
// time, transposed in registers so that lane r holds 4 bytes of row r, and
// multiplied with vpdpbusd as offset-binary bytes u = c + off. Per block,
// D_b = sum u a - off * A_b is the law's exact integer sum (integer sums
// do not depend on their order), and from there every step is
// s8_dot_tile's, in its order: the same bits as grit::s8::dot.
#include <cmath>
#include <cstring>

#include "kernels/cpu/exact_tile.h"
#include "kernels/cpu/s8_tile.h"

namespace grit {
namespace cpu {
namespace {

bool fused_cpu() {
#if defined(__x86_64__)
  static const bool cpu = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512vnni");
  }();
  return cpu;
#else
  return false;
#endif
}

}  // namespace

bool s8_fused_plan(const s8::Law& L, int64_t k, S8Fused* f) {
  if (!fused_cpu() || L.kb <= 0) return false;
  const S8CodeShape c = s8_code_shape(L);
  S8Fused out;
  if (L.sp_m != 0) {
    // I8S24's layout: int8 codes, 2 of every 4 kept, 2-bit positions; vpexpandb needs VBMI2
    static const bool vbmi2 = __builtin_cpu_supports("avx512vbmi2");
    if (!vbmi2 || !s8_i8s24_layout(L, c) || k % 64 != 0 || L.kb % 4 != 0) return false;
    out.sparse = 1;
    out.flip = 1;
    out.off = 128;
  } else if (L.elem_bits == 4) {
    // 16 row bytes = 32 columns a unit, 8 columns a slice
    if (k % 32 != 0 || L.kb % 8 != 0 || c.hi - c.lo > 255) return false;
    out.nibbles = 1;
    out.off = -c.lo;
    for (int i = 0; i < 16; ++i) out.lut[i] = static_cast<uint8_t>(L.code[i] + out.off);
  } else if (L.elem_bits == 8) {
    // 16 columns a unit, 4 a slice
    if (k % 16 != 0 || L.kb % 4 != 0 || (!c.as_int8 && !c.as_uint8)) return false;
    out.flip = c.as_int8;
    out.off = c.as_int8 ? 128 : 0;
  } else {
    return false;
  }
  *f = out;
  return true;
}

void s8_fused_activation(const s8::Law& L, const S8Fused& f, const int8_t* codes, int64_t k,
                         std::vector<int32_t>* quads) {
  auto word = [](const int8_t* c, int step) {
    uint32_t w = 0;
    for (int t = 0; t < 4; ++t) w |= static_cast<uint32_t>(static_cast<uint8_t>(c[t * step])) << (8 * t);
    return static_cast<int32_t>(w);
  };
  if (f.nibbles) {
    // byte t of a row's 4-byte word holds columns 2t and 2t + 1 (low nibble
    // first, or high first where the grade says msb)
    const int first = L.msb ? 1 : 0;
    quads->resize(static_cast<size_t>(k / 4));
    for (int64_t s = 0; s < k / 8; ++s) {
      (*quads)[2 * s] = word(codes + 8 * s + first, 2);
      (*quads)[2 * s + 1] = word(codes + 8 * s + 1 - first, 2);
    }
  } else {
    quads->resize(static_cast<size_t>(k / 4));
    for (int64_t s = 0; s < k / 4; ++s) (*quads)[s] = word(codes + 4 * s, 1);
  }
}

}  // namespace cpu
}  // namespace grit

#if defined(__x86_64__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC diagnostic push
// GCC 12's own intrinsic headers start some vectors from _mm*_undefined_*()
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx512vbmi2,avx2,fma")
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx512vbmi2,avx2,fma"))), apply_to = function)
#endif

#include "kernels/cpu/s8_avx512.h"

namespace grit {
namespace cpu {
namespace {

using s8rows::Batch;
using s8rows::load_unit;
using s8rows::Rows;
using s8rows::SparseRows;

template <int R, bool kNib, int kZero, bool kAffine>
void fused_rows(const s8::Law& L, const S8Fused& f, const int32_t* const* quads, const S8Activation* const* a,
                const S8Tile& t, const Rows<kAffine>& rows, int64_t k, const float* bias, float* y, int64_t ldy,
                const uint8_t* next, int64_t next_bytes) {
  constexpr int64_t kUnitCols = kNib ? 32 : 16, kSliceCols = kUnitCols / 4;
  const int64_t slices_per_block = L.kb / kSliceCols;
  const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(f.lut)));
  const __m512i nib = _mm512_set1_epi8(0x0F), flip = _mm512_set1_epi8(static_cast<char>(0x80));
  Batch<R, kZero> bt(L, quads, a);
  const int64_t units = k / kUnitCols;
  int64_t left = slices_per_block;
  for (int64_t u = 0; u < units; ++u) {
    if ((u & 3) == 0 && u + 16 < units)  // four units a cache line: the line 16 units ahead
      for (int r = 0; r < 16; ++r) _mm_prefetch(reinterpret_cast<const char*>(rows.at(r, (u + 16) * 16)), _MM_HINT_T0);
    // The next tile's bytes (contiguous: rows follow one another) into L2 in
    // address order, its share per unit: DRAM sees one sequential stream
    // instead of sixteen short ones.
    if (next != nullptr)
      for (int64_t at = u * 256; at < (u + 1) * 256 && at < next_bytes; at += 64)
        _mm_prefetch(reinterpret_cast<const char*>(next + at), _MM_HINT_T1);
    __m512i w[4];
    load_unit(rows, u * 16, w);
    for (int j = 0; j < 4; ++j) {
      const int64_t s = u * 4 + j;  // the slice: columns s * kSliceCols ..
      if (kNib) {
        const __m512i lo = _mm512_shuffle_epi8(lut, _mm512_and_si512(w[j], nib));
        const __m512i hi = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(w[j], 4), nib));
        for (int i = 0; i < R; ++i) {
          bt.D[i] = _mm512_dpbusd_epi32(bt.D[i], lo, _mm512_set1_epi32(bt.qa[i][2 * s]));
          bt.D[i] = _mm512_dpbusd_epi32(bt.D[i], hi, _mm512_set1_epi32(bt.qa[i][2 * s + 1]));
        }
      } else {
        const __m512i ub = f.flip ? _mm512_xor_si512(w[j], flip) : w[j];
        for (int i = 0; i < R; ++i) bt.D[i] = _mm512_dpbusd_epi32(bt.D[i], ub, _mm512_set1_epi32(bt.qa[i][s]));
      }
      if (--left != 0) continue;
      left = slices_per_block;
      bt.finish(t, f.off);  // block b ends here
    }
  }
  bt.store(t, bias, y, ldy);
}

// I8S24's 2:4 int8 codes (no zero point) expanded and transposed 64 columns
// at a time (SparseRows), then the dense 8-bit kernel's steps.
template <int R>
void sparse_rows(const s8::Law& L, const int32_t* const* quads, const S8Activation* const* a, const S8Tile& t,
                 const uint8_t* data, const uint8_t* meta, const uint64_t* cursor, int64_t r0, int64_t k,
                 const float* bias, float* y, int64_t ldy) {
  constexpr int64_t kSliceCols = 4;
  const int64_t slices_per_block = L.kb / kSliceCols, quads_per_row = k / 4;
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  SparseRows sp(t.rows, data, meta, cursor, r0, quads_per_row);
  Batch<R, s8::kZpNone> bt(L, quads, a);
  int64_t left = slices_per_block;
  for (int64_t c0 = 0; c0 < k; c0 += 64) {
    __m512i v[16];
    sp.unit(c0, v);  // v[j] lane r: columns c0 + 4j .. c0 + 4j + 3 of row r
    for (int j = 0; j < 16; ++j) {
      const int64_t s = c0 / 4 + j;
      const __m512i ub = _mm512_xor_si512(v[j], flip);
      for (int i = 0; i < R; ++i) bt.D[i] = _mm512_dpbusd_epi32(bt.D[i], ub, _mm512_set1_epi32(bt.qa[i][s]));
      if (--left != 0) continue;
      left = slices_per_block;
      bt.finish(t, 128);  // u = c + 128
    }
  }
  bt.store(t, bias, y, ldy);
}

template <int R, bool kNib, int kZero>
void fused_layout(const s8::Law& L, const S8Fused& f, const int32_t* const* quads, const S8Activation* const* a,
                  const S8Tile& t, const uint8_t* data, int64_t r0, int64_t k, int64_t n, bool ahead,
                  const float* bias, float* y, int64_t ldy) {
  const int64_t row_bytes = kNib ? k / 2 : k;
  const int64_t after = r0 + 16 < n ? n - r0 - 16 : 0;  // rows after this tile
  const uint8_t* next = ahead && after > 0 ? data + (r0 + 16) * row_bytes : nullptr;
  const int64_t next_bytes = (after < 16 ? after : 16) * row_bytes;
  if (t.rows == 16) {
    const Rows<true> rows{data + r0 * row_bytes, row_bytes};
    return fused_rows<R, kNib, kZero, true>(L, f, quads, a, t, rows, k, bias, y, ldy, next, next_bytes);
  }
  Rows<false> rows;
  for (int r = 0; r < 16; ++r) rows.row[r] = data + (r0 + (r < t.rows ? r : t.rows - 1)) * row_bytes;
  fused_rows<R, kNib, kZero, false>(L, f, quads, a, t, rows, k, bias, y, ldy, next, next_bytes);
}

template <int R, bool kNib>
void fused_zero(const s8::Law& L, const S8Fused& f, const int32_t* const* quads, const S8Activation* const* a,
                const S8Tile& t, const uint8_t* data, int64_t r0, int64_t k, int64_t n, bool ahead,
                const float* bias, float* y, int64_t ldy) {
  switch (L.zero) {
    case s8::kZpShared: return fused_layout<R, kNib, s8::kZpShared>(L, f, quads, a, t, data, r0, k, n, ahead, bias, y, ldy);
    case s8::kZpOffset: return fused_layout<R, kNib, s8::kZpOffset>(L, f, quads, a, t, data, r0, k, n, ahead, bias, y, ldy);
    default: return fused_layout<R, kNib, s8::kZpNone>(L, f, quads, a, t, data, r0, k, n, ahead, bias, y, ldy);
  }
}

template <bool kNib>
void fused_dispatch(const s8::Law& L, const S8Fused& f, const int32_t* const* quads, const S8Activation* const* a,
                    int na, const S8Tile& t, const uint8_t* data, int64_t r0, int64_t k, int64_t n, bool ahead,
                    const float* bias, float* y, int64_t ldy) {
  switch (na) {
    case 8: return fused_zero<8, kNib>(L, f, quads, a, t, data, r0, k, n, ahead, bias, y, ldy);
    case 4: return fused_zero<4, kNib>(L, f, quads, a, t, data, r0, k, n, ahead, bias, y, ldy);
    case 3: return fused_zero<3, kNib>(L, f, quads, a, t, data, r0, k, n, ahead, bias, y, ldy);
    case 2: return fused_zero<2, kNib>(L, f, quads, a, t, data, r0, k, n, ahead, bias, y, ldy);
    default: return fused_zero<1, kNib>(L, f, quads, a, t, data, r0, k, n, ahead, bias, y, ldy);
  }
}

// The bytes of 16 consecutive groups (16 bytes a row) of a tile's 16 rows
// through a reader's 256-entry table: v[q] lane r = table[byte q of row r].
inline void byte_terms(const uint8_t* plane, int64_t r0, int64_t G, int64_t q0, const float* table, __m512 v[16]) {
  const Rows<true> rows{plane + r0 * G + q0, G};
  __m512i w[4];
  load_unit(rows, 0, w);
  const __m512i ff = _mm512_set1_epi32(0xFF);
  for (int j = 0; j < 4; ++j)
    for (int b = 0; b < 4; ++b)
      v[4 * j + b] = _mm512_i32gather_ps(_mm512_and_si512(_mm512_srli_epi32(w[j], 8 * b), ff), table, 4);
}

// The same for 2-byte values: 8 groups (16 bytes a row), through the
// 65536-entry binary16 table.
inline void half_terms(const uint8_t* plane, int64_t r0, int64_t G, int64_t q0, const float* wide, __m512 v[8]) {
  const Rows<true> rows{plane + 2 * (r0 * G + q0), 2 * G};
  __m512i w[4];
  load_unit(rows, 0, w);
  const __m512i ffff = _mm512_set1_epi32(0xFFFF);
  for (int j = 0; j < 4; ++j) {
    v[2 * j] = _mm512_i32gather_ps(_mm512_and_si512(w[j], ffff), wide, 4);
    v[2 * j + 1] = _mm512_i32gather_ps(_mm512_srli_epi32(w[j], 16), wide, 4);
  }
}

}  // namespace

bool s8_tile_terms_vector(const S8Terms& R, const Grade& g, const s8::Law& L, int64_t r0, int rows, int64_t k,
                          S8Tile* t) {
  const int64_t G = k / L.k0;
  // what this path reads: whole tiles, s0 of 1 or 2 bytes in runs of 16 / 8
  // groups, s1 absent, one per tensor (k1 = 0) or binary16 (d, dmin) pairs
  // (zps=l1) per power-of-two k1, zero points of 1 byte
  const bool s0_ok = (R.s0.bytes == 1 && G % 16 == 0) || (R.s0.bytes == 2 && G % 8 == 0);
  const bool pairs = g.has_l1 && g.k1 != 0;
  // group indices are formed in int32 lanes: the tile's last row * G must fit
  if (static_cast<int64_t>(r0 + kS8TileRows) * G >= (int64_t{1} << 31)) return false;
  const bool s1_ok = !g.has_l1 || g.k1 == 0 ||
                     (g.zp_l1 && R.s1.bytes == 2 && (g.k1 & (g.k1 - 1)) == 0 && G % g.k1 == 0);
  const bool zp_ok = !g.has_zp || (R.zp.bytes == 1 && G % 16 == 0);
  if (!R.ok || rows != kS8TileRows || !s0_ok || !s1_ok || !zp_ok || (g.has_zp && g.zp_l1 && !g.has_l1))
    return false;
  t->rows = rows;
  t->S.resize(static_cast<size_t>(G * kS8TileRows));
  if (g.has_zp) {  // without a zero point the kernels never read O and zi
    t->O.resize(static_cast<size_t>(G * kS8TileRows));
    t->zi.resize(static_cast<size_t>(G * kS8TileRows));
  }
  float* S = t->S.data();
  float* O = g.has_zp ? t->O.data() : nullptr;
  int32_t* zi = g.has_zp ? t->zi.data() : nullptr;
  // s0
  for (int64_t q0 = 0; q0 < G; q0 += (R.s0.bytes == 1 ? 16 : 8)) {
    __m512 v[16];
    if (R.s0.bytes == 1) {
      byte_terms(R.s0.p, r0, G, q0, R.s0.table, v);
      for (int q = 0; q < 16; ++q) _mm512_storeu_ps(S + (q0 + q) * kS8TileRows, v[q]);
    } else {
      half_terms(R.s0.p, r0, G, q0, R.s0.wide, v);
      for (int q = 0; q < 8; ++q) _mm512_storeu_ps(S + (q0 + q) * kS8TileRows, v[q]);
    }
  }
  // s1: S = s1 * S, and for zps=l1 the second value of the pair for O
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i row_group = _mm512_mullo_epi32(_mm512_add_epi32(_mm512_set1_epi32(static_cast<int32_t>(r0)), lane),
                                               _mm512_set1_epi32(static_cast<int32_t>(G)));
  const int shift = pairs ? __builtin_ctz(g.k1) : 0;
  __m512 d = _mm512_setzero_ps(), dmin = _mm512_setzero_ps();
  if (g.has_l1 && !pairs) {
    d = _mm512_set1_ps(R.s1.at(0));
    if (g.zp_l1) dmin = _mm512_set1_ps(R.s1.at(1));
  }
  const __m512 p2 = _mm512_set1_ps(std::ldexp(1.0f, -L.qe));
  const __m512 one = _mm512_set1_ps(1.0f);
  __m512 z[16];
  for (int64_t q = 0; q < G; ++q) {
    if (pairs && q % g.k1 == 0) {
      // g1 = (row * G + q) >> log2 k1 per lane (G a multiple of k1: every
      // lane enters a new level-1 group here); the (d, dmin) pair is the 4
      // bytes at 4 * g1
      const __m512i g1 = _mm512_srli_epi32(_mm512_add_epi32(row_group, _mm512_set1_epi32(static_cast<int32_t>(q))),
                                           shift);
      const __m512i word = _mm512_i32gather_epi32(g1, R.s1.p, 4);
      d = _mm512_i32gather_ps(_mm512_and_si512(word, _mm512_set1_epi32(0xFFFF)), R.s1.wide, 4);
      dmin = _mm512_i32gather_ps(_mm512_srli_epi32(word, 16), R.s1.wide, 4);
    }
    if (g.has_l1) _mm512_storeu_ps(S + q * kS8TileRows, _mm512_mul_ps(d, _mm512_loadu_ps(S + q * kS8TileRows)));
    if (!g.has_zp) continue;
    if (q % 16 == 0) byte_terms(R.zp.p, r0, G, q, R.zp.table, z);
    __m512 zq = z[q % 16];
    if (g.zp_minus1) zq = _mm512_add_ps(zq, one);
    if (g.zp_l1) {
      // O = -(s1' * z): the sign flipped, as the scalar negation does (-0 and NaN included)
      _mm512_storeu_ps(O + q * kS8TileRows, _mm512_xor_ps(_mm512_mul_ps(dmin, zq), _mm512_set1_ps(-0.0f)));
      _mm512_storeu_si512(zi + q * kS8TileRows, _mm512_setzero_si512());
    } else {
      _mm512_storeu_ps(O + q * kS8TileRows, _mm512_setzero_ps());
      _mm512_storeu_si512(zi + q * kS8TileRows, _mm512_cvttps_epi32(_mm512_mul_ps(zq, p2)));
    }
  }
  return true;
}

void s8_fused_tile(const s8::Law& L, const S8Fused& f, const int32_t* const* quads, const S8Activation* const* a,
                   int na, const S8Tile& t, const uint8_t* data, const uint8_t* meta, const uint64_t* cursor,
                   int64_t r0, int64_t k, int64_t n, bool ahead, const float* bias, float* y, int64_t ldy) {
  if (f.sparse) {
    switch (na) {
      case 8: return sparse_rows<8>(L, quads, a, t, data, meta, cursor, r0, k, bias, y, ldy);
      case 4: return sparse_rows<4>(L, quads, a, t, data, meta, cursor, r0, k, bias, y, ldy);
      case 3: return sparse_rows<3>(L, quads, a, t, data, meta, cursor, r0, k, bias, y, ldy);
      case 2: return sparse_rows<2>(L, quads, a, t, data, meta, cursor, r0, k, bias, y, ldy);
      default: return sparse_rows<1>(L, quads, a, t, data, meta, cursor, r0, k, bias, y, ldy);
    }
  }
  if (na > 4 && na < 8) {  // 5-7 rows: four, then the rest
    s8_fused_tile(L, f, quads, a, 4, t, data, meta, cursor, r0, k, n, ahead, bias, y, ldy);
    return s8_fused_tile(L, f, quads + 4, a + 4, na - 4, t, data, meta, cursor, r0, k, n, false, bias, y + 4 * ldy,
                         ldy);
  }
  if (f.nibbles)
    fused_dispatch<true>(L, f, quads, a, na, t, data, r0, k, n, ahead, bias, y, ldy);
  else
    fused_dispatch<false>(L, f, quads, a, na, t, data, r0, k, n, ahead, bias, y, ldy);
}

}  // namespace cpu
}  // namespace grit

#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC diagnostic pop
#pragma GCC pop_options

#else  // not x86: s8_fused_plan is always false, so this is never called.

namespace grit {
namespace cpu {
void s8_fused_tile(const s8::Law&, const S8Fused&, const int32_t* const*, const S8Activation* const*, int,
                   const S8Tile&, const uint8_t*, const uint8_t*, const uint64_t*, int64_t, int64_t, int64_t, bool,
                   const float*, float*, int64_t) {}
bool s8_tile_terms_vector(const S8Terms&, const Grade&, const s8::Law&, int64_t, int, int64_t, S8Tile*) {
  return false;
}
}  // namespace cpu
}  // namespace grit

#endif
