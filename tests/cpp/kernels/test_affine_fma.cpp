// LinearPlan::affine_fma: where every product S*e of a zero-point grade is
// exact in binary32, the SIMD decoders form w = S*e - Z in one FMA. The plan
// sets it only for integer elements and integer scale codes narrow enough
// (Q4KS: 11 + 6 + 4 bits), and the one-FMA form keeps the two-step bits: on
// random planes (negative and subnormal d, zero codes, so signed zeros) every
// variant decodes like the core and returns the reference kernel's bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "grit/grit.h"
#include "kernels/cpu/packed_linear_cpu.h"
#include "nibble_planes.h"

namespace {

using grit::cpu::Isa;
using namespace nibble_test;  // Planes, random_planes, packed, activations

bool plan_flag(const char* spec) {
  grit::Grade g;
  EXPECT_TRUE(grit::grade_parse(spec, &g).ok()) << spec;
  const Planes pl = random_planes(g, 16, 256, 1);
  grit::cpu::LinearPlan plan;
  grit::cpu::make_plan(packed(g, pl, 16, 256), &plan);
  EXPECT_EQ(plan.kind, grit::cpu::FastKind::kNibbleAffine) << spec;
  return plan.affine_fma;
}

TEST(AffineFma, PlanTakesItOnlyWhereTheProductsAreExact) {
  EXPECT_TRUE(plan_flag("grit1(e=u4,k0=32,s0=u6,k1=8,s1=binary16,zp=u6,zps=l1,esr=affineminmax)"));  // Q4KS
  EXPECT_TRUE(plan_flag("grit1(e=u4,k0=32,s0=u8,k1=8,s1=binary16,zp=u6,zps=l1,esr=affineminmax)"));  // 23 bits
  // Elements 0.5 and 1.5 are not integers: the two-step form.
  EXPECT_FALSE(plan_flag("grit1(e=e2m1,k0=32,s0=u6,k1=8,s1=binary16,zp=u6,zps=l1,esr=affineminmax)"));
}

TEST(AffineFma, EveryVariantKeepsTheTwoStepBits) {
  const grit::Grade& g = *grit::reference_grade("Q4KS")->grade;
  const struct {
    int64_t n, k;
  } shapes[] = {{16, 256}, {40, 768}, {24, 160}};  // whole super-blocks, a partial tile, straddling pairs
  int64_t negative_zero_weights = 0;
  for (const auto& s : shapes) {
    const Planes pl = random_planes(g, s.n, s.k, 41);
    const grit::cpu::PackedWeight w = packed(g, pl, s.n, s.k);
    grit::cpu::LinearPlan plan;
    grit::cpu::make_plan(w, &plan);
    ASSERT_EQ(plan.kind, grit::cpu::FastKind::kNibbleAffine);
    ASSERT_TRUE(plan.affine_fma);
    const int64_t numel = s.n * s.k, tiles = grit::cpu::linear_tile_count(s.n);
    std::vector<float> want(static_cast<size_t>(numel));
    ASSERT_TRUE(grit::decode(g, w.planes, static_cast<uint64_t>(numel), want.data()).ok());
    for (float v : want) negative_zero_weights += v == 0.0f && std::signbit(v);
    const std::vector<float> x = activations(3 * s.k, false, 43);
    std::vector<float> y_want(static_cast<size_t>(3 * s.n));
    ASSERT_TRUE(grit::cpu::linear_tiles(w, x.data(), 3, nullptr, 0, tiles, y_want.data()).ok());
    for (Isa isa : grit::cpu::kAllIsas) {
      if (!grit::cpu::isa_supported(isa)) continue;
      const grit::cpu::KernelTable& kt = grit::cpu::kernels_for(isa);
      std::vector<float> got(want.size(), 1.0f);
      bool fallback = false;
      ASSERT_TRUE(kt.decode_tiles(plan, 0, tiles, got.data(), &fallback).ok());
      EXPECT_FALSE(fallback);
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
          << grit::cpu::isa_name(isa) << " decode " << s.n << "x" << s.k;
      for (int64_t m : {1, 3}) {
        std::vector<float> y(static_cast<size_t>(m * s.n), -7.0f);
        ASSERT_TRUE(kt.linear_tiles(plan, x.data(), m, nullptr, 0, tiles, y.data(), &fallback).ok());
        EXPECT_EQ(0, std::memcmp(y.data(), y_want.data(), y.size() * sizeof(float)))
            << grit::cpu::isa_name(isa) << " linear " << s.n << "x" << s.k << " m=" << m;
      }
    }
  }
  EXPECT_GT(negative_zero_weights, 0);  // the planes do reach the signed-zero case
}

}  // namespace
