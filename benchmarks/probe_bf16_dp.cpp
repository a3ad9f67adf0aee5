// A measurement, not torch_grit code: how close the bf16 activation law's
// vdpbf16ps route (csrc/kernels/cpu/bf16_dpbf16.cpp) comes to the
// instruction's own rate on this core. One thread; prints vdpbf16ps per
// second (32 multiply-adds each) and GFLOP/s for
//   - a loop of independent vdpbf16ps on registers (16 and 28 chains): the
//     ceiling;
//   - bf16_gemm_dp over the calls the ops make at batch 512 on a 4096x4096
//     weight: the forward's (512 rows, 128 chunks, 4 column pairs) and
//     grad_input's (512 rows, 64 chunks, 8 column pairs, C rows 4096 apart).
//
//   g++ -O3 -std=c++20 -Icsrc benchmarks/probe_bf16_dp.cpp -o /tmp/probe_bf16_dp
//   /tmp/probe_bf16_dp
#include <immintrin.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "../csrc/kernels/cpu/bf16_dpbf16.cpp"

namespace {

template <int kChains>
__attribute__((target("avx512f,avx512bf16"))) void ceiling() {
  __m512 acc[kChains];
  for (auto& a : acc) a = _mm512_setzero_ps();
  __m512bh a = (__m512bh)_mm512_set1_epi32(0x3F803F80), b = a;
  const int64_t n = 20000000;
  double best = 1e9;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < n; ++i) {
#pragma GCC unroll 32
      for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
      __asm__ volatile("" : "+v"(a));
    }
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    if (dt < best) best = dt;
  }
  float sink = 0;
  for (auto& v : acc) sink += _mm512_reduce_add_ps(v);
  const double dps = n * kChains / best;
  std::printf("ceiling, %2d chains on registers:   %.2f G vdpbf16ps/s, %4.0f GFLOP/s (%g)\n", kChains, dps / 1e9,
              dps * 64 / 1e9, sink * 0);
}

void call(const char* what, int64_t mp, int64_t nc, int64_t npairs, int64_t ldc) {
  using grit::cpu::kBf16Tile;
  std::vector<uint16_t> a(mp / 16 * nc * kBf16Tile + 32, 0x3F80), b(npairs * nc * 2 * kBf16Tile + 32, 0x3F80);
  std::vector<float> c(mp * ldc);
  uint16_t* A = reinterpret_cast<uint16_t*>((reinterpret_cast<uintptr_t>(a.data()) + 63) & ~uintptr_t{63});
  uint16_t* B = reinterpret_cast<uint16_t*>((reinterpret_cast<uintptr_t>(b.data()) + 63) & ~uintptr_t{63});
  double best = 1e9;
  for (int rep = 0; rep < 7; ++rep) {
    const auto t = std::chrono::steady_clock::now();
    grit::cpu::bf16_gemm_dp(A, nc, 0, nc, mp, B, nc, npairs, c.data(), ldc, false);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    if (dt < best) best = dt;
  }
  const double dps = double(mp) * nc * npairs * 2 * 16 / best;  // per row, chunk and half: 16 instructions
  std::printf("%-34s %.2f G vdpbf16ps/s, %4.0f GFLOP/s\n", what, dps / 1e9, dps * 64 / 1e9);
}

}  // namespace

int main() {
  if (!grit::cpu::bf16_dp_ready()) {
    std::printf("this CPU has no AVX512_BF16 route for the bf16 law\n");
    return 0;
  }
  ceiling<16>();
  ceiling<28>();
  call("bf16_gemm_dp, the forward's call:", 512, 128, 4, 128);
  call("bf16_gemm_dp, grad_input's call:", 512, 64, 8, 4096);
}
