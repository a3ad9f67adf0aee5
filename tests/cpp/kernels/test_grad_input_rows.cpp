// KernelTable::grad_input_rows of every variant this CPU runs against the
// reference accumulation (tile_accumulate.h, accumulate_grad_input), bit for
// bit: batch rows and columns that fill no whole register block, column
// ranges that start and end mid-strip (what a thread is handed), a grad_x
// that already holds earlier blocks' sums, and NaN, infinite, signed-zero
// and subnormal values in grad_y and W.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/packed_linear_cpu.h"
#include "kernels/cpu/tile_accumulate.h"

namespace {

using grit::cpu::Isa;

float special(std::mt19937& rng) {
  switch (rng() % 16) {
    case 0: return std::numeric_limits<float>::quiet_NaN();
    case 1: return std::numeric_limits<float>::infinity();
    case 2: return -std::numeric_limits<float>::infinity();
    case 3: return -0.0f;
    case 4: return std::numeric_limits<float>::denorm_min() * static_cast<float>(rng() % 1000);
    case 5: return 3.0e38f;
    default: return std::normal_distribution<float>(0.0f, 1.0f)(rng);
  }
}

std::vector<float> values(size_t count, std::mt19937& rng, bool specials) {
  std::vector<float> v(count);
  for (auto& x : v) x = specials ? special(rng) : std::normal_distribution<float>(0.0f, 1.0f)(rng);
  return v;
}

// Equal bits, or NaN against NaN (which NaN an add passes on is the hardware's choice).
bool same(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y;
}

void check(Isa isa, int64_t m, int64_t n, int64_t k, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
           bool specials, uint32_t seed) {
  std::mt19937 rng(seed);
  const std::vector<float> gy = values(static_cast<size_t>(m * n), rng, specials);
  const std::vector<float> w = values(static_cast<size_t>((r1 - r0) * k), rng, specials);
  std::vector<float> want = values(static_cast<size_t>(m * k), rng, false);  // earlier blocks' sums
  std::vector<float> got = want;
  grit::cpu::accumulate_grad_input(gy.data(), w.data(), n, k, r0, r1, 0, m, c0, c1, want.data());
  grit::cpu::kernels_for(isa).grad_input_rows(gy.data(), n, w.data(), r0, r1, m, k, c0, c1, got.data());
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) bad += !same(got[i], want[i]);
  EXPECT_EQ(bad, 0) << grit::cpu::isa_name(isa) << " m=" << m << " n=" << n << " k=" << k << " rows ["
                    << r0 << "," << r1 << ") cols [" << c0 << "," << c1 << ") specials=" << specials;
}

TEST(GradInputRows, EveryVariantAddsTheReferenceProductsInOrder) {
  uint32_t seed = 1;
  for (Isa isa : grit::cpu::kAllIsas) {
    if (!grit::cpu::isa_supported(isa)) continue;
    ASSERT_NE(grit::cpu::kernels_for(isa).grad_input_rows, nullptr) << grit::cpu::isa_name(isa);
    // Batch rows 1..13 cross every remainder of a 4- or 6-row block; columns
    // cross every remainder of a 16- and 64-column strip.
    for (int64_t m : {1, 2, 5, 6, 7, 13})
      for (int64_t k : {16, 33, 64, 100, 200}) {
        check(isa, m, 40, k, 0, 40, 0, k, false, seed++);
        check(isa, m, 40, k, 8, 29, 0, k, true, seed++);
        check(isa, m, 40, k, 3, 40, k / 3, k - k / 5, true, seed++);  // a thread's ragged column range
      }
  }
}

TEST(GradInputRows, ABlockOfOneRowAndAnEmptyRange) {
  for (Isa isa : grit::cpu::kAllIsas) {
    if (!grit::cpu::isa_supported(isa)) continue;
    check(isa, 9, 5, 70, 4, 5, 0, 70, true, 7);
    check(isa, 9, 5, 70, 2, 2, 0, 70, true, 8);   // no rows: grad_x unchanged
    check(isa, 9, 5, 70, 0, 5, 30, 30, true, 9);  // no columns
  }
}

}  // namespace
