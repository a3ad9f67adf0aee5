// The 64-byte descriptor (SPEC 3) and its fingerprints (SPEC 6): exact
// bytes of the reference descriptors, gid and digest against the oracle
// (grit.desc_for_grade(...).pack(), GritView.compute_gid(), grit.digest_of).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "grit/descriptor.h"
#include "grit/placement.h"
#include "test_util.h"

namespace {

grit::Descriptor ref_desc(const char* name, int16_t group_axis = 0, uint32_t note = 0) {
  const grit::Grade& g = gt::ref(name);
  return grit::descriptor_for(g, grit::default_placements(g), group_axis, note);
}

std::string gid_hex(const grit::Descriptor& d, const grit::Grade& g, std::vector<int64_t> shape) {
  return gt::hexs(grit::gid_of(d, g.canonical, shape.data(), shape.size()));
}

TEST(Descriptor, LayoutIsTheAbi) {
  grit::Descriptor d;
  d.n_levels = 2;
  d.flags = 0x21;
  d.elem = grit::kU4;
  d.scale0 = grit::kU6;
  d.scale1 = grit::kBinary16;
  d.zp_fmt = grit::kU6;
  d.group_axis = -3;
  d.k0 = 0x1234;
  d.k1 = 0xFEDC;
  d.sp_n = 5;
  d.sp_m = 9;
  d.sp_meta_fmt = 2;
  d.sp_order = 1;
  d.container = 1;
  d.frame_rsvd = 7;
  d.note = 0xA1B2C3D4;
  d.placement_data = grit::kSwizzle128x4B;
  d.placement_scale = 0x8123456789ABCDEFull;
  d.placement_meta = 0xF000000000000001ull;
  d.grade_id = 0x0102030405060708ull;
  // The oracle's GritDesc(...).pack() of the same field values.
  EXPECT_EQ(gt::hexs(grit::to_bytes(d)),
            "4752543140010221e343e5436f35e543fdff3412dcfe050902010107d4c3b2a1"
            "0300000000000010efcdab896745238101000000000000f00807060504030201");
  const grit::Bytes64 b = grit::to_bytes(d);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(b.data()), 4), "GRT1");
}

TEST(Descriptor, BytesRoundTrip) {
  // Any 64 bytes survive from_bytes -> to_bytes unchanged (no validation).
  uint8_t raw[64];
  uint32_t x = 0x9E3779B9u;
  for (int rep = 0; rep < 200; ++rep) {
    for (auto& c : raw) {
      x ^= x << 13;
      x ^= x >> 17;
      x ^= x << 5;
      c = static_cast<uint8_t>(x);
    }
    const grit::Descriptor d = grit::from_bytes(raw);
    const grit::Bytes64 back = grit::to_bytes(d);
    ASSERT_EQ(0, std::memcmp(back.data(), raw, 64)) << rep;
  }
  // And every field of a descriptor survives to_bytes -> from_bytes.
  const grit::Descriptor q = ref_desc("Q4KS", -2, 0x55AA);
  const grit::Bytes64 qb = grit::to_bytes(q);
  const grit::Descriptor r = grit::from_bytes(qb.data());
  EXPECT_EQ(r.group_axis, -2);
  EXPECT_EQ(r.note, 0x55AAu);
  EXPECT_EQ(r.k1, 8);
  EXPECT_EQ(r.zp_fmt, grit::kU6);
  EXPECT_EQ(r.placement_meta, grit::kRowMajor);
  EXPECT_EQ(r.grade_id, 0x1c600de02594fb55ull);
  EXPECT_EQ(grit::to_bytes(r), qb);
}

struct RefDesc {
  const char* name;
  const char* hex;
};

const RefDesc kRefDescs[] = {
    {"MXFP4",
     "4752543140010100432007480000000000002000000000000000000000000000"
     "01000000000000100100000000000010000000000000000083a154e49eee7023"},
    {"Q4KS",
     "4752543140010221e343e5436f35e54300002000080000000000000000000000"
     "01000000000000100100000000000010010000000000001055fb9425e00d601c"},
    {"NVF4",
     "4752543140010200432087281f37000000001000000000000000000000000000"
     "0100000000000010010000000000001000000000000000001e8370284c6fff00"},
    {"I8S24",
     "4752543140010104e7036f350000000000002000000002040101000000000000"
     "010000000000001001000000000000101100000000000010e8eb39253a28bbbb"},
    {"MXFP4_RNE",
     "4752543140010100432007480000000000002000000000000000000000000000"
     "010000000000001001000000000000100000000000000000c868600de1854225"},
    {"NVF4_RTZ",
     "4752543140010200432087281f37000000001000000000000000000000000000"
     "010000000000001001000000000000100000000000000000ea2df4a350386c00"},
};

