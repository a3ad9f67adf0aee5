// The bf16 activation law's kernel (bf16_amx.h): packers (AVX512_BF16's
// vcvtne2ps2bf16 where the CPU has it, the law's from_float otherwise; the
// two agree bit for bit, tested) and the reduction: on AMX tiles where the
// CPU follows the law's order, else on vdpbf16ps where that follows it
// (bf16_dpbf16.h), else in a scalar copy of the law.
#include "kernels/cpu/bf16_amx.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "grit/bf16_linear.h"
#include "grit/format.h"
#include "kernels/cpu/bf16_check_data.h"
#include "kernels/cpu/bf16_dpbf16.h"

#if defined(__x86_64__) && defined(__linux__)
#define GRIT_BF16_X86 1
#include <cpuid.h>
#include <immintrin.h>

#include "kernels/cpu/amx_tiles.h"
#else
#define GRIT_BF16_X86 0
#endif

namespace grit {
namespace cpu {
namespace {

std::atomic<int> g_mode{-1};
std::atomic<uint64_t> g_calls{0}, g_dp_calls{0};

// ---- the scalar copies -------------------------------------------------

int64_t mask_len(int64_t len, int64_t at, int64_t width) { return std::max<int64_t>(0, std::min(width, len - at)); }

void pack_rows_scalar(const float* src, int64_t ld, int64_t m, int64_t len, int64_t mp, uint16_t* A) {
  const int64_t nc = bf16::chunks(len);
  for (int64_t i = 0; i < mp; ++i)
    for (int64_t c = 0; c < nc; ++c) {
      uint16_t* out = A + ((i / 16) * nc + c) * kBf16Tile + (i % 16) * 32;
      for (int64_t t = 0; t < 32; ++t)
        out[t] = i < m && 32 * c + t < len ? bf16::from_float(src[i * ld + 32 * c + t]) : 0;
    }
}

void pack_weight_rows_scalar(const float* w, int64_t ld, int rows, int64_t k, uint16_t* B) {
  const int64_t nc = bf16::chunks(k);
  for (int64_t c = 0; c < nc; ++c)
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 16; ++j)
        for (int t = 0; t < 32; ++t) {
          const int r = 16 * h + j;
          const int64_t col = 32 * c + t;
          B[(c * 2 + h) * kBf16Tile + (t / 2) * 32 + j * 2 + t % 2] =
              r < rows && col < k ? bf16::from_float(w[r * ld + col]) : 0;
        }
}

void pack_weight_columns_scalar(const float* cols, int tiles, int64_t k, uint16_t* B) {
  const int64_t nc = bf16::chunks(k);
  for (int64_t c = 0; c < nc; ++c)
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 16; ++j)
        for (int t = 0; t < 32; ++t) {
          const int64_t col = 32 * c + t;
          B[(c * 2 + h) * kBf16Tile + (t / 2) * 32 + j * 2 + t % 2] =
              h < tiles && col < k ? bf16::from_float(cols[h * 16 * k + col * 16 + j]) : 0;
        }
}

void pack_weight_cols_scalar(const float* w, int64_t ld, int rows, int64_t k, int64_t first, int64_t block_chunks,
                             uint16_t* B) {
  const int64_t pairs = bf16::chunks(k);
  for (int r = 0; r < 16; ++r) {
    const int64_t pos = first + r, cl = pos / 32, p = (pos % 32) / 2, q = pos % 2;
    for (int64_t col = 0; col < 32 * pairs; ++col) {
      const int64_t pair = col / 32, h = (col % 32) / 16, j = col % 16;
      B[((pair * block_chunks + cl) * 2 + h) * kBf16Tile + p * 32 + j * 2 + q] =
          r < rows && col < k ? bf16::from_float(w[r * ld + col]) : 0;
    }
  }
}

void gemm_scalar(const uint16_t* A, int64_t a_chunks, int64_t c0, int64_t nc, int64_t mp, const uint16_t* B,
                 int64_t b_chunks, int64_t npairs, float* C, int64_t ldc, bool accumulate) {
  float av[32], bv[32];
  for (int64_t i = 0; i < mp; ++i)
    for (int64_t col = 0; col < 32 * npairs; ++col) {
      const int64_t pair = col / 32, h = (col % 32) / 16, j = col % 16;
      float acc = accumulate ? C[i * ldc + col] : 0.0f;
      for (int64_t c = 0; c < nc; ++c) {
        const uint16_t* a = A + ((i / 16) * a_chunks + c0 + c) * kBf16Tile + (i % 16) * 32;
        const uint16_t* b = B + ((pair * b_chunks + c) * 2 + h) * kBf16Tile + j * 2;
        for (int t = 0; t < 32; ++t) {
          av[t] = bf16::value(a[t]);
          bv[t] = bf16::value(b[(t / 2) * 32 + t % 2]);
        }
        acc = bf16::chunk(acc, av, bv);
      }
      C[i * ldc + col] = acc;
    }
}

void finish_row_scalar(const float* acc, const float* bias, int64_t len, void* out, bool to_bf16) {
  for (int64_t j = 0; j < len; ++j) {
    const float v = bias != nullptr ? acc[j] + bias[j] : acc[j];
    if (to_bf16) {
      uint32_t u;
      std::memcpy(&u, &v, 4);
      static_cast<uint16_t*>(out)[j] =
          v == v ? static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16) : uint16_t{0x7FC0};
    } else {
      static_cast<float*>(out)[j] = v == v ? v : canonical_nan();
    }
  }
}

}  // namespace
}  // namespace cpu
}  // namespace grit

