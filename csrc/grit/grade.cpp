#include "grade.h"

#include <cstring>
#include <utility>
#include <vector>

#include "fnv.h"

namespace grit {
namespace {

constexpr const char* kKeyNames[kNumGradeKeys] = {
    "e", "k0", "s0", "k1", "s1", "zp", "zpc", "zps", "sp", "ct", "po", "er",
    "es", "esr", "esn", "dr", "ds", "dt", "ao", "ap", "ab", "ai", "an"};

enum Domain { kFmt, kInt, kSp, kRnd, kSat, kScaleRule, kSubn, kOrder, kZpc, kZps, kCt, kPo };

constexpr Domain kKeyDomain[kNumGradeKeys] = {
    kFmt, kInt, kFmt, kInt, kFmt, kFmt, kZpc, kZps, kSp, kCt, kPo, kRnd,
    kSat, kScaleRule, kSubn, kRnd, kSat, kFmt, kOrder, kFmt, kFmt, kFmt, kSubn};

// nullptr: no default (required, or present only with its structure).
constexpr const char* kDefaults[kNumGradeKeys] = {
    nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, "asis", "shared", nullptr,
    "dense", "lsb", "rne", "satfinite", nullptr, "preserve",
    "rne", "satfinite", "binary32", "unspec", "binary32", "binary32", "binary32", "any"};

bool has_default(int key) { return kDefaults[key] != nullptr; }
bool is_required(int key) {
  return key == kKeyE || key == kKeyK0 || key == kKeyS0 || key == kKeyEsr;
}
bool is_structural(int key) {
  return key == kKeyK1 || key == kKeyS1 || key == kKeyZp || key == kKeySp;
}
bool decode_relevant(int key) {
  switch (key) {
    case kKeyE: case kKeyK0: case kKeyS0: case kKeyK1: case kKeyS1: case kKeyZp:
    case kKeyZpc: case kKeyZps: case kKeySp: case kKeyCt: case kKeyPo: case kKeyDr:
    case kKeyDs: case kKeyDt:
      return true;
    default:
      return false;
  }
}

struct Alias {
  const char* spelling;
  const char* canonical;
};

// Format spellings. Canonical names come from the format table.
constexpr Alias kFmtAliases[] = {
    {"fp4", "e2m1"}, {"fp4e2m1", "e2m1"}, {"float4_e2m1", "e2m1"}, {"float4_e2m1fn", "e2m1"},
    {"e2m1fn", "e2m1"}, {"mxfp4elem", "e2m1"},
    {"fp8e4m3", "e4m3"}, {"e4m3fn", "e4m3"}, {"float8_e4m3fn", "e4m3"}, {"f8e4m3fn", "e4m3"},
    {"ue8m0", "e8m0"}, {"e8m0fnu", "e8m0"}, {"float8_e8m0fnu", "e8m0"},
    {"f16", "binary16"}, {"fp16", "binary16"}, {"half", "binary16"}, {"float16", "binary16"},
    {"f32", "binary32"}, {"fp32", "binary32"}, {"float", "binary32"}, {"float32", "binary32"},
    {"single", "binary32"},
    {"int4", "s4"}, {"sint4", "s4"}, {"i4", "s4"},
    {"int8", "s8"}, {"sint8", "s8"}, {"i8", "s8"},
    {"uint2", "u2"}, {"uint4", "u4"}, {"nibble", "u4"}, {"uint6", "u6"},
    {"uint8", "u8"}, {"byte", "u8"},
};

// Spellings refused on purpose, with the reason.
constexpr Alias kNotAliases[] = {
    {"e4m3fnuz", "e4m3fnuz is FNUZ FP8 (another exponent bias, no negative zero), not e4m3; "
                 "FNUZ needs bias_ovr, which v1 requires to be 0"},
    {"b16", "b16 is bfloat16, a different format from binary16"},
    {"u4b", "'u4 with a bias' is not plain u4"},
};

// Real formats the v1 grammar cannot carry.
constexpr Alias kInexpressible[] = {
    {"e5m2fnuz", "FNUZ FP8 needs bias_ovr, which v1 requires to be 0"},
    {"float8_e4m3fnuz", "FNUZ FP8 needs bias_ovr, which v1 requires to be 0"},
    {"float8_e5m2fnuz", "FNUZ FP8 needs bias_ovr, which v1 requires to be 0"},
    {"nf4", "NF4 is a codebook (lookup-table) format; v1 has no codebook element class"},
    {"fp4nf", "NF4 is a codebook (lookup-table) format; v1 has no codebook element class"},
    {"int2", "signed 2-bit (s2) is not in the v1 format ladder"},
    {"s2", "signed 2-bit (s2) is not in the v1 format ladder"},
    {"bf16", "bfloat16 is not in the v1 format ladder"},
    {"bfloat16", "bfloat16 is not in the v1 format ladder"},
    {"e5m2", "e5m2 is not in the v1 format ladder"},
    {"float8_e5m2", "e5m2 is not in the v1 format ladder"},
};

struct EnumTable {
  Domain domain;
  const char* name;
  std::vector<Alias> rows;
};

const std::vector<EnumTable>& enum_tables() {
  static const std::vector<EnumTable> t = {
      {kRnd, "rounding", {{"rne", "rne"}, {"rn", "rne"}, {"nearesttiestoeven", "rne"},
                          {"nearest_even", "rne"}, {"roundtiestoeven", "rne"}, {"even", "rne"},
                          {"rna", "rna"}, {"nearesttiestoaway", "rna"}, {"away", "rna"},
                          {"rtz", "rtz"}, {"towardzero", "rtz"}, {"trunc", "rtz"},
                          {"truncate", "rtz"}, {"rtp", "rtp"}, {"towardpositive", "rtp"},
                          {"ceil", "rtp"}, {"up", "rtp"}, {"rtn", "rtn"},
                          {"towardnegative", "rtn"}, {"floor", "rtn"}, {"down", "rtn"}}},
      {kSat, "saturation", {{"satfinite", "satfinite"}, {"sat_finite", "satfinite"},
                            {"satf", "satfinite"}, {"finite", "satfinite"},
                            {"clamp", "satfinite"}, {"satmax", "satmax"},
                            {"sat_max", "satmax"}, {"ovfinf", "ovfinf"},
                            {"ovf_inf", "ovfinf"}, {"inf", "ovfinf"},
                            {"overflowtoinf", "ovfinf"}}},
      {kScaleRule, "scale rule", {{"exp2floormaxabs", "exp2floormaxabs"},
                                  {"exp2floor", "exp2floormaxabs"},
                                  {"floor", "exp2floormaxabs"},
                                  {"rtz_shared_exp", "exp2floormaxabs"},
                                  {"ocpmx", "exp2floormaxabs"},
                                  {"exp2ceilmaxabs", "exp2ceilmaxabs"},
                                  {"exp2ceil", "exp2ceilmaxabs"},
                                  {"rceil", "exp2ceilmaxabs"},
                                  {"exp2rnemaxabs", "exp2rnemaxabs"},
                                  {"exp2rne", "exp2rnemaxabs"},
                                  {"rne_shared_exp", "exp2rnemaxabs"},
                                  {"ratiomaxabs", "ratiomaxabs"}, {"ratio", "ratiomaxabs"},
                                  {"amax_over_emax", "ratiomaxabs"},
                                  {"affineminmax", "affineminmax"},
                                  {"affine", "affineminmax"}, {"minmax", "affineminmax"}}},
      {kSubn, "subnormal mode", {{"preserve", "preserve"}, {"preserved", "preserve"},
                                 {"subnormalpreserved", "preserve"}, {"denorm", "preserve"},
                                 {"ftz", "ftz"}, {"flushtozero", "ftz"},
                                 {"subnormalftz", "ftz"}, {"any", "any"},
                                 {"subnormalany", "any"}}},
      {kOrder, "accumulation order", {{"seq", "seq"}, {"sequential", "seq"},
                                      {"inorder", "seq"}, {"tree", "tree"},
                                      {"treeany", "tree"}, {"any_tree", "tree"},
                                      {"unspec", "unspec"}, {"unspecified", "unspec"},
                                      {"any", "unspec"}}},
      {kZpc, "zero-point convention", {{"asis", "asis"}, {"asstored", "asis"},
                                       {"stored", "asis"}, {"minus1", "minus1"},
                                       {"storedminusone", "minus1"},
                                       {"stored_minus_one", "minus1"}, {"gptq", "minus1"}}},
      {kZps, "zero-point scaling", {{"shared", "shared"}, {"sharedscale", "shared"},
                                    {"symmetric", "shared"}, {"l1", "l1"}, {"ownscale", "l1"},
                                    {"level1", "l1"}, {"l1scaled", "l1"}}},
      {kCt, "container", {{"dense", "dense"}, {"packed", "dense"}, {"pad8", "pad8"},
                          {"padto8", "pad8"}, {"padded", "pad8"}}},
      {kPo, "packing order", {{"lsb", "lsb"}, {"lsbfirst", "lsb"}, {"littlebit", "lsb"},
                              {"msb", "msb"}, {"msbfirst", "msb"}}},
  };
  return t;
}

const EnumTable* metaorder_table() {
  static const EnumTable t = {kOrder, "metadata order",
                              {{"asclsb", "asclsb"}, {"ascendinglsb", "asclsb"},
                               {"ordered", "asclsb"}, {"sorted", "asclsb"},
                               {"unord", "unord"}, {"unordered", "unord"},
                               {"none", "unord"}}};
  return &t;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

std::string strip_zeros(std::string_view digits) {
  size_t i = 0;
  while (i + 1 < digits.size() && digits[i] == '0') ++i;
  return std::string(digits.substr(i));
}

// A token with where it came from in the caller's text.
struct Tok {
  std::string text;
  long pos;
};

std::string quoted(const std::string& s) { return "'" + s + "'"; }

Status fail(Error e, const std::string& msg, const Tok& t) {
  return Status::Fail(e, msg + " (token " + quoted(t.text) + " at offset " +
                             std::to_string(t.pos) + ")", t.text, t.pos);
}

Status norm_fmt(const Tok& t, const char* key, std::string* out) {
  const std::string v = lower(t.text);
  fmt_t w;
  if (format_by_name(v, &w)) {
    *out = v;
    return Status::Ok();
  }
  for (const auto& a : kNotAliases)
    if (v == a.spelling)
      return fail(Error::kNotAnAlias, std::string(key) + ": " + a.canonical, t);
  for (const auto& a : kInexpressible)
    if (v == a.spelling)
      return fail(Error::kInexpressible, std::string(key) + ": " + a.canonical, t);
  if (v.rfind("iq", 0) == 0)
    return fail(Error::kInexpressible,
                std::string(key) + ": the IQ* families are codebook formats; v1 has no codebook element class", t);
  for (const auto& a : kFmtAliases) {
    if (v == a.spelling) {
      *out = a.canonical;
      return Status::Ok();
    }
  }
  return fail(Error::kUnknownToken,
              std::string(key) + ": unknown format; expected one of e2m1, e4m3, e8m0, binary16, "
                                 "binary32, u2, u4, u6, u8, s4, s8", t);
}

Status norm_enum(Domain d, const Tok& t, const char* key, std::string* out) {
  std::string v;
  for (char c : lower(t.text))
    if (c != '-') v.push_back(c);
  const EnumTable* table = nullptr;
  for (const auto& et : enum_tables())
    if (et.domain == d) table = &et;
  for (const auto& a : table->rows) {
    if (v == a.spelling) {
      *out = a.canonical;
      return Status::Ok();
    }
  }
  if (d == kOrder && v.rfind("pairwise", 0) == 0) {
    std::string n = v.substr(8);
    size_t i = 0;
    while (i < n.size() && n[i] == '_') ++i;
    n = n.substr(i);
    if (all_digits(n) && strip_zeros(n) != "0") {
      *out = "pairwise" + strip_zeros(n);
      return Status::Ok();
    }
  }
  if (d == kScaleRule && v.rfind("custom:", 0) == 0) {
    *out = v;
    return Status::Ok();
  }
  return fail(Error::kUnknownToken, std::string(key) + ": unknown " + table->name, t);
}

bool parse_small_int(const std::string& s, long* out) {
  // An integer literal as the reference reads one (Python's int()): an
  // optional sign, then digits with single '_' separators between digits
  // ("1_0" is 10). The value must fit comfortably.
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  std::string digits;
  for (size_t j = i; j < s.size(); ++j) {
    if (s[j] == '_' && j > i && j + 1 < s.size() && s[j - 1] != '_' && s[j + 1] != '_') continue;
    digits.push_back(s[j]);
  }
  std::string_view d(digits);
  if (!all_digits(d)) return false;
  const std::string z = strip_zeros(d);
  if (z.size() > 9) {
    *out = neg ? -1000000000L : 1000000000L;
    return true;
  }
  long v = std::stol(z);
  *out = neg ? -v : v;
  return true;
}

Status norm_sp(const Tok& t, std::string* out) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : lower(t.text)) {
    if (c == ':') {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  parts.push_back(cur);
  if (parts.size() != 4)
    return fail(Error::kMalformed, "sp: expected N:M:metafmt:order", t);
  long n, m;
  if (!parse_small_int(parts[0], &n) || !parse_small_int(parts[1], &m))
    return fail(Error::kMalformed, "sp: N and M must be integers", t);
  if (!(1 <= n && n < m && m <= 32))
    return fail(Error::kOutOfRange, "sp: need 1 <= N < M <= 32 (N survivors of every M), found " +
                                        std::to_string(n) + ":" + std::to_string(m), t);
  std::string meta, order;
  Status s = norm_fmt(Tok{parts[2], t.pos}, "sp metadata", &meta);
  if (!s.ok()) return s;
  if (meta != "u2" && meta != "u4")
    return fail(Error::kInexpressible, "sp: v1 metadata is u2 or u4, found " + meta, t);
  Tok ot{parts[3], t.pos};
  std::string v;
  for (char c : parts[3])
    if (c != '-') v.push_back(c);
  bool found = false;
  for (const auto& a : metaorder_table()->rows) {
    if (v == a.spelling) {
      order = a.canonical;
      found = true;
    }
  }
  if (!found) return fail(Error::kUnknownToken, "sp: unknown metadata order", ot);
  *out = std::to_string(n) + ":" + std::to_string(m) + ":" + meta + ":" + order;
  return Status::Ok();
}

Status norm_field(int key, const Tok& t, std::string* out) {
  const char* name = kKeyNames[key];
  switch (kKeyDomain[key]) {
    case kFmt:
      return norm_fmt(t, name, out);
    case kInt: {
      if (!all_digits(t.text))
        return fail(Error::kMalformed, std::string(name) + ": expected a non-negative decimal", t);
      const std::string z = strip_zeros(t.text);
      if (z.size() > 5 || std::stol(z) > 65535)
        return fail(Error::kOutOfRange,
                    std::string(name) + ": group sizes are 16-bit in the descriptor, at most 65535", t);
      *out = z;
      return Status::Ok();
    }
    case kSp:
      return norm_sp(t, out);
    default:
      return norm_enum(kKeyDomain[key], t, name, out);
  }
}

void emit(const Grade& g, bool projection, std::string* out) {
  std::string s = projection ? "gritdec1(" : "grit1(";
  bool first = true;
  for (int k = 0; k < kNumGradeKeys; ++k) {
    if ((k == kKeyK1 || k == kKeyS1) && !g.has_l1) continue;
    if ((k == kKeyZp || k == kKeyZpc || k == kKeyZps) && !g.has_zp) continue;
    if (k == kKeySp && !g.has_sp) continue;
    if (projection) {
      if (!decode_relevant(k)) continue;
    } else if (!(is_required(k) || is_structural(k)) && g.field[k] == kDefaults[k]) {
      continue;
    }
    if (!first) s.push_back(',');
    first = false;
    s += kKeyNames[k];
    s.push_back('=');
    s += g.field[k];
  }
  s.push_back(')');
  *out = std::move(s);
}

void fill_numbers(Grade* g) {
  format_by_name(g->field[kKeyE], &g->elem);
  format_by_name(g->field[kKeyS0], &g->scale0);
  g->k0 = static_cast<uint32_t>(std::stol(g->field[kKeyK0]));
  if (g->has_l1) {
    format_by_name(g->field[kKeyS1], &g->scale1);
    g->k1 = static_cast<uint32_t>(std::stol(g->field[kKeyK1]));
  }
  if (g->has_zp) {
    format_by_name(g->field[kKeyZp], &g->zp);
    g->zp_minus1 = g->field[kKeyZpc] == "minus1";
    g->zp_l1 = g->field[kKeyZps] == "l1";
  }
  if (g->has_sp) {
    const std::string& sp = g->field[kKeySp];
    const size_t a = sp.find(':'), b = sp.find(':', a + 1), c = sp.find(':', b + 1);
    g->sp_n = static_cast<uint32_t>(std::stol(sp.substr(0, a)));
    g->sp_m = static_cast<uint32_t>(std::stol(sp.substr(a + 1, b - a - 1)));
    g->sp_meta_bits = sp.compare(b + 1, c - b - 1, "u2") == 0 ? 2 : 4;
    g->sp_ascending = sp.compare(c + 1, std::string::npos, "asclsb") == 0;
  }
  g->pad8 = g->field[kKeyCt] == "pad8";
  g->msb_first = g->field[kKeyPo] == "msb";
}

bool is_py_space(unsigned char c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
}

}  // namespace

const char* grade_key_name(int key) {
  return (key >= 0 && key < kNumGradeKeys) ? kKeyNames[key] : "?";
}

Status grade_parse(std::string_view text, Grade* out) {
  // Drop whitespace but remember where every kept byte came from.
  std::string s;
  std::vector<long> at;
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      // The token is the whole UTF-8 sequence, so it stays valid text.
      size_t len = 1;
      while (len < 4 && i + len < text.size() &&
             (static_cast<unsigned char>(text[i + len]) & 0xC0) == 0x80)
        ++len;
      return Status::Fail(Error::kMalformed,
                          "grade strings are ASCII; found byte 0x" + hex(&c, 1) + " at offset " +
                              std::to_string(i), std::string(text.substr(i, len)), static_cast<long>(i));
    }
    if (is_py_space(c)) continue;
    s.push_back(static_cast<char>(c));
    at.push_back(static_cast<long>(i));
  }
  if (s.size() < 7 || lower(s.substr(0, 6)) != "grit1(" || s.back() != ')')
    return Status::Fail(Error::kMalformed, "a grade string has the form grit1(key=value,...)",
                        std::string(text.substr(0, 16)), 0);