TEST(Descriptor, ReferenceDescriptorsAreTheOraclesBytes) {
  for (const auto& r : kRefDescs) {
    SCOPED_TRACE(r.name);
    const grit::Descriptor d = ref_desc(r.name);
    EXPECT_EQ(gt::hexs(grit::to_bytes(d)), r.hex);
    EXPECT_EQ(d.grade_id, gt::ref(r.name).id);
    // The reference descriptor agrees with its own grade's frame.
    EXPECT_EQ(grit::frame_mismatch(d, grit::frame_of(gt::ref(r.name))), -1);
  }
}

TEST(Descriptor, DefaultPlacements) {
  const grit::Placements mx = grit::default_placements(gt::ref("MXFP4"));
  EXPECT_EQ(mx.data, grit::kRowMajor);
  EXPECT_EQ(mx.scale, grit::kRowMajor);
  EXPECT_EQ(mx.meta, grit::kPlacementUnspecified);
  EXPECT_EQ(grit::default_placements(gt::ref("I8S24")).meta, grit::kLinearMeta);
  EXPECT_EQ(grit::default_placements(gt::ref("Q4KS")).meta, grit::kRowMajor);
  EXPECT_EQ(grit::default_placements(gt::ref("NVF4")).meta, grit::kPlacementUnspecified);
}

TEST(Descriptor, FrameOfGrades) {
  const grit::DescFrame q = grit::frame_of(gt::ref("Q4KS"));
  EXPECT_EQ(q.n_levels, 2);
  EXPECT_EQ(q.flags, grit::kFlagHasZp | grit::kFlagZpL1Scaled);
  EXPECT_EQ(q.k1, 8);
  const grit::DescFrame s = grit::frame_of(gt::ref("I8S24"));
  EXPECT_EQ(s.flags, grit::kFlagSparse);
  EXPECT_EQ(s.sp_n, 2);
  EXPECT_EQ(s.sp_m, 4);
  EXPECT_EQ(s.sp_meta_fmt, grit::kSpMetaU2);
  EXPECT_EQ(s.sp_order, grit::kSpOrderAscLsb);
  const grit::DescFrame c = grit::frame_of(gt::parse_ok(
      "grit1(e=s4,k0=64,s0=binary16,zp=u4,zpc=minus1,ct=pad8,po=msb,esr=affineminmax)"));
  EXPECT_EQ(c.flags, grit::kFlagHasZp | grit::kFlagZpMinus1 | grit::kFlagMsbFirst);
  EXPECT_EQ(c.container, grit::kContainerPad8);
  EXPECT_EQ(c.zp_fmt, grit::kU4);
  EXPECT_EQ(c.scale1, grit::kFmtAbsent);
  EXPECT_EQ(c.n_levels, 1);
}

TEST(Descriptor, FrameMismatchNamesTheFirstField) {
  const grit::DescFrame want = grit::frame_of(gt::ref("MXFP4"));
  grit::Descriptor d = ref_desc("MXFP4");
  d.k0 = 64;
  EXPECT_EQ(grit::frame_mismatch(d, want), grit::kFfK0);
  EXPECT_STREQ(grit::frame_field_name(grit::kFfK0), "k0");
  EXPECT_EQ(grit::frame_field_value(d, grit::kFfK0), 64u);
  EXPECT_EQ(grit::frame_field_value(want, grit::kFfK0), 32u);
  d.elem = grit::kE4M3;  // earlier in FrameField order than k0
  EXPECT_EQ(grit::frame_mismatch(d, want), grit::kFfElem);
  d = ref_desc("MXFP4");
  d.container = 1;
  EXPECT_EQ(grit::frame_mismatch(d, want), grit::kFfContainer);
  EXPECT_STREQ(grit::frame_field_name(grit::kNumFrameFields), "?");
}

struct GidCase {
  const char* name;
  std::vector<int64_t> shape;
  int16_t group_axis;
  const char* gid;
};

