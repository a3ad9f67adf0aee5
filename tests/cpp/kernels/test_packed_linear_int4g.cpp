// The INT4G packed-linear reference kernels against the core decode and the
// documented order, torch-free: y and grad_x equal, bit for bit, a plain
// loop over grit::int4g_decode's binary64 weights (product formed in
// binary64, rounded once to binary32, added in ascending order to +0.0, bias
// last), whatever the tile split.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "grit/int4_groups.h"
#include "kernels/cpu/packed_linear_int4g.h"

namespace {

struct Packed {
  std::vector<uint8_t> codes;
  std::vector<double> scales;
  grit::cpu::Int4gWeight w;
};

Packed pack(int64_t n, int64_t k, uint64_t group, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> dist;
  std::vector<double> src(static_cast<size_t>(n * k));
  for (auto& v : src) v = dist(rng);
  Packed p;
  EXPECT_TRUE(grit::int4g_encode(src.data(), n, k, group, &p.codes, &p.scales).ok());
  p.w.codes = p.codes.data();
  p.w.code_bytes = p.codes.size();
  p.w.scales = p.scales.data();
  p.w.n_scales = p.scales.size();
  p.w.n = n;
  p.w.k = k;
  p.w.group = group;
  return p;
}

std::vector<float> randf(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  std::vector<float> out(count);
  for (auto& v : out) v = dist(rng);
  return out;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

TEST(PackedLinearInt4g, ForwardIsTheDocumentedOrder) {
  for (const auto& c : {std::array<int64_t, 3>{17, 40, 32}, {5, 11, 3}, {33, 7, 100}}) {
    const int64_t n = c[0], k = c[1], m = 3;
    Packed p = pack(n, k, static_cast<uint64_t>(c[2]), 1);
    ASSERT_TRUE(grit::cpu::int4g_check(p.w).ok());
    std::vector<double> w(static_cast<size_t>(n * k));
    ASSERT_TRUE(grit::int4g_decode(n, k, p.w.group, p.codes.data(), p.codes.size(), p.scales.data(),
                                   p.scales.size(), w.data()).ok());
    const std::vector<float> x = randf(static_cast<size_t>(m * k), 2), bias = randf(n, 3);
    std::vector<float> y(static_cast<size_t>(m * n), -1.0f);
    // Two calls over disjoint tiles, as two threads would make them.
    const int64_t tiles = grit::cpu::int4g_tile_count(n);
    grit::cpu::int4g_linear_tiles(p.w, x.data(), m, bias.data(), 0, tiles / 2, y.data());
    grit::cpu::int4g_linear_tiles(p.w, x.data(), m, bias.data(), tiles / 2, tiles, y.data());
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float acc = 0.0f;
        for (int64_t kk = 0; kk < k; ++kk)
          acc = acc + static_cast<float>(static_cast<double>(x[i * k + kk]) * w[j * k + kk]);
        acc = acc + bias[j];
        EXPECT_TRUE(same_bits(y[i * n + j], acc)) << i << "," << j;
      }
  }
}

TEST(PackedLinearInt4g, GradInputIsTheDocumentedOrder) {
  const int64_t n = 19, k = 13, m = 4;
  Packed p = pack(n, k, 5, 4);
  std::vector<double> w(static_cast<size_t>(n * k));
  grit::cpu::int4g_rows(p.w, 0, n, w.data());
  const std::vector<float> gy = randf(static_cast<size_t>(m * n), 5);
  std::vector<float> gx(static_cast<size_t>(m * k), 0.0f);
  // Rows in two ascending steps, as the op decodes them tile by tile.
  grit::cpu::int4g_grad_input_accumulate(p.w, gy.data(), w.data(), 0, 8, 0, m, gx.data());
  grit::cpu::int4g_grad_input_accumulate(p.w, gy.data(), w.data() + 8 * k, 8, n, 0, m, gx.data());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t kk = 0; kk < k; ++kk) {
      float acc = 0.0f;
      for (int64_t j = 0; j < n; ++j)
        acc = acc + static_cast<float>(static_cast<double>(gy[i * n + j]) * w[j * k + kk]);
      EXPECT_TRUE(same_bits(gx[i * k + kk], acc)) << i << "," << kk;
    }
}
