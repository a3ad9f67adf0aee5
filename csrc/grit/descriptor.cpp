#include "descriptor.h"

#include <cstdio>
#include <cstring>

#include "fnv.h"
#include "placement.h"

namespace grit {
namespace {
void put16(uint8_t* p, uint16_t v) { p[0] = v & 0xFF; p[1] = v >> 8; }
void put32(uint8_t* p, uint32_t v) { for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i)); }
void put64(uint8_t* p, uint64_t v) { for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i)); }
uint16_t get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
}  // namespace

Bytes64 to_bytes(const Descriptor& d) {
  Bytes64 b{};
  uint8_t* p = b.data();
  put32(p + 0, d.magic);
  p[4] = d.hdr_bytes; p[5] = d.version; p[6] = d.n_levels; p[7] = d.flags;
  put16(p + 8, d.elem); put16(p + 10, d.scale0); put16(p + 12, d.scale1); put16(p + 14, d.zp_fmt);
  put16(p + 16, static_cast<uint16_t>(d.group_axis)); put16(p + 18, d.k0); put16(p + 20, d.k1);
  p[22] = d.sp_n; p[23] = d.sp_m; p[24] = d.sp_meta_fmt; p[25] = d.sp_order;
  p[26] = d.container; p[27] = d.frame_rsvd;
  put32(p + 28, d.note);
  put64(p + 32, d.placement_data); put64(p + 40, d.placement_scale);
  put64(p + 48, d.placement_meta); put64(p + 56, d.grade_id);
  return b;
}

Descriptor from_bytes(const uint8_t* p) {
  Descriptor d;
  d.magic = get32(p);
  d.hdr_bytes = p[4]; d.version = p[5]; d.n_levels = p[6]; d.flags = p[7];
  d.elem = get16(p + 8); d.scale0 = get16(p + 10); d.scale1 = get16(p + 12); d.zp_fmt = get16(p + 14);
  d.group_axis = static_cast<int16_t>(get16(p + 16)); d.k0 = get16(p + 18); d.k1 = get16(p + 20);
  d.sp_n = p[22]; d.sp_m = p[23]; d.sp_meta_fmt = p[24]; d.sp_order = p[25];
  d.container = p[26]; d.frame_rsvd = p[27];
  d.note = get32(p + 28);
  d.placement_data = get64(p + 32); d.placement_scale = get64(p + 40);
  d.placement_meta = get64(p + 48); d.grade_id = get64(p + 56);
  return d;
}

DescFrame frame_of(const Grade& g) {
  DescFrame f{};
  f.n_levels = static_cast<uint8_t>(g.n_levels());
  uint8_t flags = 0;
  if (g.has_zp) {
    flags |= kFlagHasZp;
    if (g.zp_minus1) flags |= kFlagZpMinus1;
    if (g.zp_l1) flags |= kFlagZpL1Scaled;
  }
  if (g.has_sp) flags |= kFlagSparse;
  if (g.msb_first) flags |= kFlagMsbFirst;
  f.flags = flags;
  f.elem = g.elem;
  f.scale0 = g.scale0;
  f.scale1 = g.has_l1 ? g.scale1 : kFmtAbsent;
  f.zp_fmt = g.has_zp ? g.zp : kFmtAbsent;
  f.k0 = static_cast<uint16_t>(g.k0);
  f.k1 = g.has_l1 ? static_cast<uint16_t>(g.k1) : 0;
  if (g.has_sp) {
    f.sp_n = static_cast<uint8_t>(g.sp_n);
    f.sp_m = static_cast<uint8_t>(g.sp_m);
    f.sp_meta_fmt = g.sp_meta_bits == 2 ? kSpMetaU2 : kSpMetaU4;
    f.sp_order = g.sp_ascending ? kSpOrderAscLsb : kSpOrderUnordered;
  }
  f.container = g.pad8 ? kContainerPad8 : kContainerDense;
  return f;
}

const char* frame_field_name(int f) {
  static const char* const kNames[kNumFrameFields] = {
      "n_levels", "flags", "elem", "scale0", "scale1", "zp_fmt", "k0", "k1",
      "sp_n", "sp_m", "sp_meta_fmt", "sp_order", "container"};
  return (f >= 0 && f < kNumFrameFields) ? kNames[f] : "?";
}