  Grade g;
  std::array<bool, kNumGradeKeys> seen{};
  const size_t body_begin = 6, body_end = s.size() - 1;
  if (body_end > body_begin) {
    size_t i = body_begin;
    while (true) {
      size_t j = s.find(',', i);
      if (j == std::string::npos || j > body_end) j = body_end;
      const std::string item = s.substr(i, j - i);
      const long item_pos = i < at.size() ? at[i] : static_cast<long>(text.size());
      const size_t eq = item.find('=');
      if (eq == std::string::npos)
        return fail(Error::kMalformed, "a grade field has the form key=value", Tok{item, item_pos});
      const std::string key = lower(item.substr(0, eq));
      int k = -1;
      for (int q = 0; q < kNumGradeKeys; ++q)
        if (key == kKeyNames[q]) k = q;
      if (k < 0)
        return fail(Error::kUnknownKey, "unknown grade key; v1 keys are e,k0,s0,k1,s1,zp,zpc,zps,"
                                        "sp,ct,po,er,es,esr,esn,dr,ds,dt,ao,ap,ab,ai,an",
                    Tok{item.substr(0, eq), item_pos});
      if (seen[k]) return fail(Error::kDuplicateKey, "grade key given twice", Tok{key, item_pos});
      const size_t vpos = i + eq + 1;
      Tok value{item.substr(eq + 1), vpos < at.size() ? at[vpos] : static_cast<long>(text.size())};
      Status st = norm_field(k, value, &g.field[k]);
      if (!st.ok()) return st;
      seen[k] = true;
      if (j >= body_end) break;
      i = j + 1;
    }
  }
  for (int k : {kKeyE, kKeyK0, kKeyS0, kKeyEsr})
    if (!seen[k])
      return Status::Fail(Error::kMissingKey, std::string("missing required grade key '") +
                                                  kKeyNames[k] + "' (it has no default)",
                          kKeyNames[k], static_cast<long>(text.size()));
  if (seen[kKeyK1] != seen[kKeyS1])
    return Status::Fail(Error::kInconsistent, "k1 and s1 must both be present or both absent",
                        seen[kKeyK1] ? "k1" : "s1");
  if ((seen[kKeyZpc] || seen[kKeyZps]) && !seen[kKeyZp])
    return Status::Fail(Error::kInconsistent, "zpc/zps describe a zero point: they require zp",
                        seen[kKeyZpc] ? "zpc" : "zps");
  if (seen[kKeyZps] && g.field[kKeyZps] == "l1" && !seen[kKeyK1])
    return Status::Fail(Error::kInconsistent, "zps=l1 scales the zero point by the level-1 "
                                              "scale: it requires k1 and s1", "zps");
  for (int k = 0; k < kNumGradeKeys; ++k)
    if (!seen[k] && has_default(k)) g.field[k] = kDefaults[k];
  g.has_l1 = seen[kKeyK1];
  g.has_zp = seen[kKeyZp];
  g.has_sp = seen[kKeySp];
  emit(g, false, &g.canonical);
  g.id = fnv1a64(g.canonical.data(), g.canonical.size());
  fill_numbers(&g);
  *out = std::move(g);
  return Status::Ok();
}

