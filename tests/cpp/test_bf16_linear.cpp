// The bf16 activation law (csrc/grit/bf16_linear.h): the operand rounding,
// the chunk's two flushed chains against an evaluation in double, the
// padding of a short last chunk, and the references over a decoded weight.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "grit/bf16_linear.h"
#include "grit/decode.h"
#include "grit/encode.h"
#include "grit/grade.h"

namespace bf = grit::bf16;

namespace {

float from_bits(uint32_t u) { return bf::float_of(u); }
uint32_t bits(float v) { return bf::bits_of(v); }

grit::Grade grade(const char* text) {
  grit::Grade g;
  EXPECT_TRUE(grit::grade_parse(text, &g).ok()) << text;
  return g;
}

// A random bfloat16 with exponent field in [lo, hi] (a quarter subnormal when asked).
uint16_t random_bf16(std::mt19937& rng, int lo, int hi, bool subnormals) {
  const uint32_t r = rng();
  int e = lo + static_cast<int>(r % static_cast<uint32_t>(hi - lo + 1));
  if (subnormals && (r >> 24) % 4 == 0) e = 0;
  return static_cast<uint16_t>(((r >> 20) & 1u) << 15 | static_cast<uint32_t>(e) << 7 | ((r >> 8) & 0x7Fu));
}

// The law's step 2 for one chunk evaluated in double: each product exact, each
// sum formed exactly in double (true for the exponent ranges used here) and
// rounded once to float32, then flushed.
float chunk_in_double(float acc, const float* a, const float* b) {
  auto round_flush = [](double v) { return bf::flush(static_cast<float>(v)); };
  float E = round_flush(static_cast<double>(a[0]) * b[0]), O = round_flush(static_cast<double>(a[1]) * b[1]);
  for (int t = 2; t < 32; t += 2) {
    E = round_flush(static_cast<double>(E) + static_cast<double>(a[t]) * b[t]);
    O = round_flush(static_cast<double>(O) + static_cast<double>(a[t + 1]) * b[t + 1]);
  }
  return round_flush(static_cast<double>(acc) + static_cast<double>(round_flush(static_cast<double>(E) + O)));
}

}  // namespace

TEST(Bf16Law, FromFloat) {
  EXPECT_EQ(bf::from_float(1.0f), 0x3F80);
  EXPECT_EQ(bf::from_float(-0.0f), 0x8000);
  EXPECT_EQ(bf::from_float(from_bits(0x3F808000u)), 0x3F80);  // a tie goes to even
  EXPECT_EQ(bf::from_float(from_bits(0x3F818000u)), 0x3F82);
  EXPECT_EQ(bf::from_float(from_bits(0x3F808001u)), 0x3F81);
  EXPECT_EQ(bf::from_float(from_bits(0x00800000u)), 0x0080);  // 2^-126 stays
  EXPECT_EQ(bf::from_float(from_bits(0x007FFFFFu)), 0x0000);  // a subnormal is zero, even where RNE would round up
  EXPECT_EQ(bf::from_float(from_bits(0x807FFFFFu)), 0x8000);
  EXPECT_EQ(bf::from_float(from_bits(0x7F7FFFFFu)), 0x7F80);  // overflow to infinity
  EXPECT_EQ(bf::from_float(-INFINITY), 0xFF80);
  EXPECT_EQ(bf::from_float(from_bits(0x7F800001u)), 0x7FC0);  // a signalling NaN comes back quiet
  EXPECT_EQ(bf::from_float(from_bits(0xFFC12345u)), 0xFFC1);
}

TEST(Bf16Law, ValueReadsSubnormalsAsZero) {
  EXPECT_EQ(bits(bf::value(0x0001)), 0u);
  EXPECT_EQ(bits(bf::value(0x807F)), 0x80000000u);
  EXPECT_EQ(bits(bf::value(0x0080)), 0x00800000u);
  EXPECT_EQ(bits(bf::value(0x4049)), 0x40490000u);
}

TEST(Bf16Law, ChunkAgainstDouble) {
  std::mt19937 rng(7);
  float a[32], b[32];
  // normal magnitudes; wide ones with products near 2^-126; a quarter subnormal
  const int ranges[3][2] = {{120, 135}, {60, 67}, {1, 40}};
  for (int set = 0; set < 3; ++set)
    for (int trial = 0; trial < 4000; ++trial) {
      for (int t = 0; t < 32; ++t) {
        a[t] = bf::value(random_bf16(rng, ranges[set][0], ranges[set][1], set == 2));
        b[t] = bf::value(random_bf16(rng, ranges[set][0], ranges[set][1], set == 2));
      }
      const float acc = set == 0 ? bf::value(random_bf16(rng, 120, 135, false)) : 0.0f;
      const float got = bf::chunk(acc, a, b), want = chunk_in_double(acc, a, b);
      ASSERT_EQ(bits(got), bits(want)) << "set " << set << " trial " << trial;
    }
}