uint64_t frame_field_value(const Descriptor& d, int f) {
  switch (f) {
    case kFfNLevels: return d.n_levels;
    case kFfFlags: return d.flags;
    case kFfElem: return d.elem;
    case kFfScale0: return d.scale0;
    case kFfScale1: return d.scale1;
    case kFfZpFmt: return d.zp_fmt;
    case kFfK0: return d.k0;
    case kFfK1: return d.k1;
    case kFfSpN: return d.sp_n;
    case kFfSpM: return d.sp_m;
    case kFfSpMetaFmt: return d.sp_meta_fmt;
    case kFfSpOrder: return d.sp_order;
    default: return d.container;
  }
}

uint64_t frame_field_value(const DescFrame& f, int field) {
  switch (field) {
    case kFfNLevels: return f.n_levels;
    case kFfFlags: return f.flags;
    case kFfElem: return f.elem;
    case kFfScale0: return f.scale0;
    case kFfScale1: return f.scale1;
    case kFfZpFmt: return f.zp_fmt;
    case kFfK0: return f.k0;
    case kFfK1: return f.k1;
    case kFfSpN: return f.sp_n;
    case kFfSpM: return f.sp_m;
    case kFfSpMetaFmt: return f.sp_meta_fmt;
    case kFfSpOrder: return f.sp_order;
    default: return f.container;
  }
}

int frame_mismatch(const Descriptor& d, const DescFrame& f) {
  // Field by field in FrameField order, inline: this is on the check's hot path.
  if (d.n_levels != f.n_levels) return kFfNLevels;
  if (d.flags != f.flags) return kFfFlags;
  if (d.elem != f.elem) return kFfElem;
  if (d.scale0 != f.scale0) return kFfScale0;
  if (d.scale1 != f.scale1) return kFfScale1;
  if (d.zp_fmt != f.zp_fmt) return kFfZpFmt;
  if (d.k0 != f.k0) return kFfK0;
  if (d.k1 != f.k1) return kFfK1;
  if (d.sp_n != f.sp_n) return kFfSpN;
  if (d.sp_m != f.sp_m) return kFfSpM;
  if (d.sp_meta_fmt != f.sp_meta_fmt) return kFfSpMetaFmt;
  if (d.sp_order != f.sp_order) return kFfSpOrder;
  if (d.container != f.container) return kFfContainer;
  return -1;
}

Placements default_placements(const Grade& g) {
  Placements p;
  p.data = kRowMajor;
  p.scale = kRowMajor;
  if (g.has_sp) p.meta = kLinearMeta;
  else if (g.has_zp) p.meta = kRowMajor;
  return p;
}

Descriptor descriptor_for(const Grade& g, const Placements& p, int16_t group_axis, uint32_t note) {
  const DescFrame f = frame_of(g);
  Descriptor d;
  d.n_levels = f.n_levels;
  d.flags = f.flags;
  d.elem = f.elem; d.scale0 = f.scale0; d.scale1 = f.scale1; d.zp_fmt = f.zp_fmt;
  d.group_axis = group_axis;
  d.k0 = f.k0; d.k1 = f.k1;
  d.sp_n = f.sp_n; d.sp_m = f.sp_m; d.sp_meta_fmt = f.sp_meta_fmt; d.sp_order = f.sp_order;
  d.container = f.container;
  d.note = note;
  d.placement_data = p.data; d.placement_scale = p.scale; d.placement_meta = p.meta;
  d.grade_id = g.id;
  return d;
}

Id128 gid_of(const Descriptor& d, std::string_view canonical, const int64_t* dims, size_t rank) {
  const Bytes64 b = to_bytes(d);
  Fnv128 h;
  h.update(canonical.data(), canonical.size());
  const uint8_t nul = 0;
  h.update(&nul, 1);
  h.update(b.data(), 28);
  h.update(b.data() + 32, 32);
  uint8_t r[4];
  put32(r, static_cast<uint32_t>(rank));
  h.update(r, 4);
  for (size_t i = 0; i < rank; ++i) h.update_u64le(static_cast<uint64_t>(dims[i]));
  return h.digest();
}

Id128 digest_of(const Plane planes[4]) {
  Fnv128 h;
  for (int i = 0; i < 4; ++i) {
    h.update_u64le(planes[i].size);
    if (planes[i].size) h.update(planes[i].data, planes[i].size);
  }
  return h.digest();
}