TEST(Descriptor, GidMatchesTheOracle) {
  const GidCase cases[] = {
      {"MXFP4", {64}, 0, "b1f713354c0f9792a65ddd9b132af02d"},
      {"MXFP4", {256}, 0, "3d701c328d0f964251c3b401c3082a5a"},
      {"MXFP4", {512}, 0, "a734c055ce0f96424d7e6a9953e25cc7"},
      {"MXFP4", {4, 256}, 1, "348a68c44bb327c632b87b3b792356b0"},
      {"Q4KS", {256}, 0, "c646d848ea67be921f6866d8ce071e8e"},
      {"Q4KS", {512}, 0, "300b7c6c2b67be921b231d705ee150fb"},
      {"Q4KS", {4, 256}, 1, "b978017f21685d1b294469181e8fb504"},
      {"NVF4", {64}, 0, "b90d4dc47ed115cc294fc007698c7d0b"},
      {"NVF4", {256}, 0, "448656c1bfd1147bd4b5966e1969b738"},
      {"NVF4", {4, 256}, 1, "ca50af19eb04cf8a9934345eff7b1c3a"},
      {"I8S24", {64}, 0, "cc6338e262499a322c756ad8d4b26b29"},
      {"I8S24", {256}, 0, "57dc41dfa34998e1d7db413f848fa556"},
      {"I8S24", {4, 256}, 1, "7d7c92af05ac3dc2472866cc86890e3c"},
      {"MXFP4_RNE", {64}, 0, "e1cd92063d1e16842f70194709f6077d"},
      {"MXFP4_RNE", {256}, 0, "29ddd14f7e1e17d47b7fb00f7bcd322a"},
      {"NVF4_RTZ", {64}, 0, "76e288e36099e3994b34e98c99b6eed2"},
      {"NVF4_RTZ", {256}, 0, "eb697fe61f99e4e99fcf1325e9d9b4a5"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.name) + " rank " + std::to_string(c.shape.size()));
    const grit::Descriptor d = ref_desc(c.name, c.group_axis);
    EXPECT_EQ(gid_hex(d, gt::ref(c.name), c.shape), c.gid);
  }
  // Base32 rendering of one of them, as the oracle prints it.
  const std::vector<int64_t> s64 = {64};
  EXPECT_EQ(grit::crockford32(grit::gid_of(ref_desc("MXFP4"), gt::ref("MXFP4").canonical,
                                           s64.data(), 1)),
            "5HYW9KAK0FJY9ACQEXKC9JNW1D");
}

TEST(Descriptor, NoteIsNotHashed) {
  for (const char* name : {"MXFP4", "Q4KS", "NVF4", "I8S24"}) {
    SCOPED_TRACE(name);
    const grit::Descriptor plain = ref_desc(name);
    const grit::Descriptor noted = ref_desc(name, 0, 0xDEADBEEF);
    const grit::Bytes64 a = grit::to_bytes(plain), b = grit::to_bytes(noted);
    EXPECT_NE(a, b);
    EXPECT_EQ(b[28], 0xEF);
    EXPECT_EQ(b[31], 0xDE);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), 28));
    EXPECT_EQ(0, std::memcmp(a.data() + 32, b.data() + 32, 32));
    const std::vector<int64_t> s = {256};
    EXPECT_EQ(gid_hex(plain, gt::ref(name), s), gid_hex(noted, gt::ref(name), s));
  }
  // The oracle's gid of the noted MXFP4 descriptor is the plain one.
  EXPECT_EQ(gid_hex(ref_desc("MXFP4", 0, 0xDEADBEEF), gt::ref("MXFP4"), {256}),
            "3d701c328d0f964251c3b401c3082a5a");
}

TEST(Descriptor, GidSeesEveryFrameFieldAndTheShape) {
  const grit::Grade& g = gt::ref("MXFP4");
  const grit::Descriptor base = ref_desc("MXFP4");
  const std::string h0 = gid_hex(base, g, {256});
  EXPECT_NE(gid_hex(base, g, {512}), h0);
  EXPECT_NE(gid_hex(base, g, {1, 256}), h0);  // rank is hashed
  EXPECT_NE(gid_hex(base, gt::ref("MXFP4_RNE"), {256}), h0);  // the canonical string is hashed
  const grit::Bytes64 b = grit::to_bytes(base);
  for (int i = 0; i < 64; ++i) {
    if (i >= 28 && i < 32) continue;
    grit::Bytes64 m = b;
    m[i] ^= 0x01;
    EXPECT_NE(gid_hex(grit::from_bytes(m.data()), g, {256}), h0) << "byte " << i;
  }
}

TEST(Descriptor, DigestMatchesTheOracle) {
  grit::Plane empty[4];
  EXPECT_EQ(gt::hexs(grit::digest_of(empty)), "28ee198ca550ba36979ea053be3dc70d");
  const uint8_t a[] = {0x01, 0x02}, b[] = {0x7F}, ab[] = {0x01, 0x02, 0x7F};
  grit::Plane two[4] = {{a, 2}, {b, 1}, {nullptr, 0}, {nullptr, 0}};
  grit::Plane one[4] = {{ab, 3}, {nullptr, 0}, {nullptr, 0}, {nullptr, 0}};
  EXPECT_EQ(gt::hexs(grit::digest_of(two)), "cb58bb9d4232aeae0c5ee3e7bc6a9192");
  // Length prefixes: the same bytes split differently digest differently.
  EXPECT_EQ(gt::hexs(grit::digest_of(one)), "d7632dd8cfdf286e04a501652d87e8a6");
}