TEST(Bf16Law, ChunkOrderAndFlushes) {
  float a[32] = {}, b[32] = {};
  // the even chain and the odd chain are separate: 2^24 + 1 - 2^24 in one
  // chain loses the 1; split across the chains it survives the join
  a[0] = 16777216.0f, b[0] = 1.0f;
  a[2] = 1.0f, b[2] = 1.0f;
  a[4] = -16777216.0f, b[4] = 1.0f;
  EXPECT_EQ(bf::chunk(0.0f, a, b), 0.0f);
  a[2] = 0.0f, a[3] = 1.0f, b[3] = 1.0f;
  EXPECT_EQ(bf::chunk(0.0f, a, b), 1.0f);
  // a subnormal product is flushed where it is rounded: 2^-70 * 2^-70
  float c[32] = {}, d[32] = {};
  c[0] = std::ldexp(1.0f, -70), d[0] = std::ldexp(1.0f, -70);
  EXPECT_EQ(bits(bf::chunk(0.0f, c, d)), 0u);
  c[0] = -c[0];
  // -0 from the even chain, +0 from the odd: +0; the accumulator +0 + (+0)
  EXPECT_EQ(bits(bf::chunk(0.0f, c, d)), 0u);
  // a chain that is all -0 products stays -0, and -0 + -0 joins to -0; +0 acc gives +0
  float e[32], f[32];
  for (int t = 0; t < 32; ++t) e[t] = -1.0f, f[t] = 0.0f;
  EXPECT_EQ(bits(bf::chunk(-0.0f, e, f)), 0x80000000u);
  EXPECT_EQ(bits(bf::chunk(0.0f, e, f)), 0u);
  // NaN and infinities act as in float32 sums
  float g[32] = {}, h[32] = {};
  g[0] = INFINITY, h[0] = 1.0f, g[1] = -INFINITY, h[1] = 1.0f;
  EXPECT_TRUE(std::isnan(bf::chunk(0.0f, g, h)));
  EXPECT_TRUE(std::isnan(bf::finish(bf::chunk(0.0f, g, h), nullptr)));
  EXPECT_EQ(bits(bf::finish(bf::chunk(0.0f, g, h), nullptr)), 0x7FC00000u);
}

TEST(Bf16Law, ShortChunkIsZeroPadded) {
  std::mt19937 rng(3);
  for (int len : {1, 7, 31, 33, 70, 96}) {
    std::vector<uint16_t> a(len), b(len), ap(96, 0), bp(96, 0);
    for (int t = 0; t < len; ++t) {
      a[t] = ap[t] = random_bf16(rng, 110, 140, false);
      b[t] = bp[t] = random_bf16(rng, 110, 140, false);
    }
    const int64_t padded = bf::chunks(len) * bf::kChunk;
    EXPECT_EQ(bits(bf::dot(a.data(), b.data(), 1, len)), bits(bf::dot(ap.data(), bp.data(), 1, padded))) << len;
    // and by hand, chunk by chunk
    float acc = 0.0f, av[32], bv[32];
    for (int64_t c = 0; c < padded; c += 32) {
      for (int t = 0; t < 32; ++t) av[t] = bf::value(ap[c + t]), bv[t] = bf::value(bp[c + t]);
      acc = bf::chunk(acc, av, bv);
    }
    EXPECT_EQ(bits(bf::dot(a.data(), b.data(), 1, len)), bits(acc)) << len;
  }
}

TEST(Bf16Law, ReferencesOverADecodedWeight) {
  const grit::Grade g = grade("grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)");
  const int64_t n = 5, k = 96, m = 3;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  std::vector<float> w(n * k), x(m * k), gy(m * n), bias(n);
  for (auto& v : w) v = nd(rng);
  for (auto& v : x) v = nd(rng);
  for (auto& v : gy) v = nd(rng);
  for (auto& v : bias) v = nd(rng);
  grit::EncodedPlanes enc;
  ASSERT_TRUE(grit::encode(g, w.data(), static_cast<uint64_t>(n * k), &enc).ok());
  grit::Plane planes[4];
  for (int p = 0; p < 4; ++p) planes[p] = {enc.plane[p].data(), enc.plane[p].size()};
  std::vector<uint16_t> wb(n * k), xb(m * k), gb(m * n);
  ASSERT_TRUE(bf::decode_weight(g, planes, n, k, wb.data()).ok());
  std::vector<float> dec(n * k);
  ASSERT_TRUE(grit::decode(g, planes, static_cast<uint64_t>(n * k), dec.data()).ok());
  for (int64_t i = 0; i < n * k; ++i) {
    EXPECT_EQ(wb[i], bf::from_float(dec[i]));
    EXPECT_EQ(bits(bf::value(wb[i])), bits(dec[i]));  // MXFP4's values are bfloat16's
  }
  for (int64_t i = 0; i < m * k; ++i) xb[i] = bf::from_float(x[i]);
  for (int64_t i = 0; i < m * n; ++i) gb[i] = bf::from_float(gy[i]);
  std::vector<float> y(m * n), gx(m * k);
  bf::linear(xb.data(), m, wb.data(), n, k, bias.data(), y.data());
  bf::grad_input(gb.data(), m, wb.data(), n, k, gx.data());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j)
      EXPECT_EQ(bits(y[i * n + j]), bits(bf::finish(bf::dot(xb.data() + i * k, wb.data() + j * k, 1, k), &bias[j])));
    for (int64_t c = 0; c < k; ++c)
      EXPECT_EQ(bits(gx[i * k + c]), bits(bf::dot(gb.data() + i * n, wb.data() + c, k, n)));
  }
  // close to the float64 product of the same bfloat16 operands
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = bias[j];
      for (int64_t t = 0; t < k; ++t) s += static_cast<double>(bf::value(xb[i * k + t])) * bf::value(wb[j * k + t]);
      EXPECT_NEAR(y[i * n + j], s, 1e-4 * (1.0 + std::fabs(s)));
    }
}
