// The INT4G packed-linear reference kernels against the core decode and the
// documented order, torch-free: y and grad_x equal, bit for bit, a plain
// loop over grit::int4g_decode's binary64 weights (product formed in
// binary64, rounded once to binary32, added in ascending order to +0.0, bias
// last), whatever the tile split.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "grit/int4_groups.h"
#include "kernels/cpu/packed_linear_cpu.h"
#include "kernels/cpu/packed_linear_int4g.h"

namespace {

struct Packed {
  std::vector<uint8_t> codes;
  std::vector<double> scales;
  grit::cpu::Int4gWeight w;
};

Packed pack(int64_t n, int64_t k, uint64_t group, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> dist;
  std::vector<double> src(static_cast<size_t>(n * k));
  for (auto& v : src) v = dist(rng);
  Packed p;
  EXPECT_TRUE(grit::int4g_encode(src.data(), n, k, group, &p.codes, &p.scales).ok());
  p.w.codes = p.codes.data();
  p.w.code_bytes = p.codes.size();
  p.w.scales = p.scales.data();
  p.w.n_scales = p.scales.size();
  p.w.n = n;
  p.w.k = k;
  p.w.group = group;
  return p;
}

std::vector<float> randf(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  std::vector<float> out(count);
  for (auto& v : out) v = dist(rng);
  return out;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

TEST(PackedLinearInt4g, ForwardIsTheDocumentedOrder) {
  for (const auto& c : {std::array<int64_t, 3>{17, 40, 32}, {5, 11, 3}, {33, 7, 100}}) {
    const int64_t n = c[0], k = c[1], m = 3;
    Packed p = pack(n, k, static_cast<uint64_t>(c[2]), 1);
    ASSERT_TRUE(grit::cpu::int4g_check(p.w).ok());
    std::vector<double> w(static_cast<size_t>(n * k));
    ASSERT_TRUE(grit::int4g_decode(n, k, p.w.group, p.codes.data(), p.codes.size(), p.scales.data(),
                                   p.scales.size(), w.data()).ok());
    const std::vector<float> x = randf(static_cast<size_t>(m * k), 2), bias = randf(n, 3);
    std::vector<float> y(static_cast<size_t>(m * n), -1.0f);
    // Two calls over disjoint tiles, as two threads would make them.
    const int64_t tiles = grit::cpu::int4g_tile_count(n);
    grit::cpu::int4g_linear_tiles(p.w, x.data(), m, bias.data(), 0, tiles / 2, y.data());
    grit::cpu::int4g_linear_tiles(p.w, x.data(), m, bias.data(), tiles / 2, tiles, y.data());
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float acc = 0.0f;
        for (int64_t kk = 0; kk < k; ++kk)
          acc = acc + static_cast<float>(static_cast<double>(x[i * k + kk]) * w[j * k + kk]);
        acc = acc + bias[j];
        EXPECT_TRUE(same_bits(y[i * n + j], acc)) << i << "," << j;
      }
  }
}

TEST(PackedLinearInt4g, GradInputIsTheDocumentedOrder) {
  const int64_t n = 19, k = 13, m = 4;
  Packed p = pack(n, k, 5, 4);
  std::vector<double> w(static_cast<size_t>(n * k));
  grit::cpu::int4g_rows(p.w, 0, n, w.data());
  const std::vector<float> gy = randf(static_cast<size_t>(m * n), 5);
  std::vector<float> gx(static_cast<size_t>(m * k), 0.0f);
  // Rows in two ascending steps, as the op decodes them block by block; each
  // step's columns in two parts, as two threads would take them.
  for (const int64_t r : {int64_t{0}, int64_t{8}}) {
    const int64_t r1 = r == 0 ? 8 : n;
    grit::cpu::int4g_grad_input_accumulate(p.w, gy.data(), w.data() + r * k, r, r1, 0, m, 0, 5, gx.data());
    grit::cpu::int4g_grad_input_accumulate(p.w, gy.data(), w.data() + r * k, r, r1, 0, m, 5, k, gx.data());
  }
  for (int64_t i = 0; i < m; ++i)
    for (int64_t kk = 0; kk < k; ++kk) {
      float acc = 0.0f;
      for (int64_t j = 0; j < n; ++j)
        acc = acc + static_cast<float>(static_cast<double>(gy[i * n + j]) * w[j * k + kk]);
      EXPECT_TRUE(same_bits(gx[i * k + kk], acc)) << i << "," << kk;
    }
}

// Every instruction-set variant's INT4G kernel (KernelTable::int4g_tiles)
// returns the reference kernel's bits on ragged shapes, odd and even row
// lengths, group sizes that do and do not divide the row, batch 1 to 7,
// with and without bias, and activations holding NaN, infinities, zeros of
// both signs, subnormals and values near the binary32 limits; and it says
// when the planes need the core's reader.
namespace {

std::vector<grit::cpu::Isa> supported_isas() {
  std::vector<grit::cpu::Isa> out;
  for (grit::cpu::Isa i : grit::cpu::kAllIsas)
    if (grit::cpu::isa_supported(i)) out.push_back(i);
  return out;
}

std::vector<float> hostile_x(size_t count, uint32_t seed) {
  std::vector<float> x = randf(count, seed);
  const float special[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-45f, -3e-39f, 3.4e38f, -3.0e38f, 1e-30f};
  for (size_t i = 0; i < count; i += 37) x[i] = special[(i / 37) % 10];
  return x;
}

// The variant's y and whether it asked for the reader, over two disjoint
// tile ranges as two threads would run them.
bool variant_y(grit::cpu::Isa isa, const grit::cpu::Int4gWeight& w, const std::vector<float>& x,
               int64_t m, const float* bias, std::vector<float>* y) {
  const grit::cpu::KernelTable& kt = grit::cpu::kernels_for(isa);
  const int64_t tiles = grit::cpu::int4g_tile_count(w.n);
  bool suspect = false;
  EXPECT_TRUE(kt.int4g_tiles(w, x.data(), m, bias, 0, tiles / 2, y->data(), &suspect).ok());
  EXPECT_TRUE(kt.int4g_tiles(w, x.data(), m, bias, tiles / 2, tiles, y->data(), &suspect).ok());
  return suspect;
}

}  // namespace

TEST(PackedLinearInt4g, EveryVariantReturnsTheReferenceBits) {
  const int64_t shapes[][3] = {{1, 2, 1},    {15, 6, 4},    {16, 8, 3},     {17, 30, 7},  {33, 32, 32},
                               {40, 34, 5},  {16, 130, 32}, {31, 256, 128}, {18, 258, 100}, {16, 384, 64},
                               {48, 520, 32}, {5, 7, 3},     {17, 131, 32},  {35, 1001, 64}, {17, 257, 7}};
  for (grit::cpu::Isa isa : supported_isas()) {
    for (const auto& sh : shapes)
    for (bool aligned : {false, true}) {
      const int64_t n = sh[0], k = sh[1];
      if (aligned && k % 2 == 0) continue;
      Packed p = pack(n, k, static_cast<uint64_t>(sh[2]), static_cast<uint32_t>(n * 131 + k));
      // An odd k: the stream, or the row-aligned copy the op makes.
      std::vector<uint8_t> rows(static_cast<size_t>(n * grit::cpu::int4g_row_stride(k)));
      if (aligned) {
        grit::cpu::int4g_align_rows(p.w, 0, n, rows.data());
        p.w.row_codes = rows.data();
      }
      for (int64_t m : {1, 2, 7}) {
        const std::vector<float> x = hostile_x(static_cast<size_t>(m * k), static_cast<uint32_t>(k + m));
        const std::vector<float> bias = randf(static_cast<size_t>(n), 9);
        for (const float* b : {static_cast<const float*>(nullptr), bias.data()}) {
          std::vector<float> want(static_cast<size_t>(m * n), -1.0f), got(want.size(), -2.0f);
          grit::cpu::int4g_linear_tiles(p.w, x.data(), m, b, 0, grit::cpu::int4g_tile_count(n), want.data());
          const bool suspect = variant_y(isa, p.w, x, m, b, &got);
          // Valid planes: only the scalar variant and unaligned odd rows ask for the reader.
          EXPECT_EQ(suspect, isa == grit::cpu::Isa::kScalar || (k % 2 == 1 && !aligned))
              << grit::cpu::isa_name(isa) << " " << n << "x" << k;
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_TRUE(same_bits(got[i], want[i]))
                << grit::cpu::isa_name(isa) << " " << n << "x" << k << " g" << sh[2] << " m" << m << " at "
                << i << ": " << got[i] << " vs " << want[i];
        }
      }
    }
  }
}

TEST(PackedLinearInt4g, AlignedRowsHoldEachRowsCodesFromByteZero) {
  for (const auto& sh : {std::array<int64_t, 2>{7, 5}, {6, 131}, {3, 1}, {4, 8}}) {
    const int64_t n = sh[0], k = sh[1], stride = grit::cpu::int4g_row_stride(k);
    Packed p = pack(n, k, 4, 77);
    std::vector<uint8_t> rows(static_cast<size_t>(n * stride), 0xEE);
    grit::cpu::int4g_align_rows(p.w, 1, n, rows.data() + stride);  // a range not starting at row 0
    grit::cpu::int4g_align_rows(p.w, 0, 1, rows.data());
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < 2 * stride; ++c) {
        const int64_t i = r * k + c;
        const int want = c < k ? (p.codes[i / 2] >> (4 * (i % 2))) & 15 : 0;
        const int got = (rows[r * stride + c / 2] >> (4 * (c % 2))) & 15;
        ASSERT_EQ(got, want) << n << "x" << k << " row " << r << " column " << c;
      }
  }
}

