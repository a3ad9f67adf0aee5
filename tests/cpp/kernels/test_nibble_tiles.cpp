// The CPU tile layout (kernels/cpu/nibble_tiles.h): untiling gives the
// planes back, and packed_linear over tiled planes returns the reference
// kernel's bits on every variant this CPU runs, batch 1 and larger,
// encoded planes and random ones (NaN, infinite and non-factoring scale
// codes included), the SIMD variants reading the tiles in place.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "grit/encode.h"
#include "grit/grit.h"
#include "kernels/cpu/nibble_tiles.h"
#include "nibble_planes.h"

namespace {

using grit::cpu::Isa;
using namespace nibble_test;  // Planes, random_planes, packed, activations

struct Shape {
  const char* grade;
  int64_t n, k;
};
const Shape kShapes[] = {{"MXFP4", 17, 96}, {"MXFP4", 33, 512}, {"MXFP4", 16, 32},
                         {"MXFP4", 48, 160}, {"NVF4", 17, 48},   {"NVF4", 40, 160}};

Planes encoded(const grit::Grade& g, int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(static_cast<size_t>(n * k));
  for (auto& e : v) e = normal(rng);
  grit::EncodedPlanes enc;
  EXPECT_TRUE(grit::encode(g, v.data(), v.size(), &enc).ok());
  Planes out;
  for (int i = 0; i < 4; ++i) out.p[i] = enc.plane[i];
  return out;
}

struct Tiled {
  std::vector<uint8_t> data, scale0;
};
Tiled tile(const grit::Grade& g, const Planes& pl, int64_t n, int64_t k) {
  Tiled t;
  t.data.resize(static_cast<size_t>(grit::cpu::tiled_plane_bytes(n, k / 2)));
  t.scale0.resize(static_cast<size_t>(grit::cpu::tiled_plane_bytes(n, k / g.k0)));
  grit::cpu::tile_plane(pl.p[0].data(), n, k / 2, t.data.data());
  grit::cpu::tile_plane(pl.p[1].data(), n, k / g.k0, t.scale0.data());
  return t;
}

grit::cpu::TiledNibbles tiled_weight(const grit::Grade& g, const Planes& pl, const Tiled& t, int64_t n, int64_t k) {
  grit::cpu::TiledNibbles w;
  w.grade = &g;
  w.n = n;
  w.k = k;
  w.data = t.data.data();
  w.scale0 = t.scale0.data();
  w.scale1 = grit::Plane{pl.p[2].data(), pl.p[2].size()};
  w.aux = grit::Plane{pl.p[3].data(), pl.p[3].size()};
  return w;
}

TEST(NibbleTiles, UntileGivesThePlanesBack) {
  for (const Shape& s : kShapes) {
    const grit::Grade& g = *grit::reference_grade(s.grade)->grade;
    const Planes pl = random_planes(g, s.n, s.k, 5);
    const Tiled t = tile(g, pl, s.n, s.k);
    EXPECT_EQ(t.data.size() % 64, 0u);
    std::vector<uint8_t> back(pl.p[0].size()), back_s(pl.p[1].size());
    grit::cpu::untile_plane(t.data.data(), s.k / 2, 0, s.n, back.data());
    grit::cpu::untile_plane(t.scale0.data(), s.k / g.k0, 0, s.n, back_s.data());
    EXPECT_EQ(back, pl.p[0]) << s.grade << " " << s.n << "x" << s.k;
    EXPECT_EQ(back_s, pl.p[1]) << s.grade << " " << s.n << "x" << s.k;
    // Dword q of row 16t + r at (t*Q + q)*64 + 4r; padding is zero.
    const int64_t q_row = grit::cpu::tiled_row_dwords(s.k / 2);
    const int64_t row = s.n - 1, q = (s.k / 2 - 1) / 4;
    const uint8_t* at = t.data.data() + ((row / 16) * q_row + q) * 64 + (row % 16) * 4;
    EXPECT_EQ(0, std::memcmp(at, pl.p[0].data() + row * (s.k / 2) + q * 4, 4));
    if (s.n % 16 != 0) {
      const uint8_t* pad = t.data.data() + ((row / 16) * q_row) * 64 + 4 * (s.n % 16);
      for (int i = 0; i < 4 * (16 - s.n % 16); ++i) EXPECT_EQ(pad[i], 0) << "padding row byte " << i;
    }
  }
}

TEST(NibbleTiles, EveryVariantGivesThePlanesBits) {
  for (const Shape& s : kShapes) {
    const grit::Grade& g = *grit::reference_grade(s.grade)->grade;
    for (int kind = 0; kind < 2; ++kind) {
      const Planes pl = kind == 0 ? encoded(g, s.n, s.k, 11) : random_planes(g, s.n, s.k, 13);
      const Tiled t = tile(g, pl, s.n, s.k);
      const grit::cpu::TiledNibbles tw = tiled_weight(g, pl, t, s.n, s.k);
      const grit::cpu::PackedWeight w = packed(g, pl, s.n, s.k);
      const int64_t tiles = grit::cpu::linear_tile_count(s.n);
      for (int64_t m : {1, 3}) {
        for (bool bf16 : {true, false}) {
          const std::vector<float> x = activations(m * s.k, bf16, 17);
          const std::vector<float> bias = activations(s.n, false, 19);
          std::vector<float> want(static_cast<size_t>(m * s.n));
          ASSERT_TRUE(grit::cpu::linear_tiles(w, x.data(), m, bias.data(), 0, tiles, want.data()).ok());
          for (Isa isa : grit::cpu::kAllIsas) {
            if (!grit::cpu::isa_supported(isa)) continue;
            std::vector<float> got(want.size(), -7.0f);
            // Two ranges, as two threads would split them.
            const auto& kt = grit::cpu::kernels_for(isa);
            ASSERT_TRUE(grit::cpu::tiled_linear_tiles(kt, tw, x.data(), m, bias.data(), 0, tiles / 2, got.data()).ok());
            ASSERT_TRUE(grit::cpu::tiled_linear_tiles(kt, tw, x.data(), m, bias.data(), tiles / 2, tiles, got.data()).ok());
            EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
                << grit::cpu::isa_name(isa) << " " << s.grade << " " << s.n << "x" << s.k << " m=" << m
                << (kind == 0 ? " encoded" : " random") << (bf16 ? " bf16 x" : " f32 x");
          }
        }
      }
    }
  }
}

// Every SIMD variant's linear_tiles decodes a tiled plan in place (scalar
// reads row-major planes only and says so): handed the tiled bytes, with no
// row-major copy anywhere, it returns the reference's bits on the planes,
// batch 1 and 3, bfloat16-exact and plain float32 x, with a scale code 0
// (2^-127, not factoring) in one tile, a NaN code in another and a partial
// last tile whose padding rows hold code 0. On avx512_bf16 the pair path
// runs for the bfloat16-exact x.
TEST(NibbleTiles, SimdVariantsReadTheTilesInPlace) {
  // Batches > 1 take the pair path on AMD cores only: force it on here, whatever the vendor.
  struct PairGemmOn {
    int prev = grit::cpu::set_pair_gemm(1);
    ~PairGemmOn() { grit::cpu::set_pair_gemm(prev); }
  } pair_gemm_on;
  const Shape shapes[] = {{"MXFP4", 57, 160}, {"NVF4", 40, 160}, {"MXFP4", 32, 4096}};
  for (const Shape& s : shapes) {
    const grit::Grade& g = *grit::reference_grade(s.grade)->grade;
    Planes pl = encoded(g, s.n, s.k, 23);
    const int64_t groups = s.k / g.k0;
    pl.p[1][1 * 16 * groups + 3 * groups + groups - 1] = 0;  // tile 1, row 3, last group
    pl.p[1][0 * 16 * groups + 15 * groups + 0] = 255;         // tile 0, row 15: NaN under E8M0
    const Tiled t = tile(g, pl, s.n, s.k);
    const grit::cpu::PackedWeight w = packed(g, pl, s.n, s.k);
    grit::cpu::PackedWeight side = w;
    side.planes[0] = side.planes[1] = grit::Plane{};
    grit::cpu::LinearPlan plan;
    grit::cpu::make_plan(side, &plan);
    ASSERT_EQ(plan.kind, grit::cpu::FastKind::kNibble) << s.grade;
    plan.tiled = true;
    plan.w.planes[0] = grit::Plane{t.data.data(), t.data.size()};
    plan.w.planes[1] = grit::Plane{t.scale0.data(), t.scale0.size()};
    const int64_t tiles = grit::cpu::linear_tile_count(s.n);
    for (Isa isa : grit::cpu::kAllIsas) {
      if (!grit::cpu::isa_supported(isa)) continue;
      const auto& kt = grit::cpu::kernels_for(isa);
      EXPECT_EQ(kt.reads_tiles, isa != Isa::kScalar) << grit::cpu::isa_name(isa);
      if (!kt.reads_tiles) continue;
      for (int64_t m : {1, 3}) {
        for (bool bf16 : {true, false}) {
          const std::vector<float> x = activations(m * s.k, bf16, 29);
          std::vector<float> want(static_cast<size_t>(m * s.n)), got(want.size(), -7.0f);
          ASSERT_TRUE(grit::cpu::linear_tiles(w, x.data(), m, nullptr, 0, tiles, want.data()).ok());
          const uint64_t pairs = grit::cpu::pair_path_calls();
          bool fallback = false;
          ASSERT_TRUE(kt.linear_tiles(plan, x.data(), m, nullptr, 0, tiles, got.data(), &fallback).ok());
          EXPECT_FALSE(fallback);
          EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
              << grit::cpu::isa_name(isa) << " " << s.grade << " " << s.n << "x" << s.k << " m=" << m
              << (bf16 ? " bf16 x" : " f32 x");
          if (isa == Isa::kAvx512Bf16 && bf16 && std::string(s.grade) == "MXFP4") {
            EXPECT_GT(grit::cpu::pair_path_calls(), pairs) << "the pair path did not run, m=" << m;
          }
        }
      }
    }
  }
}

}  // namespace
