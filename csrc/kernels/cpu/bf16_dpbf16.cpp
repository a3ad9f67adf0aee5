// The bf16 activation law's reduction on vdpbf16ps (bf16_dpbf16.h).
#include "kernels/cpu/bf16_dpbf16.h"

#include <algorithm>

#include "grit/bf16_linear.h"
#include "kernels/cpu/bf16_amx.h"
#include "kernels/cpu/bf16_check_data.h"

#if defined(__x86_64__)
#define GRIT_DP_X86 1
#include <immintrin.h>
#else
#define GRIT_DP_X86 0
#endif

#if GRIT_DP_X86

#pragma GCC push_options
#pragma GCC diagnostic push
// GCC 12's AVX-512 shift intrinsics start from an "undefined" vector it then warns about
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx2,fma")
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx2,fma"))), apply_to = function)
#endif

namespace grit {
namespace cpu {
namespace {

#define GRIT_DP_INLINE inline __attribute__((always_inline))

// Chunks of one column pair's B turned into the chain pairs per block: 32
// KiB, which stays in L1 while every batch row block runs over it (8 and 4
// chunks ran slower, one thread at batch 512).
constexpr int64_t kBlockChunks = 16;
// Batch rows per panel: A's part for one block of chunks (256 rows x 16
// chunks: 256 KiB) stays in L2 while every column pair runs over it.
constexpr int64_t kPanelRows = 256;
// Batch rows per micro-kernel call (a divisor of 32): 2 halves x 4 rows of E,
// O and acc are 24 registers (6 rows with acc waiting in C ran slower).
constexpr int kRows = 4;

// A row's chunk (32 positions, word t = position t) as its chain pairs:
// dword q < 8 the E pair (high: 4q, low: 4q + 2), dword 8 + q the O pair
// (high: 4q + 1, low: 4q + 3).
alignas(64) constexpr uint16_t kRowPairs[32] = {2,  0,  6,  4,  10, 8,  14, 12, 18, 16, 22, 20, 26, 24, 30, 28,
                                                3,  1,  7,  5,  11, 9,  15, 13, 19, 17, 23, 21, 27, 25, 31, 29};

// Chunks [c, c + n) of one column pair of B (layout B, bf16_amx.h: per chunk
// and half 16 pair rows p, output j's dword = (low: 2p, high: 2p + 1)) as
// chain pairs: per chunk and half, 8 E rows (output j's dword high: 4q,
// low: 4q + 2) then 8 O rows (high: 4q + 1, low: 4q + 3).
GRIT_DP_INLINE void chain_pairs(const uint16_t* B, int64_t n, uint16_t* out) {
  const __mmask32 high = 0xAAAAAAAAu;
  for (int64_t r = 0; r < 2 * n; ++r) {  // (chunk, half)
    const uint16_t* in = B + r * kBf16Tile;
    uint16_t* o = out + r * kBf16Tile;
    for (int q = 0; q < 8; ++q) {
      const __m512i r0 = _mm512_load_si512(in + (2 * q) * 32), r1 = _mm512_load_si512(in + (2 * q + 1) * 32);
      _mm512_store_si512(o + q * 32, _mm512_mask_mov_epi16(r1, high, _mm512_slli_epi32(r0, 16)));
      _mm512_store_si512(o + (8 + q) * 32, _mm512_mask_mov_epi16(_mm512_srli_epi32(r1, 16), high, r0));
    }
  }
}

// Batch rows i0 .. i0 + MB, 32 outputs (one column pair: c at output 0),
// over n chunks of A from chunk a0 and of the pair's chain pairs P.
template <int MB>
GRIT_DP_INLINE void rows_over_pairs(const uint16_t* A, int64_t a_chunks, int64_t a0, int64_t n, int64_t i0,
                                    const uint16_t* P, float* c, int64_t ldc, bool zero) {
  __m512 acc[2][MB];
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < MB; ++i) acc[h][i] = zero ? _mm512_setzero_ps() : _mm512_loadu_ps(c + i * ldc + 16 * h);
  const __m512i perm = _mm512_load_si512(kRowPairs);
  const __m512 neg0 = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(0x80000000u)));
  // Each chunk's rows as chain pairs, written one chunk ahead (a store read
  // back at once in dwords waits for it) and read as broadcast operands.
  alignas(64) uint32_t buf[2][MB][16];
  auto pairs_of = [&](int64_t cc, uint32_t (*ap)[16]) {
    for (int i = 0; i < MB; ++i) {
      const int64_t r = i0 + i;
      const uint16_t* a = A + ((r / 16) * a_chunks + a0 + cc) * kBf16Tile + (r % 16) * 32;
      _mm512_store_si512(ap[i], _mm512_permutexvar_epi16(perm, _mm512_load_si512(a)));
    }
  };
  pairs_of(0, buf[0]);
  for (int64_t cc = 0; cc < n; ++cc) {
    uint32_t (*ap)[16] = buf[cc & 1];
    if (cc + 1 < n) pairs_of(cc + 1, buf[(cc + 1) & 1]);
    // kept from being forwarded through registers (lane extracts)
    __asm__ volatile("" : : : "memory");
    // E and O from -0.0: the first step gives the first product exactly (the law's E = p_0)
    __m512 E[2][MB], O[2][MB];
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < MB; ++i) E[h][i] = O[h][i] = neg0;
    const uint16_t* p = P + cc * 2 * kBf16Tile;
#pragma GCC unroll 8
    for (int q = 0; q < 8; ++q) {
      __m512bh be[2], bo[2];
      for (int h = 0; h < 2; ++h) {
        be[h] = (__m512bh)_mm512_load_si512(p + h * kBf16Tile + q * 32);
        bo[h] = (__m512bh)_mm512_load_si512(p + h * kBf16Tile + (8 + q) * 32);
      }
#pragma GCC unroll 8
      for (int i = 0; i < MB; ++i) {
        const __m512bh xe = (__m512bh)_mm512_set1_epi32(static_cast<int>(ap[i][q]));
        const __m512bh xo = (__m512bh)_mm512_set1_epi32(static_cast<int>(ap[i][8 + q]));
        for (int h = 0; h < 2; ++h) {
          E[h][i] = _mm512_dpbf16_ps(E[h][i], be[h], xe);
          O[h][i] = _mm512_dpbf16_ps(O[h][i], bo[h], xo);
        }
      }
    }
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < MB; ++i) acc[h][i] = _mm512_add_ps(acc[h][i], _mm512_add_ps(E[h][i], O[h][i]));
  }
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < MB; ++i) _mm512_storeu_ps(c + i * ldc + 16 * h, acc[h][i]);
}

