// The format word and exact scalar encode/decode (SPEC 1, 2). Expected
// values were taken from the oracle (grit.fmt.fmt_decode,
// grit.fmt.fmt_encode_rne, grit.numeric.f16_bits_of).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "grit/fnv.h"
#include "grit/format.h"
#include "test_util.h"

namespace {

using grit::Error;
using grit::Rounding;
using grit::Saturation;
using gt::raw_bits;

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

uint32_t dec_bits(grit::fmt_t w, uint32_t code) { return raw_bits(grit::fmt_decode(w, code)); }

uint32_t enc(grit::fmt_t w, float x, Rounding r = Rounding::kRne,
             Saturation s = Saturation::kSatFinite) {
  uint32_t c = 0xDEADBEEF;
  const grit::Status st = grit::fmt_encode(w, x, r, s, &c);
  EXPECT_TRUE(st.ok()) << st.message;
  return c;
}

// ---------------------------------------------------------------- words

TEST(Format, RegisteredWordsAreTheNormativeOnes) {
  EXPECT_EQ(grit::kE2M1, 0x2043);
  EXPECT_EQ(grit::kE4M3, 0x2887);
  EXPECT_EQ(grit::kE8M0, 0x4807);
  EXPECT_EQ(grit::kBinary16, 0x356f);
  EXPECT_EQ(grit::kBinary32, 0x371f);
  EXPECT_EQ(grit::kU2, 0x43e1);
  EXPECT_EQ(grit::kU4, 0x43e3);
  EXPECT_EQ(grit::kU6, 0x43e5);
  EXPECT_EQ(grit::kU8, 0x43e7);
  EXPECT_EQ(grit::kS4, 0x03e3);
  EXPECT_EQ(grit::kS8, 0x03e7);
}

TEST(Format, RegistryNamesRoundTrip) {
  size_t n = 0;
  const grit::FormatRow* rows = grit::registered_formats(&n);
  ASSERT_EQ(n, 11u);
  const char* expected[] = {"e2m1", "e4m3", "e8m0", "binary16", "binary32", "u2",
                            "u4",   "u6",   "u8",   "s4",       "s8"};
  for (size_t i = 0; i < n; ++i) {
    EXPECT_STREQ(rows[i].name, expected[i]);
    EXPECT_STREQ(grit::format_name(rows[i].word), rows[i].name);
    grit::fmt_t w = 0;
    ASSERT_TRUE(grit::format_by_name(rows[i].name, &w));
    EXPECT_EQ(w, rows[i].word);
  }
  grit::fmt_t w = 0;
  EXPECT_FALSE(grit::format_by_name("fp4", &w));  // aliases are the grade parser's job
  EXPECT_FALSE(grit::format_by_name("E2M1", &w));
  EXPECT_EQ(grit::format_name(grit::kFmtAbsent), nullptr);
  EXPECT_EQ(grit::format_name(0x2044), nullptr);
}

TEST(Format, UnpackFields) {
  const grit::FmtInfo e2m1 = grit::fmt_unpack(grit::kE2M1);
  EXPECT_EQ(e2m1.width, 4);
  EXPECT_EQ(e2m1.p, 2);
  EXPECT_EQ(e2m1.mantissa_bits(), 1);
  EXPECT_EQ(e2m1.exponent_bits(), 2);
  EXPECT_EQ(e2m1.nan_enc, grit::kNanNone);
  EXPECT_EQ(e2m1.szero, 1);
  const grit::FmtInfo e8m0 = grit::fmt_unpack(grit::kE8M0);
  EXPECT_TRUE(e8m0.is_exponent_only());
  EXPECT_EQ(e8m0.is_unsigned, 1);
  EXPECT_EQ(e8m0.sign_bits(), 0);
  const grit::FmtInfo s8 = grit::fmt_unpack(grit::kS8);
  EXPECT_TRUE(s8.is_integer());
  EXPECT_EQ(s8.width, 8);
  EXPECT_EQ(s8.is_unsigned, 0);
  const grit::FmtInfo b16 = grit::fmt_unpack(grit::kBinary16);
  EXPECT_EQ(b16.exponent_bits(), 5);
  EXPECT_EQ(b16.has_inf, 1);
  EXPECT_EQ(b16.nan_enc, grit::kNanAll);
  EXPECT_EQ(grit::fmt_width(grit::kBinary32), 32);
  EXPECT_EQ(grit::fmt_pack(4, 2, 0, grit::kNanNone, 1), grit::kE2M1);
}

// ---------------------------------------------------------------- decode

TEST(FormatDecode, E2M1AllCodes) {
  const uint32_t want[16] = {0x00000000, 0x3f000000, 0x3f800000, 0x3fc00000,
                             0x40000000, 0x40400000, 0x40800000, 0x40c00000,
                             0x80000000, 0xbf000000, 0xbf800000, 0xbfc00000,
                             0xc0000000, 0xc0400000, 0xc0800000, 0xc0c00000};
  for (uint32_t c = 0; c < 16; ++c) EXPECT_EQ(dec_bits(grit::kE2M1, c), want[c]) << c;
  // Negative zero really carries its sign, the smallest subnormal is 0.5,
  // the all-ones exponent is an ordinary value (no NaN, no Inf): max 6.
  EXPECT_TRUE(std::signbit(grit::fmt_decode(grit::kE2M1, 0x8)));
  EXPECT_EQ(grit::fmt_decode(grit::kE2M1, 0x8), 0.0f);
  EXPECT_EQ(grit::fmt_decode(grit::kE2M1, 0x1), 0.5f);
  EXPECT_EQ(grit::fmt_decode(grit::kE2M1, 0x7), 6.0f);
  EXPECT_EQ(grit::fmt_decode(grit::kE2M1, 0xF), -6.0f);
}

TEST(FormatDecode, E4M3Edges) {
  EXPECT_EQ(dec_bits(grit::kE4M3, 0x00), 0x00000000u);
  EXPECT_EQ(dec_bits(grit::kE4M3, 0x80), 0x80000000u);  // -0.0
  EXPECT_EQ(grit::fmt_decode(grit::kE4M3, 0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(dec_bits(grit::kE4M3, 0x01), 0x3b000000u);
  EXPECT_EQ(dec_bits(grit::kE4M3, 0x81), 0xbb000000u);
  EXPECT_EQ(dec_bits(grit::kE4M3, 0x07), 0x3c600000u);  // largest subnormal 7*2^-9
  EXPECT_EQ(dec_bits(grit::kE4M3, 0x08), 0x3c800000u);  // smallest normal 2^-6
  EXPECT_EQ(grit::fmt_decode(grit::kE4M3, 0x7E), 448.0f);
  EXPECT_EQ(grit::fmt_decode(grit::kE4M3, 0xFE), -448.0f);
  EXPECT_EQ(grit::fmt_decode(grit::kE4M3, 0x77), 240.0f);
  // One NaN per sign (nan_enc=1); both canonical. No infinity exists.
  EXPECT_EQ(dec_bits(grit::kE4M3, 0x7F), 0x7FC00000u);
  EXPECT_EQ(dec_bits(grit::kE4M3, 0xFF), 0x7FC00000u);
  for (uint32_t c = 0; c < 256; ++c)
    if (c != 0x7F && c != 0xFF) {
      EXPECT_TRUE(std::isfinite(grit::fmt_decode(grit::kE4M3, c))) << c;
    }
}

TEST(FormatDecode, E8M0Edges) {
  EXPECT_EQ(dec_bits(grit::kE8M0, 0), 0x00400000u);  // 2^-127: a binary32 subnormal
  EXPECT_EQ(grit::fmt_decode(grit::kE8M0, 0), std::ldexp(1.0f, -127));
  EXPECT_EQ(dec_bits(grit::kE8M0, 1), 0x00800000u);
  EXPECT_EQ(grit::fmt_decode(grit::kE8M0, 126), 0.5f);
  EXPECT_EQ(grit::fmt_decode(grit::kE8M0, 127), 1.0f);
  EXPECT_EQ(grit::fmt_decode(grit::kE8M0, 128), 2.0f);
  EXPECT_EQ(dec_bits(grit::kE8M0, 254), 0x7f000000u);  // 2^127, the max
  EXPECT_EQ(dec_bits(grit::kE8M0, 255), 0x7FC00000u);  // NaN
  // No zero, no sign: every non-NaN code is a positive power of two.
  for (uint32_t c = 0; c < 255; ++c) EXPECT_GT(grit::fmt_decode(grit::kE8M0, c), 0.0f) << c;
}

TEST(FormatDecode, Binary16Edges) {
  EXPECT_EQ(dec_bits(grit::kBinary16, 0x0000), 0x00000000u);
  EXPECT_EQ(dec_bits(grit::kBinary16, 0x8000), 0x80000000u);
  EXPECT_EQ(grit::fmt_decode(grit::kBinary16, 0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(dec_bits(grit::kBinary16, 0x0001), 0x33800000u);
  EXPECT_EQ(dec_bits(grit::kBinary16, 0x03FF), 0x387fc000u);  // largest subnormal
  EXPECT_EQ(dec_bits(grit::kBinary16, 0x0400), 0x38800000u);  // smallest normal 2^-14
  EXPECT_EQ(grit::fmt_decode(grit::kBinary16, 0x3C00), 1.0f);
  EXPECT_EQ(grit::fmt_decode(grit::kBinary16, 0x7BFF), 65504.0f);
  EXPECT_EQ(dec_bits(grit::kBinary16, 0x7C00), 0x7f800000u);  // +Inf
  EXPECT_EQ(dec_bits(grit::kBinary16, 0xFC00), 0xff800000u);  // -Inf
  // Every NaN pattern, signalling or negative, comes back canonical.
  for (uint32_t c : {0x7E00u, 0x7C01u, 0x7FFFu, 0xFE00u, 0xFFFFu, 0xFC01u})
    EXPECT_EQ(dec_bits(grit::kBinary16, c), 0x7FC00000u) << std::hex << c;
  EXPECT_EQ(raw_bits(grit::f16_value(0x7E00)), 0x7FC00000u);
}

TEST(FormatDecode, Binary32Edges) {
  for (uint32_t c : {0x00000000u, 0x80000000u, 0x00000001u, 0x3f800000u, 0x7f7fffffu,
                     0x7f800000u, 0xff800000u})
    EXPECT_EQ(dec_bits(grit::kBinary32, c), c) << std::hex << c;
  for (uint32_t c : {0x7f800001u, 0x7fc00000u, 0x7fffffffu, 0xffc00000u, 0xff800001u})
    EXPECT_EQ(dec_bits(grit::kBinary32, c), 0x7FC00000u) << std::hex << c;
}

TEST(FormatDecode, Integers) {
  EXPECT_EQ(grit::fmt_decode(grit::kU2, 0), 0.0f);
  EXPECT_EQ(grit::fmt_decode(grit::kU2, 3), 3.0f);
  EXPECT_EQ(grit::fmt_decode(grit::kU4, 15), 15.0f);
  EXPECT_EQ(grit::fmt_decode(grit::kU6, 63), 63.0f);
  EXPECT_EQ(grit::fmt_decode(grit::kU8, 255), 255.0f);
  EXPECT_EQ(grit::fmt_decode(grit::kS4, 7), 7.0f);
  EXPECT_EQ(grit::fmt_decode(grit::kS4, 8), -8.0f);
  EXPECT_EQ(grit::fmt_decode(grit::kS4, 15), -1.0f);
  EXPECT_EQ(grit::fmt_decode(grit::kS8, 127), 127.0f);
  EXPECT_EQ(grit::fmt_decode(grit::kS8, 128), -128.0f);  // decodable, never encoded
  EXPECT_EQ(grit::fmt_decode(grit::kS8, 129), -127.0f);
  EXPECT_EQ(grit::fmt_decode(grit::kS8, 255), -1.0f);
  // Integers have no negative zero.
  EXPECT_EQ(dec_bits(grit::kS8, 0), 0x00000000u);
  // Codes are masked to the width.
  EXPECT_EQ(grit::fmt_decode(grit::kU4, 0x13), 3.0f);
}

// fnv1a64 over u32le(f32_bits(decode(c))) for every code: the oracle's value.
uint64_t decode_table_hash(grit::fmt_t w) {
  const uint32_t n = 1u << grit::fmt_width(w);
  std::vector<uint8_t> buf;
  for (uint32_t c = 0; c < n; ++c) {
    const uint32_t b = grit::f32_bits(grit::fmt_decode(w, c));
    for (int k = 0; k < 4; ++k) buf.push_back(static_cast<uint8_t>(b >> (8 * k)));
  }
  return grit::fnv1a64(buf.data(), buf.size());
}

TEST(FormatDecode, EveryCodeOfEveryNarrowFormatMatchesTheOracle) {
  EXPECT_EQ(decode_table_hash(grit::kE2M1), 0x2403bb76b85dfea5ull);
  EXPECT_EQ(decode_table_hash(grit::kE4M3), 0xdad1d9c50f749ca5ull);
  EXPECT_EQ(decode_table_hash(grit::kE8M0), 0x6d2c8b41c3f0e5a5ull);
  EXPECT_EQ(decode_table_hash(grit::kBinary16), 0x1f87f165810ea7c5ull);
  EXPECT_EQ(decode_table_hash(grit::kU2), 0x62552b9ea71e5908ull);
  EXPECT_EQ(decode_table_hash(grit::kU4), 0x13fdf84d829c1708ull);
  EXPECT_EQ(decode_table_hash(grit::kU6), 0x335b076c7de57d88ull);
  EXPECT_EQ(decode_table_hash(grit::kU8), 0xf977be1bf8be6a08ull);
  EXPECT_EQ(decode_table_hash(grit::kS4), 0x610228d3d2cf9042ull);
  EXPECT_EQ(decode_table_hash(grit::kS8), 0xb5c3dd83e4fb0b3cull);
}

TEST(FormatDecode, NanCodes) {
  uint32_t c = 0;
  ASSERT_TRUE(grit::fmt_nan_code(grit::kE4M3, &c));
  EXPECT_EQ(c, 0x7Fu);
  ASSERT_TRUE(grit::fmt_nan_code(grit::kE8M0, &c));
  EXPECT_EQ(c, 0xFFu);
  ASSERT_TRUE(grit::fmt_nan_code(grit::kBinary16, &c));
  EXPECT_EQ(c, 0x7E00u);
  ASSERT_TRUE(grit::fmt_nan_code(grit::kBinary32, &c));
  EXPECT_EQ(c, 0x7FC00000u);
  EXPECT_FALSE(grit::fmt_nan_code(grit::kE2M1, &c));
  EXPECT_FALSE(grit::fmt_nan_code(grit::kS8, &c));
  EXPECT_FALSE(grit::fmt_nan_code(grit::kU4, &c));
}

TEST(FormatDecode, CanonicalNanHelpers) {
  EXPECT_EQ(raw_bits(grit::canonical_nan()), 0x7FC00000u);
  EXPECT_EQ(grit::f32_bits(gt::from_raw(0xFFC00001u)), 0x7FC00000u);
  EXPECT_EQ(grit::f32_bits(-0.0f), 0x80000000u);
  EXPECT_EQ(raw_bits(grit::f32_from_bits(0x7F800001u)), 0x7FC00000u);
  EXPECT_EQ(raw_bits(grit::f32_from_bits(0x80000001u)), 0x80000001u);
}

// ---------------------------------------------------------------- ladders

TEST(FormatLadder, E2M1) {
  const grit::Ladder l = grit::make_ladder(grit::kE2M1);
  const std::vector<double> mags = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  const std::vector<uint32_t> codes = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(l.mags, mags);
  EXPECT_EQ(l.codes, codes);
  EXPECT_EQ(grit::fmt_maxnorm(grit::kE2M1), 6.0);
}

TEST(FormatLadder, E4M3AndE8M0) {
  const grit::Ladder e4 = grit::make_ladder(grit::kE4M3);
  EXPECT_EQ(e4.mags.size(), 127u);  // codes 0..0x7E; 0x7F is NaN
  EXPECT_EQ(e4.codes.back(), 0x7Eu);
  EXPECT_EQ(grit::fmt_maxnorm(grit::kE4M3), 448.0);
  const grit::Ladder e8 = grit::make_ladder(grit::kE8M0);
  EXPECT_EQ(e8.mags.size(), 255u);
  EXPECT_EQ(e8.mags.front(), std::ldexp(1.0, -127));
  EXPECT_EQ(grit::fmt_maxnorm(grit::kE8M0), std::ldexp(1.0, 127));
  for (size_t i = 1; i < e4.mags.size(); ++i) EXPECT_LT(e4.mags[i - 1], e4.mags[i]);
  EXPECT_TRUE(grit::make_ladder(grit::kBinary16).mags.empty());  // width > 8
}

// ---------------------------------------------------------------- encode

TEST(FormatEncode, E2M1SaturationAndTiesToEven) {
  EXPECT_EQ(enc(grit::kE2M1, 100.0f), 0x7u);
  EXPECT_EQ(enc(grit::kE2M1, -100.0f), 0xFu);
  EXPECT_EQ(enc(grit::kE2M1, 6.0f), 0x7u);
  EXPECT_EQ(enc(grit::kE2M1, 7.0f), 0x7u);
  EXPECT_EQ(enc(grit::kE2M1, kInf), 0x7u);   // satfinite clamps infinities too
  EXPECT_EQ(enc(grit::kE2M1, -kInf), 0xFu);
  EXPECT_EQ(enc(grit::kE2M1, 2.5f), 0x4u);   // 2.5 -> 2.0 (even code)
  EXPECT_EQ(enc(grit::kE2M1, 3.5f), 0x6u);   // 3.5 -> 4.0
  EXPECT_EQ(enc(grit::kE2M1, 5.0f), 0x6u);   // 5.0 -> 4.0
  EXPECT_EQ(enc(grit::kE2M1, 0.25f), 0x0u);  // 0.25 -> 0
  EXPECT_EQ(enc(grit::kE2M1, 0.75f), 0x2u);  // 0.75 -> 1.0
  EXPECT_EQ(enc(grit::kE2M1, 1.25f), 0x2u);  // 1.25 -> 1.0
  EXPECT_EQ(enc(grit::kE2M1, -2.5f), 0xCu);
  EXPECT_EQ(enc(grit::kE2M1, 0.26f), 0x1u);
  EXPECT_EQ(enc(grit::kE2M1, 5.5f), 0x7u);
}

TEST(FormatEncode, E2M1Zeros) {
  EXPECT_EQ(enc(grit::kE2M1, 0.0f), 0x0u);
  EXPECT_EQ(enc(grit::kE2M1, -0.0f), 0x8u);
  EXPECT_EQ(enc(grit::kE2M1, 1e-30f), 0x0u);
  EXPECT_EQ(enc(grit::kE2M1, -1e-30f), 0x8u);  // underflow keeps the sign
}

TEST(FormatEncode, NanIntoFormatWithoutNanIsRefused) {
  uint32_t c = 0;
  grit::Status s = grit::fmt_encode(grit::kE2M1, kNaN, Rounding::kRne, Saturation::kSatFinite, &c);
  EXPECT_EQ(s.code, Error::kBadValue);
  s = grit::fmt_encode(grit::kS8, kNaN, Rounding::kRne, Saturation::kSatFinite, &c);
  EXPECT_EQ(s.code, Error::kBadValue);
  s = grit::fmt_encode(grit::kU4, kNaN, Rounding::kRne, Saturation::kSatFinite, &c);
  EXPECT_EQ(s.code, Error::kBadValue);
}

TEST(FormatEncode, NanIntoFormatsWithNan) {
  EXPECT_EQ(enc(grit::kE4M3, kNaN), 0x7Fu);
  EXPECT_EQ(enc(grit::kE4M3, -kNaN), 0x7Fu);
  EXPECT_EQ(enc(grit::kE8M0, kNaN), 0xFFu);
  EXPECT_EQ(enc(grit::kBinary16, kNaN), 0x7E00u);
  EXPECT_EQ(enc(grit::kBinary32, gt::from_raw(0xFF800001u)), 0x7FC00000u);
}

TEST(FormatEncode, E4M3) {
  EXPECT_EQ(enc(grit::kE4M3, 0.0f), 0x00u);
  EXPECT_EQ(enc(grit::kE4M3, -0.0f), 0x80u);
  EXPECT_EQ(enc(grit::kE4M3, 448.0f), 0x7Eu);
  EXPECT_EQ(enc(grit::kE4M3, 464.0f), 0x7Eu);   // above max: satfinite, never the NaN code
  EXPECT_EQ(enc(grit::kE4M3, 1000.0f), 0x7Eu);
  EXPECT_EQ(enc(grit::kE4M3, kInf), 0x7Eu);
  EXPECT_EQ(enc(grit::kE4M3, -kInf), 0xFEu);
  EXPECT_EQ(enc(grit::kE4M3, std::ldexp(1.0f, -9)), 0x01u);
  EXPECT_EQ(enc(grit::kE4M3, std::ldexp(1.0f, -10)), 0x00u);  // tie to even: 0
  EXPECT_EQ(enc(grit::kE4M3, 3 * std::ldexp(1.0f, -11)), 0x01u);
  EXPECT_EQ(enc(grit::kE4M3, 240.0f), 0x77u);
  EXPECT_EQ(enc(grit::kE4M3, 0.3f), 0x2Au);
  EXPECT_EQ(enc(grit::kE4M3, -0.3f), 0xAAu);
}

TEST(FormatEncode, E8M0) {
  EXPECT_EQ(enc(grit::kE8M0, 1.0f), 0x7Fu);
  EXPECT_EQ(enc(grit::kE8M0, 0.75f), 0x7Eu);  // tie between 0.5 and 1: even code 126
  EXPECT_EQ(enc(grit::kE8M0, 1.5f), 0x80u);   // tie between 1 and 2: even code 128
  EXPECT_EQ(enc(grit::kE8M0, 3.0f), 0x80u);   // tie between 2 and 4: even code 128
  EXPECT_EQ(enc(grit::kE8M0, 0.0f), 0x00u);   // no zero: the smallest power
  EXPECT_EQ(enc(grit::kE8M0, std::ldexp(1.0f, -127)), 0x00u);
  EXPECT_EQ(enc(grit::kE8M0, std::ldexp(1.0f, 127)), 0xFEu);
  EXPECT_EQ(enc(grit::kE8M0, std::numeric_limits<float>::max()), 0xFEu);
}

TEST(FormatEncode, BelowTheSmallestMagnitude) {
  // e8m0 has no zero: anything below 2^-127 is the smallest code, under
  // every rounding mode, and the sign is dropped (unsigned format).
  for (Rounding r : {Rounding::kRne, Rounding::kRna, Rounding::kRtz, Rounding::kRtp, Rounding::kRtn}) {
    for (float x : {0.0f, -0.0f, std::ldexp(1.0f, -128), std::ldexp(1.0f, -149), -1e-45f}) {
      EXPECT_EQ(enc(grit::kE8M0, x, r), 0x00u) << x << " rounding " << static_cast<int>(r);
    }
  }
  EXPECT_EQ(enc(grit::kE8M0, std::ldexp(1.0f, -127), Rounding::kRtz), 0x00u);
  EXPECT_EQ(enc(grit::kE8M0, std::ldexp(1.5f, -127), Rounding::kRtp), 0x01u);
}

TEST(FormatEncode, SignedIntegersSatfiniteIsSymmetric) {
  EXPECT_EQ(enc(grit::kS8, 1000.0f), 0x7Fu);
  EXPECT_EQ(enc(grit::kS8, -1000.0f), 0x81u);  // -127, never the asymmetric 0x80
  EXPECT_EQ(enc(grit::kS8, -128.0f), 0x81u);
  EXPECT_EQ(enc(grit::kS8, -kInf), 0x81u);
  EXPECT_EQ(enc(grit::kS8, kInf), 0x7Fu);
  EXPECT_EQ(enc(grit::kS8, 127.5f), 0x7Fu);
  EXPECT_EQ(enc(grit::kS8, 126.5f), 0x7Eu);  // ties to even
  EXPECT_EQ(enc(grit::kS8, 2.5f), 0x02u);
  EXPECT_EQ(enc(grit::kS8, -2.5f), 0xFEu);
  EXPECT_EQ(enc(grit::kS8, 0.5f), 0x00u);
  EXPECT_EQ(enc(grit::kS8, 1.5f), 0x02u);
  EXPECT_EQ(enc(grit::kS8, -0.0f), 0x00u);  // integers have no negative zero
  // satmax reaches the asymmetric minimum.
  EXPECT_EQ(enc(grit::kS8, -1000.0f, Rounding::kRne, Saturation::kSatMax), 0x80u);
  EXPECT_EQ(enc(grit::kS8, -kInf, Rounding::kRne, Saturation::kSatMax), 0x80u);
  EXPECT_EQ(enc(grit::kS4, 100.0f), 0x7u);
  EXPECT_EQ(enc(grit::kS4, -9.0f), 0x9u);  // -7
  EXPECT_EQ(enc(grit::kS4, -3.0f), 0xDu);
  EXPECT_EQ(enc(grit::kS4, 8.5f), 0x7u);
}

TEST(FormatEncode, UnsignedIntegersClampAtZero) {
  EXPECT_EQ(enc(grit::kU2, -1.0f), 0x0u);
  EXPECT_EQ(enc(grit::kU2, 3.5f), 0x3u);
  EXPECT_EQ(enc(grit::kU2, 2.5f), 0x2u);
  EXPECT_EQ(enc(grit::kU4, 15.7f), 0xFu);
  EXPECT_EQ(enc(grit::kU6, 63.4f), 0x3Fu);
  EXPECT_EQ(enc(grit::kU6, 70.0f), 0x3Fu);
  EXPECT_EQ(enc(grit::kU6, 3.5f), 0x4u);
  EXPECT_EQ(enc(grit::kU8, 70.0f), 0x46u);
  EXPECT_EQ(enc(grit::kU8, 1000.0f), 0xFFu);
  EXPECT_EQ(enc(grit::kU8, -kInf), 0x00u);
}

TEST(FormatEncode, DirectedRounding) {
  // rtz truncates the magnitude on the ladder; the sign rides along.
  EXPECT_EQ(enc(grit::kE2M1, 5.9f, Rounding::kRtz), 0x6u);   // 4.0
  EXPECT_EQ(enc(grit::kE2M1, -5.9f, Rounding::kRtz), 0xEu);  // -4.0
  EXPECT_EQ(enc(grit::kE2M1, 0.49f, Rounding::kRtz), 0x0u);
  EXPECT_EQ(enc(grit::kE2M1, 2.99f, Rounding::kRtz), 0x4u);
  EXPECT_EQ(enc(grit::kE2M1, 3.0f, Rounding::kRtz), 0x5u);   // exact stays exact
  EXPECT_EQ(enc(grit::kE2M1, 100.0f, Rounding::kRtz), 0x7u); // saturation still applies
  EXPECT_EQ(enc(grit::kE4M3, 447.0f, Rounding::kRtz), 0x7Du);  // 416
  EXPECT_EQ(enc(grit::kS8, -2.9f, Rounding::kRtz), 0xFEu);     // -2
  // rna: ties away from zero.
  EXPECT_EQ(enc(grit::kE2M1, 2.5f, Rounding::kRna), 0x5u);
  EXPECT_EQ(enc(grit::kE2M1, -0.25f, Rounding::kRna), 0x9u);
  EXPECT_EQ(enc(grit::kS8, 2.5f, Rounding::kRna), 0x03u);
  // rtp / rtn: toward +inf / -inf.
  EXPECT_EQ(enc(grit::kE2M1, 2.1f, Rounding::kRtp), 0x5u);   // 3.0
  EXPECT_EQ(enc(grit::kE2M1, -2.1f, Rounding::kRtp), 0xCu);  // -2.0
  EXPECT_EQ(enc(grit::kE2M1, 2.1f, Rounding::kRtn), 0x4u);   // 2.0
  EXPECT_EQ(enc(grit::kE2M1, -2.1f, Rounding::kRtn), 0xDu);  // -3.0
  EXPECT_EQ(enc(grit::kE2M1, 2.0f, Rounding::kRtp), 0x4u);
  EXPECT_EQ(enc(grit::kS8, 2.1f, Rounding::kRtp), 0x03u);
  EXPECT_EQ(enc(grit::kS8, -2.1f, Rounding::kRtn), 0xFDu);
}

TEST(FormatEncode, OvfinfIntoNarrowFormatWithInfinityIsRefused) {
  // An IEEE-style 8-bit format with infinities (not registered): overflow
  // under ovfinf would need an infinity code the ladder does not model.
  const grit::fmt_t e4m3_ieee = grit::fmt_pack(8, 4, 1, grit::kNanAll, 1);
  uint32_t c = 0;
  grit::Status s = grit::fmt_encode(e4m3_ieee, 1e6f, Rounding::kRne, Saturation::kOvfInf, &c);
  EXPECT_EQ(s.code, Error::kBadValue);
  s = grit::fmt_encode(e4m3_ieee, 1e6f, Rounding::kRne, Saturation::kSatFinite, &c);
  EXPECT_TRUE(s.ok());
  // Formats without infinities clamp even under ovfinf.
  EXPECT_EQ(enc(grit::kE2M1, 100.0f, Rounding::kRne, Saturation::kOvfInf), 0x7u);
  EXPECT_EQ(enc(grit::kE4M3, 1000.0f, Rounding::kRne, Saturation::kOvfInf), 0x7Eu);
}

TEST(FormatEncode, DecodeOfEncodeIsIdentityOnTheLadder) {
  for (grit::fmt_t w : {grit::kE2M1, grit::kE4M3, grit::kE8M0, grit::kS4, grit::kS8, grit::kU2,
                        grit::kU4, grit::kU6, grit::kU8}) {
    const uint32_t n = 1u << grit::fmt_width(w);
    for (uint32_t c = 0; c < n; ++c) {
      const float v = grit::fmt_decode(w, c);
      if (std::isnan(v)) continue;
      if (w == grit::kS8 && c == 0x80) continue;  // -128 saturates to -127
      if (w == grit::kS4 && c == 0x8) continue;
      EXPECT_EQ(enc(w, v), c) << grit::format_name(w) << " code " << c;
    }
  }
}

// The oracle's input set: every binary16 value, then m*2^k (m in 1, 1.25,
// 1.5, 1.75; k in -149..127; both signs), then +inf, -inf, FLT_MAX, all as
// binary32. Codes hashed as u32le, 0xFFFFFFFF where the encode is refused.
std::vector<float> encode_inputs() {
  std::vector<float> in;
  for (uint32_t h = 0; h < 65536; ++h) in.push_back(grit::f16_value(static_cast<uint16_t>(h)));
  for (int k = -149; k < 128; ++k) {
    for (double m : {1.0, 1.25, 1.5, 1.75}) {
      const double v = std::ldexp(m, k);
      if (v < 3.4e38) {
        in.push_back(static_cast<float>(v));
        in.push_back(static_cast<float>(-v));
      }
    }
  }
  in.push_back(kInf);
  in.push_back(-kInf);
  in.push_back(std::numeric_limits<float>::max());
  return in;
}

uint64_t hash_u32s(const std::vector<uint32_t>& v) {
  std::vector<uint8_t> buf;
  for (uint32_t b : v)
    for (int k = 0; k < 4; ++k) buf.push_back(static_cast<uint8_t>(b >> (8 * k)));
  return grit::fnv1a64(buf.data(), buf.size());
}

TEST(FormatEncode, SweepMatchesTheOracleRne) {
  const std::vector<float> in = encode_inputs();
  ASSERT_EQ(in.size(), 67755u);
  std::vector<uint32_t> in_bits;
  for (float x : in) in_bits.push_back(grit::f32_bits(x));
  ASSERT_EQ(hash_u32s(in_bits), 0xc807d1a0a4fc3d51ull);  // same inputs as the oracle

  const struct { grit::fmt_t w; uint64_t want; } cases[] = {
      {grit::kE2M1, 0x07de5e22beaf7722ull},     {grit::kE4M3, 0x4c6f8966b1fccd0bull},
      {grit::kE8M0, 0xb4fe6be676594b5bull},     {grit::kBinary16, 0xf0a9f249afe79447ull},
      {grit::kBinary32, 0xc807d1a0a4fc3d51ull}, {grit::kU2, 0x64d8046f659abd9full},
      {grit::kU4, 0x8c884a246cd98474ull},       {grit::kU6, 0x4f427bddf91116a4ull},
      {grit::kU8, 0x28fc04b34b5f9644ull},       {grit::kS4, 0x8f46d997669a063eull},
      {grit::kS8, 0xffc97ea862b42236ull},
  };
  for (const auto& c : cases) {
    std::vector<uint32_t> out;
    for (float x : in) {
      uint32_t code = 0;
      const grit::Status s = grit::fmt_encode(c.w, x, Rounding::kRne, Saturation::kSatFinite, &code);
      out.push_back(s.ok() ? code : 0xFFFFFFFFu);
    }
    EXPECT_EQ(hash_u32s(out), c.want) << grit::format_name(c.w);
  }
}

// ---------------------------------------------------------------- binary16

TEST(Binary16, BitsOf) {
  EXPECT_EQ(grit::f16_bits_of(kInf), 0x7C00);
  EXPECT_EQ(grit::f16_bits_of(-kInf), 0xFC00);
  EXPECT_EQ(grit::f16_bits_of(kInf, false), 0x7C00);
  EXPECT_EQ(grit::f16_bits_of(65504.0f), 0x7BFF);
  EXPECT_EQ(grit::f16_bits_of(65519.0f), 0x7BFF);          // below the rounding midpoint
  EXPECT_EQ(grit::f16_bits_of(65519.0f, false), 0x7BFF);
  EXPECT_EQ(grit::f16_bits_of(65520.0f), 0x7BFF);          // satfinite
  EXPECT_EQ(grit::f16_bits_of(65520.0f, false), 0x7C00);   // overflow to inf
  EXPECT_EQ(grit::f16_bits_of(-65520.0f), 0xFBFF);
  EXPECT_EQ(grit::f16_bits_of(-65520.0f, false), 0xFC00);
  EXPECT_EQ(grit::f16_bits_of(1e9f), 0x7BFF);
  EXPECT_EQ(grit::f16_bits_of(1e9f, false), 0x7C00);
  EXPECT_EQ(grit::f16_bits_of(kNaN), 0x7E00);
  EXPECT_EQ(grit::f16_bits_of(gt::from_raw(0xFF800001u)), 0x7E00);
  EXPECT_EQ(grit::f16_bits_of(0.0f), 0x0000);
  EXPECT_EQ(grit::f16_bits_of(-0.0f), 0x8000);
  EXPECT_EQ(grit::f16_bits_of(1.0f), 0x3C00);
  EXPECT_EQ(grit::f16_bits_of(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie -> even
  EXPECT_EQ(grit::f16_bits_of(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie -> even
}

TEST(Binary16, SubnormalRounding) {
  EXPECT_EQ(grit::f16_bits_of(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(grit::f16_bits_of(std::ldexp(1.0f, -25)), 0x0000);        // tie -> even (0)
  EXPECT_EQ(grit::f16_bits_of(1.5f * std::ldexp(1.0f, -25)), 0x0001);
  EXPECT_EQ(grit::f16_bits_of(3 * std::ldexp(1.0f, -25)), 0x0002);    // 1.5 quanta -> 2 (even)
  EXPECT_EQ(grit::f16_bits_of(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(grit::f16_bits_of(-std::ldexp(1.0f, -26)), 0x8000);       // underflow keeps the sign
  EXPECT_EQ(grit::f16_bits_of(std::ldexp(1.0f, -14)), 0x0400);
  // Just below the smallest normal rounds up into it.
  EXPECT_EQ(grit::f16_bits_of(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -25)), 0x0400);
  EXPECT_EQ(grit::f16_bits_of(1023 * std::ldexp(1.0f, -24)), 0x03FF);
}

TEST(Binary16, RoundTripEveryFiniteCode) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t b = static_cast<uint16_t>(h);
    const float v = grit::f16_value(b);
    if (std::isnan(v)) continue;
    EXPECT_EQ(grit::f16_bits_of(v), b) << std::hex << h;
    EXPECT_EQ(grit::f16_bits_of(v, false), b) << std::hex << h;
  }
}

}  // namespace
