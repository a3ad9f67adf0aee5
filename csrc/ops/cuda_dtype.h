// The torch-free CUDA kernels' name for an activation dtype (the ops pass
// only float32, bfloat16 and float16). Built only where torch has CUDA.
#pragma once

#include <c10/core/ScalarType.h>

#include "kernels/cuda/packed_linear_cuda.h"

namespace grit_ops {

inline grit::cuda::DType cuda_dtype_of(at::ScalarType t) {
  switch (t) {
    case at::kBFloat16: return grit::cuda::DType::kBFloat16;
    case at::kHalf: return grit::cuda::DType::kFloat16;
    default: return grit::cuda::DType::kFloat32;
  }
}

}  // namespace grit_ops
