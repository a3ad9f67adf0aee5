// The bf16 law's kernel (kernels/cpu/bf16_amx.h): the packers against the
// law's from_float and the layouts' index formulas, the scalar multiply
// against grit::bf16::dot on the unpacked operands, and the AMX tile
// multiplies and the vdpbf16ps route (bf16_dpbf16.h) against the scalar one
// bit for bit on data sets that reach the flushes, infinities and NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "grit/bf16_linear.h"
#include "kernels/cpu/bf16_amx.h"
#include "kernels/cpu/bf16_dpbf16.h"
#include "kernels/cpu/packed_linear_cpu.h"
#include "nibble_planes.h"

namespace bf = grit::bf16;
using grit::cpu::kBf16Tile;

namespace {

// A 64-byte aligned vector.
template <class T>
struct Buf {
  std::vector<T> raw;
  T* p;
  explicit Buf(size_t n) : raw(n + 64 / sizeof(T), T{}), p(grit::cpu::align64(raw.data())) {}
};

// Float32 values of every kind: normal, subnormal, zero, ties, infinities, NaN.
float random_float(std::mt19937& rng) {
  const uint32_t r = rng();
  switch (r % 16) {
    case 0: return bf::float_of(r & 0x807FFFFFu);                            // subnormal or zero
    case 1: return bf::float_of((r & 0xFFFF0000u) | 0x8000u);                // a tie
    case 2: return bf::float_of((r & 0x80000000u) | 0x7F800000u);            // infinity
    case 3: return bf::float_of((r & 0x803FFFFFu) | 0x7FC00000u);            // NaN
    case 4: return bf::float_of((r & 0x807FFFFFu) | 0x7F000000u);            // near overflow
    case 5: return bf::float_of((r & 0x807FFFFFu) | 0x00800000u);            // near 2^-126
    default: return std::ldexp(static_cast<float>(static_cast<int32_t>(r)) / 2147483648.0f, static_cast<int>(r % 40) - 20);
  }
}

// A bfloat16 for the multiply's data sets: exponent field in [lo, hi], a
// quarter subnormal when asked, one in 64 infinite when asked.
uint16_t random_bf16(std::mt19937& rng, int lo, int hi, bool subnormals, bool specials) {
  const uint32_t r = rng();
  int e = lo + static_cast<int>(r % static_cast<uint32_t>(hi - lo + 1));
  if (subnormals && (r >> 24) % 4 == 0) e = 0;
  if (specials && (r >> 26) % 64 == 0) return static_cast<uint16_t>(((r >> 20) & 1u) << 15 | 0x7F80u);
  return static_cast<uint16_t>(((r >> 20) & 1u) << 15 | static_cast<uint32_t>(e) << 7 | ((r >> 8) & 0x7Fu));
}

bool same(float a, float b) { return (std::isnan(a) && std::isnan(b)) || bf::bits_of(a) == bf::bits_of(b); }

struct ModeGuard {
  int before;
  explicit ModeGuard(int mode) : before(grit::cpu::set_bf16_amx(mode)) {}
  ~ModeGuard() { grit::cpu::set_bf16_amx(before); }
};

}  // namespace

TEST(Bf16Kernel, PackRowsIsFromFloat) {
  std::mt19937 rng(1);
  for (int64_t len : {1, 16, 31, 32, 45, 100}) {
    const int64_t m = 19, mp = 32, nc = bf::chunks(len);
    std::vector<float> src(m * len);
    for (auto& v : src) v = random_float(rng);
    Buf<uint16_t> A(mp * nc * kBf16Tile);
    grit::cpu::bf16_pack_rows(src.data(), len, m, len, mp, A.p);
    for (int64_t i = 0; i < mp; ++i)
      for (int64_t c = 0; c < nc * 32; ++c) {
        const uint16_t got = A.p[((i / 16) * nc + c / 32) * kBf16Tile + (i % 16) * 32 + c % 32];
        const uint16_t want = i < m && c < len ? bf::from_float(src[i * len + c]) : 0;
        ASSERT_EQ(got, want) << "len " << len << " row " << i << " col " << c << " value bits "
                             << (i < m && c < len ? bf::bits_of(src[i * len + c]) : 0u);
      }
    // bfloat16 rows: their bits as they are
    std::vector<uint16_t> bits(m * len);
    for (auto& v : bits) v = static_cast<uint16_t>(rng());
    grit::cpu::bf16_pack_rows_bits(bits.data(), len, m, len, mp, A.p);
    for (int64_t i = 0; i < mp; ++i)
      for (int64_t c = 0; c < nc * 32; ++c)
        ASSERT_EQ(A.p[((i / 16) * nc + c / 32) * kBf16Tile + (i % 16) * 32 + c % 32],
                  i < m && c < len ? bits[i * len + c] : 0);
  }
}

