// CUDA kernel of packed_linear_grad_input (the backward to x) for the packed
// layouts with a fast decoder: torch-free, raw device pointers, launched on
// the stream the caller passes.
//
// grad_x[m, k] = grad_y[m, n] W, as float32. W takes exactly the contract's
// decoded values (decode_unit.cuh); every product gy*w is rounded to
// binary32 and added with a binary32 add (never fused). The order per
// output element is fixed by n alone: lane l of a warp adds, from +0.0, the
// products of rows l, l+32, l+64, ... in ascending n; the 32 lane sums are
// combined by the butterfly xor 16, 8, 4, 2, 1; a NaN result is the canonical
// 0x7FC00000. (The CPU takes one fused multiply-add per product in plain
// ascending n: CPU and CUDA agree within the float32 summation bound, not
// bit for bit.) One warp owns a 32-column unit and up to 4 batch rows.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/cuda/packed_linear_cuda.h"

namespace grit {
namespace cuda {

// gy: [m, n] of gy_type, contiguous; gx: [m, k] float32. `flag` is a zeroed
// device int set where the planes need the exact path (an I8S24 quad naming
// one position twice: every result is then garbage and the caller must
// recompute, e.g. with the CPU kernel).
cudaError_t packed_linear_grad_input(const Plan& p, const void* gy, DType gy_type, int64_t m, float* gx,
                                     int* flag, cudaStream_t stream);

}  // namespace cuda
}  // namespace grit
