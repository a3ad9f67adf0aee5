// The packed_linear CPU kernel variants against the contract core, torch-free:
// every variant this CPU runs decodes random planes (NaN and infinite scales
// included) to grit::decode's bits, and its linear_tiles returns the scalar
// reference kernel's bits (the law of grit/linear_law.h), on encoded and on
// random planes; a poisoned group makes its output column NaN.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstring>
#include <random>
#include <vector>

#include "grit/grit.h"
#include "grit/linear_law.h"
#include "kernels/cpu/packed_linear_cpu.h"

namespace {

using grit::cpu::Isa;

struct Case {
  const char* grade;
  int64_t n, k;
};

const Case kCases[] = {
    {"MXFP4", 17, 96},  {"MXFP4", 33, 512}, {"NVF4", 17, 48},   {"NVF4", 40, 160},
    {"Q4KS", 24, 160},  {"Q4KS", 33, 512},  {"I8S24", 17, 96},  {"I8S24", 40, 288},
};

// Uniformly random planes; I8S24 quads name two distinct positions.
std::vector<std::vector<uint8_t>> random_planes(const grit::Grade& g, int64_t n, int64_t k, uint32_t seed) {
  uint64_t bytes[4];
  EXPECT_TRUE(grit::grade_plane_bytes(g, static_cast<uint64_t>(n * k), bytes).ok());
  std::mt19937 rng(seed);
  std::vector<std::vector<uint8_t>> p(4);
  for (int i = 0; i < 4; ++i) {
    p[i].resize(bytes[i]);
    for (auto& b : p[i]) b = static_cast<uint8_t>(rng());
  }
  if (g.has_sp) {
    for (auto& b : p[3]) {
      uint8_t v = 0;
      for (int q = 0; q < 2; ++q) {
        const uint32_t a = rng() % 4, c = (a + 1 + rng() % 3) % 4;
        v |= static_cast<uint8_t>((a | (c << 2)) << (4 * q));
      }
      b = v;
    }
  }
  return p;
}

// The grade's encoder's planes for values v (empty planes, and a test
// failure, if it refuses them).
std::vector<std::vector<uint8_t>> encoded(const grit::Grade& g, const std::vector<float>& v) {
  grit::EncodedPlanes enc;
  EXPECT_TRUE(grit::encode(g, v.data(), v.size(), &enc).ok());
  return std::vector<std::vector<uint8_t>>(enc.plane, enc.plane + 4);
}

grit::cpu::PackedWeight weight(const grit::Grade& g, const std::vector<std::vector<uint8_t>>& p, int64_t n,
                               int64_t k) {
  grit::cpu::PackedWeight w;
  w.grade = &g;
  w.n = n;
  w.k = k;
  for (int i = 0; i < 4; ++i) w.planes[i] = grit::Plane{p[i].data(), p[i].size()};
  return w;
}

std::vector<Isa> supported() {
  std::vector<Isa> out;
  for (Isa i : grit::cpu::kAllIsas)
    if (grit::cpu::isa_supported(i)) out.push_back(i);
  return out;
}

// Random planes of a case's grade, the core's decode of them and their plan
// (w points into planes: filled in place, never moved).
struct Decoded {
  std::vector<std::vector<uint8_t>> planes;
  grit::cpu::PackedWeight w;
  std::vector<float> want;
  grit::cpu::LinearPlan plan;
};

void decode_case(const Case& c, uint32_t seed, Decoded* d) {
  const grit::Grade& g = *grit::reference_grade(c.grade)->grade;
  d->planes = random_planes(g, c.n, c.k, seed);
  d->w = weight(g, d->planes, c.n, c.k);
  d->want.assign(static_cast<size_t>(c.n * c.k), 0.0f);
  ASSERT_TRUE(grit::decode(g, d->w.planes, static_cast<uint64_t>(c.n * c.k), d->want.data()).ok());
  grit::cpu::make_plan(d->w, &d->plan);
}

TEST(PackedLinearCpu, EveryVariantDecodesLikeTheCore) {
  for (const Case& c : kCases) {
    Decoded d;
    decode_case(c, 7, &d);
    const std::vector<float>& want = d.want;
    const grit::cpu::LinearPlan& plan = d.plan;
    EXPECT_NE(plan.kind, grit::cpu::FastKind::kNone) << c.grade;
    for (Isa isa : supported()) {
      std::vector<float> got(want.size(), 1.0f);
      bool fallback = false;
      ASSERT_TRUE(grit::cpu::kernels_for(isa)
                      .decode_tiles(plan, 0, grit::cpu::linear_tile_count(c.n), got.data(), &fallback)
                      .ok());
      EXPECT_FALSE(fallback);
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
          << grit::cpu::isa_name(isa) << " " << c.grade << " [" << c.n << ", " << c.k << "]";
    }
  }
}

// decode_strips' layout (grad_input's strips): every (row, column) where
// the layout puts it, from the second tile on as from the first, and no
// other float of the buffer written, at the variant's own width and at
// other multiples of 16, ragged last strips included.
TEST(PackedLinearCpu, EveryVariantDecodesStripsLikeTheCore) {
  for (const Case& c : kCases) {
    Decoded d;
    decode_case(c, 11, &d);
    const int64_t tiles = grit::cpu::linear_tile_count(c.n);
    for (Isa isa : supported()) {
      const grit::cpu::KernelTable& kt = grit::cpu::kernels_for(isa);
      if (kt.decode_strips == nullptr) {
        EXPECT_EQ(isa, Isa::kScalar);  // the reference decodes rows only
        continue;
      }
      for (int64_t width : {kt.grad_strip, int64_t{16}, int64_t{48}}) {
        for (int64_t t0 : {int64_t{0}, int64_t{1}}) {
          const int64_t r0 = t0 * grit::cpu::kLinearTileRows, rows = c.n - r0;
          if (rows <= 0) continue;
          const int64_t strips = (c.k + width - 1) / width, stride = rows * width + 32;
          const float sentinel = -12345.0f;
          std::vector<float> got(static_cast<size_t>(strips * stride), sentinel);
          bool fallback = false;
          ASSERT_TRUE(kt.decode_strips(d.plan, t0, tiles, got.data(), width, stride, &fallback).ok());
          EXPECT_FALSE(fallback);
          std::vector<bool> placed(got.size(), false);
          int64_t bad = 0;
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t col = 0; col < c.k; ++col) {
              const size_t at = static_cast<size_t>((col / width) * stride + r * width + col % width);
              placed[at] = true;
              bad += std::memcmp(&got[at], &d.want[static_cast<size_t>((r0 + r) * c.k + col)], sizeof(float)) != 0;
            }
          for (size_t i = 0; i < got.size(); ++i) bad += !placed[i] && got[i] != sentinel;
          EXPECT_EQ(bad, 0) << grit::cpu::isa_name(isa) << " " << c.grade << " [" << c.n << ", " << c.k
                            << "] width " << width << " from tile " << t0;
        }
      }
    }
  }
}