TEST(Bf16Kernel, PackWeightLayouts) {
  std::mt19937 rng(2);
  for (int64_t k : {16, 32, 48, 96, 130}) {
    const int64_t nc = bf::chunks(k);
    for (int rows : {1, 17, 32}) {
      std::vector<float> w(32 * k);
      for (auto& v : w) v = random_float(rng);
      Buf<uint16_t> B(nc * 2 * kBf16Tile);
      grit::cpu::bf16_pack_weight_rows(w.data(), k, rows, k, B.p);
      for (int64_t c = 0; c < nc; ++c)
        for (int h = 0; h < 2; ++h)
          for (int p = 0; p < 16; ++p)
            for (int j = 0; j < 16; ++j)
              for (int q = 0; q < 2; ++q) {
                const int r = 16 * h + j;
                const int64_t col = 32 * c + 2 * p + q;
                ASSERT_EQ(B.p[(c * 2 + h) * kBf16Tile + p * 32 + j * 2 + q],
                          r < rows && col < k ? bf::from_float(w[r * k + col]) : 0)
                    << "k " << k << " rows " << rows;
              }
    }
    // grad_input's: 16 rows at reduction position `first` of a block of 3 chunks
    for (int rows : {5, 16})
      for (int64_t first : {0, 16, 48, 80}) {
        const int64_t block = 3, pairs = nc;
        std::vector<float> w(16 * k);
        for (auto& v : w) v = random_float(rng);
        Buf<uint16_t> B(pairs * block * 2 * kBf16Tile);
        std::fill(B.raw.begin(), B.raw.end(), 0xABCD);
        grit::cpu::bf16_pack_weight_cols(w.data(), k, rows, k, first, block, B.p);
        for (int r = 0; r < 16; ++r) {
          const int64_t pos = first + r, cl = pos / 32, p = (pos % 32) / 2, q = pos % 2;
          for (int64_t col = 0; col < 32 * pairs; ++col) {
            const int64_t pair = col / 32, h = (col % 32) / 16, j = col % 16;
            ASSERT_EQ(B.p[((pair * block + cl) * 2 + h) * kBf16Tile + p * 32 + j * 2 + q],
                      r < rows && col < k ? bf::from_float(w[r * k + col]) : 0)
                << "k " << k << " first " << first << " r " << r << " col " << col;
          }
        }
      }
  }
}

namespace {

// Random A ([mp rows][a_chunks]) and B ([npairs][nc]) from one data set, and C.
struct Operands {
  int64_t mp, a_chunks, c0, nc, npairs, ldc;
  Buf<uint16_t> A, B;
  std::vector<float> C;
  Operands(std::mt19937& rng, int set, int64_t mp_, int64_t a_chunks_, int64_t c0_, int64_t nc_, int64_t npairs_)
      : mp(mp_), a_chunks(a_chunks_), c0(c0_), nc(nc_), npairs(npairs_), ldc(32 * npairs_ + 8),
        A(mp_ * a_chunks_ * kBf16Tile), B(npairs_ * nc_ * 2 * kBf16Tile), C(mp_ * ldc) {
    static const int kSets[5][2] = {{120, 135}, {60, 199}, {1, 40}, {60, 67}, {100, 150}};
    const int lo = kSets[set][0], hi = kSets[set][1];
    for (size_t i = 0; i < mp * a_chunks * kBf16Tile; ++i) A.p[i] = random_bf16(rng, lo, hi, set == 2 || set == 4, set == 4);
    for (size_t i = 0; i < npairs * nc * 2 * kBf16Tile; ++i) B.p[i] = random_bf16(rng, lo, hi, set == 2 || set == 4, set == 4);
    for (auto& v : C) {
      const uint32_t u = rng();
      v = set == 3 ? 0.0f : bf::float_of((u & 0x807FFFFFu) | (120u + u % 16) << 23);
    }
  }
};

}  // namespace

