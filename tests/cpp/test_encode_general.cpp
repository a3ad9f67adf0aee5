// The general encoder (encode_general.cpp) on the reference grades' own
// formats gives the family encoders' bytes: MXFP4 under each exp2 rule and
// dense s8 with binary16 scales (ggml's Q8_0 grade) at several group sizes,
// on zeros, ties, subnormals, huge values, NaN and Inf. Plus a worked
// affineminmax group and the refusals choose_encoder reports.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "grit/decode.h"
#include "grit/encode.h"
#include "test_util.h"

namespace {

std::vector<float> hard_values(size_t groups, size_t k0, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<float> v(groups * k0);
  for (auto& x : v) x = nd(rng);
  auto grp = [&](size_t g) { return v.begin() + static_cast<std::ptrdiff_t>(g * k0); };
  std::fill(grp(0), grp(1), 0.0f);
  std::fill(grp(1), grp(2), -0.375f);
  for (size_t i = 0; i < k0; ++i) v[2 * k0 + i] = 0.25f * static_cast<float>(static_cast<int>(i % 13) - 6);
  for (size_t i = 0; i < k0; ++i) v[3 * k0 + i] *= 1e-41f;
  for (size_t i = 0; i < k0; ++i) v[4 * k0 + i] *= 1e37f;
  v[5 * k0 + 2] = std::numeric_limits<float>::quiet_NaN();
  v[6 * k0] = -std::numeric_limits<float>::infinity();
  return v;
}

void expect_same_planes(const grit::EncodedPlanes& a, const grit::EncodedPlanes& b, const std::string& what) {
  for (int i = 0; i < 4; ++i) EXPECT_EQ(gt::hexs(a.plane[i]), gt::hexs(b.plane[i])) << what << " plane " << i;
}

TEST(EncodeGeneral, GivesTheMxfp4FamilyBytes) {
  const std::vector<float> v = hard_values(12, 32, 7);
  const struct { const char* esr; grit::ScaleRule rule; } rules[] = {
      {"exp2floormaxabs", grit::ScaleRule::kExp2Floor},
      {"exp2ceilmaxabs", grit::ScaleRule::kExp2Ceil},
      {"exp2rnemaxabs", grit::ScaleRule::kExp2Rne}};
  for (const auto& r : rules) {
    const grit::Grade g = gt::parse_ok(std::string("grit1(e=e2m1,k0=32,s0=e8m0,esr=") + r.esr + ")");
    grit::EncodedPlanes fam, gen;
    ASSERT_TRUE(grit::encode_mxfp4(v.data(), v.size(), r.rule, &fam).ok());
    ASSERT_TRUE(grit::encode_general(g, v.data(), v.size(), &gen).ok());
    expect_same_planes(fam, gen, r.esr);
  }
}

TEST(EncodeGeneral, GivesTheDenseS8BytesAtEveryGroupSize) {
  for (uint64_t k0 : {32u, 64u, 128u}) {
    const std::vector<float> v = hard_values(10, k0, static_cast<unsigned>(k0));
    const grit::Grade g =
        gt::parse_ok("grit1(e=s8,k0=" + std::to_string(k0) + ",s0=binary16,esr=ratiomaxabs)");
    grit::EncodedPlanes fam, gen;
    ASSERT_TRUE(grit::encode_s8_dense(v.data(), v.size(), k0, &fam).ok());
    ASSERT_TRUE(grit::encode_general(g, v.data(), v.size(), &gen).ok());
    expect_same_planes(fam, gen, "k0=" + std::to_string(k0));
  }
}

TEST(EncodeGeneral, AffineGroupWorkedByHand) {
  // u4 with a u4 zero point per 8 values: lo = -1, hi = 2 -> S = binary16(3/15) = 0.19995...,
  // z = rne(1 / S) + 0 = 5; q = rne(x / S) + z.
  const grit::Grade g = gt::parse_ok("grit1(e=u4,k0=8,s0=binary16,zp=u4,esr=affineminmax)");
  grit::EncoderChoice c;
  ASSERT_TRUE(grit::choose_encoder(g, &c).ok());
  EXPECT_EQ(c.family, grit::EncoderFamily::kGeneral);
  const float v[8] = {-1.0f, 2.0f, 0.0f, 0.5f, -0.5f, 1.0f, 0.1f, -0.1f};
  grit::EncodedPlanes p;
  ASSERT_TRUE(grit::encode(g, v, 8, &p).ok());
  const uint16_t sbits = static_cast<uint16_t>(p.plane[1][0] | (p.plane[1][1] << 8));
  EXPECT_EQ(sbits, grit::f16_bits_of(3.0f / 15.0f));
  const float S = grit::f16_value(sbits);
  ASSERT_EQ(p.plane[3].size(), 1u);
  EXPECT_EQ(p.plane[3][0], 5);
  // x / S = -5.0012, 10.0024, 0, 2.5006, -2.5006, 5.0012, 0.5001, -0.5001 (S = 0.19995...)
  const int want[8] = {0, 15, 5, 8, 2, 10, 6, 4};
  for (int i = 0; i < 8; ++i) EXPECT_EQ((p.plane[0][i / 2] >> (4 * (i % 2))) & 0xF, want[i]) << i;
  grit::Plane planes[4];
  for (int i = 0; i < 4; ++i) planes[i] = {p.plane[i].data(), p.plane[i].size()};
  float out[8];
  ASSERT_TRUE(grit::decode(g, planes, 8, out).ok());
  EXPECT_EQ(out[2], 0.0f);  // zero is exact
  EXPECT_EQ(out[1], S * 10.0f);
  // zpc=minus1 stores one less and decodes the same values.
  const grit::Grade gm = gt::parse_ok("grit1(e=u4,k0=8,s0=binary16,zp=u4,zpc=minus1,esr=affineminmax)");
  grit::EncodedPlanes pm;
  ASSERT_TRUE(grit::encode(gm, v, 8, &pm).ok());
  EXPECT_EQ(pm.plane[3][0], 4);
  EXPECT_EQ(gt::hexs(pm.plane[0]), gt::hexs(p.plane[0]));
}

TEST(EncodeGeneral, RefusalsNameTheMissingRule) {
  const struct { const char* grade; const char* says; } cases[] = {
      {"grit1(e=u4,k0=32,s0=binary16,zp=u4,esr=exp2rnemaxabs)", "with a zero point"},
      {"grit1(e=s4,k0=32,s0=binary16,esr=affineminmax)", "needs a zero point"},
      {"grit1(e=u4,k0=32,s0=binary16,k1=8,s1=binary16,esr=ratiomaxabs)", "two-level"},
      {"grit1(e=s4,k0=32,s0=binary16,esr=custom:x)", "names no rule"},
      {"grit1(e=e2m1,k0=32,s0=e8m0,es=ovfinf,esr=exp2floormaxabs)", "es=ovfinf"},
  };
  for (const auto& c : cases) {
    grit::EncoderChoice ch;
    const grit::Status st = grit::choose_encoder(gt::parse_ok(c.grade), &ch);
    EXPECT_FALSE(st.ok()) << c.grade;
    EXPECT_EQ(st.code, grit::Error::kInexpressible) << c.grade;
    EXPECT_NE(st.message.find(c.says), std::string::npos) << c.grade << ": " << st.message;
  }
}

}  // namespace
