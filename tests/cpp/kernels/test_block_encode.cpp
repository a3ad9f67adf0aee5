// The block encoders the parallel CPU quantize and the CUDA quantize run
// (kernels/common/block_encode.h) against the core: every narrow-format
// helper against fmt_encode / f16_bits_of / shared_exp2_exponent on a sweep
// of binary32 values, and every family, block by block over whole tensors,
// against grit::encode's planes byte for byte (NaN, Inf, zero, subnormal,
// tie and huge inputs; the Q4KS tensors the core refuses are refused).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "grit/grit.h"
#include "kernels/common/block_encode.h"

namespace {

namespace be = grit::blockenc;

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// Every 9973rd binary32 pattern (both signs, NaN and Inf included), the
// format ladders' points and midpoints at many scales, and their neighbours.
std::vector<float> sweep() {
  std::vector<float> xs;
  for (uint64_t b = 0; b <= 0xFFFFFFFFull; b += 9973) xs.push_back(from_bits(static_cast<uint32_t>(b)));
  for (uint32_t b : {0x00000000u, 0x80000000u, 0x00000001u, 0x7F7FFFFFu, 0x7F800000u, 0xFF800000u,
                     0x7FC00000u, 0x00800000u, 0x007FFFFFu})
    xs.push_back(from_bits(b));
  std::vector<double> pts;
  for (int i = 0; i < 8; ++i) pts.push_back(be::e2m1_mag(i));
  for (int i = 0; i < 127; ++i) pts.push_back(be::e4m3_mag(i));
  for (int i = 0; i < 130; ++i) {
    pts.push_back(i);
    pts.push_back(i + 0.5);
  }
  const size_t base = pts.size();
  for (size_t i = 0; i + 1 < base; ++i) pts.push_back(0.5 * (pts[i] + pts[i + 1]));
  for (double p : pts)
    for (int e = -150; e <= 130; e += 1) {
      const float c = static_cast<float>(std::ldexp(p, e));
      float lo = c, hi = c;
      for (int k = 0; k < 3; ++k) {
        lo = std::nextafter(lo, -INFINITY);
        hi = std::nextafter(hi, INFINITY);
        xs.push_back(lo);
        xs.push_back(hi);
      }
      xs.push_back(c);
      xs.push_back(-c);
    }
  return xs;
}

TEST(BlockEncode, NarrowCodesMatchFmtEncode) {
  const std::vector<float> xs = sweep();
  ASSERT_GT(xs.size(), 1000000u);
  size_t checked = 0;
  for (float x : xs) {
    if (std::isnan(x)) continue;
    uint32_t want;
    ASSERT_TRUE(grit::fmt_encode(grit::kE2M1, x, grit::Rounding::kRne, grit::Saturation::kSatFinite, &want).ok());
    ASSERT_EQ(be::e2m1_code(x), want) << "e2m1 rne " << x;
    ASSERT_TRUE(grit::fmt_encode(grit::kE2M1, x, grit::Rounding::kRtz, grit::Saturation::kSatFinite, &want).ok());
    ASSERT_EQ(be::e2m1_code(x, true), want) << "e2m1 rtz " << x;
    ASSERT_TRUE(grit::fmt_encode(grit::kE4M3, x, grit::Rounding::kRne, grit::Saturation::kSatFinite, &want).ok());
    ASSERT_EQ(be::e4m3_code(x), want) << "e4m3 " << x;
    ASSERT_TRUE(grit::fmt_encode(grit::kS8, x, grit::Rounding::kRne, grit::Saturation::kSatFinite, &want).ok());
    ASSERT_EQ(be::s8_code(x), want) << "s8 " << x;
    ASSERT_EQ(be::f16_bits(x), grit::f16_bits_of(x)) << "binary16 " << x;
    if (std::isfinite(x) && x > 0.0f) {
      for (int r = 0; r < 3; ++r)
        ASSERT_EQ(be::exp2_exponent(x, r), grit::shared_exp2_exponent(x, static_cast<grit::ScaleRule>(r)))
            << "rule " << r << " " << x;
    }
    ++checked;
  }
  EXPECT_GT(checked, 1000000u);
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float a = be::f16_float(static_cast<uint16_t>(h)), b = grit::f16_value(static_cast<uint16_t>(h));
    ASSERT_EQ(grit::f32_bits(a), grit::f32_bits(b)) << "binary16 value of " << h;
  }
  for (uint32_t c = 0; c < 127; ++c)
    ASSERT_EQ(grit::f32_bits(be::e4m3_value(c)), grit::f32_bits(grit::fmt_decode(grit::kE4M3, c))) << c;
  EXPECT_EQ(be::f16_bits(from_bits(0x7FC00000u)), grit::f16_bits_of(from_bits(0x7FC00000u)));
}

// The grade names of each family the core's encoder takes.
const char* const kGrades[] = {"MXFP4", "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2ceilmaxabs)", "MXFP4_RNE", "Q4KS",
                               "NVF4", "NVF4_RTZ", "I8S24", "grit1(e=s8,k0=32,s0=binary16,esr=ratiomaxabs)"};

std::shared_ptr<const grit::Grade> grade_of(const std::string& text) {
  auto g = std::make_shared<grit::Grade>();
  if (const grit::ReferenceGrade* r = grit::reference_grade(text)) {
    *g = *r->grade;
    return g;
  }
  const grit::Status st = grit::grade_parse(text, g.get());
  EXPECT_TRUE(st.ok()) << text << ": " << st.message;
  return g;
}

