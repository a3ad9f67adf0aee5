#include "check.h"

#include <cstdio>

#include "placement.h"

namespace grit {
namespace {

using u128 = unsigned __int128;
constexpr u128 kHuge = static_cast<u128>(1) << 120;  // saturation point, far above u64

// Saturating product; an overflow check instead of a 128-bit division keeps
// the level-1 check cheap (same results: a*b > kHuge iff a > kHuge/b).
u128 mul_sat(u128 a, u128 b) {
  if (a == 0 || b == 0) return 0;
  u128 p;
  if (a >= kHuge || b >= kHuge || __builtin_mul_overflow(a, b, &p) || p > kHuge) return kHuge;
  return p;
}
uint64_t to_u64_sat(u128 v) { return v > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(v); }
u128 bits_to_bytes(u128 bits) { return bits >= kHuge ? kHuge : (bits + 7) / 8; }

CheckResult fail(CheckStatus s, CheckField f, uint64_t expected = 0, uint64_t found = 0) {
  CheckResult r;
  r.status = s;
  r.field = f;
  r.expected = expected;
  r.found = found;
  return r;
}

uint32_t container_width(fmt_t w, uint8_t container) {
  const int width = fmt_width(w);
  return (container == kContainerPad8 && width <= 8) ? 8u : static_cast<uint32_t>(width);
}

CheckResult check_frame(const Descriptor& d) {
  const auto G = CheckStatus::kGradeUnknown;
  if (d.magic != kMagic) return fail(G, CheckField::kMagic, kMagic, d.magic);
  if (d.hdr_bytes != kHdrBytes) return fail(G, CheckField::kHdrBytes, kHdrBytes, d.hdr_bytes);
  if (d.version != kVersion) return fail(G, CheckField::kVersion, kVersion, d.version);
  if (d.n_levels != 1 && d.n_levels != 2) return fail(G, CheckField::kNLevels, 2, d.n_levels);
  if (d.flags & kFlagReservedMask) return fail(G, CheckField::kFlags, 0, d.flags & kFlagReservedMask);
  if (d.frame_rsvd != 0) return fail(G, CheckField::kFrameRsvd, 0, d.frame_rsvd);
  if (d.container != kContainerDense && d.container != kContainerPad8)
    return fail(G, CheckField::kContainer, 1, d.container);
  if (d.n_levels == 1 && (d.k1 != 0 || d.scale1 != kFmtAbsent))
    return fail(G, CheckField::kLevel1Only, 0, d.k1 != 0 ? d.k1 : d.scale1);
  if ((d.flags & kFlagSparse) && (d.flags & kFlagHasZp))
    return fail(G, CheckField::kSparseAndZp, 0, d.flags);
  if ((d.flags & kFlagZpL1Scaled) && !(d.flags & kFlagHasZp))
    return fail(G, CheckField::kZpL1NeedsZp, 0, d.flags);
  if ((d.flags & kFlagZpL1Scaled) && d.n_levels != 2)
    return fail(G, CheckField::kZpL1NeedsTwoLevels, 2, d.n_levels);
  if (fmt_unpack(d.elem).bias_ovr) return fail(G, CheckField::kElemBiasOvr, 0, d.elem);
  const struct { uint16_t w; CheckField f; } fmts[] = {
      {d.elem, CheckField::kNanEncElem}, {d.scale0, CheckField::kNanEncScale0},
      {d.scale1, CheckField::kNanEncScale1}, {d.zp_fmt, CheckField::kNanEncZp}};
  for (const auto& x : fmts)
    if (x.w != kFmtAbsent && fmt_unpack(x.w).nan_enc == kNanReserved) return fail(G, x.f, 0, x.w);
  return CheckResult{};
}

CheckResult check_placement(const Descriptor& d) {
  const auto P = CheckStatus::kPlacementUnknown;
  if (!placement_known(d.placement_data)) return fail(P, CheckField::kPlacementData, 0, d.placement_data);
  if (!placement_known(d.placement_scale)) return fail(P, CheckField::kPlacementScale, 0, d.placement_scale);
  if (!placement_known(d.placement_meta)) return fail(P, CheckField::kPlacementMeta, 0, d.placement_meta);
  const bool need_aux = (d.flags & (kFlagSparse | kFlagHasZp)) != 0;
  if (need_aux && d.placement_meta == kPlacementUnspecified)
    return fail(P, CheckField::kPlacementMetaMissing, 1, 0);
  if (!need_aux && d.placement_meta != kPlacementUnspecified)
    return fail(P, CheckField::kPlacementMetaStray, 0, d.placement_meta);
  return CheckResult{};
}

}  // namespace

// The size equations. `exact` receives the unsaturated plane lengths: a
// length that does not fit in 64 bits must never match a u64 the caller
// passes, including UINT64_MAX.
static CheckResult size_equations(const Descriptor& d, const int64_t* dims, size_t rank,
                                  PlaneSizes* out, u128 exact[4]) {
  const auto S = CheckStatus::kSizeMismatch;
  bool zero = false;
  for (size_t i = 0; i < rank; ++i) {
    if (dims[i] < 0) return fail(S, CheckField::kShape, 0, static_cast<uint64_t>(dims[i]));
    if (dims[i] == 0) zero = true;
  }
  u128 numel = 1;
  if (zero) {
    numel = 0;
  } else {
    for (size_t i = 0; i < rank; ++i) numel = mul_sat(numel, static_cast<u128>(dims[i]));
  }
  const int ga = d.group_axis;
  if (ga < 0 || static_cast<size_t>(ga) >= rank)
    return fail(S, CheckField::kGroupAxis, rank, static_cast<uint64_t>(static_cast<int64_t>(ga)));
  const uint64_t axis = static_cast<uint64_t>(dims[ga]);
  if (d.k0 == 0 || axis % d.k0 != 0) return fail(S, CheckField::kK0, d.k0, axis);
  u128 nnz = numel;
  const bool sparse = (d.flags & kFlagSparse) != 0;
  if (sparse) {
    if (d.sp_m == 0 || axis % d.sp_m != 0) return fail(S, CheckField::kSpM, d.sp_m, axis);
    nnz = numel >= kHuge ? kHuge : numel * d.sp_n / d.sp_m;
  }
  const u128 g0 = numel >= kHuge ? kHuge
                 : numel <= UINT64_MAX ? static_cast<u128>(static_cast<uint64_t>(numel) / d.k0)
                                       : numel / d.k0;
  u128 g1 = 0;
  if (d.n_levels == 2) {
    if (d.k1 == 0) {
      g1 = 1;  // one per-tensor scale, not "missing"
    } else if (g0 < kHuge && g0 % d.k1 != 0) {
      return fail(S, CheckField::kK1, d.k1, to_u64_sat(g0));
    } else {
      g1 = g0 >= kHuge ? kHuge : g0 / d.k1;
    }
  }
  u128 bytes[4];
  bytes[0] = bits_to_bytes(mul_sat(nnz, container_width(d.elem, d.container)));
  bytes[1] = bits_to_bytes(mul_sat(g0, container_width(d.scale0, kContainerPad8)));
  if (d.n_levels == 2) {
    const uint32_t per = (d.flags & kFlagZpL1Scaled) ? 2 : 1;
    bytes[2] = bits_to_bytes(mul_sat(mul_sat(g1, per), static_cast<u128>(fmt_width(d.scale1))));
  } else {
    bytes[2] = 0;
  }
  if (sparse) {
    uint32_t bits = 0;
    if (d.sp_meta_fmt == kSpMetaNone) bits = 0;
    else if (d.sp_meta_fmt == kSpMetaU2) bits = 2;
    else if (d.sp_meta_fmt == kSpMetaU4) bits = 4;
    else return fail(S, CheckField::kSpMetaFmt, kSpMetaU4, d.sp_meta_fmt);
    const u128 quads = numel >= kHuge ? kHuge : numel / d.sp_m;
    bytes[3] = bits_to_bytes(mul_sat(mul_sat(quads, d.sp_n), bits));
  } else if (d.flags & kFlagHasZp) {
    bytes[3] = bits_to_bytes(mul_sat(g0, container_width(d.zp_fmt, kContainerPad8)));
  } else {
    bytes[3] = 0;
  }
  out->numel = to_u64_sat(numel);
  out->nnz = to_u64_sat(nnz);
  out->n_groups0 = to_u64_sat(g0);
  out->n_groups1 = to_u64_sat(g1);
  for (int i = 0; i < 4; ++i) {
    out->bytes[i] = to_u64_sat(bytes[i]);
    exact[i] = bytes[i];
  }
  return CheckResult{};
}

CheckResult expected_plane_bytes(const Descriptor& d, const int64_t* dims, size_t rank,
                                 PlaneSizes* out) {
  u128 exact[4];
  return size_equations(d, dims, rank, out, exact);
}

CheckResult check_level1(const Descriptor& d, const int64_t* dims, size_t rank,
                         const uint64_t plane_bytes[4], const Grade* grade) {
  CheckResult r = check_frame(d);
  if (!r.ok()) return r;

  if (grade == nullptr) {
    const ReferenceGrade* ref = reference_grade_by_id(d.grade_id);
    if (ref == nullptr) return fail(CheckStatus::kGradeUnknown, CheckField::kGradeId, 0, d.grade_id);
    grade = ref->grade;
  } else if (grade->id != d.grade_id) {
    return fail(CheckStatus::kGradeUnknown, CheckField::kGradeId, grade->id, d.grade_id);
  }
  const DescFrame want = frame_of(*grade);
  const int bad = frame_mismatch(d, want);
  if (bad >= 0) {
    r = fail(CheckStatus::kGradeUnknown, CheckField::kGradeFrame, frame_field_value(want, bad),
             frame_field_value(d, bad));
    r.frame_field = static_cast<int8_t>(bad);
    return r;
  }

  r = check_placement(d);
  if (!r.ok()) return r;

  PlaneSizes ps;
  u128 exact[4];
  r = size_equations(d, dims, rank, &ps, exact);
  if (!r.ok()) return r;
  for (int i = 0; i < 4; ++i) {
    if (static_cast<u128>(plane_bytes[i]) != exact[i]) {
      r = fail(CheckStatus::kSizeMismatch, CheckField::kPlaneBytes, ps.bytes[i], plane_bytes[i]);
      r.plane = static_cast<int8_t>(i);
      return r;
    }
  }
  return CheckResult{};
}

bool meta_is_ascending(const uint8_t* meta, uint64_t meta_bytes, uint64_t numel, uint32_t sp_n,
                       uint32_t sp_m, uint32_t bits) {
  if (bits == 0 || sp_m == 0) return true;
  const uint64_t quads = numel / sp_m;
  const uint32_t mask = (1u << bits) - 1;
  for (uint64_t q = 0; q < quads; ++q) {
    uint32_t prev = 0;
    for (uint32_t j = 0; j < sp_n; ++j) {
      const uint64_t bitpos = (q * sp_n + j) * bits;
      const uint64_t byte_i = bitpos / 8;
      const uint32_t byte = byte_i < meta_bytes ? meta[byte_i] : 0;
      const uint32_t idx = (byte >> (bitpos % 8)) & mask;
      if (idx >= sp_m) return false;
      if (j > 0 && prev >= idx) return false;
      prev = idx;
    }
  }
  return true;
}

CheckResult check(const Descriptor& d, const int64_t* dims, size_t rank, const Plane planes[4],
                  int level, const Id128* expected_digest, const Grade* grade) {
  const uint64_t lens[4] = {planes[0].size, planes[1].size, planes[2].size, planes[3].size};
  CheckResult r = check_level1(d, dims, rank, lens, grade);
  if (!r.ok() || level < 2) return r;
  if (expected_digest != nullptr) {
    const Id128 got = digest_of(planes);
    if (got != *expected_digest) return fail(CheckStatus::kDigestMismatch, CheckField::kDigest);
  }
  if ((d.flags & kFlagSparse) && d.sp_order == kSpOrderAscLsb) {
    PlaneSizes ps;
    expected_plane_bytes(d, dims, rank, &ps);
    const uint32_t bits = d.sp_meta_fmt == kSpMetaU2 ? 2 : (d.sp_meta_fmt == kSpMetaU4 ? 4 : 0);
    if (!meta_is_ascending(planes[3].data, planes[3].size, ps.numel, d.sp_n, d.sp_m, bits)) {
      r = fail(CheckStatus::kDigestMismatch, CheckField::kSpOrder);
      r.plane = 3;
      return r;
    }
  }
  return CheckResult{};
}

const char* check_status_name(CheckStatus s) {
  switch (s) {
    case CheckStatus::kOk: return "Ok";
    case CheckStatus::kSizeMismatch: return "SizeMismatch";
    case CheckStatus::kGradeUnknown: return "GradeUnknown";
    case CheckStatus::kPlacementUnknown: return "PlacementUnknown";
    case CheckStatus::kDigestMismatch: return "DigestMismatch";
  }
  return "?";
}

const char* check_field_name(CheckField f) {
  switch (f) {
    case CheckField::kNone: return "none";
    case CheckField::kMagic: return "magic";
    case CheckField::kHdrBytes: return "hdr_bytes";
    case CheckField::kVersion: return "version";
    case CheckField::kNLevels: return "n_levels";
    case CheckField::kFlags: return "flags";
    case CheckField::kFrameRsvd: return "frame_rsvd";
    case CheckField::kContainer: return "container";
    case CheckField::kLevel1Only: return "k1/scale1";
    case CheckField::kSparseAndZp: return "flags";
    case CheckField::kZpL1NeedsZp: return "flags";
    case CheckField::kZpL1NeedsTwoLevels: return "n_levels";
    case CheckField::kElemBiasOvr: return "elem";
    case CheckField::kNanEncElem: return "elem";
    case CheckField::kNanEncScale0: return "scale0";
    case CheckField::kNanEncScale1: return "scale1";
    case CheckField::kNanEncZp: return "zp_fmt";
    case CheckField::kGradeId: return "grade_id";
    case CheckField::kGradeFrame: return "grade_frame";
    case CheckField::kPlacementData: return "placement_data";
    case CheckField::kPlacementScale: return "placement_scale";
    case CheckField::kPlacementMeta: return "placement_meta";
    case CheckField::kPlacementMetaMissing: return "placement_meta";
    case CheckField::kPlacementMetaStray: return "placement_meta";
    case CheckField::kShape: return "shape";
    case CheckField::kGroupAxis: return "group_axis";
    case CheckField::kK0: return "k0";
    case CheckField::kSpM: return "sp_m";
    case CheckField::kK1: return "k1";
    case CheckField::kSpMetaFmt: return "sp_meta_fmt";
    case CheckField::kPlaneBytes: return "plane_bytes";
    case CheckField::kDigest: return "digest";
    case CheckField::kSpOrder: return "sp_order";
  }
  return "?";
}

std::string describe(const CheckResult& r, const Descriptor& d) {
  static const char* const kPlaneNames[4] = {"data", "scale0", "scale1", "aux"};
  char buf[512];
  const unsigned long long e = r.expected, f = r.found;
  switch (r.field) {
    case CheckField::kNone: return "ok";
    case CheckField::kMagic:
      std::snprintf(buf, sizeof buf, "bad magic: expected 0x%08llx ('GRT1'), found 0x%08llx", e, f); break;
    case CheckField::kHdrBytes:
      std::snprintf(buf, sizeof buf, "bad hdr_bytes: expected %llu, found %llu", e, f); break;
    case CheckField::kVersion:
      std::snprintf(buf, sizeof buf, "unsupported descriptor version: expected %llu, found %llu", e, f); break;
    case CheckField::kNLevels:
      std::snprintf(buf, sizeof buf, "n_levels must be 1 or 2, found %llu", f); break;
    case CheckField::kFlags:
      std::snprintf(buf, sizeof buf, "reserved flag bits set: flags=0x%02x", d.flags); break;
    case CheckField::kFrameRsvd:
      std::snprintf(buf, sizeof buf, "frame_rsvd must be 0, found %llu", f); break;
    case CheckField::kContainer:
      std::snprintf(buf, sizeof buf, "container must be 0 (dense) or 1 (pad8), found %llu", f); break;
    case CheckField::kLevel1Only:
      std::snprintf(buf, sizeof buf, "n_levels=1 requires k1=0 and scale1 absent, found k1=%u scale1=0x%04x", d.k1, d.scale1); break;
    case CheckField::kSparseAndZp:
      std::snprintf(buf, sizeof buf, "flags SPARSE|HAS_ZP together are reserved in v1 (one aux plane), flags=0x%02x", d.flags); break;
    case CheckField::kZpL1NeedsZp:
      std::snprintf(buf, sizeof buf, "flag ZP_L1SCALED requires HAS_ZP, flags=0x%02x", d.flags); break;
    case CheckField::kZpL1NeedsTwoLevels:
      std::snprintf(buf, sizeof buf, "flag ZP_L1SCALED requires n_levels=2, found %u", d.n_levels); break;
    case CheckField::kElemBiasOvr:
      std::snprintf(buf, sizeof buf, "elem 0x%04x sets bias_ovr, which must be 0 in v1", d.elem); break;
    case CheckField::kNanEncElem: case CheckField::kNanEncScale0:
    case CheckField::kNanEncScale1: case CheckField::kNanEncZp:
      std::snprintf(buf, sizeof buf, "%s 0x%04llx uses the reserved nan_enc=3", check_field_name(r.field), f); break;
    case CheckField::kGradeId:
      if (e == 0)
        std::snprintf(buf, sizeof buf, "grade_id 0x%016llx is not a grade this check knows (pass the grade it claims)", f);
      else
        std::snprintf(buf, sizeof buf, "grade_id: expected 0x%016llx, found 0x%016llx", e, f);
      break;
    case CheckField::kGradeFrame:
      std::snprintf(buf, sizeof buf, "descriptor field %s disagrees with its grade: expected %llu (0x%llx), found %llu (0x%llx)",
                    frame_field_name(r.frame_field), e, e, f, f); break;
    case CheckField::kPlacementData: case CheckField::kPlacementScale: case CheckField::kPlacementMeta:
      std::snprintf(buf, sizeof buf, "%s 0x%016llx is %s, not a known placement", check_field_name(r.field), f,
                    placement_name(r.found).c_str()); break;
    case CheckField::kPlacementMetaMissing:
      std::snprintf(buf, sizeof buf, "placement_meta: the aux plane is present but placement_meta is unspecified"); break;
    case CheckField::kPlacementMetaStray:
      std::snprintf(buf, sizeof buf, "placement_meta is 0x%016llx but there is no aux plane", f); break;
    case CheckField::kShape:
      std::snprintf(buf, sizeof buf, "shape: negative extent %lld", static_cast<long long>(r.found)); break;
    case CheckField::kGroupAxis:
      std::snprintf(buf, sizeof buf, "group_axis %lld is out of range for rank %llu", static_cast<long long>(r.found), e); break;
    case CheckField::kK0:
      std::snprintf(buf, sizeof buf, "k0: shape[group_axis]=%llu is not a multiple of k0=%llu", f, e); break;
    case CheckField::kSpM:
      std::snprintf(buf, sizeof buf, "sp_m: shape[group_axis]=%llu is not a multiple of M=%llu", f, e); break;
    case CheckField::kK1:
      std::snprintf(buf, sizeof buf, "k1: level-0 group count %llu is not a multiple of k1=%llu", f, e); break;
    case CheckField::kSpMetaFmt:
      std::snprintf(buf, sizeof buf, "sp_meta_fmt %llu is not u2 (1) or u4 (2)", f); break;
    case CheckField::kPlaneBytes:
      std::snprintf(buf, sizeof buf, "plane %d (%s): expected %llu bytes, found %llu", r.plane,
                    r.plane >= 0 && r.plane < 4 ? kPlaneNames[r.plane] : "?", e, f); break;
    case CheckField::kDigest:
      std::snprintf(buf, sizeof buf, "plane digest differs from the expected digest"); break;
    case CheckField::kSpOrder:
      std::snprintf(buf, sizeof buf, "plane 3 (aux): sparsity metadata is not ascending-LSB ordered as sp_order declares"); break;
  }
  return std::string(check_status_name(r.status)) + ": " + buf;
}

}  // namespace grit