#if GRIT_BF16_X86

#pragma GCC push_options
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx2,fma,amx-tile,amx-bf16")
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx2,fma,amx-tile,amx-bf16"))), apply_to = function)
#endif

#include "kernels/cpu/avx512_transpose.h"

namespace grit {
namespace cpu {
namespace {

// Tiles 0-3: C (16 rows x 16 float32); 4, 5: A (16 rows x 32 bfloat16); 6, 7:
// B (16 pair rows x 16 outputs x 2).
TileConfig config() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) c.rows[t] = 16, c.colsb[t] = 64;
  return c;
}

__mmask16 tail_mask(int64_t len, int64_t at) {
  const int64_t n = mask_len(len, at, 16);
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
}

// 32 float32 at p (len valid from `at`) as 32 bfloat16 (vcvtne2ps2bf16: the
// law's from_float, tested).
__m512i cvt32(const float* p, int64_t len, int64_t at) {
  const __m512 lo = _mm512_maskz_loadu_ps(tail_mask(len, at), p);
  const __m512 hi = _mm512_maskz_loadu_ps(tail_mask(len, at + 16), p + 16);
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
}

void pack_rows_vec(const float* src, int64_t ld, int64_t m, int64_t len, int64_t mp, uint16_t* A) {
  const int64_t nc = bf16::chunks(len);
  for (int64_t i = 0; i < mp; ++i)
    for (int64_t c = 0; c < nc; ++c) {
      uint16_t* out = A + ((i / 16) * nc + c) * kBf16Tile + (i % 16) * 32;
      const __m512i v = i < m ? cvt32(src + i * ld + 32 * c, len, 32 * c) : _mm512_setzero_si512();
      _mm512_store_si512(out, v);
    }
}

void pack_rows_bits_vec(const uint16_t* src, int64_t ld, int64_t m, int64_t len, int64_t mp, uint16_t* A) {
  const int64_t nc = bf16::chunks(len);
  for (int64_t i = 0; i < mp; ++i)
    for (int64_t c = 0; c < nc; ++c) {
      const int64_t n = mask_len(len, 32 * c, 32);
      const __mmask32 mk = n >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((uint64_t{1} << n) - 1u);
      const __m512i v = i < m ? _mm512_maskz_loadu_epi16(mk, src + i * ld + 32 * c) : _mm512_setzero_si512();
      _mm512_store_si512(A + ((i / 16) * nc + c) * kBf16Tile + (i % 16) * 32, v);
    }
}

void pack_weight_rows_vec(const float* w, int64_t ld, int rows, int64_t k, uint16_t* B) {
  const int64_t nc = bf16::chunks(k);
  __m512i v[16];
  for (int64_t c = 0; c < nc; ++c)
    for (int h = 0; h < 2; ++h) {
      for (int j = 0; j < 16; ++j) {
        const int r = 16 * h + j;
        v[j] = r < rows ? cvt32(w + r * ld + 32 * c, k, 32 * c) : _mm512_setzero_si512();
      }
      transpose16(v);  // v[p] lane j: the pair p of row j
      uint16_t* out = B + (c * 2 + h) * kBf16Tile;
      for (int p = 0; p < 16; ++p) _mm512_store_si512(out + p * 32, v[p]);
    }
}

void pack_weight_columns_vec(const float* cols, int tiles, int64_t k, uint16_t* B) {
  const int64_t nc = bf16::chunks(k);
  alignas(64) static const uint16_t kZip[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i zip = _mm512_load_si512(kZip);
  for (int h = 0; h < 2; ++h) {
    const float* src = cols + h * 16 * k;
    for (int64_t c = 0; c < nc; ++c) {
      uint16_t* out = B + (c * 2 + h) * kBf16Tile;
      for (int p = 0; p < 16; ++p) {
        const int64_t a = 32 * c + 2 * p;
        __m512i v = _mm512_setzero_si512();
        if (h < tiles && a < k) {
          const __m512 lo = _mm512_load_ps(src + a * 16);
          const __m512 hi = a + 1 < k ? _mm512_load_ps(src + (a + 1) * 16) : _mm512_setzero_ps();
          v = _mm512_permutexvar_epi16(zip, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
        }
        _mm512_store_si512(out + p * 32, v);
      }
    }
  }
}

void pack_weight_cols_vec(const float* w, int64_t ld, int rows, int64_t k, int64_t first, int64_t block_chunks,
                          uint16_t* B) {
  const int64_t pairs = bf16::chunks(k);
  alignas(64) static const uint16_t kZip[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i zip = _mm512_load_si512(kZip);
  for (int r = 0; r < 16; r += 2) {
    const int64_t pos = first + r, cl = pos / 32, p = (pos % 32) / 2;
    for (int64_t kt = 0; kt < 2 * pairs; ++kt) {
      const int64_t col = 16 * kt;
      const __mmask16 mk = tail_mask(k, col);
      const __m512 lo = r < rows ? _mm512_maskz_loadu_ps(mk, w + r * ld + col) : _mm512_setzero_ps();
      const __m512 hi = r + 1 < rows ? _mm512_maskz_loadu_ps(mk, w + (r + 1) * ld + col) : _mm512_setzero_ps();
      const __m512i v = _mm512_permutexvar_epi16(zip, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
      _mm512_store_si512(B + (((kt / 2) * block_chunks + cl) * 2 + kt % 2) * kBf16Tile + p * 32, v);
    }
  }
}

void pack_weight_cols_from_columns_vec(const float* cols, int rows, int64_t k, int64_t first, int64_t block_chunks,
                                       uint16_t* B) {
  const int64_t pairs = bf16::chunks(k);
  alignas(64) static const uint16_t kZip[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i zip = _mm512_load_si512(kZip);
  const __mmask16 live = rows >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << rows) - 1u);
  __m512i v[16];
  for (int64_t kt = 0; kt < 2 * pairs; ++kt) {
    // columns 16 kt .. 16 kt + 15 (lane = row), rows past `rows` zeroed, then rows (lane = column)
    for (int j = 0; j < 16; ++j) {
      const int64_t c = 16 * kt + j;
      v[j] = c < k ? _mm512_maskz_load_epi32(live, cols + c * 16) : _mm512_setzero_si512();
    }
    transpose16(v);
    for (int r = 0; r < 16; r += 2) {
      const int64_t pos = first + r, cl = pos / 32, p = (pos % 32) / 2;
      const __m512i o = _mm512_permutexvar_epi16(
          zip, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(_mm512_castsi512_ps(v[r + 1]), _mm512_castsi512_ps(v[r]))));
      _mm512_store_si512(B + (((kt / 2) * block_chunks + cl) * 2 + kt % 2) * kBf16Tile + p * 32, o);
    }
  }
}

// finish_row_scalar's bits, 16 outputs at a time (the rounding in integer
// arithmetic, as the scalar copy does: vcvtneps2bf16 would flush subnormals).
void finish_row_vec(const float* acc, const float* bias, int64_t len, void* out, bool to_bf16) {
  const __m512i one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7FFF), bf16_nan = _mm512_set1_epi32(0x7FC0);
  const __m512 f32_nan = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000));
  for (int64_t j = 0; j < len; j += 16) {
    const __mmask16 mk = tail_mask(len, j);
    __m512 v = _mm512_maskz_loadu_ps(mk, acc + j);
    if (bias != nullptr) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mk, bias + j));
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    if (to_bf16) {
      const __m512i u = _mm512_castps_si512(v);
      __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(half, _mm512_and_si512(_mm512_srli_epi32(u, 16), one)));
      r = _mm512_mask_mov_epi32(_mm512_srli_epi32(r, 16), nan, bf16_nan);
      _mm256_mask_storeu_epi16(static_cast<uint16_t*>(out) + j, mk, _mm512_cvtepi32_epi16(r));
    } else {
      _mm512_mask_storeu_ps(static_cast<float*>(out) + j, mk, _mm512_mask_mov_ps(v, nan, f32_nan));
    }
  }
}