std::string decode_projection(const Grade& g) {
  std::string s;
  emit(g, true, &s);
  return s;
}

namespace {
struct RefTable {
  std::vector<Grade> grades;
  std::vector<ReferenceGrade> rows;
};

const RefTable& ref_table() {
  static const RefTable t = [] {
    static const char* const kSpecs[][3] = {
        {"GRADE_MXFP4", "MXFP4", "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)"},
        {"GRADE_Q4KS", "Q4KS",
         "grit1(e=u4,k0=32,s0=u6,k1=8,s1=binary16,zp=u6,zps=l1,esr=affineminmax)"},
        {"GRADE_NVF4", "NVF4", "grit1(e=e2m1,k0=16,s0=e4m3,k1=0,s1=binary32,esr=ratiomaxabs)"},
        {"GRADE_I8S24", "I8S24", "grit1(e=s8,k0=32,s0=binary16,sp=2:4:u2:asclsb,esr=ratiomaxabs)"},
        {"GRADE_MXFP4_RNE", "MXFP4_RNE", "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2rnemaxabs)"},
        {"GRADE_NVF4_RTZ", "NVF4_RTZ",
         "grit1(e=e2m1,k0=16,s0=e4m3,k1=0,s1=binary32,er=rtz,esr=ratiomaxabs)"},
    };
    RefTable r;
    r.grades.resize(6);
    for (int i = 0; i < 6; ++i) grade_parse(kSpecs[i][2], &r.grades[i]);
    for (int i = 0; i < 6; ++i) r.rows.push_back({kSpecs[i][0], kSpecs[i][1], &r.grades[i]});
    return r;
  }();
  return t;
}
}  // namespace

const ReferenceGrade* reference_grades(size_t* count) {
  const RefTable& t = ref_table();
  *count = t.rows.size();
  return t.rows.data();
}

const ReferenceGrade* reference_grade(std::string_view name) {
  const std::string n = lower(name);
  for (const auto& r : ref_table().rows)
    if (n == lower(r.name) || n == lower(r.short_name)) return &r;
  return nullptr;
}

const ReferenceGrade* reference_grade_by_id(uint64_t id) {
  for (const auto& r : ref_table().rows)
    if (r.grade->id == id) return &r;
  return nullptr;
}

}  // namespace grit