TEST(PackedLinearCpu, EveryVariantReturnsTheReferenceBits) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (const Case& c : kCases) {
    const grit::Grade& g = *grit::reference_grade(c.grade)->grade;
    std::vector<float> v(static_cast<size_t>(c.n * c.k));
    for (auto& e : v) e = normal(rng);
    const std::vector<std::vector<uint8_t>> planes = encoded(g, v);
    const grit::cpu::PackedWeight w = weight(g, planes, c.n, c.k);
    grit::cpu::LinearPlan plan;
    grit::cpu::make_plan(w, &plan);
    for (int64_t m : {1, 3, 9}) {
      std::vector<float> x(static_cast<size_t>(m * c.k)), bias(static_cast<size_t>(c.n));
      for (auto& e : x) e = normal(rng);
      for (auto& e : bias) e = normal(rng);
      std::vector<float> want(static_cast<size_t>(m * c.n));
      ASSERT_TRUE(grit::cpu::linear_tiles(w, x.data(), m, bias.data(), 0, grit::cpu::linear_tile_count(c.n),
                                          want.data())
                      .ok());
      for (Isa isa : supported()) {
        std::vector<float> got(want.size(), -1.0f);
        bool fallback = false;
        ASSERT_TRUE(grit::cpu::kernels_for(isa)
                        .linear_tiles(plan, x.data(), m, bias.data(), 0, grit::cpu::linear_tile_count(c.n),
                                      got.data(), &fallback)
                        .ok());
        EXPECT_FALSE(fallback);
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
            << grit::cpu::isa_name(isa) << " " << c.grade << " m=" << m;
      }
    }
  }
}

