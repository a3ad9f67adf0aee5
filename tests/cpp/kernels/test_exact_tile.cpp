// kernels/cpu/exact_tile (16 weight rows at once, AVX-512 VNNI) against the
// core's grit::exact::exact_dot, bit for bit, row by row: tiles of 1 to 16
// rows, 1 to 9 blocks and whole 4096-column rows, codes at and near their
// bounds, activation and weight block scales that are zero, subnormal,
// huge, NaN or infinite, biases likewise, for the laws of five grades.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "grit/decode.h"
#include "grit/exact_linear.h"
#include "grit/grade.h"
#include "kernels/cpu/exact_decode.h"
#include "kernels/cpu/exact_tile.h"
#include "exact_law_of.h"
#include "exact_values.h"

namespace {

TEST(ExactTile, SameBitsAsTheCore) {
  const char* const grades[] = {"MXFP4", "MXFP4_RNE", "I8S24", "grit1(e=s4,k0=32,s0=binary16,esr=ratiomaxabs)",
                                "grit1(e=s8,k0=16,s0=e8m0,sp=2:4:u2:asclsb,esr=ratiomaxabs)"};
  {
    grit::Grade g;
    grit::exact::Law L;
    ASSERT_TRUE(exact_law_of("MXFP4", &g, &L));
    if (!grit::cpu::exact_tile_supported(L)) GTEST_SKIP() << "this CPU lacks AVX-512 VNNI (F, BW, DQ, CD, VL)";
  }
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  int compared = 0, finite_nonzero = 0;
  for (const char* text : grades) {
    grit::Grade g;
    grit::exact::Law L;
    ASSERT_TRUE(exact_law_of(text, &g, &L));
    ASSERT_TRUE(grit::cpu::exact_tile_supported(L)) << text;
    for (int trial = 0; trial < 120; ++trial) {
      const int64_t B = trial % 10 == 9 ? 4096 / L.k0 : 1 + static_cast<int64_t>(rng() % 9), k = B * L.k0;
      const int rows = 1 + static_cast<int>(rng() % 16);
      const bool extreme = trial % 4 == 0;  // every code at its bound
      const bool specials = trial % 3 == 0;
      std::vector<int8_t> a(static_cast<size_t>(k));
      std::vector<float> as(static_cast<size_t>(B));
      for (auto& v : a) v = static_cast<int8_t>(extreme ? ((rng() & 1) ? 127 : -128) : static_cast<int>(rng() % 255) - 127);
      for (auto& s : as) s = specials ? special_or(rng, std::fabs(nd(rng)) * 0.01f) : std::fabs(nd(rng)) * 0.01f;
      std::vector<int16_t> w(static_cast<size_t>(rows * k));
      for (auto& v : w)
        v = static_cast<int16_t>(extreme ? ((rng() & 1) ? L.cmax : -L.cmax)
                                         : static_cast<int>(rng() % (2 * L.cmax + 1)) - L.cmax);
      std::vector<grit::exact::WScale> ws(static_cast<size_t>(rows * B));
      for (auto& s : ws) {
        s.m = static_cast<int32_t>(rng() % (L.scale_sig >= 11 ? 2048 : 2)) * ((rng() & 1) ? 1 : -1);
        s.x = static_cast<int32_t>(rng() % 60) - 40;
        s.finite = (specials && rng() % 40 == 0) ? 0 : 1;
      }
      const bool has_bias = rng() % 3 != 0;
      std::vector<float> bias(static_cast<size_t>(rows));
      for (auto& v : bias) v = specials ? special_or(rng, nd(rng) * 10.0f) : nd(rng) * 10.0f;

      grit::cpu::ExactActivation act;
      grit::cpu::exact_activation(L, a.data(), as.data(), k, &act);
      grit::cpu::ExactTile tile;
      grit::cpu::exact_tile_pack(L, w.data(), ws.data(), rows, k, &tile);
      float y[grit::cpu::kExactTileRows];
      grit::cpu::exact_dot_tile(L, act, tile, k, has_bias ? bias.data() : nullptr, y);
      for (int r = 0; r < rows; ++r) {
        const float want = grit::exact::exact_dot(L, a.data(), as.data(), w.data() + r * k, ws.data() + r * B, k,
                                                  has_bias, bias[r]);
        ASSERT_EQ(bits(y[r]), bits(want)) << text << " trial " << trial << " row " << r << " of " << rows
                                          << ", " << B << " blocks";
        ++compared;
        finite_nonzero += std::isfinite(want) && want != 0.0f;
      }
    }
  }
  // Most outputs are ordinary numbers, so the rescale and rounding were
  // compared, not only the NaN and zero rules.
  EXPECT_GT(compared, 4000);
  EXPECT_GT(finite_nonzero, compared / 2);
}

// The grid rounding made visible: blocks 0 and 1 cancel exactly (the same
// activation codes, negated weight codes, the same scales), so the output
// is block 2's term alone, rounded onto the grid the large blocks set: s =
// G - x bits below it, s from 1 (every odd term a tie) to 40, plus terms on
// or above the grid. A wrong tie rule or a grid one bit off changes these.
// exact_dot_row (exact_dot.h) is held to the same cases.
TEST(ExactTile, GridRoundingIsVisible) {
  grit::Grade g;
  grit::exact::Law L;
  ASSERT_TRUE(exact_law_of("grit1(e=s4,k0=32,s0=binary16,esr=ratiomaxabs)", &g, &L));
  const bool tiled = grit::cpu::exact_tile_supported(L);  // else only exact_dot_row is compared
  std::mt19937 rng(13);
  const int64_t B = 3, k = B * L.k0;
  const int rows = 16;
  int compared = 0, rounded = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int8_t> a(static_cast<size_t>(k));
    for (int64_t t = 0; t < L.k0; ++t) a[t] = a[L.k0 + t] = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
    for (int64_t t = 2 * L.k0; t < k; ++t) a[t] = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
    const std::vector<float> as(static_cast<size_t>(B), 1.0f);  // ma = 2^23, xa = -23
    std::vector<int16_t> w(static_cast<size_t>(rows * k));
    std::vector<grit::exact::WScale> ws(static_cast<size_t>(rows * B));
    for (int r = 0; r < rows; ++r) {
      int16_t* wr = w.data() + r * k;
      for (int64_t t = 0; t < L.k0; ++t) {
        wr[t] = static_cast<int16_t>(static_cast<int>(rng() % (2 * L.cmax + 1)) - L.cmax);
        wr[L.k0 + t] = static_cast<int16_t>(-wr[t]);
        wr[2 * L.k0 + t] = static_cast<int16_t>(static_cast<int>(rng() % (2 * L.cmax + 1)) - L.cmax);
      }
      const int32_t m0 = 1 + static_cast<int32_t>(rng() % 2047), x0 = static_cast<int32_t>(rng() % 20) - 10;
      const int32_t m2 = 1 + static_cast<int32_t>(rng() % 2047);
      // G = tmax - 62 + bitlen(B + 1), tmax = bd + bitlen(2^23 * m0) - 23
      // + x0 (blocks 0 and 1 bound the largest terms); block 2's term sits
      // at 2^(x2 - 23), so x2 = G + 23 - s.
      const int32_t G = L.bd + grit::exact::bitlen64(static_cast<uint64_t>(m0)) + x0 - 62 +
                        grit::exact::bitlen64(static_cast<uint64_t>(B) + 1);
      const int32_t s = static_cast<int32_t>(rng() % 46) - 5;  // -5..40: on or above the grid, then below
      ws[r * B + 0] = grit::exact::WScale{m0, x0, 1};
      ws[r * B + 1] = grit::exact::WScale{m0, x0, 1};
      ws[r * B + 2] = grit::exact::WScale{m2, G + 23 - s, 1};
      rounded += s > 0;
    }
    grit::cpu::ExactActivation act;
    grit::cpu::exact_activation(L, a.data(), as.data(), k, &act);
    grit::cpu::ExactTile tile;
    float y[grit::cpu::kExactTileRows];
    if (tiled) {
      grit::cpu::exact_tile_pack(L, w.data(), ws.data(), rows, k, &tile);
      grit::cpu::exact_dot_tile(L, act, tile, k, nullptr, y);
    }
    std::vector<int64_t> scratch(static_cast<size_t>(B));
    for (int r = 0; r < rows; ++r) {
      const float want =
          grit::exact::exact_dot(L, a.data(), as.data(), w.data() + r * k, ws.data() + r * B, k, false, 0.0f);
      const float row = grit::cpu::exact_dot_row(L, act, w.data() + r * k, ws.data() + r * B, k, false, 0.0f,
                                                 scratch.data());
      ASSERT_EQ(bits(row), bits(want)) << "exact_dot_row, trial " << trial << " row " << r;
      if (tiled) {
        ASSERT_EQ(bits(y[r]), bits(want)) << "exact_dot_tile, trial " << trial << " row " << r;
      }
      ++compared;
    }
  }
  EXPECT_EQ(compared, 300 * rows);
  EXPECT_GT(rounded, compared / 2);
}

