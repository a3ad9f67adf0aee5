#include "s8_linear.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "decode.h"
#include "exact_linear.h"

namespace grit {
namespace s8 {

namespace {

Status refuse(const Grade& g, const std::string& why) {
  return Status::Fail(Error::kInexpressible,
                      "grade " + g.canonical + " has no s8 activation law: " + why +
                          ". activations=\"s8\" takes grades whose elements are small integers times a "
                          "power of two (int4, int8, e2m1, with or without a zero point); run this "
                          "grade with float activations");
}

// The range of a zero point format's finite values, as integers.
bool zero_range(const Grade& g, int64_t* lo, int64_t* hi) {
  const FmtInfo fi = fmt_unpack(g.zp);
  if (!fi.is_integer() || fi.width > 16) return false;
  const int64_t w = fi.width;
  *lo = fi.is_unsigned ? 0 : -(int64_t{1} << (w - 1));
  *hi = fi.is_unsigned ? (int64_t{1} << w) - 1 : (int64_t{1} << (w - 1)) - 1;
  if (g.zp_minus1) {
    ++*lo;
    ++*hi;
  }
  return true;
}

}  // namespace

int32_t activation_block(uint32_t k0) {
  if (k0 <= static_cast<uint32_t>(kMaxBlock)) return static_cast<int32_t>(k0);
  int32_t b = kMaxBlock;
  while (b > 1 && k0 % static_cast<uint32_t>(b) != 0) b /= 2;
  return b;
}

Status s8_law(const Grade& g, Law* out) {
  Law L;
  const int ew = fmt_width(g.elem);
  if (ew > 8) return refuse(g, "its element format e=" + g.field[kKeyE] + " is wider than 8 bits");
  double vals[256];
  const int ncodes = 1 << ew;
  int qe = 0;
  for (int c = 0; c < ncodes; ++c) {
    vals[c] = fmt_decode(g.elem, static_cast<uint32_t>(c));
    if (!std::isfinite(vals[c]))
      return refuse(g, "its element format e=" + g.field[kKeyE] + " has non-finite codes");
    while (vals[c] != 0 && std::ldexp(vals[c], -qe) != std::trunc(std::ldexp(vals[c], -qe))) --qe;
  }
  int64_t cmin = 0, cmax = 0;
  for (int c = 0; c < ncodes; ++c) {
    const double v = std::ldexp(vals[c], -qe);
    if (std::fabs(v) > 255)
      return refuse(g, "its element values are not integers of at most 8 bits times one power of two "
                       "(e=" + g.field[kKeyE] + ")");
    L.code[c] = static_cast<int16_t>(v);
    cmin = std::min<int64_t>(cmin, L.code[c]);
    cmax = std::max<int64_t>(cmax, L.code[c]);
  }
  int64_t span = std::max(std::llabs(cmin), std::llabs(cmax));
  if (g.has_zp) {
    if (g.zp_l1) {
      L.zero = kZpOffset;
    } else {
      int64_t zlo = 0, zhi = 0;
      if (!zero_range(g, &zlo, &zhi))
        return refuse(g, "its zero point format zp=" + g.field[kKeyZp] +
                             " is not an integer format of at most 16 bits (zps=shared subtracts it from "
                             "the integer codes)");
      L.zero = kZpShared;
      const int64_t zl = zlo * (int64_t{1} << -qe), zh = zhi * (int64_t{1} << -qe);
      span = std::max(std::max(std::llabs(cmax - zl), std::llabs(cmin - zh)),
                      std::max(std::llabs(cmax - zh), std::llabs(cmin - zl)));
    }
  }
  if (g.has_sp) {
    if (g.sp_m == 0 || g.sp_m > 32 || g.k0 % g.sp_m != 0)
      return refuse(g, "its sparsity quads (M=" + std::to_string(g.sp_m) + ") do not tile its groups");
    L.sp_n = static_cast<int32_t>(g.sp_n);
    L.sp_m = static_cast<int32_t>(g.sp_m);
    L.sp_meta_bits = static_cast<int32_t>(g.sp_meta_bits);
  }
  L.k0 = static_cast<int32_t>(g.k0);
  L.kb = activation_block(g.k0);
  const int64_t dmax = static_cast<int64_t>(L.kb) * 127 * span;
  if (dmax >= (int64_t{1} << 24))
    return refuse(g, "a block sum reaches " + std::to_string(L.kb) + "*127*" + std::to_string(span) + " = " +
                         std::to_string(dmax) + ", past 2^24 where binary32 holds it exactly");
  L.elem_bits = g.pad8 && ew <= 8 ? 8 : ew;
  L.msb = g.msb_first && L.elem_bits < 8;
  L.qe = qe;
  *out = L;
  return Status::Ok();
}

Status weight_row_terms(const Grade& g, const Law& L, const Plane planes[4], uint64_t numel, int64_t row,
                        int64_t k, uint64_t* stored, int16_t* c, float* S, float* O, int32_t* zi) {
  const int64_t G = k / L.k0;
  std::vector<float> e(static_cast<size_t>(k)), z(static_cast<size_t>(G)), Z(static_cast<size_t>(G));
  const uint64_t begin = static_cast<uint64_t>(row * k);
  const Status st = decode_terms_range(g, planes, numel, begin, begin + static_cast<uint64_t>(k), stored, e.data(),
                                       S, z.data(), Z.data());
  if (!st.ok()) return st;
  for (int64_t t = 0; t < k; ++t) c[t] = static_cast<int16_t>(std::ldexp(e[t], -L.qe));
  for (int64_t q = 0; q < G; ++q) {
    O[q] = L.zero == kZpOffset ? -Z[q] : 0.0f;
    zi[q] = L.zero == kZpShared ? static_cast<int32_t>(std::ldexp(z[q], -L.qe)) : 0;
  }
  return Status::Ok();
}

Status linear(const Grade& g, const Law& L, const int8_t* codes, const float* scales, int64_t m,
              const Plane planes[4], int64_t n, int64_t k, const float* bias, float* y) {
  if (k % L.k0 != 0)
    return Status::Fail(Error::kOutOfRange,
                        "s8 linear: k=" + std::to_string(k) + " is not a multiple of k0=" + std::to_string(L.k0));
  const int64_t G = k / L.k0, B = k / L.kb;
  std::vector<int16_t> c(static_cast<size_t>(k));
  std::vector<float> S(static_cast<size_t>(G)), O(static_cast<size_t>(G));
  std::vector<int32_t> zi(static_cast<size_t>(G));
  uint64_t stored = 0;
  const uint64_t numel = static_cast<uint64_t>(n * k);
  for (int64_t j = 0; j < n; ++j) {
    const Status st = weight_row_terms(g, L, planes, numel, j, k, &stored, c.data(), S.data(), O.data(), zi.data());
    if (!st.ok()) return st;
    for (int64_t i = 0; i < m; ++i)
      y[i * n + j] = dot(L, codes + i * k, scales + i * B, c.data(), S.data(), O.data(), zi.data(), k,
                         bias != nullptr ? bias + j : nullptr);
  }
  return Status::Ok();
}

}  // namespace s8
}  // namespace grit