// At batch 1 the tile kernel reads the planes, at 500 rows of 264 columns
// (1 MiB of binary64 activations) the batch kernel (int4g_batch_simd.inc,
// int4g_batch_wanted): both check as they read.
TEST(PackedLinearInt4g, VariantsAskForTheReaderOnEveryBadCodeOrScale) {
  const int64_t n = 33, k = 264;
  const uint64_t g = 32;
  for (const int64_t m : {int64_t{1}, int64_t{500}}) {
  const std::vector<float> x = randf(static_cast<size_t>(m * k), 11);
  for (grit::cpu::Isa isa : supported_isas()) {
    if (isa == grit::cpu::Isa::kScalar) continue;
    std::vector<float> y(static_cast<size_t>(m * n));
    // A reserved code at every row/column position class: first and last
    // row, first, middle and last column (low and high nibble).
    for (const int64_t idx : {int64_t{0}, int64_t{1}, 7 * k + 131, n * k - 2, n * k - 1, 32 * k + 255}) {
      Packed p = pack(n, k, g, 21);
      p.codes[static_cast<size_t>(idx / 2)] = static_cast<uint8_t>(
          (p.codes[static_cast<size_t>(idx / 2)] & (idx % 2 ? 0x0F : 0xF0)) | (8 << (4 * (idx % 2))));
      ASSERT_EQ(grit::cpu::int4g_check(p.w).code, grit::Error::kReservedCode);
      EXPECT_TRUE(variant_y(isa, p.w, x, m, nullptr, &y)) << grit::cpu::isa_name(isa) << " code " << idx << " m" << m;
    }
    for (const double bad : {0.0, -1.0, double{INFINITY}, double{NAN}, 1e308}) {
      for (const size_t at : {size_t{0}, size_t{8 * 9 + 3}, size_t{n * 9 - 1}}) {
        Packed p = pack(n, k, g, 22);
        p.scales[at] = bad;
        EXPECT_TRUE(variant_y(isa, p.w, x, m, nullptr, &y))
            << grit::cpu::isa_name(isa) << " scale " << bad << " m" << m;
      }
    }
    // 7*s overflows but the group's codes stay at +-1: valid, the reader
    // is asked, and y is still the reference's.
    Packed p = pack(n, k, g, 23);
    for (int64_t c = 64; c < 96; ++c) {
      const int64_t i = 5 * k + c;
      uint8_t& byte = p.codes[static_cast<size_t>(i / 2)];
      byte = static_cast<uint8_t>((byte & (i % 2 ? 0x0F : 0xF0)) | ((c % 2 ? 1 : 0xF) << (4 * (i % 2))));
    }
    p.scales[5 * 9 + 2] = 1e308;
    ASSERT_TRUE(grit::cpu::int4g_check(p.w).ok());
    std::vector<float> want(static_cast<size_t>(m * n));
    grit::cpu::int4g_linear_tiles(p.w, x.data(), m, nullptr, 0, grit::cpu::int4g_tile_count(n), want.data());
    EXPECT_TRUE(variant_y(isa, p.w, x, m, nullptr, &y));
    for (int64_t j = 0; j < m * n; ++j) EXPECT_TRUE(same_bits(y[j], want[j])) << j << " m" << m;
  }
  }
}