// exact_tile_from_planes lays out the same tile as the core-equal decode
// (exact_weight_row, tests/cpp/kernels/test_exact_decode.cpp) followed by
// exact_tile_pack: random planes (every byte value: NaN and infinite block
// scales, every code, every 2:4 metadata nibble, one survivor where both
// positions agree), either nibble order, 4-bit and 8-bit codes, dense and
// 2-of-4 sparse, k0 16 and 32 (so chunks that end mid-vector), tiles of 1
// to 16 rows anywhere in the weight.
TEST(ExactTile, FromPlanesSameAsDecodeThenPack) {
  const char* const laid_out[] = {"MXFP4", "grit1(e=s4,k0=32,s0=binary16,po=msb,esr=ratiomaxabs)",
                                  "grit1(e=s4,k0=16,s0=binary16,esr=ratiomaxabs)",
                                  "grit1(e=s4,k0=16,s0=e8m0,po=msb,esr=ratiomaxabs)",
                                  "I8S24",
                                  "grit1(e=s8,k0=16,s0=e8m0,sp=2:4:u2:asclsb,esr=ratiomaxabs)",
                                  // an odd number of quads per row: rows start mid metadata byte
                                  "grit1(e=s8,k0=12,s0=binary16,sp=2:4:u2:asclsb,esr=ratiomaxabs)",
                                  "grit1(e=s8,k0=32,s0=binary16,esr=ratiomaxabs)"};
  // 2:4 over 4-bit codes: decode + pack instead.
  const char* const others[] = {"grit1(e=s4,k0=32,s0=binary16,sp=2:4:u2:asclsb,esr=ratiomaxabs)"};
  __builtin_cpu_init();
  const bool vbmi2 = __builtin_cpu_supports("avx512vbmi2");
  std::mt19937 rng(17);
  int compared = 0;
  for (const char* text : laid_out) {
    grit::Grade g;
    grit::exact::Law L;
    ASSERT_TRUE(exact_law_of(text, &g, &L));
    if (!grit::cpu::exact_tile_supported(L)) GTEST_SKIP() << "this CPU lacks AVX-512 VNNI (F, BW, DQ, CD, VL)";
    if (L.elem_bits == 8 && !vbmi2) {  // the 8-bit layouts need vpexpandb
      ADD_FAILURE() << "AVX-512 VNNI without VBMI2: add a test for that CPU (" << text << ")";
      continue;
    }
    for (int trial = 0; trial < 40; ++trial) {
      const int64_t n = 1 + static_cast<int64_t>(rng() % 40), k = (1 + static_cast<int64_t>(rng() % 12)) * L.k0;
      uint64_t bytes[4];
      ASSERT_TRUE(grit::grade_plane_bytes(g, static_cast<uint64_t>(n * k), bytes).ok());
      std::vector<std::vector<uint8_t>> p(4);
      for (int i = 0; i < 4; ++i) {
        p[i].resize(bytes[i]);
        for (auto& b : p[i]) b = static_cast<uint8_t>(rng());
      }
      const int64_t r0 = static_cast<int64_t>(rng() % n);
      const int rows = 1 + static_cast<int>(rng() % std::min<int64_t>(16, n - r0));
      const int64_t nb = k / L.k0;
      // Each row's first stored code: the core's count over the rows above.
      std::vector<uint64_t> cursor(static_cast<size_t>(rows));
      uint64_t at = 0;
      for (int64_t r = 0; r < r0 + rows; ++r) {
        if (r >= r0) cursor[r - r0] = at;
        at += grit::exact::row_stored(L, p[3].data(), r, k);
      }
      std::vector<int16_t> w(static_cast<size_t>(rows * k));
      std::vector<grit::exact::WScale> ws(static_cast<size_t>(rows * nb));
      for (int r = 0; r < rows; ++r)
        grit::cpu::exact_weight_row(L, p[0].data(), p[1].data(), p[3].data(), r0 + r, k, cursor[r],
                                    w.data() + r * k, ws.data() + r * nb);
      grit::cpu::ExactTile want, got;
      grit::cpu::exact_tile_pack(L, w.data(), ws.data(), rows, k, &want);
      ASSERT_TRUE(grit::cpu::exact_tile_from_planes(L, p[0].data(), p[1].data(), p[3].data(), cursor.data(), r0,
                                                    rows, k, &got))
          << text;
      ASSERT_EQ(got.rows, want.rows);
      ASSERT_EQ(got.nan_rows, want.nan_rows) << text << " trial " << trial;
      ASSERT_EQ(got.pairs, want.pairs) << text << " trial " << trial << " rows " << r0 << "+" << rows << " k " << k;
      ASSERT_EQ(got.mw, want.mw) << text << " trial " << trial;
      ASSERT_EQ(got.xw, want.xw) << text << " trial " << trial;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 8 * 40);
  for (const char* text : others) {  // laid out by decode + pack instead
    grit::Grade g;
    grit::exact::Law L;
    ASSERT_TRUE(exact_law_of(text, &g, &L));
    const uint8_t none[1] = {0};
    grit::cpu::ExactTile t;
    EXPECT_FALSE(grit::cpu::exact_tile_from_planes(L, none, none, none, nullptr, 0, 1, L.k0, &t)) << text;
  }
}

// A tile reused for several activation rows gives each row's own result.
TEST(ExactTile, OneTileManyActivationRows) {
  grit::Grade g;
  grit::exact::Law L;
  ASSERT_TRUE(exact_law_of("MXFP4", &g, &L));
  if (!grit::cpu::exact_tile_supported(L)) GTEST_SKIP() << "this CPU lacks AVX-512 VNNI (F, BW, DQ, CD, VL)";
  std::mt19937 rng(11);
  const int64_t k = 256, B = k / L.k0;
  const int rows = 16;
  std::vector<int16_t> w(static_cast<size_t>(rows * k));
  for (auto& v : w) v = static_cast<int16_t>(static_cast<int>(rng() % (2 * L.cmax + 1)) - L.cmax);
  std::vector<grit::exact::WScale> ws(static_cast<size_t>(rows * B));
  for (auto& s : ws) s = grit::exact::WScale{1, static_cast<int32_t>(rng() % 8) - 4, 1};
  grit::cpu::ExactTile tile;
  grit::cpu::exact_tile_pack(L, w.data(), ws.data(), rows, k, &tile);
  for (int i = 0; i < 8; ++i) {
    std::vector<int8_t> a(static_cast<size_t>(k));
    std::vector<float> as(static_cast<size_t>(B), 0.01f * static_cast<float>(i + 1));
    for (auto& v : a) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
    grit::cpu::ExactActivation act;
    grit::cpu::exact_activation(L, a.data(), as.data(), k, &act);
    float y[grit::cpu::kExactTileRows];
    grit::cpu::exact_dot_tile(L, act, tile, k, nullptr, y);
    for (int r = 0; r < rows; ++r)
      ASSERT_EQ(bits(y[r]), bits(grit::exact::exact_dot(L, a.data(), as.data(), w.data() + r * k, ws.data() + r * B,
                                                         k, false, 0.0f)))
          << "activation row " << i << ", weight row " << r;
  }
}

}  // namespace