TEST(PackedLinearCpu, RandomPlanesSameBitsAndPoisonedColumnsAreNaN) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  size_t total_poisoned = 0;
  for (const Case& c : kCases) {
    const grit::Grade& g = *grit::reference_grade(c.grade)->grade;
    const auto planes = random_planes(g, c.n, c.k, 21);
    const grit::cpu::PackedWeight w = weight(g, planes, c.n, c.k);
    grit::cpu::LinearPlan plan;
    grit::cpu::make_plan(w, &plan);
    // Which rows hold a NaN weight (a poisoned group, or a NaN element),
    // from the core's decode.
    const uint64_t numel = static_cast<uint64_t>(c.n * c.k);
    std::vector<float> wd(numel);
    ASSERT_TRUE(grit::decode(g, w.planes, numel, wd.data()).ok());
    std::vector<bool> poisoned(static_cast<size_t>(c.n), false);
    size_t npoison = 0;
    for (int64_t j = 0; j < c.n; ++j) {
      for (int64_t q = 0; q < c.k; ++q)
        if (std::isnan(wd[j * c.k + q])) poisoned[j] = true;
      npoison += poisoned[j];
    }
    for (int64_t m : {1, 4}) {
      std::vector<float> x(static_cast<size_t>(m * c.k));
      for (auto& v : x) v = normal(rng);
      std::vector<float> want(static_cast<size_t>(m * c.n));
      ASSERT_TRUE(grit::cpu::linear_tiles(w, x.data(), m, nullptr, 0, grit::cpu::linear_tile_count(c.n),
                                          want.data())
                      .ok());
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < c.n; ++j)
          if (poisoned[j]) {
            uint32_t bits;
            std::memcpy(&bits, &want[i * c.n + j], 4);
            EXPECT_EQ(bits, 0x7FC00000u) << c.grade << " row " << j;
          }
      for (Isa isa : supported()) {
        std::vector<float> got(want.size(), -1.0f);
        bool fallback = false;
        ASSERT_TRUE(grit::cpu::kernels_for(isa)
                        .linear_tiles(plan, x.data(), m, nullptr, 0, grit::cpu::linear_tile_count(c.n),
                                      got.data(), &fallback)
                        .ok());
        EXPECT_FALSE(fallback);
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
            << grit::cpu::isa_name(isa) << " " << c.grade << " m=" << m;
      }
    }
    total_poisoned += npoison;
  }
  EXPECT_GT(total_poisoned, 0u);  // random scale bytes do hit NaN codes
}

// The premise of the pair path, on this CPU: vdpbf16ps is two FMAs, high
// words first (random lanes; about 1% of them tell the two orders apart).
TEST(PackedLinearCpu, Bf16PairInstructionIsTwoFmasInOrder) {
  if (!__builtin_cpu_supports("avx512bf16")) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  EXPECT_EQ(grit::cpu::avx512_bf16_pair_mismatches(1u << 20, 12345), 0u);
  EXPECT_TRUE(grit::cpu::isa_supported(Isa::kAvx512Bf16));
}

// bfloat16-exact x over a wide range of magnitudes (so chains reach
// large and small sums and the order of the two FMAs of a pair matters),
// with a few NaN and infinite values.
std::vector<float> bf16_x(size_t count, std::mt19937* rng) {
  std::normal_distribution<float> normal;
  std::vector<float> x(count);
  for (auto& v : x) {
    float f = std::ldexp(normal(*rng), static_cast<int>((*rng)() % 41) - 20);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u &= 0xFFFF0000u;
    std::memcpy(&v, &u, 4);
  }
  if (count > 40) {
    x[5] = std::numeric_limits<float>::infinity();
    x[37] = std::numeric_limits<float>::quiet_NaN();
  }
  return x;
}

