// kernels/cpu/exact_dot (the activation row taken apart once) against the
// core's grit::exact::exact_dot, bit for bit: random codes at and near the
// code bounds, activation and weight block scales that are zero, subnormal,
// huge, NaN or infinite, biases likewise, for the laws of five grades.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "grit/exact_linear.h"
#include "grit/grade.h"
#include "kernels/cpu/exact_dot.h"
#include "exact_law_of.h"
#include "exact_values.h"

namespace {

TEST(ExactDot, SameBitsAsTheCore) {
  const char* const grades[] = {"MXFP4", "MXFP4_RNE", "I8S24", "grit1(e=s4,k0=32,s0=binary16,esr=ratiomaxabs)",
                                "grit1(e=s8,k0=16,s0=e8m0,sp=2:4:u2:asclsb,esr=ratiomaxabs)"};
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  int compared = 0;
  for (const char* text : grades) {
    grit::Grade g;
    grit::exact::Law L;
    ASSERT_TRUE(exact_law_of(text, &g, &L));
    for (int trial = 0; trial < 400; ++trial) {
      const int64_t B = 1 + static_cast<int64_t>(rng() % 9), k = B * L.k0;
      std::vector<int8_t> a(static_cast<size_t>(k));
      std::vector<float> as(static_cast<size_t>(B));
      std::vector<int16_t> w(static_cast<size_t>(k));
      std::vector<grit::exact::WScale> ws(static_cast<size_t>(B));
      const bool extreme = trial % 4 == 0;  // every code at its bound
      for (auto& v : a) v = static_cast<int8_t>(extreme ? ((rng() & 1) ? 127 : -127) : static_cast<int>(rng() % 255) - 127);
      for (auto& v : w)
        v = static_cast<int16_t>(extreme ? ((rng() & 1) ? L.cmax : -L.cmax)
                                         : static_cast<int>(rng() % (2 * L.cmax + 1)) - L.cmax);
      const bool specials = trial % 3 == 0;
      for (auto& s : as) s = specials ? special_or(rng, std::fabs(nd(rng)) * 0.01f) : std::fabs(nd(rng)) * 0.01f;
      for (auto& s : ws) {
        s.m = static_cast<int32_t>(rng() % (L.scale_sig >= 11 ? 2048 : 2)) * ((rng() & 1) ? 1 : -1);
        s.x = static_cast<int32_t>(rng() % 60) - 40;
        s.finite = (specials && rng() % 10 == 0) ? 0 : 1;
      }
      const bool has_bias = rng() % 3 != 0;
      const float bias = special_or(rng, nd(rng) * 10.0f);
      grit::cpu::ExactActivation act;
      grit::cpu::exact_activation(L, a.data(), as.data(), k, &act);
      std::vector<int64_t> scratch(static_cast<size_t>(B));
      const float want = grit::exact::exact_dot(L, a.data(), as.data(), w.data(), ws.data(), k, has_bias, bias);
      const float got = grit::cpu::exact_dot_row(L, act, w.data(), ws.data(), k, has_bias, bias, scratch.data());
      ASSERT_EQ(bits(got), bits(want)) << text << " trial " << trial;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 5 * 400);
}

}  // namespace
