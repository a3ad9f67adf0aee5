// A measurement, not torch_grit code: the register blocking of the batch
// GEMM's micro-kernel under the forward law of csrc/grit/linear_law.h (one
// FMA chain per k0-group, folded into each output's accumulator with the
// group's scale), against the law's earlier form (four chains per group,
// column mod 4, joined by three adds) and a plain GEMM without groups.
// One decoded 256-column chunk of 16-row tiles sits in L1 (as the
// kernel's StoreSink leaves it); every batch row of a 512 x 4096 float32
// x runs over it, MB rows x NT tiles at a time, as packed_linear_simd.inc's
// micro() does. One thread; prints vector FMAs per second (16 lanes each).
//
//   g++ -O3 -march=native -std=c++17 -ffp-contract=off benchmarks/probe_group_fold_gemm.cpp -o /tmp/fold
//   /tmp/fold
#include <immintrin.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

constexpr int64_t kChunk = 256;
#define INL inline __attribute__((always_inline))

// kChains 1: the law; 4: the earlier form; 0: no groups (a plain GEMM).
template <int kChains, int MB, int NT, int K0>
INL void micro(const float* e, const float* s, const float* x, int64_t k, float* y, int64_t n) {
  __m512 acc[NT][MB];
  for (int t = 0; t < NT; ++t)
    for (int i = 0; i < MB; ++i) acc[t][i] = _mm512_loadu_ps(y + i * n + t * 16);
  if constexpr (kChains == 0) {
#pragma GCC unroll 8
    for (int64_t kk = 0; kk < kChunk; ++kk) {
      __m512 w[NT];
      for (int t = 0; t < NT; ++t) w[t] = _mm512_load_ps(e + t * kChunk * 16 + kk * 16);
      for (int i = 0; i < MB; ++i) {
        const __m512 xb = _mm512_set1_ps(x[i * k + kk]);
        for (int t = 0; t < NT; ++t) acc[t][i] = _mm512_fmadd_ps(w[t], xb, acc[t][i]);
      }
    }
  } else {
    constexpr int C = kChains;
    for (int64_t g = 0; g * K0 < kChunk; ++g) {
      __m512 ch[NT][MB][C];
      for (int t = 0; t < NT; ++t)
        for (int i = 0; i < MB; ++i)
          for (int q = 0; q < C; ++q) ch[t][i][q] = _mm512_setzero_ps();
      for (int64_t kb = g * K0; kb < (g + 1) * K0; kb += 8) {
#pragma GCC unroll 8
        for (int q = 0; q < 8; ++q) {  // column kb + q goes to chain q mod C
          __m512 w[NT];
          for (int t = 0; t < NT; ++t) w[t] = _mm512_load_ps(e + t * kChunk * 16 + (kb + q) * 16);
          for (int i = 0; i < MB; ++i) {
            const __m512 xb = _mm512_set1_ps(x[i * k + kb + q]);
            for (int t = 0; t < NT; ++t) ch[t][i][q % C] = _mm512_fmadd_ps(w[t], xb, ch[t][i][q % C]);
          }
        }
      }
      for (int t = 0; t < NT; ++t) {
        const __m512 sv = _mm512_load_ps(s + (t * 16 + g) * 16);
        for (int i = 0; i < MB; ++i) {
          __m512 P = ch[t][i][0];
          if constexpr (C == 4)
            P = _mm512_add_ps(_mm512_add_ps(ch[t][i][0], ch[t][i][1]), _mm512_add_ps(ch[t][i][2], ch[t][i][3]));
          acc[t][i] = _mm512_fmadd_ps(sv, P, acc[t][i]);
        }
      }
    }
  }
  for (int t = 0; t < NT; ++t)
    for (int i = 0; i < MB; ++i) _mm512_storeu_ps(y + i * n + t * 16, acc[t][i]);
}

template <int kChains, int MB, int NT, int K0>
__attribute__((noinline)) void rows(const float* e, const float* s, const float* x, int64_t m, int64_t k, float* y,
                                    int64_t n) {
  for (int64_t i0 = 0; i0 + MB <= m; i0 += MB) micro<kChains, MB, NT, K0>(e, s, x + i0 * k, k, y + i0 * n, n);
}

template <int kChains, int MB, int NT, int K0>
void bench() {
  const int64_t m = (512 / MB) * MB, k = 4096, n = 4096;
  std::vector<float> x(m * k, 0.5f), y(m * n, 0.0f);
  alignas(64) static float e[4 * kChunk * 16], s[4 * 16 * 16];
  for (auto& v : e) v = 1.0f;
  for (auto& v : s) v = 1.0f;
  double best = 1e9;
  for (int rep = 0; rep < 7; ++rep) {
    const auto a = std::chrono::steady_clock::now();
    for (int64_t tg = 0; tg < n / 16 / NT / 8; ++tg)
      for (int64_t kc = 0; kc < k; kc += kChunk)
        rows<kChains, MB, NT, K0>(e, s, x.data() + kc, m, k, y.data() + tg * 16 * NT, n);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
    if (dt < best) best = dt;
  }
  const double fmas = double(m) * k * (n / 8) / 16;
  std::printf("%-10s %d rows x %d tiles, k0 = %3d: %.2f G vector FMAs/s\n",
              kChains == 0 ? "no groups" : kChains == 1 ? "one chain" : "4 chains", MB, NT, K0, fmas / best / 1e9);
}

}  // namespace

int main() {
  bench<4, 6, 1, 32>();
  bench<4, 6, 1, 16>();
  bench<1, 6, 1, 32>();
  bench<1, 12, 1, 32>();
  bench<1, 7, 2, 32>();
  bench<1, 5, 3, 32>();
  bench<1, 5, 3, 16>();
  bench<0, 6, 2, 0>();
  bench<0, 5, 3, 0>();
}