// The reader's one-pass clearance names the same first offender as a
// plain element walk, for payloads with planted reserved codes and
// overflowing groups anywhere.
TEST(PackedLinearInt4g, ReaderNamesTheFirstOffender) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 9), k = 1 + static_cast<int64_t>(rng() % 40);
    const uint64_t g = 1 + rng() % 12;
    Packed p = pack(n, k, g, static_cast<uint32_t>(trial));
    const int plants = static_cast<int>(rng() % 3);
    for (int i = 0; i < plants; ++i) {
      const uint64_t at = rng() % static_cast<uint64_t>(n * k);
      uint8_t& byte = p.codes[at / 2];
      byte = static_cast<uint8_t>((byte & (at % 2 ? 0x0F : 0xF0)) | (8u << (4 * (at % 2))));
    }
    if (rng() % 2) p.scales[rng() % p.scales.size()] = 1e308;
    const uint64_t per_row = (static_cast<uint64_t>(k) + g - 1) / g;
    std::string want;
    for (int64_t i = 0; i < n * k && want.empty(); ++i) {
      const int nib = (p.codes[static_cast<size_t>(i / 2)] >> (4 * (i % 2))) & 0xF;
      const int q = nib >= 8 ? nib - 16 : nib;
      const double s = p.scales[static_cast<size_t>((i / k) * static_cast<int64_t>(per_row) + (i % k) / static_cast<int64_t>(g))];
      const std::string where = "row " + std::to_string(i / k) + ", column " + std::to_string(i % k);
      if (q == -8) want = "reserved code -8 (nibble 8) at " + where;
      else if (!std::isfinite(q * s)) want = "non-finite reconstruction at " + where;
    }
    const grit::Status st = grit::cpu::int4g_check(p.w);
    if (want.empty())
      EXPECT_TRUE(st.ok()) << st.message;
    else
      EXPECT_EQ(st.message, want) << "trial " << trial;
  }
}

