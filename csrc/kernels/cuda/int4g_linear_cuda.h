// CUDA kernels of packed_linear, grad_input and dequantize for seed 001's int4 row
// groups ("INT4G<g>", grit/int4_groups.h): torch-free, raw device
// pointers, launched on the stream the caller passes.
//
// Numerics: W takes the core's binary64 values, w = q * s (q the signed
// code, s its group's binary64 scale); each product x * w is formed in
// binary64 and rounded once to binary32 (__dmul_rn, __double2float_rn) and
// added with a binary32 add. packed_linear's order per output element is
// fixed by k alone: the columns are cut into U units of 8 and the units into
// 32 slices (slice l: units floor(U*l/32) .. floor(U*(l+1)/32) - 1); each
// slice sum adds, from +0.0, its products in ascending column order; the 32
// slice sums meet in the adjacent-pairs tree ((s0+s1)+(s2+s3))+... (a warp's
// butterfly xor 1, 2, 4, 8, 16); the bias is added last; a NaN result is the
// canonical 0x7FC00000. The GEMV (batch <= 8) and the GEMM (above) give the
// same bits. grad_input: lane l of a warp adds the products of rows l, l+32,
// ... in ascending n, the 32 lane sums meet in the butterfly xor 16, 8, 4,
// 2, 1. (The CPU adds in plain ascending k or n: CPU and CUDA agree within
// the float32 summation bound, not bit for bit. dequantize is bit for bit.)
//
// The planes are checked as they are read. The kernels OR into *flag:
// kInt4gReserved for a code 8 (-8), kInt4gScale for a scale s without
// 0 < s and finite 7 s, kInt4gPadding for a nonzero padding nibble. A set
// flag means the caller must run the core's reader on the planes: it
// refuses them (the results are garbage) or passes them (a huge scale whose
// codes stay finite: the results are right).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/cuda/packed_linear_cuda.h"  // DType

namespace grit {
namespace cuda {

constexpr int kInt4gReserved = 1;
constexpr int kInt4gScale = 2;
constexpr int kInt4gPadding = 4;

struct Int4gPlan {
  const uint8_t* codes;  // code_bytes = ceil(n*k/2) bytes, row-major, low nibble first
  const double* scales;  // n * ceil(k/group) binary64 scales
  int64_t code_bytes;
  int64_t n, k;          // rows (out features), columns (in features: any length)
  int64_t group;         // g >= 1
};

// y[m, n] = x[m, k] W^T (+ bias[n]); x and y of dtype x_type, contiguous;
// bias float32 or null.
cudaError_t int4g_linear(const Int4gPlan& p, const void* x, DType x_type, int64_t m, const float* bias,
                         void* y, int* flag, cudaStream_t stream);

// grad_x[m, k] = grad_y[m, n] W as float32; grad_y of dtype gy_type,
// contiguous.
cudaError_t int4g_grad_input(const Int4gPlan& p, const void* gy, DType gy_type, int64_t m, float* gx, int* flag,
                             cudaStream_t stream);

// out[n, k] = W in binary64, the core's values bit for bit.
cudaError_t int4g_dequantize(const Int4gPlan& p, double* out, int* flag, cudaStream_t stream);

}  // namespace cuda
}  // namespace grit