TEST(Descriptor, ExplainListsDifferences) {
  const grit::Descriptor a = ref_desc("MXFP4");
  grit::Descriptor b = a;
  b.k0 = 64;
  b.note = 1;
  const std::string e = grit::explain(a, b);
  EXPECT_NE(e.find("k0"), std::string::npos) << e;
  EXPECT_NE(e.find("32"), std::string::npos) << e;
  EXPECT_NE(e.find("64"), std::string::npos) << e;
  EXPECT_NE(e.find("note"), std::string::npos) << e;
  EXPECT_EQ(e.find("byte-identical"), std::string::npos) << e;
  EXPECT_EQ(e.find("magic"), std::string::npos) << e;  // only differing fields
  EXPECT_EQ(e.find("elem"), std::string::npos) << e;
  // Two lines of fields plus the header.
  EXPECT_EQ(std::count(e.begin(), e.end(), '\n'), 3) << e;

  const std::string same = grit::explain(a, a);
  EXPECT_NE(same.find("byte-identical"), std::string::npos) << same;

  // Formats, placements and grade ids are rendered by name.
  grit::Descriptor c = ref_desc("NVF4");
  const std::string f = grit::explain(a, c);
  EXPECT_NE(f.find("e8m0"), std::string::npos) << f;
  EXPECT_NE(f.find("e4m3"), std::string::npos) << f;
  EXPECT_NE(f.find("GRADE_MXFP4"), std::string::npos) << f;
  EXPECT_NE(f.find("GRADE_NVF4"), std::string::npos) << f;
  c.placement_data = 0x3000000000000000ull;
  c.grade_id = 42;
  const std::string g = grit::explain(a, c);
  EXPECT_NE(g.find("RESERVED_CLASS_0x3"), std::string::npos) << g;
  EXPECT_NE(g.find("unregistered"), std::string::npos) << g;
}

TEST(Descriptor, FlagsName) {
  EXPECT_EQ(grit::flags_name(0), "none");
  EXPECT_EQ(grit::flags_name(grit::kFlagHasZp | grit::kFlagZpL1Scaled), "HAS_ZP|ZP_L1SCALED");
  EXPECT_EQ(grit::flags_name(grit::kFlagSparse), "SPARSE");
  EXPECT_EQ(grit::flags_name(0x80), "RESERVED");
  EXPECT_EQ(grit::flags_name(0x84), "SPARSE|RESERVED");
}

TEST(Placement, NamesAndClasses) {
  EXPECT_EQ(grit::placement_name(0), "PLACEMENT_UNSPECIFIED");
  EXPECT_EQ(grit::placement_name(grit::kRowMajor), "ROW_MAJOR");
  EXPECT_EQ(grit::placement_name(grit::kLinearMeta), "LINEAR_META");
  EXPECT_EQ(grit::placement_name(0x8123456789ABCDEFull), "LOCAL_HASH(0x123456789abcdef)");
  EXPECT_EQ(grit::placement_name(0xF000000000000001ull), "OPAQUE(0x000000000000001)");
  EXPECT_EQ(grit::placement_name(0x3000000000000000ull), "RESERVED_CLASS_0x3(0x3000000000000000)");
  EXPECT_EQ(grit::placement_name(0x1000000000000099ull), "RESERVED_CLASS_0x1(0x1000000000000099)");
  EXPECT_TRUE(grit::placement_known(0));
  EXPECT_TRUE(grit::placement_known(grit::kPackK4_12B));
  EXPECT_TRUE(grit::placement_known(0x8000000000000000ull));
  EXPECT_TRUE(grit::placement_known(0xFFFFFFFFFFFFFFFFull));
  EXPECT_FALSE(grit::placement_known(0x1000000000000099ull));  // unknown well-known constant
  EXPECT_FALSE(grit::placement_known(0x2000000000000001ull));  // reserved class
  EXPECT_FALSE(grit::placement_known(0x7FFFFFFFFFFFFFFFull));
  size_t n = 0;
  const grit::PlacementRow* rows = grit::well_known_placements(&n);
  ASSERT_EQ(n, 8u);
  for (size_t i = 0; i < n; ++i) {
    uint64_t w = 0;
    ASSERT_TRUE(grit::placement_by_name(rows[i].name, &w));
    EXPECT_EQ(w, rows[i].word);
    EXPECT_EQ(grit::placement_class(w), grit::kClassWellKnown);
  }
  uint64_t w = 1;
  EXPECT_TRUE(grit::placement_by_name("PLACEMENT_UNSPECIFIED", &w));
  EXPECT_EQ(w, 0u);
  EXPECT_FALSE(grit::placement_by_name("row_major", &w));
}

}  // namespace
