// The exact integer mode (csrc/grit/exact_linear.h): its roundings, its
// grade laws and refusals, and whole products against exact arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "grit/decode.h"
#include "grit/encode.h"
#include "grit/exact_linear.h"
#include "grit/grade.h"

namespace ex = grit::exact;

namespace {

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

grit::Grade grade(const char* text) {
  grit::Grade g;
  EXPECT_TRUE(grit::grade_parse(text, &g).ok()) << text;
  return g;
}

}  // namespace

TEST(ExactLinear, FixedToF32IsOneRoundingToNearestEven) {
  // long double holds any |S| < 2^63 exactly; its conversion to float is one
  // correctly rounded step (normal, subnormal and overflow alike).
  std::mt19937_64 rng(7);
  for (int t = 0; t < 200000; ++t) {
    const int sh = static_cast<int>(rng() % 63);
    int64_t S = static_cast<int64_t>(rng() >> (1 + sh));
    if (rng() & 1) S = -S;
    const int G = static_cast<int>(rng() % 400) - 250;
    const float want = static_cast<float>(std::ldexp(static_cast<long double>(S), G));
    const float got = ex::fixed_to_f32(S, G);
    ASSERT_EQ(bits(got), bits(want)) << "S=" << S << " G=" << G;
  }
  // Exact ties: 2^24 + 1 halves to even (down), 2^24 + 3 up.
  EXPECT_EQ(ex::fixed_to_f32((int64_t{1} << 24) + 1, 0), 16777216.0f);
  EXPECT_EQ(ex::fixed_to_f32((int64_t{1} << 24) + 3, 0), 16777220.0f);
  EXPECT_TRUE(std::isinf(ex::fixed_to_f32(1, 128)));
  EXPECT_EQ(bits(ex::fixed_to_f32(1, -149)), 1u);
  EXPECT_EQ(bits(ex::fixed_to_f32(1, -150)), 0u);  // 2^-150 ties to even: zero
  EXPECT_EQ(bits(ex::fixed_to_f32(3, -151)), 1u);  // 0.75 ulp rounds up
}

TEST(ExactLinear, GridRoundingIsHalfToEven) {
  EXPECT_EQ(ex::shift_rhe(5, 1), 2);    // 2.5 -> 2
  EXPECT_EQ(ex::shift_rhe(7, 1), 4);    // 3.5 -> 4
  EXPECT_EQ(ex::shift_rhe(-5, 1), -2);  // -2.5 -> -2
  EXPECT_EQ(ex::shift_rhe(-7, 1), -4);
  EXPECT_EQ(ex::shift_rhe(6, 2), 2);    // 1.5 -> 2
  EXPECT_EQ(ex::shift_rhe(int64_t{1} << 62, 63), 0);  // exactly one half -> 0
  EXPECT_EQ(ex::shift_rhe((int64_t{1} << 62) + 1, 63), 1);
  EXPECT_EQ(ex::shift_rhe(INT64_MAX, 70), 0);
  EXPECT_EQ(ex::to_grid(3, 4, 0), 48);
}

TEST(ExactLinear, PackBlockScaleAndTies) {
  // max|x| = 127: scale 1, codes are x rounded half to even.
  const float x[6] = {127.0f, 0.5f, 1.5f, 2.5f, -2.5f, -127.0f};
  int8_t q[6];
  EXPECT_EQ(ex::pack_block(x, 6, q), 1.0f);
  const int8_t want[6] = {127, 0, 2, 2, -2, -127};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(q[i], want[i]) << i;
  const float z[3] = {0.0f, -0.0f, 0.0f};
  EXPECT_EQ(ex::pack_block(z, 3, q), 1.0f);
  EXPECT_EQ(q[0] | q[1] | q[2], 0);
  // A subnormal maximum whose /127 underflows: the scale is 2^-149.
  float tiny[2];
  const uint32_t b5 = 5, b2 = 2;
  std::memcpy(&tiny[0], &b5, 4);
  std::memcpy(&tiny[1], &b2, 4);
  EXPECT_EQ(bits(ex::pack_block(tiny, 2, q)), 1u);
  EXPECT_EQ(q[0], 5);
  EXPECT_EQ(q[1], 2);
  // The scale is f32(max / 127).
  const float y[2] = {3.0f, -1.0f};
  EXPECT_EQ(ex::pack_block(y, 2, q), 3.0f / 127.0f);
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[1], -42);  // 1 / (3/127) = 42.33...
}