// The block encoders over a whole tensor, planes sized as the core's and
// filled with 0xCD first (so an unwritten byte shows).
bool encode_blocks(const grit::Grade& g, const std::vector<float>& v, const grit::EncodedPlanes& like,
                   grit::EncodedPlanes* out) {
  grit::EncoderChoice c;
  EXPECT_TRUE(grit::choose_encoder(g, &c).ok());
  be::Planes P{};
  P.v = v.data();
  P.n = v.size();
  P.family = static_cast<int>(c.family);
  P.rule = static_cast<int>(c.rule);
  P.rtz = c.elem_rounding == grit::Rounding::kRtz;
  for (int i = 0; i < 4; ++i) {
    out->plane[i].assign(like.plane[i].size(), 0xCD);
    P.p[i] = out->plane[i].data();
  }
  if (P.family == be::kNvf4) {
    P.tensor_scale = be::nvf4_tensor_scale(be::finite_max_magnitude(P.v, P.n));
    be::put_tensor_scale(P);
  }
  bool ok = true;
  for (uint64_t b = 0; b < be::block_count(P); ++b) ok = be::encode_block(P, b) && ok;
  return ok;
}

void expect_same(const char* grade, const std::vector<float>& v, const std::string& what) {
  const auto g = grade_of(grade);
  grit::EncodedPlanes want;
  const grit::Status st = grit::encode(*g, v.data(), v.size(), &want);
  grit::EncodedPlanes got;
  if (st.ok())
    for (int i = 0; i < 4; ++i) {
      grit::EncoderChoice c;
      ASSERT_TRUE(grit::choose_encoder(*g, &c).ok());
      ASSERT_EQ(be::plane_bytes(static_cast<int>(c.family), v.size(), i), want.plane[i].size())
          << grade << " plane " << i;
    }
  if (!st.ok()) {
    // The core refuses (Q4KS steps beyond binary32): so do the blocks.
    grit::EncodedPlanes sized;
    for (int i = 0; i < 4; ++i) sized.plane[i].assign(4 * v.size(), 0);
    EXPECT_FALSE(encode_blocks(*g, v, sized, &got)) << grade << " " << what << ": " << st.message;
    return;
  }
  ASSERT_TRUE(encode_blocks(*g, v, want, &got)) << grade << " " << what;
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(got.plane[i].size(), want.plane[i].size());
    for (size_t j = 0; j < want.plane[i].size(); ++j)
      ASSERT_EQ(got.plane[i][j], want.plane[i][j]) << grade << " " << what << ": plane " << i << " byte " << j;
  }
}

// Tensors of 4 super-blocks (1024 values) drawn several ways.
std::vector<std::vector<float>> cases(std::vector<std::string>* names) {
  std::vector<std::vector<float>> out;
  std::mt19937 rng(20261201);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> small(-12, 12), pick(0, 1023);
  const int n = 1024;
  auto add = [&](std::string name, std::vector<float> v) {
    names->push_back(std::move(name));
    out.push_back(std::move(v));
  };
  for (int e : {-140, -130, -126, -100, -20, -3, 0, 3, 20, 60, 100, 120, 126}) {
    std::vector<float> v(n);
    for (auto& x : v) x = std::ldexp(normal(rng), e);
    add("normal*2^" + std::to_string(e), v);
    // Small integers times a power of two: many exact ties after scaling.
    for (auto& x : v) x = std::ldexp(static_cast<float>(small(rng)), e);
    add("ties*2^" + std::to_string(e), v);
  }
  {
    std::vector<float> v(n, 0.0f);
    for (int i = 0; i < n; i += 3) v[i] = -0.0f;
    add("signed zeros", v);
  }
  {
    // Every value a different binade: the widest spread binary32 holds.
    std::vector<float> v(n);
    for (int i = 0; i < n; ++i) v[i] = std::ldexp((i % 2) ? -1.0f : 1.0f, (i * 7) % 270 - 145);
    add("binades", v);
  }
  {
    std::vector<float> v(n);
    for (auto& x : v) x = normal(rng) * 3.0e38f;
    add("near max", v);  // Q4KS steps overflow: the core refuses
  }
  for (float special : {NAN, INFINITY, -INFINITY}) {
    std::vector<float> v(n);
    for (auto& x : v) x = normal(rng);
    for (int k = 0; k < 9; ++k) v[pick(rng)] = special;
    add("with " + std::to_string(special), v);
  }
  {
    // Random bit patterns: NaN payloads, Inf, subnormals, everything.
    std::vector<float> v(n);
    std::uniform_int_distribution<uint32_t> bits;
    for (auto& x : v) x = from_bits(bits(rng));
    add("random bits", v);
  }
  {
    // Quads with equal magnitudes and NaN next to Inf (I8S24's ranking ties).
    std::vector<float> v(n);
    const float opts[] = {1.0f, -1.0f, 2.0f, 0.0f, -0.0f, NAN, INFINITY, -2.0f};
    std::uniform_int_distribution<int> o(0, 7);
    for (auto& x : v) x = opts[o(rng)];
    add("ranking ties", v);
    for (auto& x : v) x = std::isfinite(x) ? x : 3.0f;
    add("ranking ties finite", v);
  }
  return out;
}

TEST(BlockEncode, EveryFamilyMatchesTheCoreEncoder) {
  std::vector<std::string> names;
  const auto all = cases(&names);
  for (const char* grade : kGrades)
    for (size_t i = 0; i < all.size(); ++i) expect_same(grade, all[i], names[i]);
}

TEST(BlockEncode, NearMaxQ4ksIsRefusedLikeTheCore) {
  std::vector<float> v(256, 3.0e38f);
  v[0] = -3.0e38f;  // hi - lo overflows binary32
  const auto g = grade_of("Q4KS");
  grit::EncodedPlanes want;
  ASSERT_FALSE(grit::encode(*g, v.data(), v.size(), &want).ok());
  expect_same("Q4KS", v, "overflowing step");
}

}  // namespace