TEST(Bf16Kernel, ScalarMultiplyIsTheLaw) {
  ModeGuard scalar(0);
  std::mt19937 rng(5);
  Operands o(rng, 0, 32, 4, 1, 3, 2);
  const std::vector<float> C0 = o.C;
  for (bool accumulate : {false, true}) {
    o.C = C0;
    grit::cpu::bf16_gemm(o.A.p, o.a_chunks, o.c0, o.nc, o.mp, o.B.p, o.nc, o.npairs, o.C.data(), o.ldc, accumulate);
    for (int64_t i = 0; i < o.mp; ++i)
      for (int64_t col = 0; col < 32 * o.npairs; ++col) {
        const int64_t pair = col / 32, h = (col % 32) / 16, j = col % 16;
        float acc = accumulate ? C0[i * o.ldc + col] : 0.0f, av[32], bv[32];
        for (int64_t c = 0; c < o.nc; ++c) {
          for (int t = 0; t < 32; ++t) {
            av[t] = bf::value(o.A.p[((i / 16) * o.a_chunks + o.c0 + c) * kBf16Tile + (i % 16) * 32 + t]);
            bv[t] = bf::value(o.B.p[((pair * o.nc + c) * 2 + h) * kBf16Tile + (t / 2) * 32 + j * 2 + t % 2]);
          }
          acc = bf::chunk(acc, av, bv);
        }
        ASSERT_EQ(bf::bits_of(o.C[i * o.ldc + col]), bf::bits_of(acc)) << i << " " << col;
      }
    // the columns between the pairs' and ldc are not written
    for (int64_t i = 0; i < o.mp; ++i)
      for (int64_t col = 32 * o.npairs; col < o.ldc; ++col) ASSERT_EQ(o.C[i * o.ldc + col], C0[i * o.ldc + col]);
  }
}

TEST(Bf16Kernel, TileMultipliesMatchTheScalarLaw) {
  if (!grit::cpu::bf16_amx_ready())
    GTEST_SKIP() << "this CPU has no AMX-BF16 (or Linux did not grant the tile state, or its tile multiply "
                    "does not follow the law's order): the scalar copy runs instead";
  std::mt19937 rng(9);
  const uint64_t calls = grit::cpu::bf16_amx_calls();
  for (int set = 0; set < 5; ++set)
    for (int64_t mp : {32, 64})
      for (int64_t npairs : {1, 3})
        for (bool accumulate : {false, true}) {
          Operands o(rng, set, mp, 5, 1, 4, npairs);
          std::vector<float> amx = o.C, ref = o.C;
          {
            ModeGuard on(1);
            grit::cpu::bf16_gemm(o.A.p, o.a_chunks, o.c0, o.nc, o.mp, o.B.p, o.nc, o.npairs, amx.data(), o.ldc, accumulate);
          }
          {
            ModeGuard off(0);
            grit::cpu::bf16_gemm(o.A.p, o.a_chunks, o.c0, o.nc, o.mp, o.B.p, o.nc, o.npairs, ref.data(), o.ldc, accumulate);
          }
          for (size_t i = 0; i < amx.size(); ++i)
            ASSERT_TRUE(same(amx[i], ref[i])) << "set " << set << " mp " << mp << " npairs " << npairs << " acc "
                                               << accumulate << " at " << i << ": " << amx[i] << " vs " << ref[i];
        }
  EXPECT_GT(grit::cpu::bf16_amx_calls(), calls);
}

