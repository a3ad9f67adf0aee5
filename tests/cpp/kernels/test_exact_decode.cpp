// The exact integer mode's byte-wise weight decode (kernels/cpu/exact_decode)
// against the core's definitions (grit::exact::weight_row and row_stored) on
// random planes: every byte value, so NaN/inf block scales, every code, and
// sparse quads that name one position twice; 4-bit codes in both nibble
// orders and rows that start mid-byte, 8-bit codes, dense and 2:4; the
// stored-code count of rows long enough for its vector loop.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "grit/exact_linear.h"
#include "grit/decode.h"
#include "grit/grade.h"
#include "kernels/cpu/exact_decode.h"
#include "exact_law_of.h"

namespace {

const char* const kGrades[] = {
    "MXFP4",
    "MXFP4_RNE",
    "I8S24",
    "grit1(e=s4,k0=32,s0=binary16,esr=ratiomaxabs)",
    "grit1(e=s4,k0=32,s0=binary16,po=msb,esr=ratiomaxabs)",
    "grit1(e=s4,k0=3,s0=binary16,esr=ratiomaxabs)",  // odd k: odd rows start mid-byte
    "grit1(e=s4,k0=3,s0=binary16,po=msb,esr=ratiomaxabs)",
    "grit1(e=s8,k0=32,s0=binary16,esr=ratiomaxabs)",
    "grit1(e=s4,k0=32,s0=binary16,sp=2:4:u2:asclsb,esr=ratiomaxabs)",  // 2:4 over 4-bit codes
    "grit1(e=s8,k0=16,s0=e8m0,sp=2:4:u2:asclsb,esr=ratiomaxabs)",
};

TEST(ExactDecode, SameCodesScalesAndCursorsAsTheCore) {
  std::mt19937 rng(11);
  int tested = 0;
  for (const char* text : kGrades) {
    grit::Grade g;
    grit::exact::Law L;
    if (!exact_law_of(text, &g, &L)) continue;
    for (int64_t n : {1, 5, 17}) {
      for (int64_t blocks : {1, 3, 8}) {
        const int64_t k = blocks * L.k0;
        uint64_t bytes[4];
        ASSERT_TRUE(grit::grade_plane_bytes(g, static_cast<uint64_t>(n * k), bytes).ok());
        std::vector<std::vector<uint8_t>> p(4);
        for (int i = 0; i < 4; ++i) {
          p[i].resize(bytes[i] + 1);  // +1: a read past the plane would show as a mismatch below
          for (auto& b : p[i]) b = static_cast<uint8_t>(rng());
        }
        const int64_t nb = k / L.k0;
        uint64_t want_cursor = 0, got_cursor = 0;
        for (int64_t r = 0; r < n; ++r) {
          const uint64_t want_n = grit::exact::row_stored(L, p[3].data(), r, k);
          ASSERT_EQ(grit::cpu::exact_row_stored(L, p[3].data(), r, k), want_n) << text << " row " << r;
          std::vector<int16_t> wc(static_cast<size_t>(k)), gc(static_cast<size_t>(k), 7);
          std::vector<grit::exact::WScale> ws(static_cast<size_t>(nb)), gs(static_cast<size_t>(nb), {9, 9, 9});
          grit::exact::weight_row(L, p[0].data(), p[1].data(), p[3].data(), r, k, want_cursor, wc.data(), ws.data());
          grit::cpu::exact_weight_row(L, p[0].data(), p[1].data(), p[3].data(), r, k, got_cursor, gc.data(), gs.data());
          ASSERT_EQ(gc, wc) << text << " n=" << n << " k=" << k << " row " << r;
          for (int64_t b = 0; b < nb; ++b)
            ASSERT_TRUE(gs[b].m == ws[b].m && gs[b].x == ws[b].x && gs[b].finite == ws[b].finite)
                << text << " row " << r << " block " << b;
          want_cursor += want_n;
          got_cursor += want_n;
        }
        ++tested;
      }
    }
  }
  EXPECT_EQ(tested, static_cast<int>(sizeof(kGrades) / sizeof(kGrades[0])) * 9);
}

// Rows long enough for the vector count of stored codes (64 metadata bytes a
// step, 256 quads) and a tail: every byte value of random metadata.
TEST(ExactDecode, WideRowCursorsAsTheCore) {
  std::mt19937 rng(12);
  for (const char* text : {"I8S24", "grit1(e=s8,k0=16,s0=e8m0,sp=2:4:u2:asclsb,esr=ratiomaxabs)"}) {
    grit::Grade g;
    grit::exact::Law L;
    ASSERT_TRUE(exact_law_of(text, &g, &L)) << text;
    for (int64_t k : {int64_t{1024}, int64_t{2048} + 3 * L.k0, int64_t{4096}}) {
      const int64_t n = 7;
      std::vector<uint8_t> meta(static_cast<size_t>(n * k / 8 + 1));
      for (auto& b : meta) b = static_cast<uint8_t>(rng());
      for (int64_t r = 0; r < n; ++r)
        ASSERT_EQ(grit::cpu::exact_row_stored(L, meta.data(), r, k), grit::exact::row_stored(L, meta.data(), r, k))
            << text << " k=" << k << " row " << r;
    }
  }
}

}  // namespace
