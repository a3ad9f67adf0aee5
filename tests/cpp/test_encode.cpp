// Reference encoders (SPEC 9, 10): planes equal to the oracle's
// grit.encode() on fixed inputs (zeros, negative zero, NaN/Inf blocks, huge
// and tiny values), the shared-exponent rules, and NVF4_RTZ's rtz element
// rounding (where torch_grit deliberately differs from the oracle, which
// ignores er).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "grit/decode.h"
#include "grit/encode.h"
#include "oracle_vectors.h"
#include "test_util.h"

namespace {

using grit::Error;
using grit::ScaleRule;

std::vector<float> floats(const uint32_t* bits, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = gt::from_raw(bits[i]);
  return v;
}

struct Vec {
  const char* grade;
  const uint32_t* in;
  size_t n;
  const char* p[4];
};

const Vec kVecs[] = {
    {"MXFP4", oracle::mxfp4_in, sizeof oracle::mxfp4_in / 4,
     {oracle::mxfp4_p0, oracle::mxfp4_p1, oracle::mxfp4_p2, oracle::mxfp4_p3}},
    {"MXFP4_RNE", oracle::mxfp4rne_in, sizeof oracle::mxfp4rne_in / 4,
     {oracle::mxfp4rne_p0, oracle::mxfp4rne_p1, oracle::mxfp4rne_p2, oracle::mxfp4rne_p3}},
    {"Q4KS", oracle::q4ks_in, sizeof oracle::q4ks_in / 4,
     {oracle::q4ks_p0, oracle::q4ks_p1, oracle::q4ks_p2, oracle::q4ks_p3}},
    {"NVF4", oracle::nvf4_in, sizeof oracle::nvf4_in / 4,
     {oracle::nvf4_p0, oracle::nvf4_p1, oracle::nvf4_p2, oracle::nvf4_p3}},
    {"I8S24", oracle::i8s24_in, sizeof oracle::i8s24_in / 4,
     {oracle::i8s24_p0, oracle::i8s24_p1, oracle::i8s24_p2, oracle::i8s24_p3}},
};

void expect_planes(const grit::EncodedPlanes& got, const char* const want[4]) {
  for (int i = 0; i < 4; ++i) EXPECT_EQ(gt::hexs(got.plane[i]), want[i]) << "plane " << i;
}

TEST(Encode, ReproducesTheOraclePlanes) {
  for (const auto& v : kVecs) {
    SCOPED_TRACE(v.grade);
    const std::vector<float> in = floats(v.in, v.n);
    grit::EncodedPlanes ep;
    const grit::Status s = grit::encode(gt::ref(v.grade), in.data(), in.size(), &ep);
    ASSERT_TRUE(s.ok()) << s.message;
    expect_planes(ep, v.p);
  }
}

TEST(Encode, DirectEntryPointsMatchTheDispatcher) {
  const Vec& mx = kVecs[0];
  std::vector<float> in = floats(mx.in, mx.n);
  grit::EncodedPlanes ep;
  ASSERT_TRUE(grit::encode_mxfp4(in.data(), in.size(), ScaleRule::kExp2Floor, &ep).ok());
  expect_planes(ep, mx.p);
  ASSERT_TRUE(grit::encode_mxfp4(in.data(), in.size(), ScaleRule::kExp2Rne, &ep).ok());
  expect_planes(ep, kVecs[1].p);
  in = floats(kVecs[2].in, kVecs[2].n);
  ASSERT_TRUE(grit::encode_q4ks(in.data(), in.size(), &ep).ok());
  expect_planes(ep, kVecs[2].p);
  in = floats(kVecs[3].in, kVecs[3].n);
  ASSERT_TRUE(grit::encode_nvf4(in.data(), in.size(), grit::Rounding::kRne, &ep).ok());
  expect_planes(ep, kVecs[3].p);
  in = floats(kVecs[4].in, kVecs[4].n);
  ASSERT_TRUE(grit::encode_i8s24(in.data(), in.size(), &ep).ok());
  expect_planes(ep, kVecs[4].p);
}

TEST(Encode, PlanesPassTheCheckAndDecodeToTheOracle) {
  for (const auto& v : kVecs) {
    SCOPED_TRACE(v.grade);
    const grit::Grade& g = gt::ref(v.grade);
    const std::vector<float> in = floats(v.in, v.n);
    grit::EncodedPlanes ep;
    ASSERT_TRUE(grit::encode(g, in.data(), in.size(), &ep).ok());
    grit::Plane p[4];
    for (int i = 0; i < 4; ++i) p[i] = {ep.plane[i].data(), ep.plane[i].size()};
    const grit::Descriptor d = grit::descriptor_for(g, grit::default_placements(g));
    const int64_t shape[1] = {static_cast<int64_t>(v.n)};
    const grit::Id128 dg = grit::digest_of(p);
    const grit::CheckResult r = grit::check(d, shape, 1, p, 2, &dg);
    EXPECT_TRUE(r.ok()) << grit::describe(r, d);
    std::vector<float> out(v.n);
    ASSERT_TRUE(grit::decode(g, p, v.n, out.data()).ok());
  }
}

TEST(Encode, SpecificCodes) {
  // MXFP4 block 0 of the oracle input: amax 6 -> scale 2^0 (0x7F); codes
  // of 0, -0, 0.25, 0.75, 1.25, 2.5, 3.5, 5 are 0, 8, 0, 2, 2, 4, 6, 6.
  const std::vector<float> in = floats(oracle::mxfp4_in, 256);
  grit::EncodedPlanes ep;
  ASSERT_TRUE(grit::encode_mxfp4(in.data(), 256, ScaleRule::kExp2Floor, &ep).ok());
  EXPECT_EQ(ep.plane[1][0], 0x7F);
  const uint8_t want[4] = {0x80, 0x20, 0x42, 0x66};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(ep.plane[0][i], want[i]) << i;
  EXPECT_EQ(ep.plane[1][1], 0xFF);  // NaN block: poisoned scale, codes 0
  for (int i = 16; i < 32; ++i) EXPECT_EQ(ep.plane[0][i], 0x00) << i;
  EXPECT_EQ(ep.plane[1][2], 0x7F);  // zero block: 2^0, never a zero scale
  EXPECT_EQ(ep.plane[0][32], 0x08);  // -0.0 then +0.0
  EXPECT_EQ(ep.plane[1][3], 0xFF);  // -Inf poisons too
  EXPECT_EQ(ep.plane[1][4], 0xFC);  // FLT_MAX: 2^(127-2)
  EXPECT_EQ(ep.plane[1][5], 0x00);  // subnormals: clamped to 2^-127
}

TEST(Encode, RefusedInputs) {
  std::vector<float> v(48, 1.0f);
  grit::EncodedPlanes ep;
  EXPECT_EQ(grit::encode(gt::ref("MXFP4"), v.data(), 48, &ep).code, Error::kBadLength);
  EXPECT_EQ(grit::encode(gt::ref("NVF4"), v.data(), 40, &ep).code, Error::kBadLength);
  EXPECT_EQ(grit::encode(gt::ref("I8S24"), v.data(), 16, &ep).code, Error::kBadLength);
  EXPECT_EQ(grit::encode(gt::ref("Q4KS"), v.data(), 32, &ep).code, Error::kBadLength);
  // A range that overflows binary32 inside the affine fit (the oracle raises too).
  std::vector<float> huge(256);
  for (int i = 0; i < 256; ++i) huge[i] = (i % 2) ? 3e38f : -3e38f;
  EXPECT_EQ(grit::encode(gt::ref("Q4KS"), huge.data(), 256, &ep).code, Error::kBadValue);
  // MXFP4 takes the same values in stride.
  ASSERT_TRUE(grit::encode(gt::ref("MXFP4"), huge.data(), 32, &ep).ok());
  EXPECT_EQ(ep.plane[1][0], 0xFC);
}

TEST(Encode, DispatcherRefusesGradesWithoutAnEncoder) {
  std::vector<float> v(256, 0.5f);
  grit::EncodedPlanes ep;
  const char* const refused[] = {
      "grit1(e=s8,k0=32,s0=binary16,sp=2:4:u2:asclsb,er=rtz,esr=ratio)",  // I8S24's encoder is rne
      "grit1(e=u4,k0=32,s0=u6,k1=8,s1=binary16,zp=u6,zps=l1,er=rna,esr=affine)",
      "grit1(e=e2m1,k0=16,s0=e4m3,k1=0,s1=binary32,er=rtp,esr=ratio)",
  };
  for (const char* t : refused) {
    const grit::Status s = grit::encode(gt::parse_ok(t), v.data(), v.size(), &ep);
    EXPECT_EQ(s.code, Error::kInexpressible) << t;
  }
  // Dense one-level grades beside the families go to the general encoder.
  const char* const general[] = {
      "grit1(e=e2m1,k0=64,s0=e8m0,esr=exp2floormaxabs)",    // another block size
      "grit1(e=e2m1,k0=32,s0=e8m0,esr=ratiomaxabs)",        // another scale rule
      "grit1(e=e2m1,k0=32,s0=e8m0,po=msb,esr=exp2floor)",   // another placement
      "grit1(e=e2m1,k0=32,s0=e8m0,er=rtz,esr=exp2floor)",   // another element rounding
      "grit1(e=s8,k0=64,s0=binary16,esr=ratiomaxabs)",      // dense s8 at another block size
      "grit1(e=s8,k0=32,s0=binary16,er=rtz,esr=ratiomaxabs)",
  };
  for (const char* t : general) {
    grit::EncoderChoice c;
    ASSERT_TRUE(grit::choose_encoder(gt::parse_ok(t), &c).ok()) << t;
    EXPECT_EQ(c.family, grit::EncoderFamily::kGeneral) << t;
    EXPECT_TRUE(grit::encode(gt::parse_ok(t), v.data(), v.size(), &ep).ok()) << t;
  }
  // The ceil rule has an encoder although no reference grade uses it.
  EXPECT_TRUE(grit::encode(gt::parse_ok("grit1(e=e2m1,k0=32,s0=e8m0,esr=rceil)"), v.data(), 32, &ep).ok());
  EXPECT_EQ(ep.plane[1][0], 124);  // 0.5 is a power of two: ceil = floor = -1; minus emax 2 -> 2^-3
}

// Q8_0's grade: S = binary16(amax / 127) rne, codes s8(x / S) rne, a zero
// group scales by 1.0, a group holding NaN or Inf gets the NaN scale.
TEST(Encode, DenseS8RatioMaxAbs) {
  const grit::Grade g = gt::parse_ok("grit1(e=s8,k0=32,s0=binary16,esr=ratiomaxabs)");
  std::vector<float> v(96, 0.0f);
  for (int i = 0; i < 32; ++i) v[i] = static_cast<float>(i - 16) * 0.25f;  // amax 4: S = f16(4/127)
  v[40] = NAN;                                                              // group 1 poisoned
  grit::EncodedPlanes ep;
  ASSERT_TRUE(grit::encode(g, v.data(), v.size(), &ep).ok());
  ASSERT_EQ(ep.plane[0].size(), 96u);
  ASSERT_EQ(ep.plane[1].size(), 6u);
  const uint16_t s0 = static_cast<uint16_t>(ep.plane[1][0] | (ep.plane[1][1] << 8));
  EXPECT_EQ(s0, grit::f16_bits_of(4.0f / 127.0f));
  const float S = grit::f16_value(s0);
  for (int i = 0; i < 32; ++i) {
    const int q = static_cast<int>(std::nearbyint(static_cast<double>(v[i] / S)));
    EXPECT_EQ(static_cast<int8_t>(ep.plane[0][i]), q > 127 ? 127 : (q < -127 ? -127 : q)) << i;
  }
  EXPECT_EQ(ep.plane[1][2] | (ep.plane[1][3] << 8), 0x7E00);  // NaN scale
  EXPECT_EQ(ep.plane[1][4] | (ep.plane[1][5] << 8), 0x3C00);  // all-zero group: 1.0
  for (int i = 32; i < 96; ++i) EXPECT_EQ(ep.plane[0][i], 0) << i;
  std::vector<float> out(96);
  const grit::Plane planes[4] = {{ep.plane[0].data(), 96}, {ep.plane[1].data(), 6}, {nullptr, 0}, {nullptr, 0}};
  ASSERT_TRUE(grit::decode(g, planes, 96, out.data()).ok());
  EXPECT_TRUE(std::isnan(out[33]));
  EXPECT_EQ(out[64], 0.0f);
}

// ------------------------------------------------------------ shared exponent

TEST(SharedExponent, FloorCeilRne) {
  const struct { float amax; int floor, ceil, rne; } cases[] = {
      {1.0f, 0, 0, 0},
      {1.5f, 0, 1, 1},          // 1.5^2 = 2.25 > 2
      {1.4142135f, 0, 1, 0},    // f*f < 2: rne stays down
      {1.4142137f, 0, 1, 1},    // f*f > 2: rne rounds up
      {6.0f, 2, 3, 3},
      {4.0f, 2, 2, 2},
      {0.75f, -1, 0, 0},
      {2.8284270f, 1, 2, 1},
      {2.8284273f, 1, 2, 2},
      {1.9999999f, 0, 1, 1},
      {std::ldexp(1.0f, -149), -149, -149, -149},
      {std::numeric_limits<float>::max(), 127, 128, 128},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(grit::shared_exp2_exponent(c.amax, ScaleRule::kExp2Floor), c.floor) << c.amax;
    EXPECT_EQ(grit::shared_exp2_exponent(c.amax, ScaleRule::kExp2Ceil), c.ceil) << c.amax;
    EXPECT_EQ(grit::shared_exp2_exponent(c.amax, ScaleRule::kExp2Rne), c.rne) << c.amax;
  }
}

TEST(SharedExponent, RneScaleDiffersFromFloorOnlyAboveSqrt2) {
  // Oracle block 6 has amax 1.4142135, block 7 has 1.4142137.
  const std::vector<float> in = floats(oracle::mxfp4_in, 256);
  grit::EncodedPlanes fl, rn;
  ASSERT_TRUE(grit::encode_mxfp4(in.data(), 256, ScaleRule::kExp2Floor, &fl).ok());
  ASSERT_TRUE(grit::encode_mxfp4(in.data(), 256, ScaleRule::kExp2Rne, &rn).ok());
  EXPECT_EQ(fl.plane[1][6], 0x7D);
  EXPECT_EQ(rn.plane[1][6], 0x7D);
  EXPECT_EQ(fl.plane[1][7], 0x7D);
  EXPECT_EQ(rn.plane[1][7], 0x7E);
}

// ------------------------------------------------------------ NVF4_RTZ

TEST(EncodeNvf4Rtz, ScalesAreTheOraclesCodesRoundTowardZero) {
  const std::vector<float> in = floats(oracle::nvf4_in, sizeof oracle::nvf4_in / 4);
  const size_t n = in.size();
  grit::EncodedPlanes rtz;
  ASSERT_TRUE(grit::encode(gt::ref("NVF4_RTZ"), in.data(), n, &rtz).ok());
  // Scales do not depend on er: the oracle's NVF4 scale planes.
  EXPECT_EQ(gt::hexs(rtz.plane[1]), oracle::nvf4_p1);
  EXPECT_EQ(gt::hexs(rtz.plane[2]), oracle::nvf4_p2);
  EXPECT_TRUE(rtz.plane[3].empty());
  const std::vector<uint8_t> rne = gt::unhex(oracle::nvf4_p0);
  ASSERT_EQ(rtz.plane[0].size(), rne.size());

  uint32_t sbits = 0;
  for (int k = 0; k < 4; ++k) sbits |= static_cast<uint32_t>(rtz.plane[2][k]) << (8 * k);
  const float sT = gt::from_raw(sbits);
  int differ = 0, checked = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t bs = rtz.plane[1][i / 16];
    const uint32_t c_rtz = (rtz.plane[0][i / 2] >> (4 * (i % 2))) & 0xF;
    const uint32_t c_rne = (rne[i / 2] >> (4 * (i % 2))) & 0xF;
    if (bs == 0x7F) {  // poisoned block: codes are 0 in both
      EXPECT_EQ(c_rtz, 0u);
      continue;
    }
    const float S = sT * grit::fmt_decode(grit::kE4M3, bs);
    const float e_rtz = grit::fmt_decode(grit::kE2M1, c_rtz);
    const float e_rne = grit::fmt_decode(grit::kE2M1, c_rne);
    // S == 0 (block 4: tiny next to the tensor amax) encodes signed zeros.
    const float y = S == 0.0f ? std::copysign(0.0f, in[i]) : in[i] / S;
    // Never above the input in magnitude, and the sign is kept.
    EXPECT_LE(std::fabs(e_rtz), std::fabs(y)) << i;
    EXPECT_EQ(std::signbit(e_rtz), std::signbit(in[i])) << i;
    // It is the largest e2m1 magnitude not above |y| (saturating at 6).
    uint32_t want = 0;
    grit::fmt_encode(grit::kE2M1, y, grit::Rounding::kRtz, grit::Saturation::kSatFinite, &want);
    EXPECT_EQ(c_rtz, want) << i;
    for (uint32_t c = 0; c < 8; ++c) {
      const float m = grit::fmt_decode(grit::kE2M1, c);
      if (m <= std::fabs(y)) {
        EXPECT_LE(m, std::fabs(e_rtz)) << i;
      }
    }
    if (c_rtz != c_rne) {
      ++differ;
      EXPECT_LT(std::fabs(e_rtz), std::fabs(e_rne)) << i;  // rne rounded up, rtz down
    }
    ++checked;
  }
  EXPECT_GT(checked, 50);
  EXPECT_GT(differ, 0);  // the deliberate difference from the oracle shows
  // Decode is shared: the RTZ planes decode under NVF4 exactly as under NVF4_RTZ.
  grit::Plane p[4];
  for (int i = 0; i < 4; ++i) p[i] = {rtz.plane[i].data(), rtz.plane[i].size()};
  std::vector<float> a(n), b(n);
  ASSERT_TRUE(grit::decode(gt::ref("NVF4"), p, n, a.data()).ok());
  ASSERT_TRUE(grit::decode(gt::ref("NVF4_RTZ"), p, n, b.data()).ok());
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(gt::raw_bits(a[i]), gt::raw_bits(b[i]));
}