// The vdpbf16ps route: the scalar copy's bits on every data set, with
// reductions shorter and longer than its 16-chunk blocks (and not a
// multiple of them), batches within and past its 256-row panels, one to
// three column pairs, from zero and continuing.
TEST(Bf16Kernel, VectorDotsMatchTheScalarLaw) {
  if (!grit::cpu::bf16_dp_ready())
    GTEST_SKIP() << "this CPU has no AVX512_BF16 (or its vdpbf16ps does not follow the law's order): the "
                    "scalar copy runs instead";
  std::mt19937 rng(10);
  const uint64_t calls = grit::cpu::bf16_dp_calls();
  for (int set = 0; set < 5; ++set)
    for (int64_t mp : {32, 96, 288})
      for (int64_t nc : {1, 5, 16, 21})
        for (int64_t npairs : {1, 3})
          for (bool accumulate : {false, true}) {
            Operands o(rng, set, mp, nc + 2, 1, nc, npairs);
            std::vector<float> dp = o.C, ref = o.C;
            {
              ModeGuard vector(2);
              grit::cpu::bf16_gemm(o.A.p, o.a_chunks, o.c0, o.nc, o.mp, o.B.p, o.nc, o.npairs, dp.data(), o.ldc,
                                   accumulate);
            }
            {
              ModeGuard off(0);
              grit::cpu::bf16_gemm(o.A.p, o.a_chunks, o.c0, o.nc, o.mp, o.B.p, o.nc, o.npairs, ref.data(), o.ldc,
                                   accumulate);
            }
            for (size_t i = 0; i < dp.size(); ++i)
              ASSERT_TRUE(same(dp[i], ref[i])) << "set " << set << " mp " << mp << " nc " << nc << " npairs " << npairs
                                               << " acc " << accumulate << " at " << i << ": " << dp[i] << " vs "
                                               << ref[i];
          }
  EXPECT_GT(grit::cpu::bf16_dp_calls(), calls);
}

// The route restores the caller's MXCSR (it sets flush-to-zero for its own adds).
TEST(Bf16Kernel, VectorDotsLeaveTheFloatEnvironment) {
  if (!grit::cpu::bf16_dp_ready()) GTEST_SKIP() << "this CPU has no AVX512_BF16 vdpbf16ps route";
  std::mt19937 rng(12);
  Operands o(rng, 0, 32, 3, 0, 3, 1);
  ModeGuard vector(2);
  volatile float tiny = 0x1p-126f;
  grit::cpu::bf16_gemm(o.A.p, o.a_chunks, 0, 3, o.mp, o.B.p, 3, 1, o.C.data(), o.ldc, false);
  EXPECT_EQ(tiny * 0.5f, 0x1p-127f);  // a subnormal result survives: no flush-to-zero left behind
}

// bf16_finish_row: the sum with the bias in binary32, a NaN canonical, and
// the bfloat16 store rounding to nearest even (ties, subnormals, overflow to
// infinity) for any length, with and without a bias.
TEST(Bf16Kernel, FinishRowIsStepThreeOfTheLaw) {
  std::mt19937 rng(17);
  auto random_float = [&rng]() {
    const uint32_t u = rng();
    switch (u % 8) {
      case 0: return bf::float_of(u & 0x807FFFFFu);                        // subnormal or zero
      case 1: return bf::float_of((u & 0x80000000u) | 0x7F800000u);        // infinity
      case 2: return bf::float_of(0x7F800001u | (u & 0x803FFFFFu));        // a NaN
      case 3: return bf::float_of((u & 0xFFFF0000u) | 0x8000u);            // a tie
      case 4: return bf::float_of((u & 0x80000000u) | 0x7F7F8000u | (u & 0x7FFFu));  // rounds to infinity or not
      default: return bf::float_of(u);
    }
  };
  for (int64_t len : {0, 1, 15, 16, 17, 40, 128})
    for (bool with_bias : {false, true}) {
      std::vector<float> acc(len), bias(len), f32(len);
      std::vector<uint16_t> b16(len);
      for (int64_t j = 0; j < len; ++j) acc[j] = random_float(), bias[j] = random_float();
      const float* bp = with_bias ? bias.data() : nullptr;
      grit::cpu::bf16_finish_row(acc.data(), bp, len, f32.data(), false);
      grit::cpu::bf16_finish_row(acc.data(), bp, len, b16.data(), true);
      for (int64_t j = 0; j < len; ++j) {
        const float v = with_bias ? acc[j] + bias[j] : acc[j];
        const uint32_t u = bf::bits_of(v);
        const uint32_t want32 = std::isnan(v) ? 0x7FC00000u : u;
        const uint16_t want16 = std::isnan(v) ? 0x7FC0 : static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
        ASSERT_EQ(bf::bits_of(f32[j]), want32) << "len " << len << " bias " << with_bias << " at " << j;
        ASSERT_EQ(b16[j], want16) << "len " << len << " bias " << with_bias << " at " << j;
      }
    }
}

