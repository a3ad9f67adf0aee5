// Seed 001's INT4G encoder (grit/int4_groups.cpp, int4g_encode) one group at
// a time, for the host (the parallel CPU quantize) and the device (the CUDA
// quantize). A copy, not a definition: tests/python/test_int4g_ops.py holds
// the op's planes equal to the core encoder's, and the ops re-run the core
// encoder for its message wherever a group here refuses.
#pragma once

#include <math.h>
#include <stdint.h>

#include "grit/hd.h"

namespace grit {
namespace int4genc {

// The group's scale (amax / 7, or 1 for an all-zero group); false where the
// core refuses the tensor: a non-finite value, or a scale that is not > 0.
GRIT_HD bool group_scale(const double* v, int64_t len, double* scale) {
  double amax = 0.0;
  for (int64_t i = 0; i < len; ++i) {
    if (!isfinite(v[i])) return false;
    const double a = fabs(v[i]);
    if (a > amax) amax = a;  // = fmax on finite values
  }
  const double s = amax == 0.0 ? 1.0 : amax / 7.0;
  if (!(s > 0.0)) return false;
  *scale = s;
  return true;
}

// The signed code of a finite value under a finite scale > 0: divide, round
// half away from zero, clamp to [-7, 7].
GRIT_HD int code(double value, double scale) {
  const double r = round(value / scale);
  return r < -7.0 ? -7 : (r > 7.0 ? 7 : static_cast<int>(r));
}

}  // namespace int4genc
}  // namespace grit
