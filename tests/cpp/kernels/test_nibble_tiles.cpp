// The CPU tile layout (kernels/cpu/nibble_tiles.h): untiling gives the
// planes back, and packed_linear and decode over tiled planes return the
// reference kernel's bits on every variant this CPU runs, batch 1 and
// larger, encoded planes and random ones (NaN, infinite and non-factoring
// scale codes included), the SIMD variants reading the tiles in place;
// every kind with a fast decoder: MXFP4, NVF4, Q4KS, I8S24 (whose irregular
// quads are refused), ggml Q8_0's grade and the dense int8 groups, GPTQ/AWQ's
// u4 with zero points and compressed-tensors' s4 groups, per-channel ones
// included.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
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
constexpr const char* kQ8_0 = "grit1(e=s8,k0=32,s0=binary16,esr=ratiomaxabs)";
constexpr const char* kS8G128 = "grit1(e=s8,k0=128,s0=binary16,esr=ratiomaxabs)";  // scales at 2-byte offsets
constexpr const char* kS8Row = "grit1(e=s8,k0=160,s0=binary32,esr=ratiomaxabs)";   // one group per row
constexpr const char* kU4ZG32 = "grit1(e=u4,k0=32,s0=binary16,zp=u4,esr=affineminmax)";
constexpr const char* kU4ZG128 = "grit1(e=u4,k0=128,s0=binary16,zp=u4,esr=affineminmax)";
constexpr const char* kS4G64 = "grit1(e=s4,k0=64,s0=binary16,esr=ratiomaxabs)";
constexpr const char* kS4Row = "grit1(e=s4,k0=256,s0=binary32,esr=ratiomaxabs)";

// Q4KS at k = 160 and 96: level-1 groups of 8 straddle rows (n * k/32 a multiple of 8).
const Shape kShapes[] = {{"MXFP4", 17, 96}, {"MXFP4", 33, 512}, {"MXFP4", 16, 32}, {"MXFP4", 48, 160},
                         {"NVF4", 17, 48},  {"NVF4", 40, 160},  {"Q4KS", 37, 512}, {"Q4KS", 40, 160},
                         {"Q4KS", 16, 96},  {"Q4KS", 5, 2048},  {"I8S24", 37, 160}, {"I8S24", 16, 32},
                         {"I8S24", 33, 1024}, {kQ8_0, 17, 96},  {kQ8_0, 33, 512},  {kS8G128, 20, 384},
                         {kS8Row, 9, 160},  {kU4ZG32, 40, 160}, {kU4ZG128, 17, 384}, {kS4G64, 19, 192},
                         {kS4Row, 17, 256}};

// A reference name or a canonical grade string.
const grit::Grade& grade_of(const char* name) {
  static std::map<std::string, grit::Grade> parsed;
  if (const auto* ref = grit::reference_grade(name)) return *ref->grade;
  auto it = parsed.find(name);
  if (it == parsed.end()) {
    grit::Grade g;
    EXPECT_TRUE(grit::grade_parse(name, &g).ok()) << name;
    it = parsed.emplace(name, g).first;
  }
  return it->second;
}

// Random I8S24 positions name one position twice now and then; the layout
// needs every quad to name two (the encoder's planes always do): the second
// position moves to the next one, mod 4.
void make_quads_regular(const grit::Grade& g, Planes* pl) {
  if (!g.has_sp) return;
  for (auto& b : pl->p[3]) {
    for (int q = 0; q < 2; ++q) {
      const int i0 = (b >> (4 * q)) & 3, i1 = (b >> (4 * q + 2)) & 3;
      if (i0 == i1) b = static_cast<uint8_t>(b ^ (((i1 ^ ((i1 + 1) & 3)) & 3) << (4 * q + 2)));
    }
  }
}

Planes random_regular(const grit::Grade& g, int64_t n, int64_t k, uint32_t seed) {
  Planes pl = random_planes(g, n, k, seed);
  make_quads_regular(g, &pl);
  return pl;
}

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
  const int64_t db = grit::cpu::tiled_data_row_bytes(g, k), sb = grit::cpu::tiled_scale_row_bytes(g, k);
  EXPECT_EQ(static_cast<uint64_t>(n * db), pl.p[0].size()) << g.canonical;
  EXPECT_EQ(static_cast<uint64_t>(n * sb), pl.p[1].size()) << g.canonical;
  Tiled t;
  t.data.resize(static_cast<size_t>(grit::cpu::tiled_plane_bytes(n, db)));
  t.scale0.resize(static_cast<size_t>(grit::cpu::tiled_plane_bytes(n, sb)));
  grit::cpu::tile_plane(pl.p[0].data(), n, db, t.data.data());
  grit::cpu::tile_plane(pl.p[1].data(), n, sb, t.scale0.data());
  return t;
}

