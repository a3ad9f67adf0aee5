// KernelTable::grad_input_rows (and grad_input_strips, the same products
// over W laid out in strips) of every variant this CPU runs against the
// reference accumulation (tile_accumulate.h, accumulate_grad_input), bit for
// bit (the reference: one fused multiply-add per row of W, in ascending
// order): batch rows and columns that fill no whole register block, column
// ranges that start and end mid-strip (what a thread is handed), a grad_x
// that already holds earlier blocks' sums, and NaN, infinite, signed-zero
// and subnormal values in grad_y and W.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "grit/grit.h"
#include "kernels/cpu/packed_linear_cpu.h"
#include "kernels/cpu/packed_linear_ref.h"
#include "kernels/cpu/tile_accumulate.h"
#include "nibble_planes.h"

namespace {

using grit::cpu::Isa;

float special(std::mt19937& rng) {
  switch (rng() % 16) {
    case 0: return std::numeric_limits<float>::quiet_NaN();
    case 1: return std::numeric_limits<float>::infinity();
    case 2: return -std::numeric_limits<float>::infinity();
    case 3: return -0.0f;
    case 4: return std::numeric_limits<float>::denorm_min() * static_cast<float>(rng() % 1000);
    case 5: return 3.0e38f;
    default: return std::normal_distribution<float>(0.0f, 1.0f)(rng);
  }
}

std::vector<float> values(size_t count, std::mt19937& rng, bool specials) {
  std::vector<float> v(count);
  for (auto& x : v) x = specials ? special(rng) : std::normal_distribution<float>(0.0f, 1.0f)(rng);
  return v;
}

// Equal bits, or NaN against NaN (which NaN an add passes on is the hardware's choice).
bool same(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y;
}

void check(Isa isa, int64_t m, int64_t n, int64_t k, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
           bool specials, uint32_t seed) {
  std::mt19937 rng(seed);
  const std::vector<float> gy = values(static_cast<size_t>(m * n), rng, specials);
  const std::vector<float> w = values(static_cast<size_t>((r1 - r0) * k), rng, specials);
  std::vector<float> want = values(static_cast<size_t>(m * k), rng, false);  // earlier blocks' sums
  std::vector<float> got = want;
  grit::cpu::accumulate_grad_input(gy.data(), w.data(), n, k, r0, r1, 0, m, c0, c1, want.data());
  grit::cpu::kernels_for(isa).grad_input_rows(gy.data(), n, w.data(), r0, r1, m, k, c0, c1, got.data());
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) bad += !same(got[i], want[i]);
  EXPECT_EQ(bad, 0) << grit::cpu::isa_name(isa) << " m=" << m << " n=" << n << " k=" << k << " rows ["
                    << r0 << "," << r1 << ") cols [" << c0 << "," << c1 << ") specials=" << specials;
}

TEST(GradInputRows, EveryVariantAddsTheReferenceProductsInOrder) {
  uint32_t seed = 1;
  for (Isa isa : grit::cpu::kAllIsas) {
    if (!grit::cpu::isa_supported(isa)) continue;
    ASSERT_NE(grit::cpu::kernels_for(isa).grad_input_rows, nullptr) << grit::cpu::isa_name(isa);
    // Batch rows 1..13 cross every remainder of a 4- or 6-row block; columns
    // cross every remainder of a 16- and 64-column strip.
    for (int64_t m : {1, 2, 5, 6, 7, 13})
      for (int64_t k : {16, 33, 64, 100, 200}) {
        check(isa, m, 40, k, 0, 40, 0, k, false, seed++);
        check(isa, m, 40, k, 8, 29, 0, k, true, seed++);
        check(isa, m, 40, k, 3, 40, k / 3, k - k / 5, true, seed++);  // a thread's ragged column range
      }
  }
}