// A reduction run in two parts, the second from the middle of each pair's
// chunks of B (b_chunks the pairs' stride) and continuing from the first's
// C, gives one multiply's bits: the forward's parts of a long k.
TEST(Bf16Kernel, AReductionInPartsContinuesTheChain) {
  std::mt19937 rng(13);
  for (int mode : {0, 1, 2}) {
    // the scalar copy is checked always, the tiles and vdpbf16ps where this CPU runs them
    if (mode == 1 && !grit::cpu::bf16_amx_ready()) continue;
    if (mode == 2 && !grit::cpu::bf16_dp_ready()) continue;
    ModeGuard guard(mode);
    for (int set = 0; set < 5; ++set)
      for (bool accumulate : {false, true}) {
        Operands o(rng, set, 64, 7, 0, 7, 3);
        std::vector<float> whole = o.C, parts = o.C;
        grit::cpu::bf16_gemm(o.A.p, o.a_chunks, 0, 7, o.mp, o.B.p, 7, o.npairs, whole.data(), o.ldc, accumulate);
        grit::cpu::bf16_gemm(o.A.p, o.a_chunks, 0, 3, o.mp, o.B.p, 7, o.npairs, parts.data(), o.ldc, accumulate);
        grit::cpu::bf16_gemm(o.A.p, o.a_chunks, 3, 4, o.mp, o.B.p + 3 * 2 * kBf16Tile, 7, o.npairs, parts.data(),
                             o.ldc, true);
        for (size_t i = 0; i < whole.size(); ++i)
          ASSERT_TRUE(same(whole[i], parts[i])) << "mode " << mode << " set " << set << " acc " << accumulate << " at "
                                                << i << ": " << whole[i] << " vs " << parts[i];
      }
  }
}