// avx512_bf16's pair path (two FMAs of a chain per vdpbf16ps) runs for
// factored nibble layers with bfloat16-exact x, batch 1 (registers) and
// larger (chunks), and returns the reference's bits; an x it cannot take (not bfloat16-exact, or a tiny
// value its flush to zero could touch) takes the FMA path, same bits.
TEST(PackedLinearCpu, PairPathReturnsTheReferenceBits) {
  // Batches > 1 take the pair path on AMD cores only: force it on here, whatever the vendor.
  struct PairGemmOn {
    int prev = grit::cpu::set_pair_gemm(1);
    ~PairGemmOn() { grit::cpu::set_pair_gemm(prev); }
  } pair_gemm_on;
  if (!grit::cpu::isa_supported(Isa::kAvx512Bf16)) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  const grit::cpu::KernelTable& kt = grit::cpu::kernels_for(Isa::kAvx512Bf16);
  enum Planes { kEncoded, kRandom, kRandomTameScales };  // tame: E8M0 codes 110..139
  struct PairCase {
    const char* grade;
    int64_t n, k;
    Planes planes;
  };
  const PairCase cases[] = {
      {"grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)", 17, 96, kEncoded},
      {"grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)", 40, 1024, kEncoded},
      {"grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)", 33, 512, kRandom},  // NaN / huge scale codes
      {"grit1(e=e2m1,k0=16,s0=e8m0,esr=exp2floormaxabs)", 24, 272, kRandomTameScales},
      {"grit1(e=e2m1,k0=16,s0=e8m0,esr=exp2floormaxabs)", 17, 256, kRandom},
      {"grit1(e=s4,k0=32,s0=e8m0,esr=exp2floormaxabs)", 19, 160, kRandomTameScales},
  };
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  for (const PairCase& c : cases) {
    grit::Grade g;
    ASSERT_TRUE(grit::grade_parse(c.grade, &g).ok()) << c.grade;
    std::vector<std::vector<uint8_t>> planes;
    if (c.planes != kEncoded) {
      planes = random_planes(g, c.n, c.k, 9);
      if (c.planes == kRandomTameScales)
        for (auto& b : planes[1]) b = static_cast<uint8_t>(110 + b % 30);
    } else {
      std::vector<float> v(static_cast<size_t>(c.n * c.k));
      for (auto& e : v) e = std::ldexp(normal(rng), static_cast<int>(rng() % 9) - 4);
      planes = encoded(g, v);
    }
    const grit::cpu::PackedWeight w = weight(g, planes, c.n, c.k);
    grit::cpu::LinearPlan plan;
    grit::cpu::make_plan(w, &plan);
    ASSERT_EQ(plan.kind, grit::cpu::FastKind::kNibble) << c.grade;
    ASSERT_TRUE(plan.factor) << c.grade;
    std::vector<float> bias(static_cast<size_t>(c.n));
    for (auto& e : bias) e = normal(rng);
    for (int64_t m : {1, 3, 8}) {
      for (int variant = 0; variant < 3; ++variant) {
        std::vector<float> x = bf16_x(static_cast<size_t>(m * c.k), &rng);
        const size_t last_row = static_cast<size_t>((m - 1) * c.k);
        if (variant == 1) x[last_row + 3] = std::ldexp(1.0f, -70);  // tiny: the FMA path
        if (variant == 2) x[last_row + c.k - 1] = 1.0f + std::ldexp(1.0f, -20);  // not bfloat16-exact
        std::vector<float> want(static_cast<size_t>(m * c.n));
        ASSERT_TRUE(grit::cpu::linear_tiles(w, x.data(), m, bias.data(), 0, grit::cpu::linear_tile_count(c.n),
                                            want.data())
                        .ok());
        std::vector<float> got(want.size(), -1.0f);
        bool fallback = false;
        const uint64_t before = grit::cpu::pair_path_calls();
        ASSERT_TRUE(kt.linear_tiles(plan, x.data(), m, bias.data(), 0, grit::cpu::linear_tile_count(c.n),
                                    got.data(), &fallback)
                        .ok());
        EXPECT_FALSE(fallback);
        EXPECT_EQ(grit::cpu::pair_path_calls() - before, variant == 0 ? 1u : 0u)
            << c.grade << " m=" << m << " x variant " << variant;
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
            << c.grade << " [" << c.n << ", " << c.k << "] m=" << m << " x variant " << variant;
      }
    }
  }
}