// grad_input_strips: the same products over W's rows laid out in strips of
// grad_strip columns (decode_strips' layout), column ranges from a strip's
// start (what a thread is handed), batches past a pass of 512 rows.
void check_strips(Isa isa, int64_t m, int64_t n, int64_t k, int64_t r0, int64_t r1, int64_t s0, int64_t s1,
                  bool specials, uint32_t seed) {
  const grit::cpu::KernelTable& kt = grit::cpu::kernels_for(isa);
  const int64_t width = kt.grad_strip, rows = r1 - r0;
  const int64_t strips = (k + width - 1) / width, stride = rows * width + 48;  // gaps between strips
  std::mt19937 rng(seed);
  const std::vector<float> gy = values(static_cast<size_t>(m * n), rng, specials);
  const std::vector<float> w = values(static_cast<size_t>(rows * k), rng, specials);
  std::vector<float> buf(static_cast<size_t>(strips * stride + 16), std::numeric_limits<float>::quiet_NaN());
  float* sp = grit::cpu::align64(buf.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < k; ++c) sp[(c / width) * stride + r * width + c % width] = w[r * k + c];
  std::vector<float> want = values(static_cast<size_t>(m * k), rng, false);  // earlier blocks' sums
  std::vector<float> got = want;
  const int64_t c0 = s0 * width, c1 = std::min(k, s1 * width);
  grit::cpu::accumulate_grad_input(gy.data(), w.data(), n, k, r0, r1, 0, m, c0, c1, want.data());
  kt.grad_input_strips(gy.data(), n, sp, stride, r0, r1, m, k, c0, c1, got.data());
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) bad += !same(got[i], want[i]);
  EXPECT_EQ(bad, 0) << grit::cpu::isa_name(isa) << " m=" << m << " n=" << n << " k=" << k << " rows [" << r0
                    << "," << r1 << ") strips [" << s0 << "," << s1 << ") specials=" << specials;
}

TEST(GradInputRows, StripsAddTheReferenceProductsInOrder) {
  uint32_t seed = 100;
  for (Isa isa : grit::cpu::kAllIsas) {
    if (!grit::cpu::isa_supported(isa) || isa == Isa::kScalar) continue;
    const grit::cpu::KernelTable& kt = grit::cpu::kernels_for(isa);
    ASSERT_NE(kt.grad_input_strips, nullptr) << grit::cpu::isa_name(isa);
    ASSERT_GT(kt.grad_strip, 0) << grit::cpu::isa_name(isa);
    for (int64_t m : {1, 5, 13, 530})
      for (int64_t k : {16, 33, 100, 200}) {
        const int64_t strips = (k + kt.grad_strip - 1) / kt.grad_strip;
        check_strips(isa, m, 24, k, 0, 24, 0, strips, false, seed++);
        check_strips(isa, m, 24, k, 8, 19, 0, strips, true, seed++);
        if (strips > 1) check_strips(isa, m, 24, k, 3, 24, 1, strips, true, seed++);  // a thread's share
      }
  }
}

// The reference itself: each step one std::fma in ascending row order, not a
// rounded product then an add (random normal values make the two differ often).
TEST(GradInputRows, TheReferenceFusesEachStepInRowOrder) {
  std::mt19937 rng(11);
  const int64_t m = 3, n = 50, k = 40;
  const std::vector<float> gy = values(static_cast<size_t>(m * n), rng, false);
  const std::vector<float> w = values(static_cast<size_t>(n * k), rng, false);
  std::vector<float> got(static_cast<size_t>(m * k), 0.0f), fused(got.size(), 0.0f), unfused(got.size(), 0.0f);
  grit::cpu::accumulate_grad_input(gy.data(), w.data(), n, k, 0, n, 0, m, 0, k, got.data());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t c = 0; c < k; ++c)
      for (int64_t j = 0; j < n; ++j) {
        float& f = fused[static_cast<size_t>(i * k + c)];
        float& u = unfused[static_cast<size_t>(i * k + c)];
        f = std::fma(gy[static_cast<size_t>(i * n + j)], w[static_cast<size_t>(j * k + c)], f);
        const float p = gy[static_cast<size_t>(i * n + j)] * w[static_cast<size_t>(j * k + c)];
        u = u + p;
      }
  int64_t bad = 0, differ = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    bad += !same(got[i], fused[i]);
    differ += !same(fused[i], unfused[i]);
  }
  EXPECT_EQ(bad, 0);
  EXPECT_GT(differ, 20);  // the inputs tell the two laws apart
}