TEST(EncodeNvf4Rtz, ValuesBetweenLadderPoints) {
  // amax 6 gives tensor scale 6/6/448 and block scale 448 (0x7E): S = 1.
  const float vals[16] = {6.0f, 5.9f, 4.9f, 3.9f, 2.9f, 2.4f, 1.9f, 1.4f,
                          0.9f, 0.4f, -5.9f, -2.4f, -0.4f, 2.5f, 3.5f, 0.75f};
  grit::EncodedPlanes rtz, rne;
  ASSERT_TRUE(grit::encode_nvf4(vals, 16, grit::Rounding::kRtz, &rtz).ok());
  ASSERT_TRUE(grit::encode_nvf4(vals, 16, grit::Rounding::kRne, &rne).ok());
  EXPECT_EQ(rtz.plane[1][0], 0x7E);
  uint32_t sbits = 0;
  for (int k = 0; k < 4; ++k) sbits |= static_cast<uint32_t>(rtz.plane[2][k]) << (8 * k);
  ASSERT_EQ(gt::from_raw(sbits) * 448.0f, 1.0f);  // S = 1 exactly: codes are the ladder's
  const uint32_t want_rtz[16] = {7, 6, 6, 5, 4, 4, 3, 2, 1, 0, 0xE, 0xC, 0x8, 4, 5, 1};
  const uint32_t want_rne[16] = {7, 7, 6, 6, 5, 4, 4, 3, 2, 1, 0xF, 0xC, 0x9, 4, 6, 2};
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ((rtz.plane[0][i / 2] >> (4 * (i % 2))) & 0xF, want_rtz[i]) << i;
    EXPECT_EQ((rne.plane[0][i / 2] >> (4 * (i % 2))) & 0xF, want_rne[i]) << i;
  }
}

}  // namespace