// From 16 batch rows whose binary64 activations fill 1 MiB
// (int4g_batch_wanted) every vector variant takes the batch kernel
// (int4g_batch_simd.inc): the reference's bits over chunks of 256 columns
// that groups straddle, ragged tiles, odd rows (the aligned copy), batch
// rows in and out of its register blocks, passes of 512 batch rows, hostile
// activations, and a tile range split as two threads would split it.
TEST(PackedLinearInt4g, BatchKernelReturnsTheReferenceBits) {
  const int64_t shapes[][3] = {{17, 8200, 100}, {16, 8193, 7}, {33, 8450, 64}, {1, 8448, 3}};
  for (grit::cpu::Isa isa : supported_isas()) {
    if (isa == grit::cpu::Isa::kScalar) continue;
    for (const auto& sh : shapes)
      for (const int64_t m : {int64_t{16}, int64_t{17}, int64_t{19}}) {
        const int64_t n = sh[0], k = sh[1];
        Packed p = pack(n, k, static_cast<uint64_t>(sh[2]), static_cast<uint32_t>(n * 7 + k));
        std::vector<uint8_t> rows(static_cast<size_t>(n * grit::cpu::int4g_row_stride(k)));
        if (k % 2 != 0) {
          grit::cpu::int4g_align_rows(p.w, 0, n, rows.data());
          p.w.row_codes = rows.data();
        }
        const std::vector<float> x = hostile_x(static_cast<size_t>(m * k), static_cast<uint32_t>(k * m));
        const std::vector<float> bias = randf(static_cast<size_t>(n), 19);
        for (const float* b : {static_cast<const float*>(nullptr), bias.data()}) {
          std::vector<float> want(static_cast<size_t>(m * n), -1.0f), got(want.size(), -2.0f);
          grit::cpu::int4g_linear_tiles(p.w, x.data(), m, b, 0, grit::cpu::int4g_tile_count(n), want.data());
          EXPECT_FALSE(variant_y(isa, p.w, x, m, b, &got)) << grit::cpu::isa_name(isa);
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_TRUE(same_bits(got[i], want[i]))
                << grit::cpu::isa_name(isa) << " " << n << "x" << k << " m" << m << " at " << i;
        }
      }
    // Past one pass of 512 batch rows.
    const int64_t n = 20, k = 300, m = 530;
    Packed p = pack(n, k, 16, 3);
    const std::vector<float> x = hostile_x(static_cast<size_t>(m * k), 4);
    std::vector<float> want(static_cast<size_t>(m * n)), got(want.size());
    grit::cpu::int4g_linear_tiles(p.w, x.data(), m, nullptr, 0, grit::cpu::int4g_tile_count(n), want.data());
    EXPECT_FALSE(variant_y(isa, p.w, x, m, nullptr, &got));
    for (size_t i = 0; i < want.size(); ++i) ASSERT_TRUE(same_bits(got[i], want[i])) << "m530 at " << i;
  }
}

