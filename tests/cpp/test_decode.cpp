// The reference decode (SPEC 8): oracle-encoded planes decode bit for bit
// to grit.decode_bits(); the poison, sparsity and canonical-NaN laws; plane
// length refusal; tile-wise decode; the generic paths (po, ct, zps, zpc).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "grit/decode.h"
#include "oracle_vectors.h"
#include "test_util.h"

namespace {

using grit::Error;

struct Vec {
  const char* grade;
  const char* p[4];
  const uint32_t* out;
  size_t n;
};

const Vec kVecs[] = {
    {"MXFP4", {oracle::mxfp4_p0, oracle::mxfp4_p1, oracle::mxfp4_p2, oracle::mxfp4_p3},
     oracle::mxfp4_out, sizeof oracle::mxfp4_out / 4},
    {"MXFP4_RNE", {oracle::mxfp4rne_p0, oracle::mxfp4rne_p1, oracle::mxfp4rne_p2, oracle::mxfp4rne_p3},
     oracle::mxfp4rne_out, sizeof oracle::mxfp4rne_out / 4},
    {"Q4KS", {oracle::q4ks_p0, oracle::q4ks_p1, oracle::q4ks_p2, oracle::q4ks_p3},
     oracle::q4ks_out, sizeof oracle::q4ks_out / 4},
    {"NVF4", {oracle::nvf4_p0, oracle::nvf4_p1, oracle::nvf4_p2, oracle::nvf4_p3},
     oracle::nvf4_out, sizeof oracle::nvf4_out / 4},
    {"I8S24", {oracle::i8s24_p0, oracle::i8s24_p1, oracle::i8s24_p2, oracle::i8s24_p3},
     oracle::i8s24_out, sizeof oracle::i8s24_out / 4},
};

gt::Planes planes_of(const Vec& v) {
  return gt::Planes(gt::unhex(v.p[0]), gt::unhex(v.p[1]), gt::unhex(v.p[2]), gt::unhex(v.p[3]));
}

std::vector<uint32_t> decode_bits(const grit::Grade& g, gt::Planes& pl, uint64_t n,
                                  grit::Status* st = nullptr) {
  std::vector<float> out(n, 12345.0f);
  const grit::Status s = grit::decode(g, pl.planes(), n, out.data());
  if (st) *st = s;
  else EXPECT_TRUE(s.ok()) << s.message;
  std::vector<uint32_t> bits;
  for (float f : out) bits.push_back(gt::raw_bits(f));
  return bits;
}

TEST(Decode, OraclePlanesBitForBit) {
  for (const auto& v : kVecs) {
    SCOPED_TRACE(v.grade);
    gt::Planes pl = planes_of(v);
    const std::vector<uint32_t> got = decode_bits(gt::ref(v.grade), pl, v.n);
    size_t nan = 0, bad = 0;
    for (size_t i = 0; i < v.n; ++i) {
      if (got[i] != v.out[i] && ++bad <= 8)
        ADD_FAILURE() << "element " << i << ": got 0x" << std::hex << got[i] << " want 0x" << v.out[i];
      if (got[i] == 0x7FC00000u) ++nan;
    }
    EXPECT_EQ(bad, 0u);
    // Every vector exercises a poisoned group.
    EXPECT_GT(nan, 0u);
  }
}

TEST(Decode, SiblingGradesDecodeAlike) {
  // Equal decode projections: the same bytes mean the same values.
  gt::Planes pl = planes_of(kVecs[0]);
  EXPECT_EQ(decode_bits(gt::ref("MXFP4_RNE"), pl, kVecs[0].n), decode_bits(gt::ref("MXFP4"), pl, kVecs[0].n));
  gt::Planes nv = planes_of(kVecs[3]);
  EXPECT_EQ(decode_bits(gt::ref("NVF4_RTZ"), nv, kVecs[3].n),
            std::vector<uint32_t>(kVecs[3].out, kVecs[3].out + kVecs[3].n));
}

TEST(DecodeLaw, NanScalePoisonsTheGroup) {
  // MXFP4: block 0 has scale 0xFF (NaN), block 1 scale 2^1.
  std::vector<uint8_t> data(32, 0);
  for (int i = 0; i < 16; ++i) data[i] = 0x77;       // block 0: all 6.0 codes
  for (int i = 16; i < 32; ++i) data[i] = 0x21;      // block 1: 0.5, 1.0
  gt::Planes pl(data, {0xFF, 0x80}, {}, {});
  const std::vector<uint32_t> got = decode_bits(gt::ref("MXFP4"), pl, 64);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(got[i], 0x7FC00000u) << i;
  for (int i = 32; i < 64; i += 2) {
    EXPECT_EQ(got[i], 0x3f800000u) << i;      // 0.5 * 2
    EXPECT_EQ(got[i + 1], 0x40000000u) << i;  // 1.0 * 2
  }
}

TEST(DecodeLaw, SparseMaskedPositionsArePositiveZeroEvenUnderNaN) {
  // Quad 0 keeps (2,3), the rest keep (0,1); group scale is a negative NaN.
  std::vector<uint8_t> meta = {0x4E, 0x44, 0x44, 0x44};  // 8 quads, 2 x u2 each
  gt::Planes pl(std::vector<uint8_t>(16, 5), {0x01, 0xFE}, {}, meta);
  const std::vector<uint32_t> got = decode_bits(gt::ref("I8S24"), pl, 32);
  const uint32_t want8[8] = {0, 0, 0x7FC00000u, 0x7FC00000u, 0x7FC00000u, 0x7FC00000u, 0, 0};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(got[i], want8[i]) << i;  // the oracle's bits
  for (int q = 1; q < 8; ++q) {
    EXPECT_EQ(got[4 * q + 2], 0x00000000u);  // +0.0, never -0.0, never NaN
    EXPECT_EQ(got[4 * q + 3], 0x00000000u);
  }
  // With a finite scale the masked positions are still exactly +0.0 and the
  // survivors take the stored codes in ascending position order.
  std::vector<uint8_t> data(16);
  for (int i = 0; i < 16; ++i) data[i] = static_cast<uint8_t>(i + 1);
  gt::Planes fin(data, {0x00, 0x3C}, {}, meta);  // scale 1.0
  const std::vector<uint32_t> v = decode_bits(gt::ref("I8S24"), fin, 32);
  EXPECT_EQ(v[0], 0u);
  EXPECT_EQ(v[1], 0u);
  EXPECT_EQ(gt::from_raw(v[2]), 1.0f);
  EXPECT_EQ(gt::from_raw(v[3]), 2.0f);
  EXPECT_EQ(gt::from_raw(v[4]), 3.0f);
  EXPECT_EQ(gt::from_raw(v[5]), 4.0f);
  EXPECT_EQ(v[6], 0u);
  EXPECT_EQ(gt::from_raw(v[31 - 2]), 16.0f);
}

TEST(DecodeLaw, EveryNanIsCanonical) {
  // NVF4 with a tensor scale of +inf: inf*0 and inf*-0 are NaN, the rest
  // are infinities (the oracle's bits).
  std::vector<uint8_t> data = {0x10, 0x98, 0, 0, 0, 0, 0, 0};  // codes 0, 1, 8, 9
  gt::Planes inf(data, {0x38}, {0x00, 0x00, 0x80, 0x7F}, {});
  std::vector<uint32_t> got = decode_bits(gt::ref("NVF4"), inf, 16);
  EXPECT_EQ(got[0], 0x7FC00000u);
  EXPECT_EQ(got[1], 0x7F800000u);
  EXPECT_EQ(got[2], 0x7FC00000u);
  EXPECT_EQ(got[3], 0xFF800000u);
  // A negative signalling NaN tensor scale, and the negative e4m3 NaN code.
  gt::Planes snan(data, {0x38}, {0x01, 0x00, 0xC0, 0xFF}, {});
  for (uint32_t b : decode_bits(gt::ref("NVF4"), snan, 16)) EXPECT_EQ(b, 0x7FC00000u);
  gt::Planes e4nan(data, {0xFF}, {0x00, 0x00, 0x80, 0x3F}, {});
  for (uint32_t b : decode_bits(gt::ref("NVF4"), e4nan, 16)) EXPECT_EQ(b, 0x7FC00000u);
  // Q4KS: negative NaN d; NaN dmin (poisons through Z); d = inf with a zero
  // sub-block scale (inf * 0).
  gt::Planes qd(std::vector<uint8_t>(128, 0), std::vector<uint8_t>(8, 1), {0x00, 0xFE, 0x00, 0x3C},
                std::vector<uint8_t>(8, 1));
  for (uint32_t b : decode_bits(gt::ref("Q4KS"), qd, 256)) EXPECT_EQ(b, 0x7FC00000u);
  gt::Planes qz(std::vector<uint8_t>(128, 0), std::vector<uint8_t>(8, 1), {0x00, 0x3C, 0x01, 0x7C},
                std::vector<uint8_t>(8, 1));
  for (uint32_t b : decode_bits(gt::ref("Q4KS"), qz, 256)) EXPECT_EQ(b, 0x7FC00000u);
  std::vector<uint8_t> sc(8, 1);
  sc[0] = 0;
  gt::Planes qi(std::vector<uint8_t>(128, 0x10), sc, {0x00, 0x7C, 0x00, 0x3C}, std::vector<uint8_t>(8, 1));
  got = decode_bits(gt::ref("Q4KS"), qi, 256);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(got[i], 0x7FC00000u) << i;
  EXPECT_EQ(got[32], 0x7FC00000u);  // inf*0 - 1
  EXPECT_EQ(got[33], 0x7F800000u);  // inf*1 - 1
}

TEST(Decode, WrongPlaneLengthIsRefused) {
  for (const auto& v : kVecs) {
    for (int p = 0; p < 4; ++p) {
      SCOPED_TRACE(std::string(v.grade) + " plane " + std::to_string(p));
      gt::Planes pl = planes_of(v);
      pl.p[p].push_back(0);
      grit::Status s;
      decode_bits(gt::ref(v.grade), pl, v.n, &s);
      EXPECT_EQ(s.code, Error::kBadLength);
      EXPECT_NE(s.message.find("plane " + std::to_string(p)), std::string::npos) << s.message;
      if (!planes_of(v).p[p].empty()) {
        gt::Planes sh = planes_of(v);
        sh.p[p].pop_back();
        decode_bits(gt::ref(v.grade), sh, v.n, &s);
        EXPECT_EQ(s.code, Error::kBadLength);
      }
    }
  }
  // An element count the grade cannot group.
  gt::Planes pl = planes_of(kVecs[0]);
  grit::Status s;
  decode_bits(gt::ref("MXFP4"), pl, 48, &s);
  EXPECT_EQ(s.code, Error::kBadLength);
}

TEST(Decode, GradePlaneBytes) {
  uint64_t b[4];
  ASSERT_TRUE(grit::grade_plane_bytes(gt::ref("Q4KS"), 512, b).ok());
  EXPECT_EQ(b[0], 256u);
  EXPECT_EQ(b[1], 16u);
  EXPECT_EQ(b[2], 8u);
  EXPECT_EQ(b[3], 16u);
  ASSERT_TRUE(grit::grade_plane_bytes(gt::ref("I8S24"), 64, b).ok());
  EXPECT_EQ(b[0], 32u);
  EXPECT_EQ(b[3], 8u);
  EXPECT_EQ(grit::grade_plane_bytes(gt::ref("Q4KS"), 64, b).code, Error::kBadLength);  // k1
  EXPECT_EQ(grit::grade_plane_bytes(gt::ref("NVF4"), 24, b).code, Error::kBadLength);  // k0
}

TEST(Decode, TileByTileEqualsWhole) {
  for (const auto& v : kVecs) {
    SCOPED_TRACE(v.grade);
    const grit::Grade& g = gt::ref(v.grade);
    gt::Planes pl = planes_of(v);
    const grit::Plane* p = pl.planes();
    std::vector<float> out(v.n);
    uint64_t stored = 0;
    for (uint64_t b = 0; b < v.n; b += 32) {
      const uint64_t e = std::min<uint64_t>(v.n, b + 32);
      if (g.has_sp) {
        EXPECT_EQ(stored, grit::sparse_cursor(g, p, b));
      }
      const grit::Status s = grit::decode_range(g, p, v.n, b, e, &stored, out.data() + b);
      ASSERT_TRUE(s.ok()) << s.message;
    }
    for (size_t i = 0; i < v.n; ++i) EXPECT_EQ(gt::raw_bits(out[i]), v.out[i]) << i;
    // A tile that starts from the cursor computed for it.
    const uint64_t b = 64;
    uint64_t cur = grit::sparse_cursor(g, p, b);
    std::vector<float> tile(32);
    ASSERT_TRUE(grit::decode_range(g, p, v.n, b, b + 32, &cur, tile.data()).ok());
    for (int i = 0; i < 32; ++i) EXPECT_EQ(gt::raw_bits(tile[i]), v.out[b + i]) << i;
  }
  // Out-of-range tiles are refused.
  gt::Planes pl = planes_of(kVecs[4]);
  std::vector<float> out(64);
  uint64_t cur = 0;
  EXPECT_EQ(grit::decode_range(gt::ref("I8S24"), pl.planes(), kVecs[4].n, 2, 6, &cur, out.data()).code,
            Error::kOutOfRange);  // not quad-aligned
  cur = 0;
  EXPECT_EQ(grit::decode_range(gt::ref("I8S24"), pl.planes(), kVecs[4].n, 0, kVecs[4].n + 4, &cur,
                               out.data()).code,
            Error::kOutOfRange);
}

// ------------------------------------------------------------ generic paths

// x = S * (e - (z + 1)) with zpc=minus1 (zps=shared), two groups of four.
// codes 0 1 2 3 | 4 5 6 15, S = 0.5 | 2.0, stored z = 2 | 0.
const float kZpWant[8] = {-1.5f, -1.0f, -0.5f, 0.0f, 6.0f, 8.0f, 10.0f, 28.0f};

void expect_zp_decode(const char* grade_text, std::vector<uint8_t> data) {
  SCOPED_TRACE(grade_text);
  const grit::Grade g = gt::parse_ok(grade_text);
  gt::Planes pl(std::move(data), {0x00, 0x38, 0x00, 0x40}, {}, {0x02, 0x00});
  const std::vector<uint32_t> got = decode_bits(g, pl, 8);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(got[i], gt::raw_bits(kZpWant[i])) << i;
  EXPECT_EQ(got[3], 0x00000000u);  // 0.5 * (3 - 3) is +0.0
}

TEST(DecodeGeneric, SharedZeroPointMinusOne) {
  expect_zp_decode("grit1(e=u4,k0=4,s0=binary16,zp=u4,zpc=minus1,esr=affine)",
                   {0x10, 0x32, 0x54, 0xF6});
}

TEST(DecodeGeneric, MsbFirstPacking) {
  expect_zp_decode("grit1(e=u4,k0=4,s0=binary16,zp=u4,zpc=minus1,po=msb,esr=affine)",
                   {0x01, 0x23, 0x45, 0x6F});
}

TEST(DecodeGeneric, Pad8Container) {
  expect_zp_decode("grit1(e=u4,k0=4,s0=binary16,zp=u4,zpc=minus1,ct=pad8,esr=affine)",
                   {0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x0F});
}

TEST(DecodeGeneric, SharedZeroPointIsOneRounding) {
  // zps=shared is S*(e-z): with S = 1/3-ish (binary16 0x3555), e = 5, z = 2
  // the result is f32(S*3), not f32(S*5) - f32(S*2).
  const grit::Grade g = gt::parse_ok("grit1(e=u4,k0=2,s0=binary16,zp=u4,esr=affine)");
  gt::Planes pl({0x55}, {0x55, 0x35}, {}, {0x02});
  const std::vector<uint32_t> got = decode_bits(g, pl, 2);
  const float S = grit::f16_value(0x3555);
  const float want = S * 3.0f;
  EXPECT_EQ(got[0], gt::raw_bits(want));
  EXPECT_EQ(got[1], gt::raw_bits(want));
}

TEST(DecodeGeneric, SignedElementsAndLevelOrder) {
  // s4 elements, two levels with a binary32 per-tensor scale: S = s1 * s0.
  const grit::Grade g =
      gt::parse_ok("grit1(e=s4,k0=2,s0=e8m0,k1=0,s1=binary32,esr=ratio)");
  // codes 7, -8 | -1, 0 ; s0 = 2^-1, 2^3 ; s1 = 3.0
  gt::Planes pl({0x87, 0x0F}, {126, 130}, {0x00, 0x00, 0x40, 0x40}, {});
  const std::vector<uint32_t> got = decode_bits(g, pl, 4);
  EXPECT_EQ(gt::from_raw(got[0]), 10.5f);
  EXPECT_EQ(gt::from_raw(got[1]), -12.0f);
  EXPECT_EQ(gt::from_raw(got[2]), -24.0f);
  EXPECT_EQ(got[3], 0x00000000u);
}

}  // namespace

