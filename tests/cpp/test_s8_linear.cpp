// The s8 activation law (csrc/grit/s8_linear.h): its blocks, its grade laws
// and refusals, the terms against the decode, and whole products against a
// long-double evaluation of the same steps.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "grit/decode.h"
#include "grit/encode.h"
#include "grit/exact_linear.h"
#include "grit/grade.h"
#include "grit/s8_linear.h"

namespace s8 = grit::s8;

namespace {

grit::Grade grade(const char* text) {
  grit::Grade g;
  EXPECT_TRUE(grit::grade_parse(text, &g).ok()) << text;
  return g;
}

constexpr const char* kMxfp4 = "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)";
constexpr const char* kQ4ks = "grit1(e=u4,k0=32,s0=u6,k1=8,s1=binary16,zp=u6,zps=l1,esr=affineminmax)";
constexpr const char* kU4z = "grit1(e=u4,k0=64,s0=binary16,zp=u4,esr=affineminmax)";

}  // namespace

TEST(S8Law, ActivationBlock) {
  EXPECT_EQ(s8::activation_block(16), 16);
  EXPECT_EQ(s8::activation_block(256), 256);
  EXPECT_EQ(s8::activation_block(384), 128);
  EXPECT_EQ(s8::activation_block(4096), 256);
  EXPECT_EQ(s8::activation_block(385), 1);
}

TEST(S8Law, GradeLaws) {
  s8::Law L;
  ASSERT_TRUE(s8::s8_law(grade(kMxfp4), &L).ok());
  EXPECT_EQ(L.qe, -1);
  EXPECT_EQ(L.zero, s8::kZpNone);
  EXPECT_EQ(L.code[0x7], 12);   // e2m1 6.0 = 12 * 2^-1
  EXPECT_EQ(L.code[0xF], -12);
  ASSERT_TRUE(s8::s8_law(grade(kQ4ks), &L).ok());
  EXPECT_EQ(L.zero, s8::kZpOffset);
  ASSERT_TRUE(s8::s8_law(grade(kU4z), &L).ok());
  EXPECT_EQ(L.zero, s8::kZpShared);
  EXPECT_EQ(L.kb, 64);
}

TEST(S8Law, Refusals) {
  s8::Law L;
  const grit::Status e4m3 = s8::s8_law(grade("grit1(e=e4m3,k0=32,s0=e8m0,esr=exp2floormaxabs)"), &L);
  EXPECT_EQ(e4m3.code, grit::Error::kInexpressible);
  EXPECT_NE(e4m3.message.find("e=e4m3"), std::string::npos) << e4m3.message;
  const grit::Status b16 = s8::s8_law(grade("grit1(e=binary16,k0=32,s0=e8m0,esr=exp2floormaxabs)"), &L);
  EXPECT_EQ(b16.code, grit::Error::kInexpressible);
}

// The terms reproduce the decode: f32(S*e), f32(f32(S*e) - Z), f32(S*f32(e - z)).
TEST(S8Law, TermsAreTheDecode) {
  for (const char* text : {kMxfp4, kQ4ks, kU4z}) {
    const grit::Grade g = grade(text);
    s8::Law L;
    ASSERT_TRUE(s8::s8_law(g, &L).ok());
    const int64_t n = 3, k = 256;
    std::mt19937 rng(5);
    std::normal_distribution<float> nd;
    std::vector<float> w(n * k);
    for (auto& v : w) v = nd(rng);
    grit::EncodedPlanes ep;
    ASSERT_TRUE(grit::encode(g, w.data(), n * k, &ep).ok()) << text;
    grit::Plane p[4];
    for (int i = 0; i < 4; ++i) p[i] = grit::Plane{ep.plane[i].data(), ep.plane[i].size()};
    std::vector<float> dec(n * k);
    ASSERT_TRUE(grit::decode(g, p, n * k, dec.data()).ok());
    const int64_t G = k / L.k0;
    std::vector<int16_t> c(k);
    std::vector<float> S(G), O(G);
    std::vector<int32_t> zi(G);
    uint64_t stored = 0;
    for (int64_t r = 0; r < n; ++r) {
      ASSERT_TRUE(s8::weight_row_terms(g, L, p, n * k, r, k, &stored, c.data(), S.data(), O.data(), zi.data()).ok());
      for (int64_t t = 0; t < k; ++t) {
        const int64_t q = t / L.k0;
        const float e = std::ldexp(static_cast<float>(c[t]), L.qe);
        float want;
        if (L.zero == s8::kZpShared)
          want = S[q] * (e - std::ldexp(static_cast<float>(zi[q]), L.qe));
        else if (L.zero == s8::kZpOffset)
          want = S[q] * e + O[q];
        else
          want = S[q] * e;
        EXPECT_EQ(want, dec[r * k + t]) << text << " row " << r << " col " << t;
      }
    }
  }
}

