// LinearPlan::s0_e4m3: the SIMD nibble decoders form NVF4's scales (E4M3
// codes times the per-tensor binary32 scale) arithmetically in super-blocks
// whose codes are all normal E4M3, and take the table elsewhere. The plan
// offers the shortcut only where it gives the table's bits, and every
// variant returns the core's decode and the reference kernel's bits, on
// row-major and tiled planes, with zero, subnormal, negative and NaN codes
// planted in some super-blocks, and per-tensor scales that make weights
// overflow or scales subnormal.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "grit/grit.h"
#include "kernels/cpu/nibble_tiles.h"
#include "nibble_planes.h"
#include "kernels/cpu/packed_linear_cpu.h"

namespace {

using grit::cpu::Isa;
using namespace nibble_test;  // Planes, random_planes, packed, activations

// Random element codes, scale codes drawn from the normal E4M3 codes (both
// signs), the per-tensor scale s1.
Planes normal_code_planes(const grit::Grade& g, int64_t n, int64_t k, float s1, uint32_t seed) {
  uint64_t bytes[4];
  EXPECT_TRUE(grit::grade_plane_bytes(g, static_cast<uint64_t>(n * k), bytes).ok());
  std::mt19937 rng(seed);
  Planes out;
  for (int i = 0; i < 4; ++i) out.p[i].resize(bytes[i]);
  for (auto& b : out.p[0]) b = static_cast<uint8_t>(rng());
  for (auto& b : out.p[1]) b = static_cast<uint8_t>((8 + rng() % 119) | (rng() % 4 == 0 ? 0x80 : 0));
  EXPECT_EQ(out.p[2].size(), 4u);
  std::memcpy(out.p[2].data(), &s1, 4);
  return out;
}

const grit::Grade& nvf4() { return *grit::reference_grade("NVF4")->grade; }

grit::cpu::LinearPlan plan_for(const grit::Grade& g, const Planes& pl, int64_t n, int64_t k) {
  grit::cpu::LinearPlan plan;
  grit::cpu::make_plan(packed(g, pl, n, k), &plan);
  return plan;
}

TEST(E4m3Scales, PlanOffersTheShortcutOnlyWhereItGivesTheTable) {
  const grit::Grade& g = nvf4();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const struct {
    float s1;
    bool want;
  } cases[] = {{1.0f, true},    {0.37f, true},  {-2.5f, true},     {3e35f, true},  // 448 * 3e35 is finite
               {1e-39f, true},  {0.0f, true},   {1e37f, false},    // 448 * 1e37 overflows
               {nan, false},    {std::numeric_limits<float>::infinity(), false}};
  for (const auto& c : cases) {
    const Planes pl = normal_code_planes(g, 16, 256, c.s1, 1);
    const grit::cpu::LinearPlan plan = plan_for(g, pl, 16, 256);
    ASSERT_EQ(plan.kind, grit::cpu::FastKind::kNibble);
    EXPECT_FALSE(plan.factor);
    EXPECT_EQ(plan.s0_e4m3, c.want) << "s1 = " << c.s1;
    if (!plan.s0_e4m3) continue;
    // The claim itself, against the format's own decode: every normal code.
    for (uint32_t code = 0; code < 256; ++code) {
      if ((code & 0x7F) < 8 || (code & 0x7F) == 0x7F) continue;
      const float want = c.s1 * grit::fmt_decode(g.scale0, code);
      EXPECT_EQ(0, std::memcmp(&plan.s0[code], &want, 4)) << "code " << code << " s1 = " << c.s1;
      const float arith = plan.s0_e4m3_mul * grit::fmt_decode(g.scale0, code);
      EXPECT_EQ(0, std::memcmp(&plan.s0[code], &arith, 4));
    }
  }
  // A factoring grade never takes it (its scales are E8M0 shifts).
  const grit::Grade& mx = *grit::reference_grade("MXFP4")->grade;
  Planes pl;
  uint64_t bytes[4];
  ASSERT_TRUE(grit::grade_plane_bytes(mx, 16 * 256, bytes).ok());
  for (int i = 0; i < 4; ++i) pl.p[i].assign(bytes[i], 127);
  EXPECT_FALSE(plan_for(mx, pl, 16, 256).s0_e4m3);
}

TEST(E4m3Scales, EveryVariantKeepsTheBitsOnBothRoutes) {
  const grit::Grade& g = nvf4();
  const int64_t n = 40, k = 768;  // three tiles (the last partial), three super-blocks per row
  const int64_t groups = k / static_cast<int64_t>(g.k0);
  const float scales[] = {1.0f, 0.37f, -2.5f, 3e35f, 1e-39f, 1e37f};
  int planted = 0;
  for (float s1 : scales) {
    Planes pl = normal_code_planes(g, n, k, s1, 7);
    // One odd code in each of six (tile, super-block) pairs: zero, negative
    // zero, subnormal, negative subnormal, NaN, negative NaN; the other
    // three pairs stay all normal and take the arithmetic route.
    const struct {
      int64_t row, group;
      uint8_t code;
    } plants[] = {{5, 17, 0x00}, {38, 0, 0x80}, {20, 47, 0x03}, {33, 20, 0x87}, {11, 40, 0x7F}, {0, 3, 0xFF}};
    for (const auto& pt : plants) pl.p[1][pt.row * groups + pt.group] = pt.code;
    planted += 6;
    const grit::cpu::PackedWeight w = packed(g, pl, n, k);
    grit::cpu::LinearPlan plan;
    grit::cpu::make_plan(w, &plan);
    ASSERT_EQ(plan.kind, grit::cpu::FastKind::kNibble);
    EXPECT_EQ(plan.s0_e4m3, s1 != 1e37f) << "s1 = " << s1;

    std::vector<float> decoded(static_cast<size_t>(n * k));
    ASSERT_TRUE(grit::decode(g, w.planes, static_cast<uint64_t>(n * k), decoded.data()).ok());
    std::vector<uint8_t> td(static_cast<size_t>(grit::cpu::tiled_plane_bytes(n, k / 2)));
    std::vector<uint8_t> ts(static_cast<size_t>(grit::cpu::tiled_plane_bytes(n, groups)));
    grit::cpu::tile_plane(pl.p[0].data(), n, k / 2, td.data());
    grit::cpu::tile_plane(pl.p[1].data(), n, groups, ts.data());
    grit::cpu::LinearPlan tplan = plan;
    tplan.tiled = true;
    tplan.w.planes[0] = grit::Plane{td.data(), td.size()};
    tplan.w.planes[1] = grit::Plane{ts.data(), ts.size()};
    const int64_t tiles = grit::cpu::linear_tile_count(n);

    for (Isa isa : grit::cpu::kAllIsas) {
      if (!grit::cpu::isa_supported(isa)) continue;
      const grit::cpu::KernelTable& kt = grit::cpu::kernels_for(isa);
      std::vector<float> got(decoded.size(), 1.0f);
      bool fallback = false;
      ASSERT_TRUE(kt.decode_tiles(plan, 0, tiles, got.data(), &fallback).ok());
      EXPECT_FALSE(fallback);
      EXPECT_EQ(0, std::memcmp(got.data(), decoded.data(), decoded.size() * sizeof(float)))
          << grit::cpu::isa_name(isa) << " decode, s1 = " << s1;
      for (int64_t m : {1, 3, 9}) {
        for (bool bf16 : {true, false}) {
          const std::vector<float> x = activations(m * k, bf16, 31);
          const std::vector<float> bias = activations(n, false, 37);
          std::vector<float> want(static_cast<size_t>(m * n));
          ASSERT_TRUE(grit::cpu::linear_tiles(w, x.data(), m, bias.data(), 0, tiles, want.data()).ok());
          for (int tiled = 0; tiled < (kt.reads_tiles ? 2 : 1); ++tiled) {
            std::vector<float> y(want.size(), -7.0f);
            fallback = false;
            ASSERT_TRUE(kt.linear_tiles(tiled ? tplan : plan, x.data(), m, bias.data(), 0, tiles, y.data(),
                                        &fallback)
                            .ok());
            EXPECT_FALSE(fallback);
            EXPECT_EQ(0, std::memcmp(y.data(), want.data(), want.size() * sizeof(float)))
                << grit::cpu::isa_name(isa) << (tiled ? " tiled" : " planes") << " s1 = " << s1 << " m=" << m
                << (bf16 ? " bf16 x" : " f32 x");
          }
        }
      }
    }
  }
  EXPECT_EQ(planted, 36);
}

}  // namespace
