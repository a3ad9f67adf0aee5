// A measurement, not torch_grit code. Which order of float32 roundings an
// AMX-BF16 tile multiply (tdpbf16ps) follows on the CPU it runs on: the
// question a law for bfloat16 activations on AMX has to answer first
// (docs/performance.md, "probe_amx_bf16_order.cpp"). Random bf16 tiles
// (A: 16 rows x K, B: K/2 pair rows x 16 columns, C: 16 x 16 float32), one
// tdpbf16ps per trial, and every output compared bit for bit with candidate
// orders computed here from the exact products (a bf16 x bf16 product is
// exact in float32 when it neither overflows nor underflows; in double
// always):
//   seq       acc = fma(a_k, b_k, acc) for k = 0, 1, 2, ... (one rounding a product)
//   pairs     acc = acc + f32(a_2i b_2i + a_2i+1 b_2i+1), pairs in order
//   once      f32(acc + sum of all products), one rounding
//   parity    E = sequential float32 sum of the products at even k, O = the same at
//             odd k (each add rounded to nearest even), then acc + (E + O)
//   parity+ftz  the same with subnormal inputs and accumulator read as zero
//             (DAZ) and every rounded sum that is subnormal flushed to zero of
//             its sign (FTZ); the products themselves are not flushed
// in five data sets: normal magnitudes with a random accumulator, the same
// with C = +0, magnitudes over the whole exponent range, one input in four
// subnormal, and products and sums around 2^-126 (C = +0). Prints the
// mismatches per candidate and set.
//
//   g++ -O2 -std=c++17 benchmarks/probe_amx_bf16_order.cpp -o /tmp/probe_amx && /tmp/probe_amx
//
// Needs AMX-BF16 and Linux's permission for the tile state; says so and
// exits 2 without them.
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cpuid.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace {

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

uint64_t g_state = 0x9E3779B97F4A7C15ull;
uint64_t next() {
  g_state ^= g_state << 13;
  g_state ^= g_state >> 7;
  g_state ^= g_state << 17;
  return g_state;
}

float from_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// A random bf16: sign, 7 mantissa bits, the exponent field from [lo, hi];
// a quarter of them subnormal (exponent field 0) when `subnormals`.
uint16_t random_bf16(int lo, int hi, bool subnormals) {
  const uint64_t r = next();
  int e = lo + static_cast<int>(r % static_cast<uint64_t>(hi - lo + 1));
  if (subnormals && (r >> 40) % 4 == 0) e = 0;
  return static_cast<uint16_t>(((r >> 20) & 1) << 15 | e << 7 | ((r >> 8) & 0x7F));
}

bool same(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }
float daz(float v) { return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v; }
// a double sum rounded to float32, then flushed if subnormal
float ftz(double v) { return daz(static_cast<float>(v)); }

enum { kSeq, kPairs, kOnce, kParity, kParityFtz, kCandidates };
const char* const kNames[kCandidates] = {"seq", "pairs", "once", "parity", "parity+ftz"};

__attribute__((target("amx-tile,amx-bf16"))) void run_set(const char* name, int lo, int hi, bool subnormals,
                                                          bool zero_acc, int trials) {
  alignas(64) uint16_t A[16][32], B[16][32];
  alignas(64) float C[16][16], C0[16][16];
  long mismatches[kCandidates] = {}, total = 0;
  for (int t = 0; t < trials; ++t) {
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 32; ++j) {
        A[i][j] = random_bf16(lo, hi, subnormals);
        B[i][j] = random_bf16(lo, hi, subnormals);
      }
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 16; ++j) C0[i][j] = C[i][j] = zero_acc ? 0.0f : from_bf16(random_bf16(lo, hi, subnormals));
    _tile_loadd(0, C, 64);
    _tile_loadd(1, A, 64);
    _tile_loadd(2, B, 64);
    _tile_dpbf16ps(0, 1, 2);
    _tile_stored(0, C, 64);
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 16; ++n) {
        // element k of row m's dot product: A[m][k] * B[k / 2][2n + k % 2]
        // element k of row m's dot product: A[m][k] * B[k / 2][2n + k % 2], exact in double
        double p[32], pd[32];  // pd: with subnormal inputs read as zero
        for (int k = 0; k < 32; ++k) {
          const float a = from_bf16(A[m][k]), b = from_bf16(B[k / 2][2 * n + k % 2]);
          p[k] = static_cast<double>(a) * b;
          pd[k] = static_cast<double>(daz(a)) * daz(b);
        }
        float e[kCandidates];
        float acc = C0[m][n];
        for (int k = 0; k < 32; ++k)
          acc = std::fma(from_bf16(A[m][k]), from_bf16(B[k / 2][2 * n + k % 2]), acc);
        e[kSeq] = acc;
        acc = C0[m][n];
        for (int i = 0; i < 16; ++i) acc = acc + static_cast<float>(p[2 * i] + p[2 * i + 1]);
        e[kPairs] = acc;
        long double all = C0[m][n];
        for (int k = 0; k < 32; ++k) all += p[k];
        e[kOnce] = static_cast<float>(all);
        float E = static_cast<float>(p[0]), O = static_cast<float>(p[1]);
        for (int i = 1; i < 16; ++i) {
          E = static_cast<float>(static_cast<double>(E) + p[2 * i]);
          O = static_cast<float>(static_cast<double>(O) + p[2 * i + 1]);
        }
        e[kParity] = C0[m][n] + (E + O);
        E = ftz(pd[0]), O = ftz(pd[1]);
        for (int i = 1; i < 16; ++i) {
          E = ftz(static_cast<double>(E) + pd[2 * i]);
          O = ftz(static_cast<double>(O) + pd[2 * i + 1]);
        }
        e[kParityFtz] = ftz(static_cast<double>(daz(C0[m][n])) + static_cast<double>(ftz(static_cast<double>(E) + O)));
        for (int c = 0; c < kCandidates; ++c)
          if (!same(e[c], C[m][n])) ++mismatches[c];
        ++total;
      }
  }
  std::printf("%-40s %8ld outputs:", name, total);
  for (int c = 0; c < kCandidates; ++c) std::printf("  %s %ld", kNames[c], mismatches[c]);
  std::printf("\n");
}

__attribute__((target("amx-tile,amx-bf16"))) void probe() {
  TileConfig cfg;
  for (int t = 0; t < 3; ++t) cfg.rows[t] = 16, cfg.colsb[t] = 64;
  _tile_loadconfig(&cfg);
  std::printf("tdpbf16ps, K = 32, mismatching outputs per candidate order (0: that order, bit for bit)\n");
  run_set("normal, |x| in [2^-7, 2^8]", 120, 135, false, false, 2000);
  run_set("normal, accumulator +0", 120, 135, false, true, 2000);
  run_set("exponents 2^-66 .. 2^72", 60, 199, false, false, 2000);
  run_set("a quarter of the inputs subnormal", 1, 40, true, false, 2000);
  run_set("products and sums near 2^-126, C = +0", 60, 67, false, true, 2000);
  _tile_release();
}

}  // namespace

int main() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  // CPUID.(7,0):EDX bit 22 AMX-BF16, bit 24 AMX-TILE
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 22)) || !(d & (1u << 24))) {
    std::printf("this CPU has no AMX-BF16\n");
    return 2;
  }
  if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) != 0) {
    std::printf("Linux did not grant the tile state\n");
    return 2;
  }
  probe();
  return 0;
}
