// Grade strings (SPEC 4): canonical form, ids, aliases, every parse error
// class with its token and byte offset, the decode projection. Canonical
// strings and ids are the oracle's (grit.GRADE_REGISTRY, grit.grade_id_of).
#include <gtest/gtest.h>

#include <string>

#include "grit/grade.h"
#include "test_util.h"

namespace {

using grit::Error;

struct RefCase {
  const char* name;
  const char* canonical;
  uint64_t id;
};

const RefCase kRefs[] = {
    {"GRADE_MXFP4", "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)", 0x2370ee9ee454a183ull},
    {"GRADE_Q4KS", "grit1(e=u4,k0=32,s0=u6,k1=8,s1=binary16,zp=u6,zps=l1,esr=affineminmax)",
     0x1c600de02594fb55ull},
    {"GRADE_NVF4", "grit1(e=e2m1,k0=16,s0=e4m3,k1=0,s1=binary32,esr=ratiomaxabs)",
     0x00ff6f4c2870831eull},
    {"GRADE_I8S24", "grit1(e=s8,k0=32,s0=binary16,sp=2:4:u2:asclsb,esr=ratiomaxabs)",
     0xbbbb283a2539ebe8ull},
    {"GRADE_MXFP4_RNE", "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2rnemaxabs)", 0x254285e10d6068c8ull},
    {"GRADE_NVF4_RTZ", "grit1(e=e2m1,k0=16,s0=e4m3,k1=0,s1=binary32,er=rtz,esr=ratiomaxabs)",
     0x006c3850a3f42dea},
};

TEST(Grade, ReferenceGradesCanonicalStringsAndIds) {
  size_t n = 0;
  const grit::ReferenceGrade* rows = grit::reference_grades(&n);
  ASSERT_EQ(n, 6u);
  for (size_t i = 0; i < n; ++i) {
    SCOPED_TRACE(kRefs[i].name);
    EXPECT_STREQ(rows[i].name, kRefs[i].name);
    EXPECT_EQ(std::string("GRADE_") + rows[i].short_name, rows[i].name);
    EXPECT_EQ(rows[i].grade->canonical, kRefs[i].canonical);
    EXPECT_EQ(rows[i].grade->id, kRefs[i].id);
    // The id is FNV-1a-64 of the canonical string, no terminator.
    EXPECT_EQ(grit::fnv1a64(kRefs[i].canonical, std::strlen(kRefs[i].canonical)), kRefs[i].id);
    // Parsing the canonical string is a fixed point.
    const grit::Grade g = gt::parse_ok(kRefs[i].canonical);
    EXPECT_EQ(g.canonical, kRefs[i].canonical);
    EXPECT_EQ(g.id, kRefs[i].id);
  }
}

TEST(Grade, ReferenceLookup) {
  ASSERT_NE(grit::reference_grade("GRADE_MXFP4"), nullptr);
  EXPECT_EQ(grit::reference_grade("mxfp4"), grit::reference_grade("GRADE_MXFP4"));
  EXPECT_EQ(grit::reference_grade("grade_nvf4_rtz"), grit::reference_grade("NVF4_RTZ"));
  EXPECT_EQ(grit::reference_grade("GRADE_MXFP8"), nullptr);
  EXPECT_EQ(grit::reference_grade(""), nullptr);
  const grit::ReferenceGrade* q = grit::reference_grade_by_id(0x1c600de02594fb55ull);
  ASSERT_NE(q, nullptr);
  EXPECT_STREQ(q->name, "GRADE_Q4KS");
  EXPECT_EQ(grit::reference_grade_by_id(0), nullptr);
  EXPECT_EQ(grit::reference_grade_by_id(0x2370ee9ee454a184ull), nullptr);
}

TEST(Grade, NumbersOfTheReferenceGrades) {
  const grit::Grade& mx = gt::ref("MXFP4");
  EXPECT_EQ(mx.elem, grit::kE2M1);
  EXPECT_EQ(mx.scale0, grit::kE8M0);
  EXPECT_EQ(mx.k0, 32u);
  EXPECT_FALSE(mx.has_l1 || mx.has_zp || mx.has_sp);
  EXPECT_EQ(mx.n_levels(), 1);
  EXPECT_EQ(mx.esr(), "exp2floormaxabs");
  EXPECT_EQ(mx.er(), "rne");

  const grit::Grade& q = gt::ref("Q4KS");
  EXPECT_TRUE(q.has_l1 && q.has_zp && q.zp_l1);
  EXPECT_FALSE(q.zp_minus1);
  EXPECT_EQ(q.elem, grit::kU4);
  EXPECT_EQ(q.scale0, grit::kU6);
  EXPECT_EQ(q.scale1, grit::kBinary16);
  EXPECT_EQ(q.zp, grit::kU6);
  EXPECT_EQ(q.k1, 8u);
  EXPECT_EQ(q.n_levels(), 2);

  const grit::Grade& nv = gt::ref("NVF4");
  EXPECT_TRUE(nv.has_l1);
  EXPECT_EQ(nv.k1, 0u);  // one per-tensor scale
  EXPECT_EQ(nv.scale1, grit::kBinary32);
  EXPECT_EQ(nv.scale0, grit::kE4M3);
  EXPECT_EQ(gt::ref("NVF4_RTZ").er(), "rtz");

  const grit::Grade& sp = gt::ref("I8S24");
  EXPECT_TRUE(sp.has_sp);
  EXPECT_EQ(sp.sp_n, 2u);
  EXPECT_EQ(sp.sp_m, 4u);
  EXPECT_EQ(sp.sp_meta_bits, 2u);
  EXPECT_TRUE(sp.sp_ascending);
  EXPECT_EQ(sp.elem, grit::kS8);
}

TEST(Grade, AliasSpellingsCanonicalise) {
  const struct { const char* in; const char* canonical; } cases[] = {
      {"GRIT1( E = FP4 , k0=032, s0=ue8m0, esr=ocp-mx )",
       "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)"},
      {"grit1(esr=floor,s0=E8M0fnu,k0=32,e=float4_e2m1fn)",
       "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)"},
      // Explicit defaults are dropped from the canonical form.
      {"grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs,er=rne,es=satfinite)",
       "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)"},
      {"grit1(e=int8,k0=32,s0=half,sp=2:4:uint2:sorted,esr=ratio)",
       "grit1(e=s8,k0=32,s0=binary16,sp=2:4:u2:asclsb,esr=ratiomaxabs)"},
      {"grit1(e=nibble,k0=32,s0=uint6,k1=8,s1=fp16,zp=uint6,zps=ownscale,esr=minmax)",
       "grit1(e=u4,k0=32,s0=u6,k1=8,s1=binary16,zp=u6,zps=l1,esr=affineminmax)"},
      {"grit1(e=e2m1,k0=16,s0=fp8e4m3,k1=0,s1=f32,er=truncate,esr=amax_over_emax)",
       "grit1(e=e2m1,k0=16,s0=e4m3,k1=0,s1=binary32,er=rtz,esr=ratiomaxabs)"},
      {"grit1(e=u4,k0=128,s0=binary16,zp=u4,zpc=gptq,esr=affine,ao=pairwise_08)",
       "grit1(e=u4,k0=128,s0=binary16,zp=u4,zpc=minus1,esr=affineminmax,ao=pairwise8)"},
      {"grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2ceil)",
       "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2ceilmaxabs)"},
      // Multi-line, tabs, mixed case.
      {"grit1(\n\te=E2M1,\n\tk0=32,\r\n\ts0=E8M0,\n\tESR=Exp2Floor\n)",
       "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)"},
      // Every key away from its default, emitted in canonical key order.
      {"grit1(e=s4,k0=64,s0=binary16,ct=pad8,po=msb,dr=rtz,ds=satmax,dt=binary16,ao=tree,"
       "ap=binary16,ab=binary16,ai=binary16,an=ftz,esn=ftz,es=ovfinf,er=rna,esr=custom:My-Rule)",
       "grit1(e=s4,k0=64,s0=binary16,ct=pad8,po=msb,er=rna,es=ovfinf,esr=custom:myrule,esn=ftz,"
       "dr=rtz,ds=satmax,dt=binary16,ao=tree,ap=binary16,ab=binary16,ai=binary16,an=ftz)"},
  };
  for (const auto& c : cases) {
    const grit::Grade g = gt::parse_ok(c.in);
    EXPECT_EQ(g.canonical, c.canonical) << c.in;
    EXPECT_EQ(g.id, grit::fnv1a64(g.canonical.data(), g.canonical.size()));
  }
  // Two ids from the oracle for non-reference grades.
  EXPECT_EQ(gt::parse_ok("grit1(e=u4,k0=128,s0=binary16,zp=u4,zpc=gptq,esr=affine,ao=pairwise_08)").id,
            0xe51174aff4527945ull);
  EXPECT_EQ(gt::parse_ok("grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2ceil)").id, 0x72ed502c18ab2e96ull);
}

TEST(Grade, NumbersOfACustomGrade) {
  const grit::Grade g = gt::parse_ok(
      "grit1(e=s4,k0=64,s0=binary16,zp=u4,zpc=minus1,ct=pad8,po=msb,esr=affineminmax)");
  EXPECT_EQ(g.elem, grit::kS4);
  EXPECT_EQ(g.zp, grit::kU4);
  EXPECT_TRUE(g.has_zp);
  EXPECT_TRUE(g.zp_minus1);
  EXPECT_FALSE(g.zp_l1);
  EXPECT_TRUE(g.pad8);
  EXPECT_TRUE(g.msb_first);
  EXPECT_EQ(g.field[grit::kKeyZps], "shared");  // default filled in
  EXPECT_EQ(g.field[grit::kKeyAo], "unspec");
}

TEST(Grade, KeyNames) {
  EXPECT_STREQ(grit::grade_key_name(grit::kKeyE), "e");
  EXPECT_STREQ(grit::grade_key_name(grit::kKeyEsr), "esr");
  EXPECT_STREQ(grit::grade_key_name(grit::kKeyAn), "an");
  EXPECT_STREQ(grit::grade_key_name(grit::kNumGradeKeys), "?");
  EXPECT_STREQ(grit::grade_key_name(-1), "?");
}

// ------------------------------------------------------------ parse errors

struct Bad {
  grit::Status s;
  std::string text;
};

Bad parse_bad(const std::string& text) {
  grit::Grade g;
  g.canonical = "untouched";
  Bad b{grit::grade_parse(text, &g), text};
  EXPECT_FALSE(b.s.ok()) << text;
  EXPECT_EQ(g.canonical, "untouched") << "a failed parse must not write its output";
  EXPECT_FALSE(b.s.message.empty());
  return b;
}

// The error class, the token and its byte offset in the caller's text.
void expect_error(const std::string& text, Error code, const std::string& token, long position) {
  const Bad b = parse_bad(text);
  EXPECT_EQ(b.s.code, code) << text << " -> " << grit::error_name(b.s.code) << ": " << b.s.message;
  EXPECT_EQ(b.s.token, token) << text;
  EXPECT_EQ(b.s.position, position) << text;
}

long at(const std::string& text, const std::string& needle) {
  const size_t p = text.find(needle);
  EXPECT_NE(p, std::string::npos) << needle;
  return static_cast<long>(p);
}

TEST(GradeParseError, Malformed) {
  std::string t = "grit(e=e2m1,k0=32,s0=e8m0,esr=floor)";
  expect_error(t, Error::kMalformed, t.substr(0, 16), 0);
  t = "grit1(e=e2m1,k0=32,s0=e8m0,esr=floor";  // no closing parenthesis
  EXPECT_EQ(parse_bad(t).s.code, Error::kMalformed);
  t = "grit1(e=e2m1,k0=32,s0,esr=floor)";  // a field without '='
  expect_error(t, Error::kMalformed, "s0", at(t, "s0,"));
  t = "grit1(e=e2m1,k0=32,s0=e8m0,esr=floor,)";  // trailing comma: empty field
  EXPECT_EQ(parse_bad(t).s.code, Error::kMalformed);
  t = "grit1(e=e2m1,k0=3x2,s0=e8m0,esr=floor)";  // k0 not a decimal
  expect_error(t, Error::kMalformed, "3x2", at(t, "3x2"));
  t = "grit1(e=e2m1,k0=-32,s0=e8m0,esr=floor)";
  expect_error(t, Error::kMalformed, "-32", at(t, "-32"));
  t = "grit1(e=s8,k0=32,s0=binary16,sp=2:4:u2,esr=ratio)";  // sp needs four parts
  expect_error(t, Error::kMalformed, "2:4:u2", at(t, "2:4:u2"));
  t = "grit1(e=s8,k0=32,s0=binary16,sp=two:4:u2:asclsb,esr=ratio)";
  EXPECT_EQ(parse_bad(t).s.code, Error::kMalformed);
  // Grade strings are ASCII: the offending byte and its offset.
  t = "grit1(e=e2m1,k0=32,s0=e8m0,esr=fl\xc3\xb6or)";
  const Bad b = parse_bad(t);
  EXPECT_EQ(b.s.code, Error::kMalformed);
  EXPECT_EQ(b.s.position, at(t, "\xc3"));
  EXPECT_EQ(b.s.token, "\xc3\xb6");  // the whole UTF-8 sequence
  EXPECT_EQ(parse_bad("").s.code, Error::kMalformed);
  EXPECT_EQ(parse_bad("grit1)").s.code, Error::kMalformed);
}

TEST(GradeParseError, UnknownKey) {
  std::string t = "grit1(e=e2m1,k0=32,s0=e8m0,esr=floor,Bias=1)";
  expect_error(t, Error::kUnknownKey, "Bias", at(t, "Bias"));
  // Whitespace does not move the reported offset off the original text.
  t = "grit1( e=e2m1, k0=32, s0=e8m0, esr=floor,   zz = 1 )";
  expect_error(t, Error::kUnknownKey, "zz", at(t, "zz"));
}

TEST(GradeParseError, DuplicateKey) {
  const std::string t = "grit1(e=e2m1,k0=32,s0=e8m0,K0=64,esr=floor)";
  expect_error(t, Error::kDuplicateKey, "k0", at(t, "K0"));
}

TEST(GradeParseError, MissingKey) {
  std::string t = "grit1(e=e2m1,k0=32,s0=e8m0)";  // esr has no default
  expect_error(t, Error::kMissingKey, "esr", static_cast<long>(t.size()));
  t = "grit1(k0=32,s0=e8m0,esr=floor)";
  expect_error(t, Error::kMissingKey, "e", static_cast<long>(t.size()));
  t = "grit1(e=e2m1,s0=e8m0,esr=floor)";
  expect_error(t, Error::kMissingKey, "k0", static_cast<long>(t.size()));
  t = "grit1(e=e2m1,k0=32,esr=floor)";
  expect_error(t, Error::kMissingKey, "s0", static_cast<long>(t.size()));
  t = "grit1()";
  expect_error(t, Error::kMissingKey, "e", static_cast<long>(t.size()));
}

TEST(GradeParseError, UnknownToken) {
  std::string t = "grit1(e=E9M9,k0=32,s0=e8m0,esr=floor)";
  expect_error(t, Error::kUnknownToken, "E9M9", at(t, "E9M9"));
  t = "grit1(e=e2m1,k0=32,s0=e8m0,esr=floor,er=sideways)";
  expect_error(t, Error::kUnknownToken, "sideways", at(t, "sideways"));
  t = "grit1(e=e2m1,k0=32,s0=e8m0,esr=maxabs)";
  expect_error(t, Error::kUnknownToken, "maxabs", at(t, "maxabs"));
  t = "grit1(e=e2m1,k0=32,s0=e8m0,esr=floor,ao=pairwise0)";
  expect_error(t, Error::kUnknownToken, "pairwise0", at(t, "pairwise0"));
  t = "grit1(e=e2m1,k0=32,s0=e8m0,esr=floor,ct=sparse)";
  expect_error(t, Error::kUnknownToken, "sparse", at(t, "sparse"));
  // Inside sp: the metadata order and the metadata format.
  t = "grit1(e=s8,k0=32,s0=binary16,sp=2:4:u2:chaos,esr=ratio)";
  Bad b = parse_bad(t);
  EXPECT_EQ(b.s.code, Error::kUnknownToken);
  EXPECT_EQ(b.s.token, "chaos");
  t = "grit1(e=s8,k0=32,s0=binary16,sp=2:4:q3:asclsb,esr=ratio)";
  b = parse_bad(t);
  EXPECT_EQ(b.s.code, Error::kUnknownToken);
  EXPECT_EQ(b.s.token, "q3");
}

TEST(GradeParseError, NotAnAlias) {
  std::string t = "grit1(e=e4m3fnuz,k0=32,s0=e8m0,esr=floor)";
  expect_error(t, Error::kNotAnAlias, "e4m3fnuz", at(t, "e4m3fnuz"));
  t = "grit1(e=e2m1,k0=32,s0=B16,esr=floor)";
  expect_error(t, Error::kNotAnAlias, "B16", at(t, "B16"));
  t = "grit1(e=u4b,k0=32,s0=e8m0,esr=floor)";
  expect_error(t, Error::kNotAnAlias, "u4b", at(t, "u4b"));
}

TEST(GradeParseError, Inexpressible) {
  std::string t = "grit1(e=nf4,k0=64,s0=binary16,esr=ratio)";
  expect_error(t, Error::kInexpressible, "nf4", at(t, "nf4"));
  t = "grit1(e=IQ4_NL,k0=32,s0=binary16,esr=ratio)";
  expect_error(t, Error::kInexpressible, "IQ4_NL", at(t, "IQ4_NL"));
  t = "grit1(e=e2m1,k0=32,s0=bf16,esr=ratio)";
  expect_error(t, Error::kInexpressible, "bf16", at(t, "bf16"));
  t = "grit1(e=float8_e5m2fnuz,k0=32,s0=e8m0,esr=floor)";
  expect_error(t, Error::kInexpressible, "float8_e5m2fnuz", at(t, "float8_e5m2fnuz"));
  t = "grit1(e=int2,k0=32,s0=binary16,esr=ratio)";
  expect_error(t, Error::kInexpressible, "int2", at(t, "int2"));
  // v1 sparsity metadata is u2 or u4 only.
  t = "grit1(e=s8,k0=32,s0=binary16,sp=2:4:u8:asclsb,esr=ratio)";
  EXPECT_EQ(parse_bad(t).s.code, Error::kInexpressible);
}

TEST(GradeParseError, OutOfRange) {
  std::string t = "grit1(e=e2m1,k0=70000,s0=e8m0,esr=floor)";
  expect_error(t, Error::kOutOfRange, "70000", at(t, "70000"));
  t = "grit1(e=e2m1,k0=65536,s0=e8m0,esr=floor)";
  expect_error(t, Error::kOutOfRange, "65536", at(t, "65536"));
  t = "grit1(e=e2m1,k0=32,s0=e8m0,k1=999999999999,s1=binary32,esr=floor)";
  expect_error(t, Error::kOutOfRange, "999999999999", at(t, "999999999999"));
  EXPECT_EQ(gt::parse_ok("grit1(e=e2m1,k0=65535,s0=e8m0,esr=floor)").k0, 65535u);
  EXPECT_EQ(gt::parse_ok("grit1(e=e2m1,k0=00000000032,s0=e8m0,esr=floor)").k0, 32u);
  // N survivors of every M: 1 <= N < M <= 32.
  t = "grit1(e=s8,k0=32,s0=binary16,sp=4:4:u2:asclsb,esr=ratio)";
  expect_error(t, Error::kOutOfRange, "4:4:u2:asclsb", at(t, "4:4:u2:asclsb"));
  t = "grit1(e=s8,k0=32,s0=binary16,sp=0:4:u2:asclsb,esr=ratio)";
  expect_error(t, Error::kOutOfRange, "0:4:u2:asclsb", at(t, "0:4:u2:asclsb"));
  t = "grit1(e=s8,k0=32,s0=binary16,sp=2:33:u4:asclsb,esr=ratio)";
  expect_error(t, Error::kOutOfRange, "2:33:u4:asclsb", at(t, "2:33:u4:asclsb"));
  EXPECT_EQ(gt::parse_ok("grit1(e=s8,k0=32,s0=binary16,sp=02:4:U2:Ordered,esr=ratio)").field[grit::kKeySp],
            "2:4:u2:asclsb");
}

TEST(GradeParseError, Inconsistent) {
  Bad b = parse_bad("grit1(e=e2m1,k0=16,s0=e4m3,k1=0,esr=ratio)");  // k1 without s1
  EXPECT_EQ(b.s.code, Error::kInconsistent);
  EXPECT_EQ(b.s.token, "k1");
  b = parse_bad("grit1(e=e2m1,k0=16,s0=e4m3,s1=binary32,esr=ratio)");  // s1 without k1
  EXPECT_EQ(b.s.code, Error::kInconsistent);
  EXPECT_EQ(b.s.token, "s1");
  b = parse_bad("grit1(e=u4,k0=32,s0=binary16,zps=shared,esr=affine)");  // zps without zp
  EXPECT_EQ(b.s.code, Error::kInconsistent);
  EXPECT_EQ(b.s.token, "zps");
  b = parse_bad("grit1(e=u4,k0=32,s0=binary16,zpc=minus1,esr=affine)");  // zpc without zp
  EXPECT_EQ(b.s.code, Error::kInconsistent);
  EXPECT_EQ(b.s.token, "zpc");
  b = parse_bad("grit1(e=u4,k0=32,s0=binary16,zp=u4,zps=l1,esr=affine)");  // zps=l1 without k1
  EXPECT_EQ(b.s.code, Error::kInconsistent);
  EXPECT_EQ(b.s.token, "zps");
  // The same grade with a level-1 scale is fine.
  EXPECT_TRUE(gt::parse_ok("grit1(e=u4,k0=32,s0=binary16,k1=4,s1=binary16,zp=u4,zps=l1,esr=affine)").zp_l1);
}

TEST(GradeParseError, ErrorNames) {
  EXPECT_STREQ(grit::error_name(Error::kOk), "ok");
  EXPECT_STREQ(grit::error_name(Error::kMalformed), "malformed");
  EXPECT_STREQ(grit::error_name(Error::kNotAnAlias), "not_an_alias");
  EXPECT_STREQ(grit::error_name(Error::kInexpressible), "inexpressible");
  EXPECT_STREQ(grit::error_name(Error::kBadLength), "bad_length");
}

// ------------------------------------------------------------ projection

TEST(Grade, DecodeProjection) {
  const std::string mx = grit::decode_projection(gt::ref("MXFP4"));
  EXPECT_EQ(mx, "gritdec1(e=e2m1,k0=32,s0=e8m0,ct=dense,po=lsb,dr=rne,ds=satfinite,dt=binary32)");
  EXPECT_EQ(mx, grit::decode_projection(gt::ref("MXFP4_RNE")));
  EXPECT_NE(gt::ref("MXFP4").canonical, gt::ref("MXFP4_RNE").canonical);
  EXPECT_EQ(grit::decode_projection(gt::ref("NVF4")), grit::decode_projection(gt::ref("NVF4_RTZ")));
  EXPECT_EQ(grit::decode_projection(gt::ref("NVF4")),
            "gritdec1(e=e2m1,k0=16,s0=e4m3,k1=0,s1=binary32,ct=dense,po=lsb,dr=rne,ds=satfinite,"
            "dt=binary32)");
  EXPECT_EQ(grit::decode_projection(gt::ref("Q4KS")),
            "gritdec1(e=u4,k0=32,s0=u6,k1=8,s1=binary16,zp=u6,zpc=asis,zps=l1,ct=dense,po=lsb,"
            "dr=rne,ds=satfinite,dt=binary32)");
  EXPECT_EQ(grit::decode_projection(gt::ref("I8S24")),
            "gritdec1(e=s8,k0=32,s0=binary16,sp=2:4:u2:asclsb,ct=dense,po=lsb,dr=rne,ds=satfinite,"
            "dt=binary32)");
  EXPECT_NE(mx, grit::decode_projection(gt::ref("NVF4")));
  // Encode-only keys never reach the projection; decode keys always do.
  EXPECT_EQ(grit::decode_projection(gt::parse_ok(
                "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2ceil,er=rtz,ao=seq,ap=binary16)")),
            mx);
  EXPECT_NE(grit::decode_projection(gt::parse_ok("grit1(e=e2m1,k0=32,s0=e8m0,po=msb,esr=floor)")), mx);
}

}  // namespace
