#include "decode.h"

#include <cmath>
#include <string>
#include <utility>

#include "bits.h"
#include "check.h"
#include "linear_law.h"

namespace grit {

Status grade_plane_bytes(const Grade& g, uint64_t numel, uint64_t bytes[4]) {
  const Descriptor d = descriptor_for(g, default_placements(g));
  const int64_t dims[1] = {static_cast<int64_t>(numel)};
  if (numel > static_cast<uint64_t>(INT64_MAX))
    return Status::Fail(Error::kOutOfRange, "element count does not fit in int64");
  PlaneSizes ps;
  const CheckResult r = expected_plane_bytes(d, dims, 1, &ps);
  if (!r.ok()) return Status::Fail(Error::kBadLength, describe(r, d));
  for (int i = 0; i < 4; ++i) bytes[i] = ps.bytes[i];
  return Status::Ok();
}

namespace {

struct Reader {
  const uint8_t* p;
  int width;      // stored bits per value
  bool msb;       // MSB-first stream
  uint32_t at(uint64_t i) const {
    const uint64_t off = i * static_cast<uint64_t>(width);
    return msb ? read_bits_msb(p, off, width) : read_bits_lsb(p, off, width);
  }
};

int padded(fmt_t f) {
  const int w = fmt_width(f);
  return w <= 8 ? 8 : w;
}

}  // namespace

Status decode(const Grade& g, const Plane planes[4], uint64_t numel, float* out) {
  uint64_t stored = 0;
  return decode_range(g, planes, numel, 0, numel, &stored, out);
}

namespace {
uint32_t survivors(const Grade& g, const Plane planes[4], uint64_t q) {
  uint32_t keep = 0;
  for (uint32_t n = 0; n < g.sp_n; ++n) {
    const uint32_t idx = read_bits_lsb(planes[3].data, (q * g.sp_n + n) * g.sp_meta_bits,
                                       static_cast<int>(g.sp_meta_bits));
    if (idx < g.sp_m) keep |= 1u << idx;
  }
  return keep;
}
}  // namespace

uint64_t sparse_cursor(const Grade& g, const Plane planes[4], uint64_t index) {
  if (!g.has_sp) return index;
  uint64_t c = 0;
  for (uint64_t q = 0; q < index / g.sp_m; ++q) c += static_cast<uint64_t>(__builtin_popcount(survivors(g, planes, q)));
  return c;
}

namespace {
// The decode loop. `forced` >= 0 replaces every stored element code (used
// by decode_bounds); the scale chain, zero points and sparsity are read as
// stored.
// What every ranged decode checks before it reads a byte: the plane
// lengths (want[] gets them), the range and the sparse cursor.
Status check_range(const Grade& g, const Plane planes[4], uint64_t numel, uint64_t begin,
                   uint64_t end, uint64_t stored, uint64_t want[4]) {
  static const char* const kPlaneNames[4] = {"data", "scale0", "scale1", "aux"};
  Status st = grade_plane_bytes(g, numel, want);
  if (!st.ok()) return st;
  for (int i = 0; i < 4; ++i) {
    if (planes[i].size != want[i])
      return Status::Fail(Error::kBadLength, std::string("plane ") + std::to_string(i) + " (" +
                                                 kPlaneNames[i] + "): expected " +
                                                 std::to_string(want[i]) + " bytes, found " +
                                                 std::to_string(planes[i].size));
  }
  if (begin > end || end > numel)
    return Status::Fail(Error::kOutOfRange, "decode range [" + std::to_string(begin) + ", " +
                                                std::to_string(end) + ") is outside [0, " +
                                                std::to_string(numel) + ")");
  if (g.has_sp && begin % g.sp_m != 0)
    return Status::Fail(Error::kOutOfRange, "a sparse decode range starts on a multiple of M=" +
                                                std::to_string(g.sp_m));
  if (g.has_sp && stored > want[0])
    return Status::Fail(Error::kOutOfRange, "sparse data cursor past the data plane");
  return Status::Ok();
}

Reader elem_reader(const Grade& g, const uint8_t* data) {
  const int ew = fmt_width(g.elem);
  const int ecw = g.pad8 && ew <= 8 ? 8 : ew;
  // Byte-multiple codes are little-endian; po only orders sub-byte codes.
  return Reader{data, ecw, g.msb_first && ecw < 8};
}

// The four plane readers of a grade.
struct Readers {
  Reader elem, s0, s1, zp;
  uint64_t per;  // level-1 values per group: 2 under zps=l1 (scale, zero-point scale)
  Readers(const Grade& g, const Plane planes[4])
      : elem(elem_reader(g, planes[0].data)),
        s0{planes[1].data, padded(g.scale0), false},
        s1{planes[2].data, g.has_l1 ? fmt_width(g.scale1) : 8, false},
        zp{planes[3].data, g.has_zp ? padded(g.zp) : 8, false},
        per(g.zp_l1 ? 2 : 1) {}
};

// S of group g0: scale0, times the level-1 scale (outermost first, one
// rounding) when there is one; *g1 gets the level-1 group.
float group_scale(const Grade& g, const Readers& rd, uint64_t g0, uint64_t* g1) {
  float S = fmt_decode(g.scale0, rd.s0.at(g0));
  *g1 = 0;
  if (g.has_l1) {
    *g1 = g.k1 ? g0 / g.k1 : 0;
    S = fmt_decode(g.scale1, rd.s1.at(rd.per * *g1)) * S;
  }
  return S;
}

// The zero point z of group g0 (+1 under zpc=minus1).
float group_zero(const Grade& g, const Readers& rd, uint64_t g0) {
  float z = fmt_decode(g.zp, rd.zp.at(g0));
  if (g.zp_minus1) z = z + 1.0f;
  return z;
}

// Z of level-1 group g1 under zps=l1: its zero-point scale times z.
float group_offset(const Grade& g, const Readers& rd, uint64_t g1, float z) {
  return fmt_decode(g.scale1, rd.s1.at(rd.per * g1 + 1)) * z;
}

// The decoded value of an element kept by the sparsity law: poison (NaN S),
// then the zero-point law, one binary32 rounding per step, NaN canonical.
float element_value(const Grade& g, const Readers& rd, uint64_t g0, uint64_t g1, float S,
                    uint32_t code) {
  const float nan = canonical_nan();
  if (std::isnan(S)) return nan;
  const float e = fmt_decode(g.elem, code);
  float x;
  if (g.has_zp) {
    const float z = group_zero(g, rd, g0);
    if (g.zp_l1) {
      const float Z = group_offset(g, rd, g1, z);
      if (std::isnan(Z)) return nan;
      const float se = S * e;
      x = se - Z;
    } else {
      const float ez = e - z;
      x = S * ez;
    }
  } else {
    x = S * e;
  }
  return std::isnan(x) ? nan : x;
}

// The element codes in stream order. For sparse grades it walks the data
// cursor and reports the positions a quad prunes (+0.0 under the sparsity
// law, before any scale is read).
struct CodeWalk {
  const Grade& g;
  const Plane* planes;
  const Reader& elem;
  uint64_t data_len;
  uint64_t stored;     // the sparse data cursor
  uint64_t keep = 0;   // survivor mask of the current quad (M <= 32)
  // kKept (and *code), kPruned, or kPastEnd when the cursor would run past
  // the data plane.
  enum Step { kKept, kPruned, kPastEnd };
  Step next(uint64_t i, uint32_t* code) {
    if (!g.has_sp) {
      *code = elem.at(i);
      return kKept;
    }
    const uint64_t q = i / g.sp_m, j = i % g.sp_m;
    if (j == 0) keep = survivors(g, planes, q);
    if (!((keep >> j) & 1u)) return kPruned;
    if (stored >= data_len) return kPastEnd;
    *code = elem.at(stored++);
    return kKept;
  }
  static Status past_end() {
    return Status::Fail(Error::kOutOfRange, "sparse data cursor past the data plane");
  }
};

Status decode_impl(const Grade& g, const Plane planes[4], uint64_t numel, uint64_t begin,
                   uint64_t end, uint64_t* stored_io, int64_t forced, float* out) {
  uint64_t want[4];
  const Status st = check_range(g, planes, numel, begin, end, *stored_io, want);
  if (!st.ok()) return st;
  const Readers rd(g, planes);
  CodeWalk codes{g, planes, rd.elem, want[0], *stored_io};

  for (uint64_t i = begin; i < end; ++i) {
    uint32_t code = 0;
    float* o = out + (i - begin);
    const CodeWalk::Step step = codes.next(i, &code);
    if (step == CodeWalk::kPastEnd) return CodeWalk::past_end();
    if (step == CodeWalk::kPruned) {
      *o = 0.0f;  // sparsity law: +0.0, before any scale is read
      continue;
    }
    if (forced >= 0) code = static_cast<uint32_t>(forced);
    const uint64_t g0 = i / g.k0;
    uint64_t g1;
    const float S = group_scale(g, rd, g0, &g1);
    *o = element_value(g, rd, g0, g1, S, code);
  }
  *stored_io = codes.stored;
  return Status::Ok();
}

// The finite code of largest (or most negative) value a format can store;
// signed integers stop at -(2^(w-1)-1), the smallest code encode produces.
uint32_t extreme_code(fmt_t f, bool top) {
  const FmtInfo fi = fmt_unpack(f);
  if (fi.is_integer()) {
    if (fi.is_unsigned) return top ? static_cast<uint32_t>((1ull << fi.width) - 1) : 0u;
    const uint32_t mag = static_cast<uint32_t>((1ull << (fi.width - 1)) - 1);
    return top ? mag : static_cast<uint32_t>(((1ull << fi.width) - mag) & ((1ull << fi.width) - 1));
  }
  if (f == kBinary16) return top ? 0x7BFFu : 0xFBFFu;
  if (f == kBinary32) return top ? 0x7F7FFFFFu : 0xFF7FFFFFu;
  const Ladder l = make_ladder(f);
  if (l.codes.empty()) return 0;
  if (fi.sign_bits() == 0) return top ? l.codes.back() : l.codes.front();
  return top ? l.codes.back() : (l.codes.back() | (1u << (fi.width - 1)));
}
}  // namespace

Status decode_range(const Grade& g, const Plane planes[4], uint64_t numel, uint64_t begin,
                    uint64_t end, uint64_t* stored_io, float* out) {
  return decode_impl(g, planes, numel, begin, end, stored_io, -1, out);
}

Status decode_factors_range(const Grade& g, const Plane planes[4], uint64_t numel, uint64_t begin,
                            uint64_t end, uint64_t* stored_io, float* e, float* S) {
  uint64_t want[4];
  const Status st = check_range(g, planes, numel, begin, end, *stored_io, want);
  if (!st.ok()) return st;
  if (begin % g.k0 != 0 || end % g.k0 != 0)
    return Status::Fail(Error::kOutOfRange, "a factored decode range [" + std::to_string(begin) +
                                                ", " + std::to_string(end) +
                                                ") covers whole groups of k0=" + std::to_string(g.k0));
  const Readers rd(g, planes);
  float maxabs = 0.0f;
  const bool factors = law_factors_grade(g, &maxabs);
  CodeWalk codes{g, planes, rd.elem, want[0], *stored_io};
  bool factored = false;
  float s = 1.0f;
  uint64_t g1 = 0;
  for (uint64_t i = begin; i < end; ++i) {
    const uint64_t g0 = i / g.k0;
    if (i % g.k0 == 0) {
      s = group_scale(g, rd, g0, &g1);
      factored = factors && law_group_factored(s, maxabs);
      S[(i - begin) / g.k0] = factored ? s : 1.0f;
    }
    uint32_t code = 0;
    float* o = e + (i - begin);
    const CodeWalk::Step step = codes.next(i, &code);
    if (step == CodeWalk::kPastEnd) return CodeWalk::past_end();
    if (step == CodeWalk::kPruned) {
      *o = 0.0f;
      continue;
    }
    if (factored) {
      const float v = fmt_decode(g.elem, code);
      *o = std::isnan(v) ? canonical_nan() : v;
    } else {
      *o = element_value(g, rd, g0, g1, s, code);
    }
  }
  *stored_io = codes.stored;
  return Status::Ok();
}

Status decode_terms_range(const Grade& g, const Plane planes[4], uint64_t numel, uint64_t begin,
                          uint64_t end, uint64_t* stored_io, float* e, float* S, float* z, float* Z) {
  uint64_t want[4];
  const Status st = check_range(g, planes, numel, begin, end, *stored_io, want);
  if (!st.ok()) return st;
  if (begin % g.k0 != 0 || end % g.k0 != 0)
    return Status::Fail(Error::kOutOfRange, "a terms decode range [" + std::to_string(begin) + ", " +
                                                std::to_string(end) + ") covers whole groups of k0=" +
                                                std::to_string(g.k0));
  const Readers rd(g, planes);
  CodeWalk codes{g, planes, rd.elem, want[0], *stored_io};
  for (uint64_t i = begin; i < end; ++i) {
    if (i % g.k0 == 0) {
      const uint64_t g0 = i / g.k0, at = (i - begin) / g.k0;
      uint64_t g1 = 0;
      S[at] = group_scale(g, rd, g0, &g1);
      z[at] = 0.0f;
      Z[at] = 0.0f;
      if (g.has_zp) {
        const float zv = group_zero(g, rd, g0);
        if (g.zp_l1)
          Z[at] = group_offset(g, rd, g1, zv);
        else
          z[at] = zv;
      }
    }
    uint32_t code = 0;
    const CodeWalk::Step step = codes.next(i, &code);
    if (step == CodeWalk::kPastEnd) return CodeWalk::past_end();
    e[i - begin] = step == CodeWalk::kPruned ? 0.0f : fmt_decode(g.elem, code);
  }
  *stored_io = codes.stored;
  return Status::Ok();
}

Status decode_bounds(const Grade& g, const Plane planes[4], uint64_t numel, float* lo, float* hi) {
  uint64_t c0 = 0, c1 = 0;
  Status st = decode_impl(g, planes, numel, 0, numel, &c0, extreme_code(g.elem, false), lo);
  if (!st.ok()) return st;
  st = decode_impl(g, planes, numel, 0, numel, &c1, extreme_code(g.elem, true), hi);
  if (!st.ok()) return st;
  for (uint64_t i = 0; i < numel; ++i) {
    if (lo[i] > hi[i]) std::swap(lo[i], hi[i]);  // a negative scale flips the range
  }
  return Status::Ok();
}

}  // namespace grit