// KernelTable::decode_columns (the forward's route into B): every variant's
// columns are the reference decode's rows, and B packed from them is B
// packed from the rows; so is B from KernelTable::bf16_pack_tile (the
// decoder's registers straight into B) where the variant has it, and
// grad_input's B from bf16_pack_cols_tile is the column packer's.
TEST(Bf16Kernel, DecodedColumnsAreTheDecode) {
  const int64_t shapes[][2] = {{17, 128}, {32, 384}, {40, 256}, {20, 80}};  // 80: a last chunk of 16 positions
  nibble_test::for_each_random_weight(shapes, 7, [&](const char* name, const grit::Grade& g, int64_t n, int64_t k,
                                                     const grit::cpu::PackedWeight& w, const std::vector<float>& ref) {
    grit::cpu::LinearPlan plan;
    grit::cpu::make_plan(w, &plan);
    const int64_t tiles = grit::cpu::linear_tile_count(n);
    for (grit::cpu::Isa isa : grit::cpu::kAllIsas) {
      if (!grit::cpu::isa_supported(isa)) continue;
      const auto& kt = grit::cpu::kernels_for(isa);
      if (kt.decode_columns == nullptr) continue;
      Buf<float> cols(tiles * 16 * k);
      bool fb = false;
      ASSERT_TRUE(kt.decode_columns(plan, 0, tiles, cols.p, &fb).ok());
      if (fb) {  // random I8S24 positions may name one position twice: the decoder says so
        EXPECT_TRUE(g.has_sp) << name;
        continue;
      }
      for (int64_t r = 0; r < n; ++r)
        for (int64_t c = 0; c < k; ++c)
          ASSERT_TRUE(same(cols.p[(r / 16) * 16 * k + c * 16 + r % 16], ref[r * k + c]))
              << grit::cpu::isa_name(isa) << " " << name << " row " << r << " col " << c;
      // grad_input's B straight from the decoder's registers, where the variant packs:
      // each tile as positions 16 (t % 2) .. of a block of 2 chunks
      if (kt.bf16_pack_cols_tile != nullptr)
        for (int64_t t = 0; t < tiles; ++t) {
          const int rows = static_cast<int>(std::min<int64_t>(16, n - 16 * t));
          const int64_t first = 16 * (t % 2), words = bf::chunks(k) * 2 * 2 * kBf16Tile;
          Buf<uint16_t> want(words), got(words);
          std::fill(want.p, want.p + words, uint16_t{0xABCD});
          std::fill(got.p, got.p + words, uint16_t{0xABCD});
          grit::cpu::bf16_pack_weight_cols_from_columns(cols.p + t * 16 * k, rows, k, first, 2, want.p);
          bool tfb = false;
          ASSERT_TRUE(kt.bf16_pack_cols_tile(plan, t, first, 2, got.p, &tfb).ok());
          ASSERT_FALSE(tfb) << name;
          for (int64_t i = 0; i < words; ++i)
            ASSERT_EQ(got.p[i], want.p[i]) << name << " " << grit::cpu::isa_name(isa) << " tile " << t << " at " << i;
        }
      for (int64_t r0 = 0; r0 < n; r0 += 32) {
        const int rows = static_cast<int>(std::min<int64_t>(32, n - r0));
        Buf<uint16_t> from_cols(bf::chunks(k) * 2 * kBf16Tile), from_rows(bf::chunks(k) * 2 * kBf16Tile);
        grit::cpu::bf16_pack_weight_columns(cols.p + (r0 / 16) * 16 * k, (rows + 15) / 16, k, from_cols.p);
        grit::cpu::bf16_pack_weight_rows(ref.data() + r0 * k, k, rows, k, from_rows.p);
        // straight from the decoder's registers, where the variant packs
        Buf<uint16_t> from_tiles(bf::chunks(k) * 2 * kBf16Tile);
        bool packed = false;
        if (kt.bf16_pack_tile != nullptr) {
          packed = true;
          for (int h = 0; h < (rows + 15) / 16; ++h) {
            bool tfb = false;
            ASSERT_TRUE(kt.bf16_pack_tile(plan, r0 / 16 + h, from_tiles.p + h * kBf16Tile, &tfb).ok());
            ASSERT_FALSE(tfb) << name;
          }
        }
        // lanes past n repeat the last row in the columns (their outputs are never kept)
        for (int64_t c = 0; c < bf::chunks(k); ++c)
          for (int h = 0; h < 2; ++h)
            for (int p = 0; p < 16; ++p)
              for (int j = 0; j < 16; ++j)
                if (16 * h + j < rows)
                  for (int q = 0; q < 2; ++q) {
                    const int64_t at = (c * 2 + h) * kBf16Tile + p * 32 + j * 2 + q;
                    ASSERT_EQ(from_cols.p[at], from_rows.p[at]) << name << " " << grit::cpu::isa_name(isa);
                    if (packed) {
                      ASSERT_EQ(from_tiles.p[at], from_rows.p[at])
                          << name << " " << grit::cpu::isa_name(isa) << " chunk " << c << " pair " << p;
                    }
                  }
      }
    }
  });
}

// grad_input's B from a tile's columns is grad_input's B from its rows (lanes
// from `rows` on ignored).
TEST(Bf16Kernel, ColumnPackerForGradInputIsTheRowPacker) {
  std::mt19937 rng(31);
  for (int64_t k : {16, 48, 130})
    for (int rows : {3, 16})
      for (int64_t first : {0, 48}) {
        const int64_t block = 2, pairs = bf::chunks(k);
        Buf<float> cols(16 * k);
        std::vector<float> w(16 * k);
        for (int r = 0; r < 16; ++r)
          for (int64_t c = 0; c < k; ++c) w[r * k + c] = cols.p[c * 16 + r] = random_float(rng);
        Buf<uint16_t> a(pairs * block * 2 * kBf16Tile), b(pairs * block * 2 * kBf16Tile);
        grit::cpu::bf16_pack_weight_cols(w.data(), k, rows, k, first, block, a.p);
        grit::cpu::bf16_pack_weight_cols_from_columns(cols.p, rows, k, first, block, b.p);
        for (size_t i = 0; i < pairs * block * 2 * kBf16Tile; ++i)
          ASSERT_EQ(a.p[i], b.p[i]) << "k " << k << " rows " << rows << " first " << first << " at " << i;
      }
}
