// The packed_linear law (grit/linear_law.h) and the factored decode it runs
// on: the factors compose to the contract's decode value for value, only
// where the grade and group allow it, and the law's chains, FMAs and NaN
// rule are the ones the header states.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "grit/grit.h"
#include "test_util.h"

namespace {

using grit::Error;

// Grades with every decode shape: plain, level-1, zps=l1, sparse, zps=shared
// (zpc=minus1, pad8, msb), signed elements under a two-level ratio scale.
const char* const kGrades[] = {
    "MXFP4", "NVF4", "Q4KS", "I8S24", "MXFP4_RNE", "NVF4_RTZ",
    "grit1(e=u4,k0=4,s0=binary16,zp=u4,zpc=minus1,esr=affine)",
    "grit1(e=u4,k0=4,s0=binary16,zp=u4,zpc=minus1,po=msb,ct=pad8,esr=affine)",
    "grit1(e=u4,k0=2,s0=binary16,zp=u4,esr=affine)",
    "grit1(e=s4,k0=2,s0=e8m0,k1=0,s1=binary32,esr=ratio)",
    "grit1(e=e4m3,k0=32,s0=e8m0,esr=exp2floormaxabs)",
};

grit::Grade grade_of(const char* text) {
  const grit::ReferenceGrade* r = grit::reference_grade(text);
  return r != nullptr ? *r->grade : gt::parse_ok(text);
}

// The smallest element count of the form 2^j * 64 the grade accepts (whole
// groups, quads and level-1 groups), with its plane sizes.
uint64_t accepted_numel(const grit::Grade& g, uint64_t bytes[4]) {
  for (uint64_t n = 512; n <= (1u << 20); n *= 2)
    if (grit::grade_plane_bytes(g, n, bytes).ok()) return n;
  ADD_FAILURE() << "no element count accepted by " << g.canonical;
  return 0;
}

// Random bytes in every plane (NaN and infinite scales occur); sparse
// metadata names two distinct positions per quad.
gt::Planes random_planes(const grit::Grade& g, const uint64_t bytes[4], uint32_t seed) {
  std::mt19937 rng(seed);
  gt::Planes pl;
  for (int i = 0; i < 4; ++i) {
    pl.p[i].resize(bytes[i]);
    for (auto& b : pl.p[i]) b = static_cast<uint8_t>(rng());
  }
  if (g.has_sp) {
    for (auto& b : pl.p[3]) {
      uint8_t v = 0;
      for (int q = 0; q < 2; ++q) {
        const uint32_t a = rng() % 4, c = (a + 1 + rng() % 3) % 4;
        v |= static_cast<uint8_t>((a | (c << 2)) << (4 * q));
      }
      b = v;
    }
  }
  return pl;
}

TEST(LinearLaw, FactorsComposeToTheDecode) {
  for (const char* text : kGrades) {
    SCOPED_TRACE(text);
    const grit::Grade g = grade_of(text);
    float maxabs;
    const bool factors = grit::law_factors_grade(g, &maxabs);
    uint64_t bytes[4];
    const uint64_t n = accepted_numel(g, bytes);
    for (uint32_t seed = 1; seed <= 3; ++seed) {
      gt::Planes pl = random_planes(g, bytes, seed);
      std::vector<float> w(n), e(n), S(n / g.k0);
      ASSERT_TRUE(grit::decode(g, pl.planes(), n, w.data()).ok());
      uint64_t cur = 0;
      const grit::Status st = grit::decode_factors_range(g, pl.planes(), n, 0, n, &cur, e.data(), S.data());
      ASSERT_TRUE(st.ok()) << st.message;
      size_t factored = 0;
      for (uint64_t grp = 0; grp < n / g.k0; ++grp) {
        if (gt::raw_bits(S[grp]) != gt::raw_bits(1.0f)) {
          EXPECT_TRUE(factors) << "group " << grp << " factored under a grade the law does not factor";
          EXPECT_TRUE(grit::law_group_factored(S[grp], maxabs)) << grp;
          ++factored;
        }
      }
      if (factors) {
        EXPECT_GT(factored, 0u);
      }
      // Whatever the form, f32(S*e) is the decode's value (NaN where it is NaN).
      for (uint64_t i = 0; i < n; ++i) {
        const float c = S[i / g.k0] * e[i];
        if (std::isnan(w[i]))
          EXPECT_TRUE(std::isnan(c)) << i;
        else
          EXPECT_EQ(c, w[i]) << i << ": S " << S[i / g.k0] << " e " << e[i];
      }
      // Tile by tile (whole groups, the sparse cursor carried) equals whole.
      const uint64_t step = 2 * std::max<uint64_t>(g.k0, g.has_sp ? g.sp_m : 1);
      std::vector<float> e2(n), S2(n / g.k0);
      cur = 0;
      for (uint64_t b = 0; b < n; b += step) {
        const uint64_t end = std::min(n, b + step);
        ASSERT_TRUE(
            grit::decode_factors_range(g, pl.planes(), n, b, end, &cur, e2.data() + b, S2.data() + b / g.k0)
                .ok());
      }
      for (uint64_t i = 0; i < n; ++i) EXPECT_EQ(gt::raw_bits(e2[i]), gt::raw_bits(e[i])) << i;
      for (uint64_t i = 0; i < n / g.k0; ++i) EXPECT_EQ(gt::raw_bits(S2[i]), gt::raw_bits(S[i])) << i;
    }
  }
}

TEST(LinearLaw, WhichGradesAndGroupsFactor) {
  float maxabs;
  EXPECT_TRUE(grit::law_factors_grade(gt::ref("MXFP4"), &maxabs));
  EXPECT_EQ(maxabs, 6.0f);
  EXPECT_TRUE(grit::law_factors_grade(gt::ref("I8S24"), &maxabs));
  EXPECT_EQ(maxabs, 128.0f);
  EXPECT_FALSE(grit::law_factors_grade(gt::ref("NVF4"), &maxabs));  // level-1 scale: S*e rounds
  EXPECT_FALSE(grit::law_factors_grade(gt::ref("Q4KS"), &maxabs));  // zero points
  EXPECT_TRUE(grit::law_factors_grade(gt::parse_ok("grit1(e=e4m3,k0=32,s0=e8m0,esr=exp2floormaxabs)"), &maxabs));
  EXPECT_EQ(maxabs, 448.0f);
  // A group whose S * max|e| overflows is not factored: MXFP4 scale 2^127.
  const grit::Grade& g = gt::ref("MXFP4");
  gt::Planes pl(std::vector<uint8_t>(32, 0x77), std::vector<uint8_t>{127, 254}, {}, {});  // e = 6, scales 1, 2^127
  std::vector<float> e(64), S(2), w(64);
  uint64_t cur = 0;
  ASSERT_TRUE(grit::decode_factors_range(g, pl.planes(), 64, 0, 64, &cur, e.data(), S.data()).ok());
  ASSERT_TRUE(grit::decode(g, pl.planes(), 64, w.data()).ok());
  EXPECT_EQ(S[0], 1.0f);  // 2^0: factored, and its scale is 1 itself
  EXPECT_EQ(e[0], 6.0f);
  EXPECT_EQ(S[1], 1.0f);  // unfactored: e is the decoded weight, infinite
  EXPECT_TRUE(std::isinf(e[32]) && std::isinf(w[32]));
}

TEST(LinearLaw, FactoredRangesAreChecked) {
  const grit::Grade& g = gt::ref("MXFP4");
  uint64_t bytes[4];
  const uint64_t n = accepted_numel(g, bytes);
  gt::Planes pl = random_planes(g, bytes, 9);
  std::vector<float> e(n), S(n);
  uint64_t cur = 0;
  const grit::Status split = grit::decode_factors_range(g, pl.planes(), n, 16, 48, &cur, e.data(), S.data());
  EXPECT_EQ(split.code, Error::kOutOfRange);
  EXPECT_NE(split.message.find("k0=32"), std::string::npos) << split.message;
  EXPECT_EQ(grit::decode_factors_range(g, pl.planes(), n, 0, n + 32, &cur, e.data(), S.data()).code,
            Error::kOutOfRange);
  pl.p[1].pop_back();  // a short scale plane
  const grit::Status shortp = grit::decode_factors_range(g, pl.planes(), n, 0, n, &cur, e.data(), S.data());
  EXPECT_EQ(shortp.code, Error::kBadLength);
  EXPECT_NE(shortp.message.find("scale0"), std::string::npos) << shortp.message;
}

TEST(LinearLaw, OneAscendingChainPerGroup) {
  // x = [2^24, 1, 1, 1, -2^24, 1, 1, 1], e = 1. In one group of 8 the chain
  // runs in ascending columns: 2^24 + 1 rounds back to 2^24 three times,
  // then -2^24 cancels it and three ones remain: 3 (four chains, column
  // mod 4, would have given 6).
  const float x[8] = {16777216.0f, 1, 1, 1, -16777216.0f, 1, 1, 1};
  const float e[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  EXPECT_EQ(grit::law_block_dot(e, x, 8), 3.0f);
  // Two groups of 4 (S = 1): each chain starts from +0.0 and the fold adds
  // 2^24 and -2^24 + 3 = -16777213 (exact): 3 again, by another path.
  const float S[2] = {1.0f, 1.0f};
  EXPECT_EQ(grit::law_block_dot(e, x, 4), 16777216.0f);
  EXPECT_EQ(grit::law_block_dot(e + 4, x + 4, 4), -16777213.0f);
  EXPECT_EQ(grit::law_dot(e, S, x, 8, 4), 3.0f);
  // A group of 2 splits the first four columns into two chains: 2^24 + 1
  // rounds to 2^24, the next group gives 2, the fold 2^24 + 2 (exact).
  const float S4[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  EXPECT_EQ(grit::law_dot(e, S4, x, 4, 2), 16777218.0f);
}

TEST(LinearLaw, EachProductIsExactInsideItsFma) {
  // The chain gets fma(1, -1, 0) = -1, then three zeros, then fma(a, a, -1) with a = 1 + 2^-12:
  // a*a = 1 + 2^-11 + 2^-24 exactly, so the chain holds 2^-11 + 2^-24;
  // a product rounded first (a tie at 2^-24, to even) would leave 2^-11.
  const float a = 1.0f + std::ldexp(1.0f, -12);
  const float e[5] = {1, 0, 0, 0, a}, x[5] = {-1, 0, 0, 0, a};
  EXPECT_EQ(grit::law_block_dot(e, x, 5), std::ldexp(1.0f, -11) + std::ldexp(1.0f, -24));
  const float rounded = a * a;
  EXPECT_EQ(rounded - 1.0f, std::ldexp(1.0f, -11));
}

TEST(LinearLaw, ScaleOncePerGroup) {
  // Two groups of 4: S = 2, 0.25; x = 1 everywhere: 2 * 10 + 0.25 * 32 = 28.
  const float e[8] = {1, 2, 3, 4, 8, 8, 8, 8};
  const float S[2] = {2.0f, 0.25f}, x[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  EXPECT_EQ(grit::law_dot(e, S, x, 8, 4), 28.0f);
  const float bias = -2.0f;
  EXPECT_EQ(grit::law_finish(28.0f, &bias), 26.0f);
}

TEST(LinearLaw, NanAnywhereGivesTheCanonicalNan) {
  const float e[4] = {1, 2, 3, 4}, x[4] = {1, 1, 1, 1};
  const float nan_payload = gt::from_raw(0xFFC01234u);
  const float S_nan[1] = {nan_payload}, S[1] = {1.0f};
  EXPECT_EQ(gt::raw_bits(grit::law_finish(grit::law_dot(e, S_nan, x, 4, 4), nullptr)), 0x7FC00000u);
  const float en[4] = {1, nan_payload, 3, 4};
  EXPECT_EQ(gt::raw_bits(grit::law_finish(grit::law_dot(en, S, x, 4, 4), nullptr)), 0x7FC00000u);
  const float xn[4] = {1, nan_payload, 1, 1};
  EXPECT_EQ(gt::raw_bits(grit::law_finish(grit::law_dot(e, S, xn, 4, 4), nullptr)), 0x7FC00000u);
  // An infinite activation against a zero element is NaN too (0 * inf).
  const float ez[4] = {0, 2, 3, 4}, xi[4] = {INFINITY, 1, 1, 1};
  EXPECT_TRUE(std::isnan(grit::law_dot(ez, S, xi, 4, 4)));
}

}  // namespace