// KernelTable::int4g_grad_input returns int4g_grad_input_accumulate's bits:
// batch rows in and out of its register blocks, column ranges that do and
// do not end on its vectors, rows in two blocks, grad_y holding NaN,
// infinities, zeros of both signs and subnormals. A NaN may differ in sign
// (which NaN an add passes on follows its operands' order, which the
// compiler may swap in the reference's loop); the op makes every NaN of
// grad_x canonical afterwards.
TEST(PackedLinearInt4g, GradInputOfEveryVariantIsTheReferences) {
  for (grit::cpu::Isa isa : supported_isas()) {
    const grit::cpu::KernelTable& kt = grit::cpu::kernels_for(isa);
    if (isa == grit::cpu::Isa::kScalar) {
      EXPECT_EQ(kt.int4g_grad_input, nullptr);
      continue;
    }
    ASSERT_NE(kt.int4g_grad_input, nullptr) << grit::cpu::isa_name(isa);
    for (const auto& sh : {std::array<int64_t, 3>{19, 13, 5}, {40, 100, 32}, {33, 131, 7}, {64, 96, 32}})
      for (const int64_t m : {int64_t{1}, int64_t{3}, int64_t{4}, int64_t{5}, int64_t{9}}) {
        const int64_t n = sh[0], k = sh[1];
        Packed p = pack(n, k, static_cast<uint64_t>(sh[2]), static_cast<uint32_t>(n + k + m));
        std::vector<double> w(static_cast<size_t>(n * k));
        grit::cpu::int4g_rows(p.w, 0, n, w.data());
        // Batch row 0 holds NaN and infinities, the others zeros of both
        // signs and subnormals: their sums stay numbers to compare.
        std::vector<float> gy = randf(static_cast<size_t>(m * n), static_cast<uint32_t>(m * 3 + k));
        const float nonfinite[] = {NAN, INFINITY, -INFINITY}, tiny[] = {0.0f, -0.0f, 1e-45f, -3e-39f};
        for (int64_t j = 0; j < n; j += 5) gy[static_cast<size_t>(j)] = nonfinite[(j / 5) % 3];
        for (int64_t i = n + 2; i < m * n; i += 7) gy[static_cast<size_t>(i)] = tiny[(i / 7) % 4];
        std::vector<float> want(static_cast<size_t>(m * k), 0.0f), got(want.size(), 0.0f);
        const int64_t split = n / 2, cut = k > 40 ? 37 : k / 2;
        for (const int64_t r : {int64_t{0}, split}) {
          const int64_t r1 = r == 0 ? split : n;
          grit::cpu::int4g_grad_input_accumulate(p.w, gy.data(), w.data() + r * k, r, r1, 0, m, 0, k, want.data());
          kt.int4g_grad_input(gy.data(), n, w.data() + r * k, r, r1, m, k, 0, cut, got.data());
          kt.int4g_grad_input(gy.data(), n, w.data() + r * k, r, r1, m, k, cut, k, got.data());
        }
        int nans = 0;
        for (size_t i = 0; i < want.size(); ++i) {
          nans += std::isnan(want[i]);
          ASSERT_TRUE(same_bits(got[i], want[i]) || (std::isnan(got[i]) && std::isnan(want[i])))
              << grit::cpu::isa_name(isa) << " " << n << "x" << k << " m" << m << " at " << i << ": " << got[i]
              << " vs " << want[i];
        }
        EXPECT_LE(nans, static_cast<int>(k));  // only batch row 0's sums may be NaN
      }
  }
}

