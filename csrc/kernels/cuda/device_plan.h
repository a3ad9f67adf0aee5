// The device plan (packed_linear_cuda.h's Plan) of a grade and its planes:
// the CPU kernels' grade tables, classified for the CUDA kernels. Host code,
// torch-free: used by the ATen wrapper and by the CPU emulator's tests.
#pragma once

#include <cstdint>

#include "grit/grit.h"
#include "kernels/cpu/packed_linear_cpu.h"
#include "kernels/cuda/packed_linear_cuda.h"

namespace grit {
namespace cuda {

// False when no CUDA kernel decodes the grade.
inline bool make_device_plan(const Grade& g, const Plane planes[4], int64_t n, int64_t k, Plan* out) {
  cpu::LinearPlan lp;
  cpu::make_grade_tables(g, &lp);
  Plan& d = *out;
  d = Plan{};
  switch (lp.kind) {
    case cpu::FastKind::kNone:
    case cpu::FastKind::kInt8Dense:  // no CUDA decoder yet: the op's reference route
    case cpu::FastKind::kNibbleZp:
    case cpu::FastKind::kNibbleFs:
      return false;
    case cpu::FastKind::kNibble: d.kind = Kind::kNibble; break;
    case cpu::FastKind::kNibbleAffine: d.kind = Kind::kNibbleAffine; break;
    case cpu::FastKind::kInt8Sparse24: d.kind = Kind::kInt8Sparse24; break;
  }
  d.tensor_scale = TensorScale::kNone;
  if (lp.kind == cpu::FastKind::kNibble && g.has_l1) {
    if (g.scale1 == kBinary32)
      d.tensor_scale = TensorScale::kBinary32;
    else if (g.scale1 == kBinary16)
      d.tensor_scale = TensorScale::kBinary16;
    else
      return false;
  }
  for (int i = 0; i < 4; ++i) d.planes[i] = planes[i].data;
  d.n = n;
  d.k = k;
  d.k0 = lp.k0;
  d.k1 = lp.k1;
  d.s0_e8m0 = lp.s0_map == cpu::CodeMap::kE8M0;
  for (int i = 0; i < 16; ++i) d.elem[i] = lp.elem[i];
  for (int i = 0; i < 256; ++i) {
    d.s0[i] = lp.s0[i];
    d.zp[i] = lp.zp[i];
  }
  return true;
}

}  // namespace cuda
}  // namespace grit
