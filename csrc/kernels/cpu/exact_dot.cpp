#include "kernels/cpu/exact_dot.h"

namespace grit {
namespace cpu {

using exact::Law;

void exact_activation(const Law& L, const int8_t* codes, const float* scales, int64_t k, ExactActivation* out) {
  const int64_t nb = k / L.k0;
  out->codes.assign(codes, codes + k);
  out->ma.resize(static_cast<size_t>(nb));
  out->xa.resize(static_cast<size_t>(nb));
  out->finite = true;
  for (int64_t b = 0; b < nb; ++b)
    if (!exact::f32_parts(scales[b], &out->ma[b], &out->xa[b])) out->finite = false;
}

namespace {

// D_b = sum of a*w over one block: int32 is exact when |D_b| < 2^31.
template <class Acc>
inline int64_t block_sum(const int16_t* a, const int16_t* w, int32_t k0) {
  Acc d = 0;
  for (int32_t t = 0; t < k0; ++t) d += static_cast<Acc>(a[t]) * static_cast<Acc>(w[t]);
  return static_cast<int64_t>(d);
}

}  // namespace

float exact_dot_row(const Law& L, const ExactActivation& a, const int16_t* w, const exact::WScale* ws, int64_t k,
                    bool has_bias, float bias, int64_t* p) {
  const int64_t B = k / L.k0;
  const float nan = exact::bits_to_f32(0x7FC00000u);
  if (!a.finite) return nan;
  int32_t tmax = 0;
  bool any = false;
  for (int64_t b = 0; b < B; ++b) {
    if (!ws[b].finite) return nan;
    p[b] = a.ma[b] * ws[b].m;
    if (p[b] == 0) continue;
    const int32_t top =
        L.bd + exact::bitlen64(static_cast<uint64_t>(p[b] < 0 ? -p[b] : p[b])) + a.xa[b] + ws[b].x;
    if (!any || top > tmax) tmax = top;
    any = true;
  }
  int64_t mb = 0;
  int32_t xb = 0;
  if (has_bias) {
    if (!exact::f32_parts(bias, &mb, &xb)) return bias != bias ? nan : bias;
    if (mb != 0) {
      const int32_t top = exact::bitlen64(static_cast<uint64_t>(mb < 0 ? -mb : mb)) + xb;
      if (!any || top > tmax) tmax = top;
      any = true;
    }
  }
  if (!any) return 0.0f;
  const int32_t G = tmax - 62 + exact::bitlen64(static_cast<uint64_t>(B) + 1);
  const bool narrow = L.bd <= 31;
  int64_t sum = 0;
  for (int64_t b = 0; b < B; ++b) {
    if (p[b] == 0) continue;
    const int16_t* ab = a.codes.data() + b * L.k0;
    const int16_t* wb = w + b * L.k0;
    const int64_t D = narrow ? block_sum<int32_t>(ab, wb, L.k0) : block_sum<int64_t>(ab, wb, L.k0);
    sum += exact::to_grid(D * p[b], a.xa[b] + ws[b].x, G);
  }
  if (mb != 0) sum += exact::to_grid(mb, xb, G);
  return exact::fixed_to_f32(sum, G);
}

}  // namespace cpu
}  // namespace grit