// The grade's plan for w (its tables from the side planes), pointed at the
// tiles as the SIMD variants read them in place.
grit::cpu::LinearPlan tiled_plan(const grit::cpu::PackedWeight& w, const Tiled& t) {
  grit::cpu::PackedWeight side = w;
  side.planes[0] = side.planes[1] = grit::Plane{};
  grit::cpu::LinearPlan plan;
  grit::cpu::make_plan(side, &plan);
  plan.tiled = true;
  plan.w.planes[0] = grit::Plane{t.data.data(), t.data.size()};
  plan.w.planes[1] = grit::Plane{t.scale0.data(), t.scale0.size()};
  return plan;
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
    const grit::Grade& g = grade_of(s.grade);
    const Planes pl = random_planes(g, s.n, s.k, 5);
    const Tiled t = tile(g, pl, s.n, s.k);
    const int64_t db = grit::cpu::tiled_data_row_bytes(g, s.k);  // k/2, or k for dense int8
    EXPECT_EQ(t.data.size() % 64, 0u);
    std::vector<uint8_t> back(pl.p[0].size()), back_s(pl.p[1].size());
    grit::cpu::untile_plane(t.data.data(), db, 0, s.n, back.data());
    grit::cpu::untile_plane(t.scale0.data(), grit::cpu::tiled_scale_row_bytes(g, s.k), 0, s.n, back_s.data());
    EXPECT_EQ(back, pl.p[0]) << s.grade << " " << s.n << "x" << s.k;
    EXPECT_EQ(back_s, pl.p[1]) << s.grade << " " << s.n << "x" << s.k;
    // Dword q of row 16t + r at (t*Q + q)*64 + 4r; padding is zero.
    const int64_t q_row = grit::cpu::tiled_row_dwords(db);
    const int64_t row = s.n - 1, q = (db - 1) / 4;
    const uint8_t* at = t.data.data() + ((row / 16) * q_row + q) * 64 + (row % 16) * 4;
    EXPECT_EQ(0, std::memcmp(at, pl.p[0].data() + row * db + q * 4, 4));
    if (s.n % 16 != 0) {
      const uint8_t* pad = t.data.data() + ((row / 16) * q_row) * 64 + 4 * (s.n % 16);
      for (int i = 0; i < 4 * (16 - s.n % 16); ++i) EXPECT_EQ(pad[i], 0) << "padding row byte " << i;
    }
  }
}