TEST(GradInputRows, ABlockOfOneRowAndAnEmptyRange) {
  for (Isa isa : grit::cpu::kAllIsas) {
    if (!grit::cpu::isa_supported(isa)) continue;
    check(isa, 9, 5, 70, 4, 5, 0, 70, true, 7);
    check(isa, 9, 5, 70, 2, 2, 0, 70, true, 8);   // no rows: grad_x unchanged
    check(isa, 9, 5, 70, 0, 5, 30, 30, true, 9);  // no columns
  }
}

// A bfloat16 value of magnitude 2^lo .. 2^hi (8 significant bits), or a
// special one (zero, infinity, NaN) now and then.
float bf16_in(std::mt19937& rng, int lo, int hi) {
  switch (rng() % 24) {
    case 0: return 0.0f;
    case 1: return -0.0f;
    case 2: return std::numeric_limits<float>::infinity();
    case 3: return -std::numeric_limits<float>::infinity();
    case 4: return std::numeric_limits<float>::quiet_NaN();
    default: break;
  }
  const int e = lo + static_cast<int>(rng() % static_cast<uint32_t>(hi - lo));
  const float m = 1.0f + static_cast<float>(rng() % 128) / 128.0f;
  return (rng() & 1 ? -1.0f : 1.0f) * std::ldexp(m, e);
}

// An MXFP4 weight value: e2m1 times 2^(c-127), c in [72, 187], or NaN (code 255).
float mxfp4_in(std::mt19937& rng) {
  static const float e2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  if (rng() % 50 == 0) return std::numeric_limits<float>::quiet_NaN();
  const int c = 72 + static_cast<int>(rng() % 116);
  return (rng() & 1 ? -1.0f : 1.0f) * std::ldexp(e2m1[rng() % 8], c - 127);
}

TEST(GradInputRows, PairsAddTheReferenceProductsInOrder) {
  if (!grit::cpu::isa_supported(Isa::kAvx512Bf16)) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  const auto& kt = grit::cpu::kernels_for(Isa::kAvx512Bf16);
  ASSERT_NE(kt.grad_input_pairs, nullptr);
  uint32_t seed = 100;
  for (int64_t m : {1, 5, 6, 13})
    for (int64_t rows : {1, 2, 7, 40})  // odd counts end on one multiply and add
      for (int64_t k : {16, 70, 128}) {
        std::mt19937 rng(seed++);
        const int64_t n = rows + 3, r0 = 2;
        std::vector<float> gy(static_cast<size_t>(m * n)), w(static_cast<size_t>(rows * k));
        for (auto& v : gy) v = bf16_in(rng, -56, 62);
        for (auto& v : w) v = mxfp4_in(rng);
        std::vector<float> want(static_cast<size_t>(m * k), 0.0f), got = want;
        grit::cpu::accumulate_grad_input(gy.data(), w.data(), n, k, r0, r0 + rows, 0, m, 0, k, want.data());
        kt.grad_input_pairs(gy.data(), n, w.data(), r0, r0 + rows, m, k, 0, k, got.data());
        int64_t bad = 0;
        for (size_t i = 0; i < got.size(); ++i) bad += !same(got[i], want[i]);
        EXPECT_EQ(bad, 0) << "m=" << m << " rows=" << rows << " k=" << k;
      }
}