inline void prefetch_tile(const uint16_t* t) {
  const char* p = reinterpret_cast<const char*>(t);
  for (int l = 0; l < 1024; l += 64) _mm_prefetch(p + l, _MM_HINT_T0);
}

void gemm_amx(const uint16_t* A, int64_t a_chunks, int64_t c0, int64_t nc, int64_t mp, const uint16_t* B,
              int64_t b_chunks, int64_t npairs, float* C, int64_t ldc, bool accumulate) {
  const TileConfig cfg = config();
  _tile_loadconfig(&cfg);
  const int64_t ldb = ldc * 4;  // bytes
  for (int64_t q = 0; q < mp / 32; ++q) {
    const uint16_t* a0 = A + ((2 * q) * a_chunks + c0) * kBf16Tile;
    const uint16_t* a1 = A + ((2 * q + 1) * a_chunks + c0) * kBf16Tile;
    for (int64_t pair = 0; pair < npairs; ++pair) {
      const uint16_t* b = B + pair * b_chunks * 2 * kBf16Tile;
      float* c = C + 32 * q * ldc + 32 * pair;
      if (accumulate) {
        _tile_loadd(0, c, ldb);
        _tile_loadd(1, c + 16, ldb);
        _tile_loadd(2, c + 16 * ldc, ldb);
        _tile_loadd(3, c + 16 * ldc + 16, ldb);
      } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
      }
      for (int64_t t = 0; t < nc; ++t) {
        if (t + 1 < nc) {  // the next chunk's tiles into L1 while this one multiplies
          prefetch_tile(a0 + (t + 1) * kBf16Tile);
          prefetch_tile(a1 + (t + 1) * kBf16Tile);
          prefetch_tile(b + (t + 1) * 2 * kBf16Tile);
          prefetch_tile(b + (t + 1) * 2 * kBf16Tile + kBf16Tile);
        }
        _tile_loadd(4, a0 + t * kBf16Tile, 64);
        _tile_loadd(6, b + t * 2 * kBf16Tile, 64);
        _tile_loadd(7, b + t * 2 * kBf16Tile + kBf16Tile, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_loadd(5, a1 + t * kBf16Tile, 64);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      _tile_stored(0, c, ldb);
      _tile_stored(1, c + 16, ldb);
      _tile_stored(2, c + 16 * ldc, ldb);
      _tile_stored(3, c + 16 * ldc + 16, ldb);
    }
  }
  _tile_release();
}

bool cpu_has_bf16_vector() {
  static const bool ok = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw");
  return ok;
}

// ---- the order check ------------------------------------------------------

Bf16CheckData g_data{0x2545F4914F6CDD1Dull};

bool same_bits(float a, float b) {
  if (std::isnan(a) && std::isnan(b)) return true;  // the law makes every NaN result canonical
  return bf16::bits_of(a) == bf16::bits_of(b);
}

// One data set: random tiles, one tdpbf16ps on a preloaded C, every output
// against grit::bf16::chunk.
bool check_set(int lo, int hi, bool subnormals, bool zero_acc, bool specials, int trials) {
  alignas(64) uint16_t a[16][32], b[16][32];
  alignas(64) float c[16][16], c0[16][16];
  float av[32], bv[32];
  for (int trial = 0; trial < trials; ++trial) {
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 32; ++j) {
        a[i][j] = g_data.operand(lo, hi, subnormals, specials);
        b[i][j] = g_data.operand(lo, hi, subnormals, specials);
      }
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 16; ++j) c0[i][j] = c[i][j] = g_data.sum(zero_acc);
    _tile_loadd(0, c, 64);
    _tile_loadd(4, a, 64);
    _tile_loadd(6, b, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_stored(0, c, 64);
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 16; ++j) {
        for (int t = 0; t < 32; ++t) {
          av[t] = bf16::value(a[i][t]);
          bv[t] = bf16::value(b[t / 2][2 * j + t % 2]);
        }
        if (!same_bits(bf16::chunk(c0[i][j], av, bv), c[i][j])) return false;
      }
  }
  return true;
}

