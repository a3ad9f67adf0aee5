// The boundary check (SPEC 7): a clean pass per reference grade, one test
// per failure field in the normative order, level-2 content checks, size
// saturation, a 100000-input robustness sweep and a differential run
// against the oracle (tests/cpp/gen_check_fuzz_hash.py).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "grit/check.h"
#include "test_util.h"

namespace {

using grit::CheckField;
using grit::CheckResult;
using grit::CheckStatus;

struct Case {
  grit::Descriptor d;
  std::vector<int64_t> shape;
  uint64_t lens[4];
  CheckResult run() const { return grit::check_level1(d, shape.data(), shape.size(), lens); }
};

struct RefLens {
  const char* name;
  uint64_t l256[4];   // shape (256,), group_axis 0
  uint64_t l4x256[4]; // shape (4, 256), group_axis 1
};

// grit.expected_plane_bytes of the oracle.
const RefLens kLens[] = {
    {"MXFP4", {128, 8, 0, 0}, {512, 32, 0, 0}},
    {"Q4KS", {128, 8, 4, 8}, {512, 32, 16, 32}},
    {"NVF4", {128, 16, 4, 0}, {512, 64, 4, 0}},
    {"I8S24", {128, 16, 0, 32}, {512, 64, 0, 128}},
    {"MXFP4_RNE", {128, 8, 0, 0}, {512, 32, 0, 0}},
    {"NVF4_RTZ", {128, 16, 4, 0}, {512, 64, 4, 0}},
};

Case clean(const char* name) {
  const grit::Grade& g = gt::ref(name);
  Case c{grit::descriptor_for(g, grit::default_placements(g)), {256}, {0, 0, 0, 0}};
  for (const auto& l : kLens)
    if (std::string(l.name) == name)
      for (int i = 0; i < 4; ++i) c.lens[i] = l.l256[i];
  return c;
}

void expect_fail(const CheckResult& r, CheckStatus s, CheckField f) {
  EXPECT_EQ(r.status, s) << grit::check_status_name(r.status) << " / " << grit::check_field_name(r.field);
  EXPECT_EQ(r.field, f) << grit::check_field_name(r.field);
  EXPECT_FALSE(r.ok());
}

// ------------------------------------------------------------ clean passes

TEST(Check, CleanPassForEveryReferenceGrade) {
  for (const auto& l : kLens) {
    SCOPED_TRACE(l.name);
    Case c = clean(l.name);
    CheckResult r = c.run();
    EXPECT_TRUE(r.ok()) << grit::describe(r, c.d);
    EXPECT_EQ(r.field, CheckField::kNone);
    // Rank 2, grouped along axis 1.
    Case c2 = c;
    c2.d.group_axis = 1;
    c2.shape = {4, 256};
    for (int i = 0; i < 4; ++i) c2.lens[i] = l.l4x256[i];
    r = c2.run();
    EXPECT_TRUE(r.ok()) << grit::describe(r, c2.d);
    // With the grade passed explicitly, too.
    r = grit::check_level1(c.d, c.shape.data(), 1, c.lens, &gt::ref(l.name));
    EXPECT_TRUE(r.ok()) << grit::describe(r, c.d);
  }
}

TEST(Check, ExpectedPlaneBytesMatchTheOracle) {
  for (const auto& l : kLens) {
    SCOPED_TRACE(l.name);
    Case c = clean(l.name);
    grit::PlaneSizes ps;
    ASSERT_TRUE(grit::expected_plane_bytes(c.d, c.shape.data(), 1, &ps).ok());
    for (int i = 0; i < 4; ++i) EXPECT_EQ(ps.bytes[i], l.l256[i]) << i;
    EXPECT_EQ(ps.numel, 256u);
  }
  Case s = clean("I8S24");
  grit::PlaneSizes ps;
  ASSERT_TRUE(grit::expected_plane_bytes(s.d, s.shape.data(), 1, &ps).ok());
  EXPECT_EQ(ps.nnz, 128u);
  EXPECT_EQ(ps.n_groups0, 8u);
  EXPECT_EQ(ps.n_groups1, 0u);
  Case q = clean("Q4KS");
  q.shape = {256, 3};
  ASSERT_TRUE(grit::expected_plane_bytes(q.d, q.shape.data(), 2, &ps).ok());
  EXPECT_EQ(ps.n_groups0, 24u);
  EXPECT_EQ(ps.n_groups1, 3u);
  const uint64_t want[4] = {384, 24, 12, 24};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(ps.bytes[i], want[i]);
}

TEST(Check, EmptyTensor) {
  // numel 0 is a valid tensor; NVF4 still carries its per-tensor scale.
  Case m = clean("MXFP4");
  m.shape = {0};
  for (auto& l : m.lens) l = 0;
  EXPECT_TRUE(m.run().ok());
  Case n = clean("NVF4");
  n.shape = {0};
  const uint64_t nv[4] = {0, 0, 4, 0};
  std::copy(nv, nv + 4, n.lens);
  EXPECT_TRUE(n.run().ok());
  Case q = clean("Q4KS");
  q.shape = {0, 256};
  for (auto& l : q.lens) l = 0;
  EXPECT_TRUE(q.run().ok());
}

TEST(Check, CustomGradeWithExplicitGrade) {
  const grit::Grade g = gt::parse_ok(
      "grit1(e=s4,k0=64,s0=binary16,zp=u4,zpc=minus1,ct=pad8,po=msb,esr=affineminmax)");
  const grit::Descriptor d = grit::descriptor_for(g, grit::default_placements(g));
  const int64_t shape[1] = {128};
  const uint64_t lens[4] = {128, 4, 0, 2};  // pad8 elements; zp always padded to 8 bits
  EXPECT_TRUE(grit::check_level1(d, shape, 1, lens, &g).ok());
  // Without the grade, an unregistered id is all a consumer can see.
  expect_fail(grit::check_level1(d, shape, 1, lens), CheckStatus::kGradeUnknown, CheckField::kGradeId);
}

// ------------------------------------------------------------ step 1: frame

TEST(CheckFrame, BadMagic) {
  Case c = clean("MXFP4");
  c.d.magic = 0x31545248;
  const CheckResult r = c.run();
  expect_fail(r, CheckStatus::kGradeUnknown, CheckField::kMagic);
  EXPECT_EQ(r.expected, grit::kMagic);
  EXPECT_EQ(r.found, 0x31545248u);
}

TEST(CheckFrame, HdrBytes) {
  Case c = clean("MXFP4");
  c.d.hdr_bytes = 63;
  const CheckResult r = c.run();
  expect_fail(r, CheckStatus::kGradeUnknown, CheckField::kHdrBytes);
  EXPECT_EQ(r.expected, 64u);
  EXPECT_EQ(r.found, 63u);
}

TEST(CheckFrame, Version) {
  Case c = clean("NVF4");
  c.d.version = 2;
  expect_fail(c.run(), CheckStatus::kGradeUnknown, CheckField::kVersion);
  c.d.version = 0;
  expect_fail(c.run(), CheckStatus::kGradeUnknown, CheckField::kVersion);
}

TEST(CheckFrame, NLevels) {
  Case c = clean("MXFP4");
  c.d.n_levels = 0;
  expect_fail(c.run(), CheckStatus::kGradeUnknown, CheckField::kNLevels);
  c.d.n_levels = 3;
  const CheckResult r = c.run();
  expect_fail(r, CheckStatus::kGradeUnknown, CheckField::kNLevels);
  EXPECT_EQ(r.found, 3u);
}

TEST(CheckFrame, ReservedFlags) {
  for (uint8_t bit : {uint8_t{0x40}, uint8_t{0x80}}) {
    Case c = clean("MXFP4");
    c.d.flags |= bit;
    const CheckResult r = c.run();
    expect_fail(r, CheckStatus::kGradeUnknown, CheckField::kFlags);
    EXPECT_EQ(r.found, bit);
  }
}

TEST(CheckFrame, FrameRsvd) {
  Case c = clean("I8S24");
  c.d.frame_rsvd = 1;
  expect_fail(c.run(), CheckStatus::kGradeUnknown, CheckField::kFrameRsvd);
}

TEST(CheckFrame, Container) {
  Case c = clean("MXFP4");
  c.d.container = 2;
  const CheckResult r = c.run();
  expect_fail(r, CheckStatus::kGradeUnknown, CheckField::kContainer);
  EXPECT_EQ(r.found, 2u);
}

TEST(CheckFrame, LevelOneOnly) {
  Case c = clean("MXFP4");
  c.d.k1 = 8;
  CheckResult r = c.run();
  expect_fail(r, CheckStatus::kGradeUnknown, CheckField::kLevel1Only);
  EXPECT_EQ(r.found, 8u);
  c = clean("MXFP4");
  c.d.scale1 = grit::kBinary16;
  r = c.run();
  expect_fail(r, CheckStatus::kGradeUnknown, CheckField::kLevel1Only);
  EXPECT_EQ(r.found, grit::kBinary16);
}

TEST(CheckFrame, SparseAndZeroPoint) {
  Case c = clean("I8S24");
  c.d.flags |= grit::kFlagHasZp;
  expect_fail(c.run(), CheckStatus::kGradeUnknown, CheckField::kSparseAndZp);
}

TEST(CheckFrame, ZpL1ScaledWithoutHasZp) {
  Case c = clean("Q4KS");
  c.d.flags = grit::kFlagZpL1Scaled;
  expect_fail(c.run(), CheckStatus::kGradeUnknown, CheckField::kZpL1NeedsZp);
}

TEST(CheckFrame, ZpL1ScaledWithOneLevel) {
  Case c = clean("MXFP4");
  c.d.flags = grit::kFlagHasZp | grit::kFlagZpL1Scaled;
  const CheckResult r = c.run();
  expect_fail(r, CheckStatus::kGradeUnknown, CheckField::kZpL1NeedsTwoLevels);
  EXPECT_EQ(r.expected, 2u);
  EXPECT_EQ(r.found, 1u);
}

TEST(CheckFrame, ElemBiasOvr) {
  Case c = clean("MXFP4");
  c.d.elem |= 0x8000;
  const CheckResult r = c.run();
  expect_fail(r, CheckStatus::kGradeUnknown, CheckField::kElemBiasOvr);
  EXPECT_EQ(r.found, grit::kE2M1 | 0x8000u);
}

TEST(CheckFrame, ReservedNanEnc) {
  const uint16_t kNan3 = 3u << 11;
  Case c = clean("MXFP4");
  c.d.elem = static_cast<uint16_t>(grit::kE2M1 | kNan3);
  expect_fail(c.run(), CheckStatus::kGradeUnknown, CheckField::kNanEncElem);
  c = clean("MXFP4");
  c.d.scale0 = static_cast<uint16_t>(grit::kE8M0 | kNan3);
  expect_fail(c.run(), CheckStatus::kGradeUnknown, CheckField::kNanEncScale0);
  c = clean("NVF4");
  c.d.scale1 = static_cast<uint16_t>(grit::kBinary32 | kNan3);
  expect_fail(c.run(), CheckStatus::kGradeUnknown, CheckField::kNanEncScale1);
  c = clean("Q4KS");
  c.d.zp_fmt = static_cast<uint16_t>(grit::kU6 | kNan3);
  expect_fail(c.run(), CheckStatus::kGradeUnknown, CheckField::kNanEncZp);
}

// ------------------------------------------------------------ step 2: grade

TEST(CheckGrade, UnknownGradeId) {
  Case c = clean("MXFP4");
  c.d.grade_id ^= 1;
  CheckResult r = c.run();
  expect_fail(r, CheckStatus::kGradeUnknown, CheckField::kGradeId);
  EXPECT_EQ(r.found, c.d.grade_id);
  // A claimed grade that is not the descriptor's.
  c = clean("MXFP4");
  r = grit::check_level1(c.d, c.shape.data(), 1, c.lens, &gt::ref("MXFP4_RNE"));
  expect_fail(r, CheckStatus::kGradeUnknown, CheckField::kGradeId);
  EXPECT_EQ(r.expected, gt::ref("MXFP4_RNE").id);
  EXPECT_EQ(r.found, gt::ref("MXFP4").id);
}

TEST(CheckGrade, FrameDisagreesWithGrade) {
  Case c = clean("MXFP4");
  c.d.k0 = 64;  // "the JSON says 64 but the grade says 32"
  CheckResult r = c.run();
  expect_fail(r, CheckStatus::kGradeUnknown, CheckField::kGradeFrame);
  EXPECT_EQ(r.frame_field, grit::kFfK0);
  EXPECT_EQ(r.expected, 32u);
  EXPECT_EQ(r.found, 64u);

  c = clean("Q4KS");
  c.d.flags = grit::kFlagHasZp;  // zps=shared instead of l1
  r = c.run();
  expect_fail(r, CheckStatus::kGradeUnknown, CheckField::kGradeFrame);
  EXPECT_EQ(r.frame_field, grit::kFfFlags);

  c = clean("I8S24");
  c.d.sp_order = grit::kSpOrderUnordered;
  r = c.run();
  expect_fail(r, CheckStatus::kGradeUnknown, CheckField::kGradeFrame);
  EXPECT_EQ(r.frame_field, grit::kFfSpOrder);

  c = clean("NVF4");
  c.d.container = grit::kContainerPad8;
  r = c.run();
  expect_fail(r, CheckStatus::kGradeUnknown, CheckField::kGradeFrame);
  EXPECT_EQ(r.frame_field, grit::kFfContainer);

  c = clean("NVF4");
  c.d.scale0 = grit::kE8M0;
  r = c.run();
  EXPECT_EQ(r.frame_field, grit::kFfScale0);
  EXPECT_EQ(r.expected, grit::kE4M3);
  EXPECT_EQ(r.found, grit::kE8M0);
}

// ------------------------------------------------------------ step 3: placement

TEST(CheckPlacement, ReservedClass) {
  Case c = clean("MXFP4");
  c.d.placement_data = 0x2000000000000001ull;
  CheckResult r = c.run();
  expect_fail(r, CheckStatus::kPlacementUnknown, CheckField::kPlacementData);
  EXPECT_EQ(r.found, 0x2000000000000001ull);
  c = clean("MXFP4");
  c.d.placement_scale = 0x1000000000000099ull;  // unknown well-known constant
  expect_fail(c.run(), CheckStatus::kPlacementUnknown, CheckField::kPlacementScale);
  c = clean("I8S24");
  c.d.placement_meta = 0x4000000000000000ull;
  expect_fail(c.run(), CheckStatus::kPlacementUnknown, CheckField::kPlacementMeta);
  // Local-hash and opaque words are accepted.
  c = clean("MXFP4");
  c.d.placement_data = 0x8000000000001234ull;
  c.d.placement_scale = 0xF00000000000ABCDull;
  EXPECT_TRUE(c.run().ok());
}

TEST(CheckPlacement, MetaMissing) {
  for (const char* name : {"I8S24", "Q4KS"}) {
    Case c = clean(name);
    c.d.placement_meta = grit::kPlacementUnspecified;
    expect_fail(c.run(), CheckStatus::kPlacementUnknown, CheckField::kPlacementMetaMissing);
  }
}

TEST(CheckPlacement, MetaStray) {
  for (const char* name : {"MXFP4", "NVF4"}) {
    Case c = clean(name);
    c.d.placement_meta = grit::kRowMajor;
    const CheckResult r = c.run();
    expect_fail(r, CheckStatus::kPlacementUnknown, CheckField::kPlacementMetaStray);
    EXPECT_EQ(r.found, grit::kRowMajor);
  }
}

// ------------------------------------------------------------ step 4: sizes

TEST(CheckSize, NegativeExtent) {
  Case c = clean("MXFP4");
  c.shape = {256, -1};
  const CheckResult r = c.run();
  expect_fail(r, CheckStatus::kSizeMismatch, CheckField::kShape);
  EXPECT_EQ(static_cast<int64_t>(r.found), -1);
  c.shape = {-256};
  expect_fail(c.run(), CheckStatus::kSizeMismatch, CheckField::kShape);
}

TEST(CheckSize, GroupAxisOutOfRange) {
  Case c = clean("MXFP4");
  c.d.group_axis = 1;
  CheckResult r = c.run();
  expect_fail(r, CheckStatus::kSizeMismatch, CheckField::kGroupAxis);
  EXPECT_EQ(r.expected, 1u);  // the rank
  c.d.group_axis = -1;
  expect_fail(c.run(), CheckStatus::kSizeMismatch, CheckField::kGroupAxis);
  c.d.group_axis = 0;
  c.shape.clear();  // rank 0 has no axis to group along
  expect_fail(c.run(), CheckStatus::kSizeMismatch, CheckField::kGroupAxis);
}

TEST(CheckSize, NotAMultipleOfK0) {
  Case c = clean("MXFP4");
  c.shape = {48};
  CheckResult r = c.run();
  expect_fail(r, CheckStatus::kSizeMismatch, CheckField::kK0);
  EXPECT_EQ(r.expected, 32u);
  EXPECT_EQ(r.found, 48u);
  // The group axis is what must divide, not the element count.
  c.shape = {2, 48};
  c.d.group_axis = 1;
  expect_fail(c.run(), CheckStatus::kSizeMismatch, CheckField::kK0);
  c = clean("NVF4");
  c.shape = {16, 8};
  c.d.group_axis = 1;
  expect_fail(c.run(), CheckStatus::kSizeMismatch, CheckField::kK0);
}

TEST(CheckSize, NotAMultipleOfM) {
  // k0=6 divides the axis, M=4 does not (a grade only an explicit caller can claim).
  const grit::Grade g = gt::parse_ok("grit1(e=s8,k0=6,s0=binary16,sp=2:4:u2:asclsb,esr=ratio)");
  const grit::Descriptor d = grit::descriptor_for(g, grit::default_placements(g));
  const int64_t shape[1] = {6};
  const uint64_t lens[4] = {3, 2, 0, 1};
  const CheckResult r = grit::check_level1(d, shape, 1, lens, &g);
  expect_fail(r, CheckStatus::kSizeMismatch, CheckField::kSpM);
  EXPECT_EQ(r.expected, 4u);
  EXPECT_EQ(r.found, 6u);
  const int64_t ok_shape[1] = {12};
  const uint64_t ok_lens[4] = {6, 4, 0, 2};
  EXPECT_TRUE(grit::check_level1(d, ok_shape, 1, ok_lens, &g).ok());
}

TEST(CheckSize, K1Divisibility) {
  Case c = clean("Q4KS");
  c.shape = {64};  // two level-0 groups, k1 = 8
  const CheckResult r = c.run();
  expect_fail(r, CheckStatus::kSizeMismatch, CheckField::kK1);
  EXPECT_EQ(r.expected, 8u);
  EXPECT_EQ(r.found, 2u);
  // The per-tensor case (k1 = 0) never fails this rule.
  Case n = clean("NVF4");
  n.shape = {16};
  const uint64_t nv[4] = {8, 1, 4, 0};
  std::copy(nv, nv + 4, n.lens);
  EXPECT_TRUE(n.run().ok());
}

TEST(CheckSize, EachPlaneLengthWrong) {
  for (const char* name : {"Q4KS", "I8S24", "NVF4", "MXFP4"}) {
    for (int p = 0; p < 4; ++p) {
      SCOPED_TRACE(std::string(name) + " plane " + std::to_string(p));
      Case c = clean(name);
      const uint64_t want = c.lens[p];
      c.lens[p] = want + 1;
      const CheckResult r = c.run();
      expect_fail(r, CheckStatus::kSizeMismatch, CheckField::kPlaneBytes);
      EXPECT_EQ(r.plane, p);
      EXPECT_EQ(r.expected, want);
      EXPECT_EQ(r.found, want + 1);
      if (want > 0) {
        c.lens[p] = want - 1;
        EXPECT_EQ(c.run().plane, p);
      }
    }
  }
  // The first wrong plane is the one reported.
  Case c = clean("Q4KS");
  c.lens[1] = 0;
  c.lens[3] = 0;
  EXPECT_EQ(c.run().plane, 1);
}

TEST(CheckSize, SpMetaFmtUnknown) {
  // Unreachable through check_level1 (the grade frame pins sp_meta_fmt), so
  // it is the size equations' own refusal.
  grit::Descriptor d = clean("I8S24").d;
  d.sp_meta_fmt = 3;
  const int64_t shape[1] = {256};
  grit::PlaneSizes ps;
  const CheckResult r = grit::expected_plane_bytes(d, shape, 1, &ps);
  expect_fail(r, CheckStatus::kSizeMismatch, CheckField::kSpMetaFmt);
  EXPECT_EQ(r.found, 3u);
  d.sp_meta_fmt = grit::kSpMetaU4;
  ASSERT_TRUE(grit::expected_plane_bytes(d, shape, 1, &ps).ok());
  EXPECT_EQ(ps.bytes[3], 64u);
}

TEST(CheckSize, ShapeProductOverflowingU64) {
  Case c = clean("MXFP4");
  c.shape = {int64_t{1} << 40, int64_t{1} << 40};  // numel 2^80
  grit::PlaneSizes ps;
  ASSERT_TRUE(grit::expected_plane_bytes(c.d, c.shape.data(), 2, &ps).ok());
  EXPECT_EQ(ps.numel, UINT64_MAX);  // saturated
  EXPECT_EQ(ps.bytes[0], UINT64_MAX);
  EXPECT_EQ(ps.bytes[1], UINT64_MAX);
  EXPECT_EQ(ps.bytes[2], 0u);
  // Realistic lengths: a size mismatch.
  for (auto& l : c.lens) l = 0;
  expect_fail(c.run(), CheckStatus::kSizeMismatch, CheckField::kPlaneBytes);
  const uint64_t big[4] = {uint64_t{1} << 62, uint64_t{1} << 60, 0, 0};
  std::copy(big, big + 4, c.lens);
  expect_fail(c.run(), CheckStatus::kSizeMismatch, CheckField::kPlaneBytes);
  // The saturated value itself is not a match: the true requirement is
  // 2^79 bytes, which no u64 length can state (the oracle agrees).
  const uint64_t sat[4] = {UINT64_MAX, UINT64_MAX, 0, 0};
  std::copy(sat, sat + 4, c.lens);
  expect_fail(c.run(), CheckStatus::kSizeMismatch, CheckField::kPlaneBytes);
  // Extreme extents do not trap either.
  c.shape = {INT64_MAX - 31, INT64_MAX, INT64_MAX, INT64_MAX};
  for (auto& l : c.lens) l = UINT64_MAX;
  const CheckResult r = c.run();
  EXPECT_EQ(r.status, CheckStatus::kSizeMismatch);
  c.shape = {int64_t{1} << 62, 4};  // numel exactly 2^64
  for (auto& l : c.lens) l = UINT64_MAX;
  expect_fail(c.run(), CheckStatus::kSizeMismatch, CheckField::kPlaneBytes);
  // numel 2^64 needs 2^63 + 2^59 bytes, which do fit: the check accepts the
  // exact lengths, as the oracle does.
  const uint64_t exact[4] = {uint64_t{1} << 63, uint64_t{1} << 59, 0, 0};
  std::copy(exact, exact + 4, c.lens);
  EXPECT_TRUE(c.run().ok());
}

// ------------------------------------------------------------ order

TEST(CheckOrder, FirstFailureWins) {
  Case c = clean("I8S24");
  c.d.placement_meta = 0;   // step 3
  c.shape = {-1};           // step 4
  c.d.k0 = 64;              // step 2
  c.d.frame_rsvd = 9;       // step 1
  expect_fail(c.run(), CheckStatus::kGradeUnknown, CheckField::kFrameRsvd);
  c.d.frame_rsvd = 0;
  expect_fail(c.run(), CheckStatus::kGradeUnknown, CheckField::kGradeFrame);
  c.d.k0 = 32;
  expect_fail(c.run(), CheckStatus::kPlacementUnknown, CheckField::kPlacementMetaMissing);
  c.d.placement_meta = grit::kLinearMeta;
  expect_fail(c.run(), CheckStatus::kSizeMismatch, CheckField::kShape);
  // Within step 1 the magic is checked first.
  Case m = clean("MXFP4");
  m.d.magic = 0;
  m.d.version = 9;
  m.d.flags = 0xFF;
  expect_fail(m.run(), CheckStatus::kGradeUnknown, CheckField::kMagic);
}

// ------------------------------------------------------------ level 2

struct Content {
  Case c;
  gt::Planes planes;
};

Content i8s24_content() {
  Content k{clean("I8S24"), {}};
  k.planes = gt::Planes(std::vector<uint8_t>(128, 0x05), std::vector<uint8_t>(16, 0x3C),
                        {}, std::vector<uint8_t>(32, 0x44));  // each quad keeps (0,1)
  return k;
}

TEST(CheckContent, Level2DigestMatchAndMismatch) {
  Content k = i8s24_content();
  const grit::Plane* p = k.planes.planes();
  const grit::Id128 want = grit::digest_of(p);
  CheckResult r = grit::check(k.c.d, k.c.shape.data(), 1, p, 2, &want);
  EXPECT_TRUE(r.ok()) << grit::describe(r, k.c.d);
  k.planes.p[0][77] ^= 0x10;
  p = k.planes.planes();
  r = grit::check(k.c.d, k.c.shape.data(), 1, p, 2, &want);
  expect_fail(r, CheckStatus::kDigestMismatch, CheckField::kDigest);
  // Level 1 never reads the planes, so it cannot see the change.
  EXPECT_TRUE(grit::check(k.c.d, k.c.shape.data(), 1, p, 1, &want).ok());
  // Level 2 without an expected digest skips the digest comparison.
  EXPECT_TRUE(grit::check(k.c.d, k.c.shape.data(), 1, p, 2).ok());
}

TEST(CheckContent, Level2NonAscendingSparsityMetadata) {
  Content k = i8s24_content();
  EXPECT_TRUE(grit::check(k.c.d, k.c.shape.data(), 1, k.planes.planes(), 2).ok());
  // Quad 5 says (2, 1): descending.
  k.planes.p[3][5 / 2] = static_cast<uint8_t>((k.planes.p[3][2] & 0x0F) | ((2 | (1 << 2)) << 4));
  CheckResult r = grit::check(k.c.d, k.c.shape.data(), 1, k.planes.planes(), 2);
  expect_fail(r, CheckStatus::kDigestMismatch, CheckField::kSpOrder);
  EXPECT_EQ(r.plane, 3);
  // A repeated index (1, 1) is not strictly ascending either.
  k = i8s24_content();
  k.planes.p[3][31] = 0x05 << 4 | 0x4;
  r = grit::check(k.c.d, k.c.shape.data(), 1, k.planes.planes(), 2);
  expect_fail(r, CheckStatus::kDigestMismatch, CheckField::kSpOrder);
  // (2, 3) is fine.
  k = i8s24_content();
  k.planes.p[3][0] = 0x4E;
  EXPECT_TRUE(grit::check(k.c.d, k.c.shape.data(), 1, k.planes.planes(), 2).ok());
  // Digest first, then ordering.
  k.planes.p[3][0] = 0x06;
  const grit::Id128 wrong{};
  r = grit::check(k.c.d, k.c.shape.data(), 1, k.planes.planes(), 2, &wrong);
  expect_fail(r, CheckStatus::kDigestMismatch, CheckField::kDigest);
}

TEST(CheckContent, Level1DoesNotTouchPlanes) {
  Case c = clean("I8S24");
  grit::Plane p[4] = {{nullptr, 128}, {nullptr, 16}, {nullptr, 0}, {nullptr, 32}};
  EXPECT_TRUE(grit::check(c.d, c.shape.data(), 1, p, 1).ok());
}

TEST(CheckContent, MetaIsAscending) {
  const uint8_t asc[] = {0x4E, 0xC4};  // quads (2,3) (0,1) | (0,1) (0,3)
  EXPECT_TRUE(grit::meta_is_ascending(asc, 2, 16, 2, 4, 2));
  const uint8_t eq[] = {0x00};  // (0, 0)
  EXPECT_FALSE(grit::meta_is_ascending(eq, 1, 8, 2, 4, 2));
  const uint8_t tail[] = {0x4E};  // quads (2,3) (0,1); a third quad reads past the plane as (0,0)
  EXPECT_TRUE(grit::meta_is_ascending(tail, 1, 8, 2, 4, 2));
  EXPECT_FALSE(grit::meta_is_ascending(tail, 1, 12, 2, 4, 2));
  // u4 metadata, an index >= M is refused.
  const uint8_t big[] = {0x50};  // indices (0, 5) with M = 4
  EXPECT_FALSE(grit::meta_is_ascending(big, 1, 4, 2, 4, 4));
  const uint8_t ok4[] = {0x30};  // (0, 3)
  EXPECT_TRUE(grit::meta_is_ascending(ok4, 1, 4, 2, 4, 4));
  EXPECT_TRUE(grit::meta_is_ascending(nullptr, 0, 0, 2, 4, 2));
}

// ------------------------------------------------------------ diagnostics

TEST(CheckDiagnostics, NamesAndSentences) {
  EXPECT_STREQ(grit::check_status_name(CheckStatus::kOk), "Ok");
  EXPECT_STREQ(grit::check_status_name(CheckStatus::kSizeMismatch), "SizeMismatch");
  EXPECT_STREQ(grit::check_status_name(CheckStatus::kGradeUnknown), "GradeUnknown");
  EXPECT_STREQ(grit::check_status_name(CheckStatus::kPlacementUnknown), "PlacementUnknown");
  EXPECT_STREQ(grit::check_status_name(CheckStatus::kDigestMismatch), "DigestMismatch");
  EXPECT_STREQ(grit::check_field_name(CheckField::kK0), "k0");
  EXPECT_STREQ(grit::check_field_name(CheckField::kPlaneBytes), "plane_bytes");

  Case c = clean("Q4KS");
  c.lens[1] = 9;
  CheckResult r = c.run();
  std::string s = grit::describe(r, c.d);
  EXPECT_EQ(s, "SizeMismatch: plane 1 (scale0): expected 8 bytes, found 9");

  c = clean("MXFP4");
  c.d.k0 = 64;
  r = c.run();
  s = grit::describe(r, c.d);
  EXPECT_EQ(s.rfind("GradeUnknown: ", 0), 0u) << s;
  EXPECT_NE(s.find("k0"), std::string::npos) << s;
  EXPECT_NE(s.find("32"), std::string::npos) << s;
  EXPECT_NE(s.find("64"), std::string::npos) << s;

  c = clean("MXFP4");
  c.d.placement_data = 0x3000000000000000ull;
  s = grit::describe(c.run(), c.d);
  EXPECT_NE(s.find("RESERVED_CLASS_0x3"), std::string::npos) << s;
  EXPECT_EQ(grit::describe(CheckResult{}, c.d), "ok");
}

// ------------------------------------------------------------ robustness

struct SplitMix {
  uint64_t s;
  uint64_t next() {
    s += 0x9E3779B97F4A7C15ull;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return next() % n; }
};

TEST(CheckFuzz, RandomDescriptorsNeverTrap) {
  SplitMix rng{12345};
  size_t nref = 0;
  const grit::ReferenceGrade* refs = grit::reference_grades(&nref);
  int seen[5] = {0, 0, 0, 0, 0};
  int level2 = 0;
  for (int iter = 0; iter < 100000; ++iter) {
    uint8_t raw[64];
    const bool believable = iter % 2 == 0;
    if (believable) {
      // A reference descriptor with a few bytes changed, so every step of
      // the check gets exercised, not only the magic.
      const grit::Grade& g = *refs[rng.below(nref)].grade;
      const grit::Bytes64 b = grit::to_bytes(grit::descriptor_for(g, grit::default_placements(g)));
      std::memcpy(raw, b.data(), 64);
      const uint64_t muts = rng.below(3);
      for (uint64_t m = 0; m < muts; ++m) raw[rng.below(64)] = static_cast<uint8_t>(rng.next());
    } else {
      for (int i = 0; i < 64; i += 8) {
        const uint64_t w = rng.next();
        std::memcpy(raw + i, &w, 8);
      }
    }
    const grit::Descriptor d = grit::from_bytes(raw);
    const size_t rank = static_cast<size_t>(rng.below(9));
    int64_t dims[8];
    for (size_t i = 0; i < rank; ++i) {
      switch (rng.below(5)) {
        case 0: dims[i] = static_cast<int64_t>(rng.next()); break;  // any, negative too
        case 1: dims[i] = static_cast<int64_t>(rng.below(1024)); break;
        case 2: dims[i] = INT64_MAX - static_cast<int64_t>(rng.below(4)); break;
        default: dims[i] = 256 * static_cast<int64_t>(1 + rng.below(4)); break;
      }
    }
    uint64_t lens[4];
    grit::PlaneSizes ps;
    const bool have = grit::expected_plane_bytes(d, dims, rank, &ps).ok();
    if (have && rng.below(2)) {
      std::copy(ps.bytes, ps.bytes + 4, lens);
    } else {
      for (auto& l : lens) l = rng.below(3) == 0 ? rng.next() : rng.below(512);
    }
    const CheckResult r = grit::check_level1(d, dims, rank, lens);
    const int s = static_cast<int>(r.status);
    ASSERT_GE(s, 0);
    ASSERT_LE(s, 3);  // level 1 never reports a digest mismatch
    ASSERT_EQ(r.ok(), r.field == CheckField::kNone);
    ++seen[s];
    EXPECT_FALSE(grit::describe(r, d).empty());
    // Level 2 on real buffers of the declared lengths reads nothing beyond them.
    if (r.ok() && lens[0] + lens[1] + lens[2] + lens[3] < (1u << 16)) {
      gt::Planes pl;
      for (int i = 0; i < 4; ++i) {
        pl.p[i].resize(lens[i]);
        for (auto& byte : pl.p[i]) byte = static_cast<uint8_t>(rng.next());
      }
      const grit::Id128 dg = grit::digest_of(pl.planes());
      const CheckResult r3 = grit::check(d, dims, rank, pl.planes(), 2, rng.below(2) ? &dg : nullptr);
      ASSERT_TRUE(r3.status == CheckStatus::kOk || r3.status == CheckStatus::kDigestMismatch);
      ++level2;
    }
    // The claimed-grade entry point takes the same inputs.
    const CheckResult r2 = grit::check_level1(d, dims, rank, lens, refs[iter % nref].grade);
    ASSERT_LE(static_cast<int>(r2.status), 3);
  }
  // The sweep reaches every level-1 outcome.
  EXPECT_GT(seen[0], 100);
  EXPECT_GT(seen[1], 100);
  EXPECT_GT(seen[2], 100);
  EXPECT_GT(seen[3], 100);
  EXPECT_GT(level2, 100);
}

// Same draws as tests/cpp/gen_check_fuzz_hash.py.
TEST(CheckFuzz, MatchesTheOracle) {
  static const char* const kRefs[] = {"MXFP4", "Q4KS", "NVF4", "I8S24", "MXFP4_RNE", "NVF4_RTZ"};
  static const int64_t kDims[] = {0, 1, 2, 4, 8, 16, 32, 64, 96, 128, 256, 512, -1, int64_t{1} << 40};
  static const uint8_t kSmall[] = {0, 1, 2, 3, 4, 8, 16, 32, 0x40, 0x80, 0xFF};
  SplitMix rng{0x6772697431ull};
  std::vector<uint8_t> rec;
  int hist[5] = {0, 0, 0, 0, 0};
  const int n = 20000;
  for (int iter = 0; iter < n; ++iter) {
    grit::Bytes64 raw = grit::to_bytes([&] {
      const grit::Grade& g = gt::ref(kRefs[rng.below(6)]);
      return grit::descriptor_for(g, grit::default_placements(g));
    }());
    const uint64_t muts = rng.below(3);
    for (uint64_t m = 0; m < muts; ++m) {
      const uint64_t pos = rng.below(64);
      raw[pos] = rng.below(2) ? kSmall[rng.below(sizeof kSmall)] : static_cast<uint8_t>(rng.below(256));
    }
    const size_t rank = static_cast<size_t>(rng.below(4));
    int64_t dims[3];
    for (size_t i = 0; i < rank; ++i) dims[i] = kDims[rng.below(sizeof kDims / sizeof kDims[0])];
    if (rank && rng.below(2)) dims[0] = 256 * static_cast<int64_t>(1 + rng.below(3));
    const uint64_t mode = rng.below(4), plane = rng.below(4);
    uint64_t rnd[4];
    for (auto& x : rnd) x = rng.below(300);

    const grit::Descriptor d = grit::from_bytes(raw.data());
    grit::PlaneSizes ps;
    const bool have = grit::expected_plane_bytes(d, dims, rank, &ps).ok();
    uint64_t lens[4] = {0, 0, 0, 0};
    if (have) std::copy(ps.bytes, ps.bytes + 4, lens);
    if (mode == 2) lens[plane] += 1;
    if (mode == 3) std::copy(rnd, rnd + 4, lens);
    const CheckResult r = grit::check_level1(d, dims, rank, lens);
    ++hist[static_cast<int>(r.status)];
    rec.push_back(static_cast<uint8_t>(r.status));
    rec.push_back(have ? 1 : 0);
    if (have)
      for (uint64_t b : ps.bytes)
        for (int k = 0; k < 8; ++k) rec.push_back(static_cast<uint8_t>(b >> (8 * k)));
  }
  // The oracle's histogram and record hash for the same 20000 cases.
  EXPECT_EQ(hist[0], 2072);
  EXPECT_EQ(hist[1], 5700);
  EXPECT_EQ(hist[2], 8479);
  EXPECT_EQ(hist[3], 3749);
  EXPECT_EQ(hist[4], 0);
  EXPECT_EQ(grit::fnv1a64(rec.data(), rec.size()), 0x51af2c9d92720ef1ull);
}

}  // namespace
