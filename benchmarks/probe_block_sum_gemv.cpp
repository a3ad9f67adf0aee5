// A measurement, not torch_grit code. It decided the shape of the
// accumulation law that csrc/grit/linear_law.h defines (per-block sums with
// the scale applied once; this stays as the standalone lower bound for the
// batch-1 loop). MXFP4 GEMV (batch 1, 4096x4096, float32 x) with
// per-block partial sums: P_b = sum of e*x over the block's 32 columns (FMA,
// four interleaved chains, the law's form when this probe was written; the
// law now takes one chain per block, which the shipped kernels overlap
// across blocks), then acc = fma(S_b, P_b, acc). The law before it
// (each product w*x rounded, added in ascending k, no FMA) cost an S*e
// multiply and a separate add per weight; this one does not. Random codes
// and scales, `sets` distinct weight copies cycled (8: 71 MB, from DRAM; 1:
// 8.9 MB, from L3), software prefetch of the next tile (-DPF=0 turns it off).
//
//   g++ -O3 -std=c++17 -fopenmp -ffp-contract=off benchmarks/probe_block_sum_gemv.cpp -o /tmp/probe
//   /tmp/probe 8; /tmp/probe 1
//
// Compare with the shipped kernel in the same minutes:
//   torch.set_num_threads(1 or 2); torch.ops.grit.packed_linear(x, *planes, "MXFP4", [4096, 4096], None)
#include <immintrin.h>
#include <omp.h>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>
#include <algorithm>

#ifndef PF
#define PF 1
#endif
static const float kE2M1[16] = {0, .5f, 1, 1.5f, 2, 3, 4, 6, -0.f, -.5f, -1, -1.5f, -2, -3, -4, -6};

// 16 rows x 16 bytes, transposed: a copy of load_t16_affine in
// csrc/kernels/cpu/packed_linear_avx512.cpp, kept here so the probe builds
// alone with the one g++ line above (the kernel's is file-local).
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))
static inline void load_t16(const uint8_t* p, int64_t stride, __m512i out[4]) {
  __m512i z[4];
  for (int a = 0; a < 4; ++a) {
    const uint8_t* q = p + a * stride;
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i*)q));
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i*)(q + 4 * stride)), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i*)(q + 8 * stride)), 2);
    z[a] = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i*)(q + 12 * stride)), 3);
  }
  const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
  out[0] = _mm512_unpacklo_epi64(t0, t2);
  out[1] = _mm512_unpackhi_epi64(t0, t2);
  out[2] = _mm512_unpacklo_epi64(t1, t3);
  out[3] = _mm512_unpackhi_epi64(t1, t3);
}

__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))
void gemv_block(const uint8_t* codes, const uint8_t* sc, const float* x, int64_t n, int64_t k,
                float* y, int64_t t0, int64_t t1) {
  const __m512 lut = _mm512_loadu_ps(kE2M1);
  const int64_t cs = k / 2, ss = k / 32;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t r0 = t * 16;
    __m512 acc = _mm512_setzero_ps();
    // scale byte offsets of the 16 rows, lane order = load_t16's order
    alignas(64) int32_t off[16];
    {
      // load_t16 lane j of 128-bit chunk c of z[a] = row a + 4c; after the 4x4 transpose
      // out[j] lane (4c + a) = dword j of row a + 4c
      for (int c = 0; c < 4; ++c) for (int a = 0; a < 4; ++a) off[4 * c + a] = (int32_t)((r0 + a + 4 * c) * ss);
    }
    const __m512i voff = _mm512_load_si512(off);
    for (int64_t b = 0; b < k / 32; ++b) {
      __m512i d[4];
      if (PF && (b & 3) == 0 && t + 1 < t1) {
        const uint8_t* nx = codes + (r0 + 16) * cs + b * 16;
        for (int r = 0; r < 16; ++r) _mm_prefetch((const char*)(nx + r * cs), _MM_HINT_T1);
        if ((b & 63) == 0) for (int r = 0; r < 16; ++r) _mm_prefetch((const char*)(sc + (r0 + 16 + r) * ss + b), _MM_HINT_T1);
      }
      load_t16(codes + r0 * cs + b * 16, cs, d);
      const __m512i sb = _mm512_and_si512(_mm512_i32gather_epi32(voff, sc + b, 1), _mm512_set1_epi32(0xFF));
      const __m512 S = _mm512_castsi512_ps(_mm512_slli_epi32(sb, 23));
      __m512 P0 = _mm512_setzero_ps(), P1 = P0, P2 = P0, P3 = P0;
      const float* xb = x + b * 32;
#define COL(j, p, P) P = _mm512_fmadd_ps(_mm512_permutexvar_ps((p) ? _mm512_srli_epi32(d[j], 4 * (p)) : d[j], lut), _mm512_set1_ps(xb[8 * (j) + (p)]), P);
#define DW(j) COL(j,0,P0) COL(j,1,P1) COL(j,2,P2) COL(j,3,P3) COL(j,4,P0) COL(j,5,P1) COL(j,6,P2) COL(j,7,P3)
      DW(0) DW(1) DW(2) DW(3)
      acc = _mm512_fmadd_ps(S, _mm512_add_ps(_mm512_add_ps(P0, P1), _mm512_add_ps(P2, P3)), acc);
    }
    alignas(64) float o[16];
    _mm512_store_ps(o, acc);
    for (int L = 0; L < 16; ++L) y[r0 + (L & 3) + 4 * (L >> 2)] = o[L];
  }
}

int main(int argc, char** argv) {
  const int64_t n = 4096, k = 4096; const int64_t sets = argc > 1 ? atoi(argv[1]) : 8;
  std::vector<std::vector<uint8_t>> C(sets), S(sets);
  srand(1);
  for (int s = 0; s < sets; ++s) {
    C[s].resize(n * k / 2); S[s].resize(n * k / 32);
    for (auto& v : C[s]) v = rand() & 0xFF;
    for (auto& v : S[s]) v = 120 + rand() % 8;
  }
  std::vector<float> x(k), y(n);
  for (auto& v : x) v = (rand() % 2000 - 1000) / 1000.0f;
  // check against scalar
  {
    gemv_block(C[0].data(), S[0].data(), x.data(), n, k, y.data(), 0, n / 16);
    double maxerr = 0;
    for (int64_t r = 0; r < n; r += 97) {
      double ref = 0;
      for (int64_t c = 0; c < k; ++c) {
        int code = (C[0][r * k / 2 + c / 2] >> (4 * (c & 1))) & 15;
        ref += (double)kE2M1[code] * std::ldexp(1.0, S[0][r * k / 32 + c / 32] - 127) * x[c];
      }
      maxerr = std::max(maxerr, std::fabs(ref - y[r]) / (std::fabs(ref) + 1e-30));
    }
    printf("max rel err vs float64 (sampled rows): %.3g\n", maxerr);
  }
  for (int th : {1, 2}) {
    omp_set_num_threads(th);
    std::vector<double> times;
    for (int rep = 0; rep < 7; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      for (int s = 0; s < sets; ++s) {
#pragma omp parallel
        {
          int i = omp_get_thread_num(), T = omp_get_num_threads();
          int64_t tiles = n / 16, a = tiles * i / T, b = tiles * (i + 1) / T;
          gemv_block(C[s].data(), S[s].data(), x.data(), n, k, y.data(), a, b);
        }
      }
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / sets);
    }
    std::sort(times.begin(), times.end());
    printf("threads %d: median %.0f us per 4096x4096 MXFP4 GEMV\n", th, times[3] * 1e6);
  }
}
