// Seed 001's fixtures, reproduced exactly: codes, packed bytes, scales and
// reconstructions, and one test per reader refusal.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "grit/int4_groups.h"

namespace {

std::vector<int> codes_of(const std::vector<uint8_t>& p, size_t n) {
  std::vector<int> out;
  for (size_t i = 0; i < n; ++i) {
    const int nib = (p[i / 2] >> (4 * (i % 2))) & 0xF;
    out.push_back(nib >= 8 ? nib - 16 : nib);
  }
  return out;
}

const std::vector<double> kW = {-7, -3.5, 0, 3.5, 0.1, 0.2, 0.3, 7};

}  // namespace

TEST(Int4Groups, SeedMatrixGroupOfFour) {
  std::vector<uint8_t> p;
  std::vector<double> s;
  ASSERT_TRUE(grit::int4g_encode(kW.data(), 2, 4, 4, &p, &s).ok());
  EXPECT_EQ(s, (std::vector<double>{1.0, 1.0}));
  EXPECT_EQ(codes_of(p, 8), (std::vector<int>{-7, -4, 0, 4, 0, 0, 0, 7}));
  EXPECT_EQ(p, (std::vector<uint8_t>{0xC9, 0x40, 0x00, 0x70}));
  std::vector<double> back(8);
  ASSERT_TRUE(grit::int4g_decode(2, 4, 4, p.data(), p.size(), s.data(), s.size(), back.data()).ok());
  EXPECT_EQ(back, (std::vector<double>{-7, -4, 0, 4, 0, 0, 0, 7}));
}

TEST(Int4Groups, SeedMatrixGroupOfTwo) {
  std::vector<uint8_t> p;
  std::vector<double> s;
  ASSERT_TRUE(grit::int4g_encode(kW.data(), 2, 4, 2, &p, &s).ok());
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0], 1.0);
  EXPECT_EQ(s[1], 0.5);
  EXPECT_EQ(s[2], 0.028571428571428574);  // the seed's printed f64 scale
  EXPECT_EQ(s[3], 1.0);
  EXPECT_EQ(codes_of(p, 8), (std::vector<int>{-7, -4, 0, 7, 4, 7, 0, 7}));
  EXPECT_EQ(p, (std::vector<uint8_t>{0xC9, 0x70, 0x74, 0x70}));
  std::vector<double> back(8);
  ASSERT_TRUE(grit::int4g_decode(2, 4, 2, p.data(), p.size(), s.data(), s.size(), back.data()).ok());
  EXPECT_EQ(back[4], 0.1142857142857143);  // the seed's reconstruction of 0.1
  EXPECT_EQ(back[3], 3.5);
}

TEST(Int4Groups, SeedOddRowShortFinalGroup) {
  const std::vector<double> w = {-7, -3.5, 0, 3.5, 7};
  std::vector<uint8_t> p;
  std::vector<double> s;
  ASSERT_TRUE(grit::int4g_encode(w.data(), 1, 5, 4, &p, &s).ok());
  EXPECT_EQ(s, (std::vector<double>{1.0, 1.0}));
  EXPECT_EQ(p, (std::vector<uint8_t>{0xC9, 0x40, 0x07}));
}

TEST(Int4Groups, FixedScaleRoundsAwayAndClips) {
  int q;
  ASSERT_TRUE(grit::int4g_code(0.5, 1.0, &q).ok());
  EXPECT_EQ(q, 1);
  ASSERT_TRUE(grit::int4g_code(-0.5, 1.0, &q).ok());
  EXPECT_EQ(q, -1);
  ASSERT_TRUE(grit::int4g_code(10.0, 1.0, &q).ok());
  EXPECT_EQ(q, 7);
  ASSERT_TRUE(grit::int4g_code(-10.0, 1.0, &q).ok());
  EXPECT_EQ(q, -7);
  ASSERT_TRUE(grit::int4g_code(1e308, 1e-300, &q).ok());  // ratio overflows to inf: saturates
  EXPECT_EQ(q, 7);
  EXPECT_EQ(grit::int4g_code(NAN, 1.0, &q).code, grit::Error::kNonFinite);
  EXPECT_EQ(grit::int4g_code(1.0, 0.0, &q).code, grit::Error::kBadScale);
}

TEST(Int4Groups, AllZeroGroupUsesScaleOne) {
  const std::vector<double> w = {0.0, -0.0, 0.0, 0.0};
  std::vector<uint8_t> p;
  std::vector<double> s;
  ASSERT_TRUE(grit::int4g_encode(w.data(), 1, 4, 4, &p, &s).ok());
  EXPECT_EQ(s, (std::vector<double>{1.0}));
  EXPECT_EQ(p, (std::vector<uint8_t>{0x00, 0x00}));
}