bool order_holds() {
  const TileConfig cfg = config();
  _tile_loadconfig(&cfg);
  const bool ok = check_set(120, 135, false, false, false, 64) && check_set(120, 135, false, true, false, 64) &&
                  check_set(60, 199, false, false, false, 64) && check_set(1, 40, true, false, false, 64) &&
                  check_set(60, 67, false, true, false, 64) && check_set(100, 150, true, false, true, 64);
  _tile_release();
  return ok;
}

bool amx_bf16_ready() {
  static const bool ok = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    // CPUID.(7,0):EDX bit 22 AMX-BF16, bit 24 AMX-TILE
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    if (!(d & (1u << 22)) || !(d & (1u << 24)) || !cpu_has_bf16_vector()) return false;
    if (!request_tile_state()) return false;
    return order_holds();
  }();
  return ok;
}

}  // namespace
}  // namespace cpu
}  // namespace grit

#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC diagnostic pop
#pragma GCC pop_options

#endif  // GRIT_BF16_X86

namespace grit {
namespace cpu {

#if GRIT_BF16_X86
bool bf16_amx_ready() { return amx_bf16_ready(); }
#else
bool bf16_amx_ready() { return false; }
#endif

int set_bf16_amx(int mode) { return g_mode.exchange(mode < 0 ? -1 : std::min(mode, 2)); }
uint64_t bf16_amx_calls() { return g_calls.load(); }
uint64_t bf16_dp_calls() { return g_dp_calls.load(); }

void bf16_pack_rows(const float* src, int64_t ld, int64_t m, int64_t len, int64_t mp, uint16_t* A) {
#if GRIT_BF16_X86
  if (cpu_has_bf16_vector()) return pack_rows_vec(src, ld, m, len, mp, A);
#endif
  pack_rows_scalar(src, ld, m, len, mp, A);
}

void bf16_pack_rows_bits(const uint16_t* src, int64_t ld, int64_t m, int64_t len, int64_t mp, uint16_t* A) {
#if GRIT_BF16_X86
  if (cpu_has_bf16_vector()) return pack_rows_bits_vec(src, ld, m, len, mp, A);
#endif
  const int64_t nc = bf16::chunks(len);
  for (int64_t i = 0; i < mp; ++i)
    for (int64_t c = 0; c < nc; ++c) {
      uint16_t* out = A + ((i / 16) * nc + c) * kBf16Tile + (i % 16) * 32;
      for (int64_t t = 0; t < 32; ++t) out[t] = i < m && 32 * c + t < len ? src[i * ld + 32 * c + t] : 0;
    }
}

void bf16_pack_weight_rows(const float* w, int64_t ld, int rows, int64_t k, uint16_t* B) {
#if GRIT_BF16_X86
  if (cpu_has_bf16_vector()) return pack_weight_rows_vec(w, ld, rows, k, B);
#endif
  pack_weight_rows_scalar(w, ld, rows, k, B);
}

void bf16_pack_weight_columns(const float* cols, int tiles, int64_t k, uint16_t* B) {
#if GRIT_BF16_X86
  if (cpu_has_bf16_vector()) return pack_weight_columns_vec(cols, tiles, k, B);
#endif
  pack_weight_columns_scalar(cols, tiles, k, B);
}

void bf16_pack_weight_cols(const float* w, int64_t ld, int rows, int64_t k, int64_t first, int64_t block_chunks,
                           uint16_t* B) {
#if GRIT_BF16_X86
  if (cpu_has_bf16_vector()) return pack_weight_cols_vec(w, ld, rows, k, first, block_chunks, B);
#endif
  pack_weight_cols_scalar(w, ld, rows, k, first, block_chunks, B);
}

void bf16_pack_weight_cols_from_columns(const float* cols, int rows, int64_t k, int64_t first, int64_t block_chunks,
                                        uint16_t* B) {
#if GRIT_BF16_X86
  if (cpu_has_bf16_vector()) return pack_weight_cols_from_columns_vec(cols, rows, k, first, block_chunks, B);
#endif
  // the scalar route: the rows out of the columns, then the rows' packer
  std::vector<float> w(static_cast<size_t>(16 * k));
  for (int r = 0; r < 16; ++r)
    for (int64_t c = 0; c < k; ++c) w[r * k + c] = cols[c * 16 + r];
  pack_weight_cols_scalar(w.data(), k, rows, k, first, block_chunks, B);
}

void bf16_finish_row(const float* acc, const float* bias, int64_t len, void* out, bool to_bf16) {
#if GRIT_BF16_X86
  if (cpu_has_bf16_vector()) return finish_row_vec(acc, bias, len, out, to_bf16);
#endif
  finish_row_scalar(acc, bias, len, out, to_bf16);
}

void bf16_gemm(const uint16_t* A, int64_t a_chunks, int64_t c0, int64_t nc, int64_t mp, const uint16_t* B,
               int64_t b_chunks, int64_t npairs, float* C, int64_t ldc, bool accumulate) {
  const int mode = g_mode.load(std::memory_order_relaxed);
#if GRIT_BF16_X86
  if (mode != 0 && mode != 2 && amx_bf16_ready()) {
    gemm_amx(A, a_chunks, c0, nc, mp, B, b_chunks, npairs, C, ldc, accumulate);
    g_calls.fetch_add(1, std::memory_order_relaxed);
    return;
  }
#endif
  if (mode != 0 && bf16_dp_ready()) {
    bf16_gemm_dp(A, a_chunks, c0, nc, mp, B, b_chunks, npairs, C, ldc, accumulate);
    g_dp_calls.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  gemm_scalar(A, a_chunks, c0, nc, mp, B, b_chunks, npairs, C, ldc, accumulate);
}

}  // namespace cpu
}  // namespace grit