// One call's blocks in sequence over one grad_x (the op's blocks of rows),
// each over a ragged column range, against the reference doing the same.
TEST(GradInputRows, PairsOverSeveralBlocksAndColumnRanges) {
  if (!grit::cpu::isa_supported(Isa::kAvx512Bf16)) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  const auto& kt = grit::cpu::kernels_for(Isa::kAvx512Bf16);
  std::mt19937 rng(7);
  const int64_t m = 7, n = 53, k = 200;
  std::vector<float> gy(static_cast<size_t>(m * n)), w(static_cast<size_t>(n * k));
  for (auto& v : gy) v = bf16_in(rng, -56, 62);
  for (auto& v : w) v = mxfp4_in(rng);
  std::vector<float> want(static_cast<size_t>(m * k), 0.0f), got = want;
  const int64_t blocks[][2] = {{0, 16}, {16, 37}, {37, 53}};
  const int64_t ranges[][2] = {{0, 70}, {70, 133}, {133, 200}};
  for (const auto& b : blocks)
    for (const auto& c : ranges) {
      const float* rows = w.data() + b[0] * k;
      grit::cpu::accumulate_grad_input(gy.data(), rows, n, k, b[0], b[1], 0, m, c[0], c[1], want.data());
      kt.grad_input_pairs(gy.data(), n, rows, b[0], b[1], m, k, c[0], c[1], got.data());
    }
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) bad += !same(got[i], want[i]);
  EXPECT_EQ(bad, 0);
  // Sums that overflow: same-sign products near the bounds round to infinity both ways.
  std::vector<float> big_gy(static_cast<size_t>(16), std::ldexp(1.9921875f, 61));
  std::vector<float> big_w(static_cast<size_t>(16 * 16), std::ldexp(6.0f, 60));
  std::vector<float> a(16, 0.0f), b2 = a;
  grit::cpu::accumulate_grad_input(big_gy.data(), big_w.data(), 16, 16, 0, 16, 0, 1, 0, 16, a.data());
  kt.grad_input_pairs(big_gy.data(), 16, big_w.data(), 0, 16, 1, 16, 0, 16, b2.data());
  for (int i = 0; i < 16; ++i) {
    EXPECT_TRUE(std::isinf(a[static_cast<size_t>(i)]));
    EXPECT_TRUE(same(a[static_cast<size_t>(i)], b2[static_cast<size_t>(i)])) << i;
  }
}

TEST(GradInputRows, PairsAllowedOnlyWhereTheyGiveTheSameBits) {
  ASSERT_NE(grit::reference_grade("MXFP4"), nullptr);
  const grit::Grade& mxfp4 = *grit::reference_grade("MXFP4")->grade;
  const int64_t n = 4, k = 64;
  std::vector<uint8_t> data(static_cast<size_t>(n * k / 2), 0x21), scales(static_cast<size_t>(n * k / 32), 120);
  grit::cpu::PackedWeight w;
  w.grade = &mxfp4;
  w.n = n;
  w.k = k;
  w.planes[0] = grit::Plane{data.data(), data.size()};
  w.planes[1] = grit::Plane{scales.data(), scales.size()};
  grit::cpu::LinearPlan plan;
  grit::cpu::make_plan(w, &plan);
  std::vector<float> gy = {1.5f, -0.0f, 0.0f, std::numeric_limits<float>::infinity(), std::ldexp(1.0f, -56),
                           std::ldexp(1.75f, 61), std::numeric_limits<float>::quiet_NaN()};
  EXPECT_TRUE(grit::cpu::pairs_allowed(plan, scales.data(), scales.size(), gy.data(), static_cast<int64_t>(gy.size())));
  for (float bad : {std::ldexp(1.0f, -57), std::ldexp(1.0f, 62), 1.0f + 0x1p-20f,
                    std::numeric_limits<float>::denorm_min()}) {
    std::vector<float> g2 = gy;
    g2.push_back(bad);
    EXPECT_FALSE(grit::cpu::pairs_allowed(plan, scales.data(), scales.size(), g2.data(), static_cast<int64_t>(g2.size()))) << bad;
  }
  for (uint8_t code : {71, 188, 0, 254}) {
    scales[1] = code;
    EXPECT_FALSE(grit::cpu::pairs_allowed(plan, scales.data(), scales.size(), gy.data(), 1)) << static_cast<int>(code);
  }
  for (uint8_t code : {72, 187, 255}) {
    scales[1] = code;
    EXPECT_TRUE(grit::cpu::pairs_allowed(plan, scales.data(), scales.size(), gy.data(), 1)) << static_cast<int>(code);
  }
  ASSERT_NE(grit::reference_grade("NVF4"), nullptr);
  const grit::Grade& nvf4 = *grit::reference_grade("NVF4")->grade;
  grit::cpu::LinearPlan other;
  grit::cpu::make_grade_tables(nvf4, &other);
  other.w.grade = &nvf4;
  EXPECT_FALSE(grit::cpu::pairs_allowed(other, scales.data(), scales.size(), gy.data(), 1));
  // E8M0 scales over s4 elements: -8 reaches the elements' bound (|e| < 8), so no pairs.
  grit::Grade s4;
  ASSERT_TRUE(grit::grade_parse("grit1(e=s4,k0=32,s0=e8m0,esr=exp2floormaxabs)", &s4).ok());
  grit::cpu::PackedWeight w4 = w;
  w4.grade = &s4;
  grit::cpu::LinearPlan plan4;
  grit::cpu::make_plan(w4, &plan4);
  ASSERT_EQ(plan4.kind, grit::cpu::FastKind::kNibble);
  ASSERT_TRUE(plan4.factor);
  scales[1] = 120;
  EXPECT_FALSE(grit::cpu::pairs_allowed(plan4, scales.data(), scales.size(), gy.data(), 1));
}

}  // namespace