// Two weights side by side, [A | B] (each row A's row then B's), from their
// planes: per row, each plane's share of A then of B; a per-tensor plane
// (NVF4's level-1 scale) is A's. Needs every row to fill whole bytes.
std::vector<std::vector<uint8_t>> side_by_side(const grit::Grade& g, const std::vector<std::vector<uint8_t>>& a,
                                               const std::vector<std::vector<uint8_t>>& b, int64_t n, int64_t k) {
  uint64_t one[4], two[4], all[4];
  EXPECT_TRUE(grit::grade_plane_bytes(g, static_cast<uint64_t>(k), one).ok());
  EXPECT_TRUE(grit::grade_plane_bytes(g, static_cast<uint64_t>(2 * k), two).ok());
  EXPECT_TRUE(grit::grade_plane_bytes(g, static_cast<uint64_t>(n * k), all).ok());
  std::vector<std::vector<uint8_t>> out(4);
  for (int i = 0; i < 4; ++i) {
    if (one[i] == two[i]) {  // per tensor (or empty)
      out[i] = a[i];
      continue;
    }
    EXPECT_EQ(all[i], one[i] * static_cast<uint64_t>(n)) << "plane " << i << " rows are not whole bytes";
    for (int64_t r = 0; r < n; ++r) {
      out[i].insert(out[i].end(), a[i].begin() + r * one[i], a[i].begin() + (r + 1) * one[i]);
      out[i].insert(out[i].end(), b[i].begin() + r * one[i], b[i].begin() + (r + 1) * one[i]);
    }
  }
  return out;
}

// The law split at a group boundary (linear_law.h): the chain over B continued
// from the chain over A, then finished, is the chain over [A | B]: the bits a
// tensor-parallel ordered reduction relies on. Random planes (NaN and
// infinite scales) and encoded ones.
// Each half a whole number of groups (super-blocks for Q4KS) per row.
TEST(PackedLinearCpu, AChainContinuedAcrossAColumnCutIsTheWholeChain) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  const Case cases[] = {{"MXFP4", 17, 96}, {"MXFP4", 33, 512}, {"NVF4", 17, 48}, {"NVF4", 40, 160},
                        {"Q4KS", 8, 256},  {"Q4KS", 33, 512},  {"I8S24", 17, 96}, {"I8S24", 40, 288}};
  for (const Case& c : cases) {
    const grit::Grade& g = *grit::reference_grade(c.grade)->grade;
    for (int source = 0; source < 2; ++source) {
      auto a = random_planes(g, c.n, c.k, 40 + source), b = random_planes(g, c.n, c.k, 50 + source);
      if (source == 1) {
        std::vector<float> v(static_cast<size_t>(c.n * c.k));
        for (auto* planes : {&a, &b}) {
          for (auto& e : v) e = normal(rng);
          *planes = encoded(g, v);
        }
      }
      b[2] = a[2];  // one per-tensor scale (NVF4's) for both halves, as a cut weight has
      const auto ab = side_by_side(g, a, b, c.n, c.k);
      const int64_t m = 3, tiles = grit::cpu::linear_tile_count(c.n);
      std::vector<float> xa(static_cast<size_t>(m * c.k)), xb(xa.size()), x(static_cast<size_t>(m * 2 * c.k));
      std::vector<float> bias(static_cast<size_t>(c.n));
      for (auto& e : xa) e = normal(rng);
      for (auto& e : xb) e = normal(rng);
      for (auto& e : bias) e = normal(rng);
      for (int64_t i = 0; i < m; ++i) {
        std::copy(xa.begin() + i * c.k, xa.begin() + (i + 1) * c.k, x.begin() + i * 2 * c.k);
        std::copy(xb.begin() + i * c.k, xb.begin() + (i + 1) * c.k, x.begin() + i * 2 * c.k + c.k);
      }
      std::vector<float> want(static_cast<size_t>(m * c.n));
      ASSERT_TRUE(grit::cpu::linear_tiles(weight(g, ab, c.n, 2 * c.k), x.data(), m, bias.data(), 0, tiles,
                                          want.data())
                      .ok());
      std::vector<float> acc(want.size(), 0.0f);
      ASSERT_TRUE(grit::cpu::linear_tiles_continue(weight(g, a, c.n, c.k), xa.data(), m, 0, tiles, acc.data()).ok());
      ASSERT_TRUE(grit::cpu::linear_tiles_continue(weight(g, b, c.n, c.k), xb.data(), m, 0, tiles, acc.data()).ok());
      for (size_t t = 0; t < acc.size(); ++t) acc[t] = grit::law_finish(acc[t], &bias[t % c.n]);
      EXPECT_EQ(0, std::memcmp(acc.data(), want.data(), want.size() * sizeof(float)))
          << c.grade << " source " << source;
    }
  }
}