void gemm_dp(const uint16_t* A, int64_t a_chunks, int64_t c0, int64_t nc, int64_t mp, const uint16_t* B,
             int64_t b_chunks, int64_t npairs, float* C, int64_t ldc, bool accumulate) {
  alignas(64) uint16_t P[kBlockChunks * 2 * kBf16Tile];
  // Flush to zero for the chunk's closing adds (E + O, acc + that): a sum of
  // two float32 values under 2^-126 is exact, so MXCSR.FTZ gives the law's
  // flush whatever the rule for tininess; vdpbf16ps flushes on its own.
  // One third faster than flushing by compare and mask.
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(csr | 0x8000u);
  for (int64_t r0 = 0; r0 < mp; r0 += kPanelRows) {
    const int64_t r1 = std::min(mp, r0 + kPanelRows);
    for (int64_t cb = 0; cb < nc; cb += kBlockChunks) {
      const int64_t n = std::min(kBlockChunks, nc - cb);
      const bool zero = !accumulate && cb == 0;
      for (int64_t pair = 0; pair < npairs; ++pair) {
        chain_pairs(B + (pair * b_chunks + cb) * 2 * kBf16Tile, n, P);
        for (int64_t i0 = r0; i0 < r1; i0 += kRows)
          rows_over_pairs<kRows>(A, a_chunks, c0 + cb, n, i0, P, C + i0 * ldc + 32 * pair, ldc, zero);
      }
    }
  }
  _mm_setcsr(csr);
}

// ---- the order check ------------------------------------------------------

Bf16CheckData g_data{0x9E3779B97F4A7C15ull};

// One data set: 32 rows of A and one column pair of B, two chunks, on C
// preloaded as the law leaves a sum (normal or zero) or from zero; every
// output against grit::bf16::chunk.
bool check_set(int lo, int hi, bool subnormals, bool zero_acc, bool specials, int trials) {
  constexpr int64_t kChunks = 2;
  alignas(64) uint16_t a[2 * kChunks * kBf16Tile], b[kChunks * 2 * kBf16Tile];
  alignas(64) float c[32 * 32], c0[32 * 32];
  float av[32], bv[32];
  for (int trial = 0; trial < trials; ++trial) {
    for (auto& v : a) v = g_data.operand(lo, hi, subnormals, specials);
    for (auto& v : b) v = g_data.operand(lo, hi, subnormals, specials);
    for (int i = 0; i < 32 * 32; ++i) c0[i] = c[i] = g_data.sum(zero_acc);
    gemm_dp(a, kChunks, 0, kChunks, 32, b, kChunks, 1, c, 32, !zero_acc);
    for (int i = 0; i < 32; ++i)
      for (int col = 0; col < 32; ++col) {
        const int h = col / 16, j = col % 16;
        float want = c0[i * 32 + col];
        for (int64_t ch = 0; ch < kChunks; ++ch) {
          for (int t = 0; t < 32; ++t) {
            av[t] = bf16::value(a[((i / 16) * kChunks + ch) * kBf16Tile + (i % 16) * 32 + t]);
            bv[t] = bf16::value(b[(ch * 2 + h) * kBf16Tile + (t / 2) * 32 + j * 2 + t % 2]);
          }
          want = bf16::chunk(want, av, bv);
        }
        const float got = c[i * 32 + col];
        if (!(want != want && got != got) && bf16::bits_of(want) != bf16::bits_of(got)) return false;
      }
  }
  return true;
}

bool order_holds() {
  return check_set(120, 135, false, false, false, 8) && check_set(120, 135, false, true, false, 8) &&
         check_set(60, 199, false, false, false, 8) && check_set(1, 40, true, false, false, 8) &&
         check_set(60, 67, false, true, false, 8) && check_set(100, 150, true, false, true, 8);
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

bool bf16_dp_ready() {
  static const bool ok = [] {
    if (!__builtin_cpu_supports("avx512bf16") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512dq"))
      return false;
    return order_holds();
  }();
  return ok;
}

void bf16_gemm_dp(const uint16_t* A, int64_t a_chunks, int64_t c0, int64_t nc, int64_t mp, const uint16_t* B,
                  int64_t b_chunks, int64_t npairs, float* C, int64_t ldc, bool accumulate) {
  gemm_dp(A, a_chunks, c0, nc, mp, B, b_chunks, npairs, C, ldc, accumulate);
}

}  // namespace cpu
}  // namespace grit

#else  // GRIT_DP_X86

namespace grit {
namespace cpu {
bool bf16_dp_ready() { return false; }
void bf16_gemm_dp(const uint16_t*, int64_t, int64_t, int64_t, int64_t, const uint16_t*, int64_t, int64_t, float*,
                  int64_t, bool) {}
}  // namespace cpu
}  // namespace grit

#endif  // GRIT_DP_X86