TEST(ExactLinear, PackActivationsRefusesNonFinite) {
  const float x[4] = {1.0f, NAN, 2.0f, 3.0f};
  int8_t q[4];
  float s[2];
  const grit::Status st = ex::pack_activations(x, 1, 4, 2, q, s);
  EXPECT_EQ(st.code, grit::Error::kNonFinite);
  EXPECT_NE(st.message.find("column 1"), std::string::npos) << st.message;
  EXPECT_EQ(ex::pack_activations(x, 1, 4, 3, q, s).code, grit::Error::kOutOfRange);
}

TEST(ExactLinear, LawsOfTheReferenceGrades) {
  ex::Law L;
  ASSERT_TRUE(ex::exact_law(*grit::reference_grade("I8S24")->grade, &L).ok());
  EXPECT_EQ(L.k0, 32);
  EXPECT_EQ(L.cmax, 128);
  EXPECT_EQ(L.qe, 0);
  EXPECT_EQ(L.bd, 20);  // 32*128*128 = 2^19 -> bitlen 20; 20 + 24 + 11 = 55 <= 63
  EXPECT_EQ(L.sp_m, 4);
  ASSERT_TRUE(ex::exact_law(*grit::reference_grade("MXFP4")->grade, &L).ok());
  EXPECT_EQ(L.qe, -1);  // e2m1 values are halves
  EXPECT_EQ(L.cmax, 12);
  EXPECT_EQ(L.code[0x7], 12);   // 6.0
  EXPECT_EQ(L.code[0xF], -12);  // -6.0
  EXPECT_EQ(L.code[0x1], 1);    // 0.5
  ASSERT_TRUE(ex::exact_law(*grit::reference_grade("MXFP4_RNE")->grade, &L).ok());
  for (const char* name : {"Q4KS", "NVF4", "NVF4_RTZ"}) {
    const grit::Status st = ex::exact_law(*grit::reference_grade(name)->grade, &L);
    EXPECT_EQ(st.code, grit::Error::kInexpressible) << name;
    EXPECT_NE(st.message.find("no exact integer law"), std::string::npos) << st.message;
  }
  EXPECT_NE(ex::exact_law(*grit::reference_grade("Q4KS")->grade, &L).message.find("zero point"),
            std::string::npos);
  EXPECT_NE(ex::exact_law(*grit::reference_grade("NVF4")->grade, &L).message.find("second scale level"),
            std::string::npos);
  EXPECT_EQ(ex::exact_law(grade("grit1(e=s8,k0=32,s0=binary32,esr=ratiomaxabs)"), &L).code,
            grit::Error::kInexpressible);
}

TEST(ExactLinear, OverflowBoundRefusesWithTheNumbers) {
  ex::Law L;
  ASSERT_TRUE(ex::exact_law(grade("grit1(e=s8,k0=4096,s0=binary16,esr=ratiomaxabs)"), &L).ok());
  const grit::Status st = ex::exact_law(grade("grit1(e=s8,k0=32768,s0=binary16,esr=ratiomaxabs)"), &L);
  EXPECT_EQ(st.code, grit::Error::kOutOfRange);
  EXPECT_NE(st.message.find("k0*128*max|code| = 32768*128*128"), std::string::npos) << st.message;
  EXPECT_NE(st.message.find("2^65 > 2^63"), std::string::npos) << st.message;
  EXPECT_NE(st.message.find("k0 <= 16383"), std::string::npos) << st.message;
}