// KernelTable::grad_input_fused: every variant's sums over whole tiles,
// decoded from random planes of every grade with a fast decoder (NaN,
// infinite and zero scales among them), equal the reference accumulation
// over the reference decode, for column ranges a thread is handed (whole
// chunks, the last short) and grad_x holding earlier sums; the rows of a
// partial last tile are left alone; a plan the decoder gives up on (random
// I8S24 positions naming one place twice) says so.
TEST(GradInputRows, FusedDecodeAddsTheReferenceProductsInOrder) {
  const int64_t shapes[][2] = {{16, 256}, {37, 1280}, {48, 640}};
  nibble_test::for_each_random_weight(shapes, 13, [&](const char* name, const grit::Grade& g, int64_t n, int64_t k,
                                                      const grit::cpu::PackedWeight& w, const std::vector<float>& wd) {
    std::mt19937 rng(static_cast<uint32_t>(n * 17 + k));
    grit::cpu::LinearPlan plan;
    grit::cpu::make_plan(w, &plan);
    const int64_t whole = n / 16 * 16;
    for (const int64_t m : {int64_t{1}, int64_t{7}}) {
      const std::vector<float> gy = values(static_cast<size_t>(m * n), rng, true);
      const std::vector<float> start = values(static_cast<size_t>(m * k), rng, false);
      std::vector<float> want = start;
      grit::cpu::accumulate_grad_input(gy.data(), wd.data(), n, k, 0, whole, 0, m, 0, k, want.data());
      for (grit::cpu::Isa isa : grit::cpu::kAllIsas) {
        if (!grit::cpu::isa_supported(isa)) continue;
        const auto& kt = grit::cpu::kernels_for(isa);
        if (kt.grad_input_fused == nullptr) continue;
        std::vector<float> got = start;
        bool fb = false;
        // two threads' ranges: [0, 256) and [256, k)
        ASSERT_TRUE(kt.grad_input_fused(plan, gy.data(), m, 0, 256, got.data(), &fb).ok());
        ASSERT_TRUE(kt.grad_input_fused(plan, gy.data(), m, 256, k, got.data(), &fb).ok());
        if (fb) {
          EXPECT_TRUE(g.has_sp) << name;
          continue;
        }
        for (int64_t i = 0; i < m * k; ++i)
          ASSERT_TRUE(same(got[i], want[i])) << grit::cpu::isa_name(isa) << " " << name << " " << n << "x" << k
                                             << " m " << m << " at " << i << ": " << got[i] << " vs " << want[i];
      }
    }
  });
  for (grit::cpu::Isa isa : grit::cpu::kAllIsas) {  // a range that starts mid-chunk is refused
    if (!grit::cpu::isa_supported(isa) || grit::cpu::kernels_for(isa).grad_input_fused == nullptr) continue;
    grit::cpu::PackedWeight w;
    w.grade = grit::reference_grade("MXFP4")->grade;
    w.n = 16;
    w.k = 512;
    uint64_t bytes[4];
    ASSERT_TRUE(grit::grade_plane_bytes(*w.grade, 16 * 512, bytes).ok());
    std::vector<uint8_t> pl[4];
    for (int i = 0; i < 4; ++i) {
      pl[i].assign(bytes[i], 0x3C);
      w.planes[i] = grit::Plane{pl[i].data(), pl[i].size()};
    }
    grit::cpu::LinearPlan plan;
    grit::cpu::make_plan(w, &plan);
    std::vector<float> gy(16, 1.0f), gx(512, 0.0f);
    bool fb = false;
    EXPECT_FALSE(grit::cpu::kernels_for(isa).grad_input_fused(plan, gy.data(), 1, 128, 512, gx.data(), &fb).ok());
  }
}
