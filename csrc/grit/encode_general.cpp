// The general encoder: any dense one-level grade the family encoders of
// encode.cpp do not take, under the esr rules of GRIT SPEC 9 read for a
// general element and scale format. The reading is torch_grit's and is
// written out in docs/numerics.md ("Encoders for any grade"); on the
// reference grades' own formats it gives the family encoders' bytes
// (tests/cpp/test_encode_general.cpp).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <string>

#include "bits.h"
#include "decode.h"
#include "encode.h"
#include "format.h"

namespace grit {
namespace {

constexpr Rounding kScaleRounding = Rounding::kRne;  // every esr rounds its scale to nearest even

std::string fmt_str(fmt_t f) {
  const char* n = format_name(f);
  return n ? n : "an unregistered format";
}

Status refuse(const std::string& why) { return Status::Fail(Error::kInexpressible, why); }

// The element grid the encoder rounds onto.
struct ElemGrid {
  double maxnorm = 0;  // largest finite magnitude
  int emax = 0;        // floor(log2(maxnorm)): the exp2 rules' element exponent
  int64_t qmin = 0, qmax = 0;  // integer elements: the satfinite range
};

ElemGrid elem_grid(fmt_t e) {
  ElemGrid r;
  const FmtInfo f = fmt_unpack(e);
  if (f.is_integer()) {
    r.qmax = f.is_unsigned ? (int64_t{1} << f.width) - 1 : (int64_t{1} << (f.width - 1)) - 1;
    r.qmin = f.is_unsigned ? 0 : -r.qmax;  // satfinite never yields the asymmetric minimum
    r.maxnorm = static_cast<double>(r.qmax);
  } else {
    r.maxnorm = fmt_maxnorm(e);
  }
  r.emax = std::ilogb(r.maxnorm);
  return r;
}

enum class Rule { kExp2Floor, kExp2Ceil, kExp2Rne, kRatio, kAffine };

bool rule_of(const std::string& esr, Rule* r) {
  if (esr == "exp2floormaxabs") *r = Rule::kExp2Floor;
  else if (esr == "exp2ceilmaxabs") *r = Rule::kExp2Ceil;
  else if (esr == "exp2rnemaxabs") *r = Rule::kExp2Rne;
  else if (esr == "ratiomaxabs") *r = Rule::kRatio;
  else if (esr == "affineminmax") *r = Rule::kAffine;
  else return false;
  return true;
}

bool rounding_of(const std::string& er, Rounding* r) {
  if (er == "rne") *r = Rounding::kRne;
  else if (er == "rna") *r = Rounding::kRna;
  else if (er == "rtz") *r = Rounding::kRtz;
  else if (er == "rtp") *r = Rounding::kRtp;
  else if (er == "rtn") *r = Rounding::kRtn;
  else return false;
  return true;
}

// Round x (finite) to an integer under er, as fmt_encode rounds integers.
double round_integer(double x, Rounding r) {
  switch (r) {
    case Rounding::kRne: return std::nearbyint(x);
    case Rounding::kRna: return std::round(x);
    case Rounding::kRtz: return std::trunc(x);
    case Rounding::kRtp: return std::ceil(x);
    default: return std::floor(x);
  }
}

uint32_t scale_code(fmt_t s, float x) {
  if (!std::isfinite(x)) x = FLT_MAX;  // a range past binary32 saturates like any other
  uint32_t c = 0;
  fmt_encode(s, x, kScaleRounding, Saturation::kSatFinite, &c);  // x is positive
  return c;
}

// The smallest positive value of a scale format: the code a rounded-to-zero
// scale becomes, so that no group ever stores a zero scale.
uint32_t smallest_positive_code(fmt_t s) {
  if (fmt_width(s) > 8) return 1;  // binary16 / binary32: the least subnormal
  const Ladder l = make_ladder(s);
  for (size_t i = 0; i < l.mags.size(); ++i)
    if (l.mags[i] > 0.0) return l.codes[i];
  return 0;
}

// Range of exponents x with 2^x exactly a value of the scale format.
void pow2_range(fmt_t s, int* lo, int* hi) {
  *lo = 1;
  *hi = 0;
  for (int x = -149; x <= 127; ++x) {
    const float p = std::ldexp(1.0f, x);
    uint32_t c = 0;
    if (!fmt_encode(s, p, kScaleRounding, Saturation::kSatFinite, &c).ok() || fmt_decode(s, c) != p)
      continue;
    if (*lo > *hi) *lo = x;
    *hi = x;
  }
}

// Little-endian value of `bits` padded width (8, 16 or 32) at index i.
void put_padded(std::vector<uint8_t>& p, uint64_t i, int width, uint32_t code) {
  const int bytes = width <= 8 ? 1 : width / 8;
  for (int k = 0; k < bytes; ++k) p[i * bytes + k] = static_cast<uint8_t>(code >> (8 * k));
}

struct Plan {
  Rule rule = Rule::kRatio;
  Rounding er = Rounding::kRne;
  ElemGrid grid;
  int pow2_lo = 0, pow2_hi = 0;
  int64_t z_lo = 0, z_hi = 0;  // the zero points the zp format can carry (after zpc)
  int64_t z_mid = 0;           // ratiomaxabs with a zero point: the fixed middle
};

Status make_plan(const Grade& g, Plan* p) {
  if (g.has_sp) return refuse("sparse grades encode only in the I8S24 family (2:4, s8, binary16 per 32)");
  if (g.has_l1)
    return refuse("two-level grades encode only in the Q4KS and NVF4 families; a general "
                     "two-level esr reading is not defined");
  const std::string& esr = g.esr();
  if (!rule_of(esr, &p->rule))
    return refuse("esr=" + esr + " names no rule GRIT v1 states (exp2floormaxabs, exp2ceilmaxabs, "
                     "exp2rnemaxabs, ratiomaxabs, affineminmax)");
  if (!rounding_of(g.er(), &p->er)) return refuse("er=" + g.er() + " is not a rounding the encoder knows");
  if (g.field[kKeyEs] != "satfinite")
    return refuse("es=" + g.field[kKeyEs] + ": the encoders saturate to the largest finite value (es=satfinite)");
  if (g.field[kKeyEsn] == "ftz")
    return refuse("esn=ftz: the encoders keep subnormal results (esn=preserve or any)");
  const FmtInfo e = fmt_unpack(g.elem);
  if (e.width > 8 || e.is_exponent_only())
    return refuse("element format " + fmt_str(g.elem) +
                         ": the encoder takes integer or minifloat elements of at most 8 bits");
  p->grid = elem_grid(g.elem);
  const FmtInfo s = fmt_unpack(g.scale0);
  if (fmt_decode(g.scale0, scale_code(g.scale0, 1.0f)) != 1.0f)
    return refuse("s0=" + fmt_str(g.scale0) + " cannot hold the scale 1 an all-zero group takes");
  if (s.is_integer() && !s.is_unsigned)
    return refuse("s0=" + fmt_str(g.scale0) + ": a signed integer scale; scales are positive");
  const bool exp2 = p->rule != Rule::kRatio && p->rule != Rule::kAffine;
  if (p->rule == Rule::kAffine && !g.has_zp)
    return refuse("esr=affineminmax needs a zero point (zp=...): without one the range cannot move");
  if (g.has_zp) {
    if (exp2)
      return refuse("esr=" + esr + " with a zero point: the exp2 rules are stated for symmetric grades; "
                                      "a zero-point grade encodes under esr=affineminmax or ratiomaxabs");
    if (!e.is_integer())
      return refuse("esr=" + esr + " with a zero point and element format " + fmt_str(g.elem) +
                           ": the zero-point readings need integer elements");
    const FmtInfo z = fmt_unpack(g.zp);
    if (!z.is_integer())
      return refuse("zp=" + fmt_str(g.zp) + ": the zero-point readings need an integer zero point");
    const ElemGrid zg = elem_grid(g.zp);
    const int64_t off = g.zp_minus1 ? 1 : 0;
    p->z_lo = std::max(p->grid.qmin, zg.qmin + off);
    p->z_hi = std::min(p->grid.qmax, zg.qmax + off);
    if (p->z_lo > p->z_hi)
      return refuse("zp=" + fmt_str(g.zp) + " holds no zero point inside the element range");
    if (p->rule == Rule::kRatio) {
      // GPTQ's symmetric rule: the zero point is the grid's middle, floor((qmin + qmax + 1) / 2).
      const int64_t sum = p->grid.qmin + p->grid.qmax + 1;
      p->z_mid = sum >= 0 ? sum / 2 : -((-sum + 1) / 2);
      if (p->z_mid < p->z_lo || p->z_mid > p->z_hi)
        return refuse("zp=" + fmt_str(g.zp) + " cannot hold the middle zero point " +
                             std::to_string(p->z_mid) + " esr=ratiomaxabs takes");
    }
  }
  if (exp2) {
    pow2_range(g.scale0, &p->pow2_lo, &p->pow2_hi);
    if (p->pow2_lo > p->pow2_hi)
      return refuse("s0=" + fmt_str(g.scale0) + " holds no power of two for esr=" + esr);
  }
  return Status::Ok();
}

}  // namespace

Status general_encoder_fits(const Grade& g) {
  Plan p;
  return make_plan(g, &p);
}

Status encode_general(const Grade& g, const float* v, uint64_t n, EncodedPlanes* out) {
  Plan P;
  Status st = make_plan(g, &P);
  if (!st.ok()) return st;
  uint64_t bytes[4];
  st = grade_plane_bytes(g, n, bytes);
  if (!st.ok()) return st;
  EncodedPlanes planes;
  for (int i = 0; i < 4; ++i) planes.plane[i].assign(bytes[i], 0);
  const int ew = fmt_width(g.elem);
  const int ecw = g.pad8 && ew <= 8 ? 8 : ew;
  const bool msb = g.msb_first && ecw < 8;
  const uint32_t emask = ecw >= 32 ? ~0u : ((1u << ecw) - 1);
  const int s0w = fmt_width(g.scale0), zpw = g.has_zp ? fmt_width(g.zp) : 8;
  auto put_code = [&](uint64_t i, uint32_t c) {
    if (msb) write_bits_msb(planes.plane[0].data(), i * ecw, ecw, c & emask);
    else write_bits_lsb(planes.plane[0].data(), i * ecw, ecw, c & emask);
  };
  const uint64_t k0 = g.k0;
  const float one = 1.0f;
  for (uint64_t grp = 0; grp < n / k0; ++grp) {
    const float* x = v + grp * k0;
    bool finite = true;
    for (uint64_t i = 0; i < k0; ++i) finite = finite && std::isfinite(x[i]);
    if (!finite) {
      uint32_t nan = 0;
      if (!fmt_nan_code(g.scale0, &nan))
        return Status::Fail(Error::kBadValue,
                            "group " + std::to_string(grp) + " (values " + std::to_string(grp * k0) + ".." +
                                std::to_string(grp * k0 + k0 - 1) + ") holds NaN or Inf, and s0=" +
                                fmt_str(g.scale0) + " has no NaN code to poison it");
      put_padded(planes.plane[1], grp, s0w, nan);  // codes and zero point stay 0
      continue;
    }
    uint32_t sc;
    float lo = 0.0f;  // affineminmax: the range's low end, for the zero point below
    if (P.rule == Rule::kAffine) {
      // Python's min/max keep the first of equal values; zero is forced into the range.
      float mn = x[0], mx = x[0];
      for (uint64_t i = 1; i < k0; ++i) {
        if (x[i] < mn) mn = x[i];
        if (x[i] > mx) mx = x[i];
      }
      lo = mn < 0.0f ? mn : 0.0f;
      const float hi = mx > 0.0f ? mx : 0.0f;
      const float steps = static_cast<float>(P.grid.qmax - P.grid.qmin);
      sc = hi == lo ? scale_code(g.scale0, one) : scale_code(g.scale0, (hi - lo) / steps);
    } else {
      float amax = 0.0f;
      for (uint64_t i = 0; i < k0; ++i) amax = std::fmax(amax, std::fabs(x[i]));
      if (P.rule == Rule::kRatio && g.has_zp) {
        // GPTQ's symmetric scale: the range [-amax, amax] over every step of the grid.
        const float steps = static_cast<float>(P.grid.qmax - P.grid.qmin);
        sc = amax == 0.0f ? scale_code(g.scale0, one) : scale_code(g.scale0, (amax + amax) / steps);
      } else if (P.rule == Rule::kRatio) {
        sc = amax == 0.0f ? scale_code(g.scale0, one)
                          : scale_code(g.scale0, amax / static_cast<float>(P.grid.maxnorm));
      } else {
        const ScaleRule r = P.rule == Rule::kExp2Floor ? ScaleRule::kExp2Floor
                            : P.rule == Rule::kExp2Ceil ? ScaleRule::kExp2Ceil
                                                        : ScaleRule::kExp2Rne;
        int e = amax == 0.0f ? 0 : shared_exp2_exponent(amax, r) - P.grid.emax;
        e = e < P.pow2_lo ? P.pow2_lo : (e > P.pow2_hi ? P.pow2_hi : e);
        sc = scale_code(g.scale0, std::ldexp(1.0f, e));
      }
    }
    if (fmt_decode(g.scale0, sc) == 0.0f) sc = smallest_positive_code(g.scale0);
    put_padded(planes.plane[1], grp, s0w, sc);
    const float S = fmt_decode(g.scale0, sc);
    if (g.has_zp) {
      int64_t z = P.z_mid;
      if (P.rule == Rule::kAffine) {
        const float t0 = -lo / S;
        if (!std::isfinite(t0))
          return Status::Fail(Error::kBadValue, "group " + std::to_string(grp) +
                                                    ": the zero point leaves binary32 during encode");
        // Clamped in binary64 before the integer conversion: t0 may be far past int64.
        const double zr = std::nearbyint(static_cast<double>(t0)) + static_cast<double>(P.grid.qmin);
        z = zr <= static_cast<double>(P.z_lo)   ? P.z_lo
            : zr >= static_cast<double>(P.z_hi) ? P.z_hi
                                                : static_cast<int64_t>(zr);
      }
      uint32_t zc = 0;
      fmt_encode(g.zp, static_cast<float>(z - (g.zp_minus1 ? 1 : 0)), Rounding::kRne, Saturation::kSatFinite, &zc);
      put_padded(planes.plane[3], grp, zpw, zc);
      for (uint64_t i = 0; i < k0; ++i) {
        const float t = x[i] / S;
        // A finite value over a positive scale overflows only past the grid: saturate.
        const double r = std::isfinite(t) ? round_integer(static_cast<double>(t), P.er) + static_cast<double>(z)
                                          : (t > 0 ? static_cast<double>(P.grid.qmax) : static_cast<double>(P.grid.qmin));
        const int64_t q = r <= static_cast<double>(P.grid.qmin)   ? P.grid.qmin
                          : r >= static_cast<double>(P.grid.qmax) ? P.grid.qmax
                                                                  : static_cast<int64_t>(r);
        put_code(grp * k0 + i, static_cast<uint32_t>(q));
      }
    } else {
      for (uint64_t i = 0; i < k0; ++i) {
        uint32_t c = 0;
        fmt_encode(g.elem, x[i] / S, P.er, Saturation::kSatFinite, &c);  // finite or +-inf: saturates
        put_code(grp * k0 + i, c);
      }
    }
  }
  *out = std::move(planes);
  return Status::Ok();
}

}  // namespace grit