// decode_bounds: each element's representable range under its own scales.
TEST(DecodeBounds, ReferenceGradesGiveTheirSaturationPoints) {
  const grit::Grade& mx = *grit::reference_grade("MXFP4")->grade;
  std::vector<uint8_t> data(16, 0x00), scale = {0x80};  // one block, scale 2^1
  grit::Plane p[4] = {{data.data(), 16}, {scale.data(), 1}, {nullptr, 0}, {nullptr, 0}};
  std::vector<float> lo(32), hi(32);
  ASSERT_TRUE(grit::decode_bounds(mx, p, 32, lo.data(), hi.data()).ok());
  EXPECT_EQ(hi[0], 12.0f);
  EXPECT_EQ(lo[31], -12.0f);

  const grit::Grade& q4 = *grit::reference_grade("Q4KS")->grade;
  std::vector<uint8_t> qd(128, 0), sc(8, 2), sup = {0x00, 0x3C, 0x00, 0x3C}, mins(8, 3);  // d=dmin=1
  grit::Plane pq[4] = {{qd.data(), 128}, {sc.data(), 8}, {sup.data(), 4}, {mins.data(), 8}};
  std::vector<float> lq(256), hq(256);
  ASSERT_TRUE(grit::decode_bounds(q4, pq, 256, lq.data(), hq.data()).ok());
  EXPECT_EQ(lq[5], -3.0f);            // S*0 - Z with Z = 1*3
  EXPECT_EQ(hq[5], 2.0f * 15 - 3.0f);  // S*15 - Z with S = 1*2

  const grit::Grade& i8 = *grit::reference_grade("I8S24")->grade;
  // Every quad keeps positions 0 and 2: indices (0, 2) are bits 00,10 -> 0x8, two quads a byte.
  std::vector<uint8_t> d8(16, 0), s16 = {0x00, 0x3C}, meta(4, 0x88);
  grit::Plane pi[4] = {{d8.data(), 16}, {s16.data(), 2}, {nullptr, 0}, {meta.data(), 4}};
  std::vector<float> l8(32), h8(32);
  ASSERT_TRUE(grit::decode_bounds(i8, pi, 32, l8.data(), h8.data()).ok());
  EXPECT_EQ(h8[0], 127.0f);
  EXPECT_EQ(l8[0], -127.0f);  // encode never produces -128
  EXPECT_EQ(h8[1], 0.0f);     // a masked position holds exactly zero
  EXPECT_EQ(l8[1], 0.0f);
}