// One output by hand: two blocks of 32, a zero point, a bias.
TEST(S8Law, DotByHand) {
  s8::Law L;
  ASSERT_TRUE(s8::s8_law(grade("grit1(e=u4,k0=32,s0=binary16,zp=u4,esr=affineminmax)"), &L).ok());
  std::vector<int8_t> a(64);
  std::vector<int16_t> c(64);
  for (int t = 0; t < 64; ++t) {
    a[t] = static_cast<int8_t>(t % 7 - 3);
    c[t] = static_cast<int16_t>(t % 16);
  }
  const float sa[2] = {0.5f, 0.25f}, S[2] = {2.0f, 4.0f}, O[2] = {0, 0};
  const int32_t zi[2] = {8, 3};
  long double want = 0;
  for (int b = 0; b < 2; ++b) {
    long long D = 0, A = 0;
    for (int t = 0; t < 32; ++t) {
      D += a[b * 32 + t] * c[b * 32 + t];
      A += a[b * 32 + t];
    }
    want += static_cast<long double>(sa[b]) * S[b] * static_cast<long double>(D - zi[b] * A);
  }
  const float bias = 1.5f;
  // Every step here is exact (small integers times powers of two).
  EXPECT_EQ(s8::dot(L, a.data(), sa, c.data(), S, O, zi, 64, &bias), static_cast<float>(want + bias));
  const float nan_scale[2] = {NAN, 1.0f};
  const uint32_t bits = [&] {
    const float y = s8::dot(L, a.data(), sa, c.data(), nan_scale, O, zi, 64, nullptr);
    uint32_t b;
    std::memcpy(&b, &y, 4);
    return b;
  }();
  EXPECT_EQ(bits, 0x7FC00000u);
}

// linear() over planes equals dot() over the row terms, row by row.
TEST(S8Law, LinearOverPlanes) {
  const grit::Grade g = grade(kQ4ks);
  s8::Law L;
  ASSERT_TRUE(s8::s8_law(g, &L).ok());
  const int64_t m = 2, n = 5, k = 256;
  std::mt19937 rng(9);
  std::normal_distribution<float> nd;
  std::vector<float> w(n * k), x(m * k);
  for (auto& v : w) v = nd(rng);
  for (auto& v : x) v = nd(rng);
  grit::EncodedPlanes ep;
  ASSERT_TRUE(grit::encode(g, w.data(), n * k, &ep).ok());
  grit::Plane p[4];
  for (int i = 0; i < 4; ++i) p[i] = grit::Plane{ep.plane[i].data(), ep.plane[i].size()};
  std::vector<int8_t> codes(m * k);
  std::vector<float> scales(m * k / L.kb), y(m * n);
  ASSERT_TRUE(grit::exact::pack_activations(x.data(), m, k, L.kb, codes.data(), scales.data()).ok());
  ASSERT_TRUE(s8::linear(g, L, codes.data(), scales.data(), m, p, n, k, nullptr, y.data()).ok());
  // Close to the float product of the decoded weight and the raw activations.
  std::vector<float> dec(n * k);
  ASSERT_TRUE(grit::decode(g, p, n * k, dec.data()).ok());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0, mag = 0;
      for (int64_t t = 0; t < k; ++t) {
        ref += static_cast<double>(x[i * k + t]) * dec[j * k + t];
        mag += std::fabs(static_cast<double>(x[i * k + t]) * dec[j * k + t]);
      }
      EXPECT_NEAR(y[i * n + j], ref, 0.02 * mag) << i << "," << j;
    }
  // A plane of the wrong length is refused, naming it.
  grit::Plane shortp[4] = {p[0], p[1], p[2], p[3]};
  shortp[0].size -= 1;
  EXPECT_FALSE(s8::linear(g, L, codes.data(), scales.data(), m, shortp, n, k, nullptr, y.data()).ok());
}
