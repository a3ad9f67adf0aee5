#include "exact_linear.h"

#include <cmath>
#include <vector>

#include "format.h"

namespace grit {
namespace exact {

namespace {

Status refuse(const Grade& g, const std::string& why) {
  return Status::Fail(Error::kInexpressible,
                      "grade " + g.canonical + " has no exact integer law: " + why +
                          ". The exact mode takes grades whose decode is one block scale (binary16 or "
                          "e8m0) times an integer-valued element code, such as I8S24 and MXFP4; use "
                          "packed_linear without exact=True for this grade");
}

}  // namespace

Status exact_law(const Grade& g, Law* out) {
  Law L;
  if (g.has_zp)
    return refuse(g, "it has a zero point (zp=" + g.field[kKeyZp] + ", zps=" + g.field[kKeyZps] +
                         "); its decode rounds the offset in binary32 (f32(f32(S*e) - Z) for zps=l1), so "
                         "the weight is not an integer code times one block scale");
  if (g.has_l1)
    return refuse(g, "it has a second scale level (k1/s1=" + g.field[kKeyS1] +
                         "); the block scale f32(s1 * s0) is itself rounded in binary32, so it is not "
                         "an exactly known integer times a power of two with a bounded significand");
  if (g.scale0 == kBinary16) {
    L.scale = kScaleBinary16;
    L.scale_sig = 11;
  } else if (g.scale0 == kE8M0) {
    L.scale = kScaleE8M0;
    L.scale_sig = 1;
  } else {
    return refuse(g, "its block scale format s0=" + g.field[kKeyS0] +
                         " is not binary16 or e8m0 (the scale formats with a short exact significand "
                         "the exact mode implements)");
  }
  const int ew = fmt_width(g.elem);
  if (ew > 8)
    return refuse(g, "its element format e=" + g.field[kKeyE] + " is wider than 8 bits");
  // Every code's value as an integer times 2^qe; a NaN or infinite code has none.
  double vals[256];
  const int ncodes = 1 << ew;
  int qe = 0;
  for (int c = 0; c < ncodes; ++c) {
    vals[c] = fmt_decode(g.elem, static_cast<uint32_t>(c));
    if (!std::isfinite(vals[c]))
      return refuse(g, "its element format e=" + g.field[kKeyE] + " has non-finite codes");
    while (vals[c] != 0 && std::ldexp(vals[c], -qe) != std::trunc(std::ldexp(vals[c], -qe))) --qe;
  }
  int cmax = 0;
  for (int c = 0; c < ncodes; ++c) {
    const double v = std::ldexp(vals[c], -qe);
    if (std::fabs(v) > 32767) return refuse(g, "its element codes span more than 16 bits");
    L.code[c] = static_cast<int16_t>(v);
    if (std::abs(static_cast<int>(L.code[c])) > cmax) cmax = std::abs(static_cast<int>(L.code[c]));
  }
  // The decode law's product S * v must be exact in binary32 for these to be
  // the contract's weights: significands fit 24 bits, the lowest bit >= 2^-149.
  const int low_scale = L.scale == kScaleBinary16 ? -24 : -127;
  if (L.scale_sig + bitlen64(static_cast<uint64_t>(cmax)) > 24 || low_scale + qe < -149)
    return refuse(g, "its decode product s0 * e is not always exact in binary32");
  if (g.has_sp) {
    if (g.sp_m == 0 || g.sp_m > 32 || g.k0 % g.sp_m != 0)
      return refuse(g, "its sparsity quads (M=" + std::to_string(g.sp_m) + ") do not tile its blocks");
    L.sp_n = static_cast<int32_t>(g.sp_n);
    L.sp_m = static_cast<int32_t>(g.sp_m);
    L.sp_meta_bits = static_cast<int32_t>(g.sp_meta_bits);
  }
  L.k0 = static_cast<int32_t>(g.k0);
  L.elem_bits = g.pad8 && ew <= 8 ? 8 : ew;
  L.msb = g.msb_first && L.elem_bits < 8;
  L.qe = qe;
  L.cmax = cmax;
  // The overflow bound: |D_b| <= k0 * 128 * cmax < 2^bd and
  // |N_b| = |D_b * ma * mw| < 2^(bd + 24 + scale_sig) must stay below 2^63.
  const uint64_t dmax = static_cast<uint64_t>(g.k0) * 128u * static_cast<uint64_t>(cmax ? cmax : 1);
  L.bd = bitlen64(dmax);
  const int need = L.bd + 24 + L.scale_sig;
  if (need > 63) {
    // bitlen(k0*128*cmax) <= 39 - scale_sig  <=>  k0*128*cmax < 2^(39 - scale_sig)
    const uint64_t k0max = ((uint64_t{1} << (39 - L.scale_sig)) - 1) / (128u * static_cast<uint64_t>(cmax ? cmax : 1));
    return Status::Fail(
        Error::kOutOfRange,
        "grade " + g.canonical + ": the exact mode's int64 accumulator bound fails: a block term is " +
            "D * ma * mw with |D| <= k0*128*max|code| = " + std::to_string(g.k0) + "*128*" +
            std::to_string(cmax) + " = " + std::to_string(dmax) + " < 2^" + std::to_string(L.bd) +
            ", the activation scale's 24-bit and the weight scale's " + std::to_string(L.scale_sig) +
            "-bit significands: 2^" + std::to_string(need) + " > 2^63. Refused rather than overflow; " +
            "a grade with k0 <= " + std::to_string(k0max) + " fits");
  }
  *out = L;
  return Status::Ok();
}

Status pack_activations(const float* x, int64_t m, int64_t k, int64_t block, int8_t* codes,
                        float* scales) {
  if (block <= 0 || k % block != 0)
    return Status::Fail(Error::kOutOfRange, "pack_activations: block " + std::to_string(block) +
                                                " must be positive and divide k=" + std::to_string(k));
  for (int64_t i = 0; i < m * k; ++i) {
    if (!std::isfinite(x[i]))
      return Status::Fail(Error::kNonFinite,
                          "pack_activations: x holds a non-finite value (" + std::to_string(x[i]) +
                              ") at row " + std::to_string(i / k) + ", column " + std::to_string(i % k) +
                              "; int8 codes with a finite scale cannot represent it");
  }
  const int64_t nb = k / block;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t b = 0; b < nb; ++b)
      scales[i * nb + b] = pack_block(x + i * k + b * block, block, codes + i * k + b * block);
  return Status::Ok();
}

Status exact_linear(const Law& law, const int8_t* codes, const float* scales, int64_t m,
                    const uint8_t* data, const uint8_t* s0, const uint8_t* meta, int64_t n,
                    int64_t k, const float* bias, float* y) {
  if (law.k0 <= 0 || k % law.k0 != 0 || (law.sp_m && k % law.sp_m != 0))
    return Status::Fail(Error::kOutOfRange, "exact_linear: k=" + std::to_string(k) +
                                                " is not a multiple of the block k0=" +
                                                std::to_string(law.k0));
  const int64_t nb = k / law.k0;
  std::vector<int16_t> w(static_cast<size_t>(k));
  std::vector<WScale> ws(static_cast<size_t>(nb));
  uint64_t cursor = 0;
  for (int64_t j = 0; j < n; ++j) {
    weight_row(law, data, s0, meta, j, k, cursor, w.data(), ws.data());
    cursor += row_stored(law, meta, j, k);
    for (int64_t i = 0; i < m; ++i)
      y[i * n + j] = exact_dot(law, codes + i * k, scales + i * nb, w.data(), ws.data(), k,
                               bias != nullptr, bias ? bias[j] : 0.0f);
  }
  return Status::Ok();
}

}  // namespace exact
}  // namespace grit