// KernelTable::int4g_decode_rows gives the core's binary64 weights
// (int4g_decode_rows), and those rounded to binary32, for even row lengths:
// groups that are and are not multiples of 16, short final groups, rows
// ending inside a 16-column vector, a row range not starting at row 0, and
// every code -7..7 under tiny, huge and subnormal scales.
TEST(PackedLinearInt4g, DecodeRowsOfEveryVariantIsTheCores) {
  const int64_t shapes[][3] = {{3, 2, 1}, {5, 16, 16}, {7, 34, 7}, {17, 64, 32}, {9, 100, 48}, {4, 130, 100},
                               {2, 4096, 32}};
  for (grit::cpu::Isa isa : supported_isas()) {
    const grit::cpu::KernelTable& kt = grit::cpu::kernels_for(isa);
    if (isa == grit::cpu::Isa::kScalar) {
      EXPECT_EQ(kt.int4g_decode_rows, nullptr);
      continue;
    }
    ASSERT_NE(kt.int4g_decode_rows, nullptr) << grit::cpu::isa_name(isa);
    for (const auto& sh : shapes) {
      const int64_t n = sh[0], k = sh[1];
      Packed p = pack(n, k, static_cast<uint64_t>(sh[2]), static_cast<uint32_t>(n * 5 + k));
      for (size_t i = 0; i < p.codes.size(); ++i)  // every code but the reserved one, in turn
        if (i % 3 == 0) p.codes[i] = static_cast<uint8_t>(((i / 3) % 15 + 9) % 16 | ((((i / 3) + 4) % 15 + 9) % 16) << 4);
      const double scales[] = {1e-300, 4.9e-324, 1e300, 3.0, 0.1};
      for (size_t i = 0; i < p.scales.size(); i += 3) p.scales[i] = scales[(i / 3) % 5];
      ASSERT_TRUE(grit::cpu::int4g_check(p.w).ok());
      const int64_t r0 = n > 1 ? 1 : 0;
      std::vector<double> want(static_cast<size_t>((n - r0) * k)), got64(want.size(), -1.0);
      std::vector<float> got32(want.size(), -1.0f);
      grit::cpu::int4g_rows(p.w, r0, n, want.data());
      kt.int4g_decode_rows(p.w, r0, n, got64.data(), nullptr);
      kt.int4g_decode_rows(p.w, r0, n, nullptr, got32.data());
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(std::memcmp(&got64[i], &want[i], sizeof(double)), 0)
            << grit::cpu::isa_name(isa) << " " << n << "x" << k << " at " << i << ": " << got64[i] << " vs " << want[i];
        ASSERT_TRUE(same_bits(got32[i], static_cast<float>(want[i])))
            << grit::cpu::isa_name(isa) << " " << n << "x" << k << " at " << i;
      }
    }
  }
}