// Bits equal, or both NaN: a continued acc is not canonicalised (the
// finishing call does that), and NaN payloads are not the law's.
bool same_or_both_nan(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::isnan(a[i]) && std::isnan(b[i])) && std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return false;
  return true;
}

// A continued plan (LinearPlan::continued) on every variant: y's running
// acc continued over the weight's groups, the reference continuation's
// bits, at batch 1 (the GEMM, not the GEMV) and larger, from starting
// accs with NaN, infinities and signed zeros; random planes (NaN and
// infinite scales) and encoded ones. A group wider than the GEMM chunk
// falls back before writing anything.
TEST(PackedLinearCpu, EveryVariantContinuesAChainLikeTheReference) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  for (const Case& c : kCases) {
    const grit::Grade& g = *grit::reference_grade(c.grade)->grade;
    for (int source = 0; source < 2; ++source) {
      auto planes = random_planes(g, c.n, c.k, 60 + source);
      if (source == 1) {
        std::vector<float> v(static_cast<size_t>(c.n * c.k));
        for (auto& e : v) e = normal(rng);
        planes = encoded(g, v);
      }
      const grit::cpu::PackedWeight w = weight(g, planes, c.n, c.k);
      grit::cpu::LinearPlan plan;
      grit::cpu::make_plan(w, &plan);
      plan.continued = true;
      const int64_t tiles = grit::cpu::linear_tile_count(c.n);
      for (int64_t m : {1, 3, 9}) {
        std::vector<float> x(static_cast<size_t>(m * c.k)), start(static_cast<size_t>(m * c.n));
        for (auto& e : x) e = normal(rng);
        for (auto& e : start) e = 64.0f * normal(rng);
        start[0] = std::numeric_limits<float>::quiet_NaN();
        start[start.size() / 2] = std::numeric_limits<float>::infinity();
        start[start.size() - 1] = -0.0f;
        if (start.size() > 2) start[1] = -std::numeric_limits<float>::infinity();
        std::vector<float> want = start;
        ASSERT_TRUE(grit::cpu::linear_tiles_continue(w, x.data(), m, 0, tiles, want.data()).ok());
        for (Isa isa : supported()) {
          std::vector<float> got = start;
          bool fallback = false;
          ASSERT_TRUE(grit::cpu::kernels_for(isa).linear_tiles(plan, x.data(), m, nullptr, 0, tiles, got.data(),
                                                               &fallback).ok());
          EXPECT_FALSE(fallback) << grit::cpu::isa_name(isa) << " " << c.grade;
          EXPECT_TRUE(same_or_both_nan(got, want))
              << grit::cpu::isa_name(isa) << " " << c.grade << " [" << c.n << ", " << c.k << "] m " << m
              << " source " << source;
        }
      }
    }
  }
  // One group per row, wider than the GEMM chunk: the fast variants decline.
  grit::Grade wide;
  ASSERT_TRUE(grit::grade_parse("grit1(e=s8,k0=512,s0=binary16,esr=ratiomaxabs)", &wide).ok());
  const auto planes = random_planes(wide, 17, 512, 70);
  grit::cpu::LinearPlan plan;
  grit::cpu::make_plan(weight(wide, planes, 17, 512), &plan);
  EXPECT_EQ(plan.kind, grit::cpu::FastKind::kInt8Dense);
  plan.continued = true;
  std::vector<float> x(512, 1.0f), y(17, 2.0f);
  for (Isa isa : supported()) {
    if (isa == Isa::kScalar) continue;
    bool fallback = false;
    ASSERT_TRUE(grit::cpu::kernels_for(isa).linear_tiles(plan, x.data(), 1, nullptr, 0, 2, y.data(), &fallback).ok());
    EXPECT_TRUE(fallback) << grit::cpu::isa_name(isa);
    EXPECT_TRUE(std::all_of(y.begin(), y.end(), [](float v) { return v == 2.0f; })) << grit::cpu::isa_name(isa);
  }
}

}  // namespace