std::string flags_name(uint8_t flags) {
  static const struct { uint8_t bit; const char* name; } kBits[] = {
      {kFlagHasZp, "HAS_ZP"}, {kFlagZpMinus1, "ZP_MINUS1"}, {kFlagSparse, "SPARSE"},
      {kFlagMsbFirst, "MSB_FIRST"}, {kFlagInterleaved, "INTERLEAVED"},
      {kFlagZpL1Scaled, "ZP_L1SCALED"}};
  std::string s;
  for (const auto& b : kBits) {
    if (flags & b.bit) {
      if (!s.empty()) s += "|";
      s += b.name;
    }
  }
  if (flags & kFlagReservedMask) s += s.empty() ? "RESERVED" : "|RESERVED";
  return s.empty() ? "none" : s;
}

namespace {
std::string render(const char* field, uint64_t v) {
  char buf[96];
  const std::string f = field;
  if (f == "elem" || f == "scale0" || f == "scale1" || f == "zp_fmt") {
    const char* n = v == kFmtAbsent ? "absent" : format_name(static_cast<fmt_t>(v));
    std::snprintf(buf, sizeof buf, "0x%04llx (%s)", static_cast<unsigned long long>(v), n ? n : "?");
    return buf;
  }
  if (f.rfind("placement_", 0) == 0) {
    std::snprintf(buf, sizeof buf, "0x%016llx (%s)", static_cast<unsigned long long>(v),
                  placement_name(v).c_str());
    return buf;
  }
  if (f == "grade_id") {
    const ReferenceGrade* r = reference_grade_by_id(v);
    std::snprintf(buf, sizeof buf, "0x%016llx (%s)", static_cast<unsigned long long>(v),
                  r ? r->name : "unregistered");
    return buf;
  }
  if (f == "magic") {
    std::snprintf(buf, sizeof buf, "0x%08llx", static_cast<unsigned long long>(v));
    return buf;
  }
  if (f == "flags") {
    std::snprintf(buf, sizeof buf, "0x%02llx (%s)", static_cast<unsigned long long>(v),
                  flags_name(static_cast<uint8_t>(v)).c_str());
    return buf;
  }
  if (f == "group_axis") return std::to_string(static_cast<int16_t>(v));
  return std::to_string(v);
}
}  // namespace

std::string explain(const Descriptor& a, const Descriptor& b) {
  struct F { const char* name; uint64_t va, vb; };
  const F fields[] = {
      {"magic", a.magic, b.magic}, {"hdr_bytes", a.hdr_bytes, b.hdr_bytes},
      {"version", a.version, b.version}, {"n_levels", a.n_levels, b.n_levels},
      {"flags", a.flags, b.flags}, {"elem", a.elem, b.elem}, {"scale0", a.scale0, b.scale0},
      {"scale1", a.scale1, b.scale1}, {"zp_fmt", a.zp_fmt, b.zp_fmt},
      {"group_axis", static_cast<uint16_t>(a.group_axis), static_cast<uint16_t>(b.group_axis)},
      {"k0", a.k0, b.k0}, {"k1", a.k1, b.k1}, {"sp_n", a.sp_n, b.sp_n}, {"sp_m", a.sp_m, b.sp_m},
      {"sp_meta_fmt", a.sp_meta_fmt, b.sp_meta_fmt}, {"sp_order", a.sp_order, b.sp_order},
      {"container", a.container, b.container}, {"frame_rsvd", a.frame_rsvd, b.frame_rsvd},
      {"note", a.note, b.note}, {"placement_data", a.placement_data, b.placement_data},
      {"placement_scale", a.placement_scale, b.placement_scale},
      {"placement_meta", a.placement_meta, b.placement_meta},
      {"grade_id", a.grade_id, b.grade_id}};
  std::string out = "field                 A                                        B\n";
  bool same = true;
  for (const auto& f : fields) {
    if (f.va == f.vb) continue;
    same = false;
    char line[256];
    std::snprintf(line, sizeof line, "%-20s  %-40s %s\n", f.name, render(f.name, f.va).c_str(),
                  render(f.name, f.vb).c_str());
    out += line;
  }
  if (same) out += "(descriptors are byte-identical)\n";
  return out;
}

}  // namespace grit
