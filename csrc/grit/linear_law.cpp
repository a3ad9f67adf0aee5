#include "linear_law.h"

namespace grit {

bool law_factors_grade(const Grade& g, float* maxabs) {
  *maxabs = 0.0f;
  if (g.has_zp || g.has_l1 || fmt_width(g.elem) > 8) return false;
  const FmtInfo ei = fmt_unpack(g.elem);
  if (g.scale0 == kBinary16) {
    if (!ei.is_integer()) return false;
  } else if (g.scale0 != kE8M0) {
    return false;
  }
  float smallest = INFINITY;
  for (uint32_t c = 0; c < (1u << fmt_width(g.elem)); ++c) {
    const float v = std::fabs(fmt_decode(g.elem, c));
    if (!std::isfinite(v)) continue;
    if (v > *maxabs) *maxabs = v;
    if (v > 0.0f && v < smallest) smallest = v;
  }
  return ei.is_integer() || smallest >= 0x1p-22f;
}

}  // namespace grit