TEST(NibbleTiles, EveryVariantGivesThePlanesBits) {
  for (const Shape& s : kShapes) {
    const grit::Grade& g = grade_of(s.grade);
    for (int kind = 0; kind < 2; ++kind) {
      if (kind == 0 && s.k % (g.k0 * (g.k1 ? g.k1 : 1)) != 0) continue;  // the encoder's groups are whole rows
      const Planes pl = kind == 0 ? encoded(g, s.n, s.k, 11) : random_regular(g, s.n, s.k, 13);
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
    const grit::Grade& g = grade_of(s.grade);
    Planes pl = encoded(g, s.n, s.k, 23);
    const int64_t groups = s.k / g.k0;
    pl.p[1][1 * 16 * groups + 3 * groups + groups - 1] = 0;  // tile 1, row 3, last group
    pl.p[1][0 * 16 * groups + 15 * groups + 0] = 255;         // tile 0, row 15: NaN under E8M0
    const Tiled t = tile(g, pl, s.n, s.k);
    const grit::cpu::PackedWeight w = packed(g, pl, s.n, s.k);
    const grit::cpu::LinearPlan plan = tiled_plan(w, t);
    ASSERT_EQ(plan.kind, grit::cpu::FastKind::kNibble) << s.grade;
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

// Decode over tiled planes (dequantize and grad_input's W) is the reference
// decode's bits on every variant, for tile ranges as threads split them.
TEST(NibbleTiles, DecodeOfTilesIsTheReferenceDecode) {
  for (const Shape& s : kShapes) {
    const grit::Grade& g = grade_of(s.grade);
    const Planes pl = random_regular(g, s.n, s.k, 31);
    const Tiled t = tile(g, pl, s.n, s.k);
    const grit::cpu::TiledNibbles tw = tiled_weight(g, pl, t, s.n, s.k);
    const grit::cpu::PackedWeight w = packed(g, pl, s.n, s.k);
    std::vector<float> want(static_cast<size_t>(s.n * s.k));
    uint64_t cursor = 0;
    ASSERT_TRUE(grit::cpu::decode_rows(w, 0, s.n, &cursor, want.data()).ok());
    const int64_t tiles = grit::cpu::linear_tile_count(s.n), half = tiles / 2;
    for (Isa isa : grit::cpu::kAllIsas) {
      if (!grit::cpu::isa_supported(isa)) continue;
      const auto& kt = grit::cpu::kernels_for(isa);
      std::vector<float> got(want.size(), -7.0f);
      ASSERT_TRUE(grit::cpu::tiled_decode_tiles(kt, tw, 0, half, got.data()).ok());
      ASSERT_TRUE(grit::cpu::tiled_decode_tiles(kt, tw, half, tiles, got.data() + half * 16 * s.k).ok());
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
          << grit::cpu::isa_name(isa) << " " << s.grade << " " << s.n << "x" << s.k;
    }
  }
}

// The SIMD decoders of Q4KS and I8S24 read their tiles in place, batch 1
// and larger, with non-finite scales: a NaN level-1 pair and a zero-point
// scale of infinity (Q4KS), a binary16 NaN and infinity (I8S24).
TEST(NibbleTiles, AffineAndSparseTilesAreReadInPlace) {
  const Shape shapes[] = {{"Q4KS", 57, 512}, {"Q4KS", 32, 4096}, {"I8S24", 57, 160}, {"I8S24", 32, 4096}};
  for (const Shape& s : shapes) {
    const grit::Grade& g = grade_of(s.grade);
    Planes pl = encoded(g, s.n, s.k, 37);
    if (g.has_sp) {
      const int64_t row = s.k / 32 * 2;  // binary16 scales a row
      pl.p[1][20 * row + 2] = 0x00;  // row 20, group 1: 0x7E00, a NaN
      pl.p[1][20 * row + 3] = 0x7E;
      pl.p[1][3 * row + 0] = 0x00;  // row 3, group 0: +inf
      pl.p[1][3 * row + 1] = 0x7C;
    } else {
      pl.p[2][4 * 3 + 0] = 0x00;  // level-1 pair 3: d = NaN
      pl.p[2][4 * 3 + 1] = 0x7E;
      pl.p[2][4 * 9 + 2] = 0x00;  // pair 9: dmin = +inf
      pl.p[2][4 * 9 + 3] = 0x7C;
    }
    const Tiled t = tile(g, pl, s.n, s.k);
    const grit::cpu::PackedWeight w = packed(g, pl, s.n, s.k);
    const grit::cpu::LinearPlan plan = tiled_plan(w, t);
    ASSERT_TRUE(grit::cpu::tile_layout_kind(plan.kind)) << s.grade;
    ASSERT_NE(plan.kind, grit::cpu::FastKind::kNibble) << s.grade;
    const int64_t tiles = grit::cpu::linear_tile_count(s.n);
    for (Isa isa : grit::cpu::kAllIsas) {
      if (!grit::cpu::isa_supported(isa)) continue;
      const auto& kt = grit::cpu::kernels_for(isa);
      if (!kt.reads_tiles) continue;
      for (int64_t m : {1, 3, 9}) {
        const std::vector<float> x = activations(m * s.k, false, 41);
        const std::vector<float> bias = activations(s.n, false, 43);
        std::vector<float> want(static_cast<size_t>(m * s.n)), got(want.size(), -7.0f);
        ASSERT_TRUE(grit::cpu::linear_tiles(w, x.data(), m, bias.data(), 0, tiles, want.data()).ok());
        bool fallback = false;
        ASSERT_TRUE(kt.linear_tiles(plan, x.data(), m, bias.data(), 0, tiles, got.data(), &fallback).ok());
        EXPECT_FALSE(fallback);
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
            << grit::cpu::isa_name(isa) << " " << s.grade << " " << s.n << "x" << s.k << " m=" << m;
        bool nan = false;
        for (float v : want) nan = nan || std::isnan(v);
        EXPECT_TRUE(nan) << "the non-finite scales reach y";
      }
    }
  }
}

// A sparse weight whose quad names one position twice has no fixed row
// offsets: every tiled route refuses it with a message, never a wrong y.
TEST(NibbleTiles, IrregularSparseTilesAreRefused) {
  const grit::Grade& g = *grit::reference_grade("I8S24")->grade;
  const int64_t n = 20, k = 128;
  Planes pl = random_regular(g, n, k, 47);
  EXPECT_TRUE(grit::cpu::sparse_quads_regular(pl.p[3].data(), pl.p[3].size()));
  pl.p[3][7 * (k / 8) + 3] = 0x55;  // row 7: both quads name position 1 twice
  EXPECT_FALSE(grit::cpu::sparse_quads_regular(pl.p[3].data(), pl.p[3].size()));
  const Tiled t = tile(g, pl, n, k);
  const grit::cpu::TiledNibbles tw = tiled_weight(g, pl, t, n, k);
  const std::vector<float> x = activations(k, false, 53);
  for (Isa isa : grit::cpu::kAllIsas) {
    if (!grit::cpu::isa_supported(isa)) continue;
    const auto& kt = grit::cpu::kernels_for(isa);
    std::vector<float> y(static_cast<size_t>(n)), out(static_cast<size_t>(n * k));
    const grit::Status s = grit::cpu::tiled_linear_tiles(kt, tw, x.data(), 1, nullptr, 0, 2, y.data());
    EXPECT_FALSE(s.ok()) << grit::cpu::isa_name(isa);
    EXPECT_NE(s.message.find("two distinct positions"), std::string::npos) << s.message;
    EXPECT_FALSE(grit::cpu::tiled_decode_tiles(kt, tw, 0, 2, out.data()).ok()) << grit::cpu::isa_name(isa);
  }
}

}  // namespace