TEST(Int4Groups, EncoderRefusals) {
  std::vector<uint8_t> p;
  std::vector<double> s;
  const std::vector<double> nan = {1.0, NAN};
  EXPECT_EQ(grit::int4g_encode(nan.data(), 1, 2, 2, &p, &s).code, grit::Error::kNonFinite);
  const std::vector<double> tiny = {std::numeric_limits<double>::denorm_min()};
  EXPECT_EQ(grit::int4g_encode(tiny.data(), 1, 1, 1, &p, &s).code, grit::Error::kBadScale);
  EXPECT_EQ(grit::int4g_encode(kW.data(), 2, 4, 0, &p, &s).code, grit::Error::kOutOfRange);
  EXPECT_EQ(grit::int4g_encode(kW.data(), 0, 4, 2, &p, &s).code, grit::Error::kOutOfRange);
}

TEST(Int4Groups, ReaderRefusalsEachHaveTheirOwnClass) {
  const std::vector<uint8_t> good = {0xC9, 0x40, 0x07};
  const std::vector<double> s = {1.0, 1.0};
  auto v = [](const std::vector<uint8_t>& p, const std::vector<double>& sc) {
    return grit::int4g_validate(1, 5, 4, p.data(), p.size(), sc.data(), sc.size());
  };
  EXPECT_TRUE(v(good, s).ok());
  EXPECT_EQ(v({0xC9, 0x40}, s).code, grit::Error::kPayloadLength);
  EXPECT_EQ(v(good, {1.0}).code, grit::Error::kScaleCount);
  EXPECT_EQ(v(good, {1.0, 0.0}).code, grit::Error::kBadScale);
  EXPECT_EQ(v(good, {1.0, -2.0}).code, grit::Error::kBadScale);
  EXPECT_EQ(v(good, {INFINITY, 1.0}).code, grit::Error::kBadScale);
  EXPECT_EQ(v(good, {NAN, 1.0}).code, grit::Error::kBadScale);
  EXPECT_EQ(v({0xC9, 0x40, 0x17}, s).code, grit::Error::kPadding);
  EXPECT_EQ(v({0xC8, 0x40, 0x07}, s).code, grit::Error::kReservedCode);
  const std::vector<double> huge = {1e308, 1.0};
  EXPECT_EQ(v(good, huge).code, grit::Error::kNonFinite);  // -7 * 1e308 overflows
  const grit::Status st = v({0xC9, 0x40}, s);
  EXPECT_NE(st.message.find("expected 3 bytes, found 2"), std::string::npos) << st.message;
}

TEST(Int4Groups, ParseName) {
  auto parse = [](const std::string& s, uint64_t* g) { return grit::int4g_parse_name(s.data(), s.size(), g); };
  uint64_t g = 0;
  ASSERT_TRUE(parse("INT4G32", &g).ok());
  EXPECT_EQ(g, 32u);
  ASSERT_TRUE(parse(" int4g7\n", &g).ok());
  EXPECT_EQ(g, 7u);
  ASSERT_TRUE(parse("Int4G4611686018427387904", &g).ok());  // 2^62
  EXPECT_EQ(g, uint64_t{1} << 62);
  for (const char* bad : {"", "INT4G", "INT4G0", "INT4G07", "INT4G-1", "INT4G 4", "INT4G4x", "INT4",
                          "MXFP4", "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)"})
    EXPECT_EQ(parse(bad, &g).code, grit::Error::kMalformed) << bad;
  EXPECT_EQ(parse("INT4G4611686018427387905", &g).code, grit::Error::kOutOfRange);
  EXPECT_EQ(parse("INT4G99999999999999999999999", &g).code, grit::Error::kOutOfRange);
}

TEST(Int4Groups, DecodeRowsEqualsTheWholeDecode) {
  std::vector<uint8_t> p;
  std::vector<double> s;
  std::vector<double> w(3 * 7);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(static_cast<double>(i)) * (1 + i % 5);
  ASSERT_TRUE(grit::int4g_encode(w.data(), 3, 7, 3, &p, &s).ok());  // short final group of 1
  std::vector<double> whole(21), part(14);
  ASSERT_TRUE(grit::int4g_decode(3, 7, 3, p.data(), p.size(), s.data(), s.size(), whole.data()).ok());
  grit::int4g_decode_rows(3, 7, 3, p.data(), s.data(), 1, 3, part.data());
  for (size_t i = 0; i < part.size(); ++i) EXPECT_EQ(part[i], whole[7 + i]) << i;
}