namespace {

// The exact real value of one output, in long double: every term here is a
// short integer times powers of two, so the sum is exact and one rounding
// to float is the law's answer whenever no block term needs more than the
// grid's 62 - L bits (true for these small magnitudes).
float exact_reference(const std::vector<int8_t>& a, const std::vector<float>& as,
                      const std::vector<float>& w, int64_t i, int64_t j, int64_t k, int64_t k0) {
  long double acc = 0;
  for (int64_t b = 0; b < k / k0; ++b) {
    long double d = 0;
    for (int64_t t = b * k0; t < (b + 1) * k0; ++t) d += static_cast<long double>(a[i * k + t]) * w[j * k + t];
    acc += d * as[i * (k / k0) + b];
  }
  return static_cast<float>(acc);
}

}  // namespace

TEST(ExactLinear, ProductsMatchExactArithmetic) {
  for (const char* name : {"I8S24", "MXFP4"}) {
    const grit::Grade& g = *grit::reference_grade(name)->grade;
    ex::Law L;
    ASSERT_TRUE(ex::exact_law(g, &L).ok());
    const int64_t m = 3, n = 5, k = 96;
    std::mt19937 rng(11);
    std::normal_distribution<float> nd;
    std::vector<float> wf(n * k), x(m * k);
    for (auto& v : wf) v = nd(rng);
    for (auto& v : x) v = nd(rng);
    grit::EncodedPlanes p;
    ASSERT_TRUE(grit::encode(g, wf.data(), n * k, &p).ok());
    grit::Plane planes[4];
    for (int i = 0; i < 4; ++i) planes[i] = {p.plane[i].data(), p.plane[i].size()};
    std::vector<float> w(n * k);
    ASSERT_TRUE(grit::decode(g, planes, n * k, w.data()).ok());
    std::vector<int8_t> a(m * k);
    std::vector<float> as(m * (k / 32));
    ASSERT_TRUE(ex::pack_activations(x.data(), m, k, 32, a.data(), as.data()).ok());
    std::vector<float> y(m * n);
    ASSERT_TRUE(ex::exact_linear(L, a.data(), as.data(), m, planes[0].data, planes[1].data, planes[3].data,
                                 n, k, nullptr, y.data())
                    .ok());
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        EXPECT_EQ(bits(y[i * n + j]), bits(exact_reference(a, as, w, i, j, k, 32)))
            << name << " (" << i << ", " << j << ")";
  }
}

TEST(ExactLinear, PoisonAndBias) {
  const grit::Grade g = grade("grit1(e=s8,k0=4,s0=binary16,esr=ratiomaxabs)");
  ex::Law L;
  ASSERT_TRUE(ex::exact_law(g, &L).ok());
  const uint8_t data[8] = {1, 2, 3, 4, 0xFF, 0, 0, 0};  // codes 1 2 3 4 | -1 0 0 0
  uint8_t s0[4] = {0x00, 0x3C, 0x00, 0x40};            // scales 1.0, 2.0
  const int8_t a[8] = {1, 1, 1, 1, 5, 0, 0, 0};
  const float as[2] = {0.5f, 0.25f};
  float y;
  ASSERT_TRUE(ex::exact_linear(L, a, as, 1, data, s0, nullptr, 1, 8, nullptr, &y).ok());
  EXPECT_EQ(y, 10 * 0.5f + (-5) * 0.25f * 2.0f);  // 2.5
  const float bias = -2.5f;
  ASSERT_TRUE(ex::exact_linear(L, a, as, 1, data, s0, nullptr, 1, 8, &bias, &y).ok());
  EXPECT_EQ(bits(y), 0u);  // +0.0
  s0[3] = 0x7E;  // scale1 = NaN
  ASSERT_TRUE(ex::exact_linear(L, a, as, 1, data, s0, nullptr, 1, 8, nullptr, &y).ok());
  EXPECT_EQ(bits(y), 0x7FC00000u);
}
