// CUDA kernels of packed_linear and dequantize for the packed layouts with a
// fast decoder (kernels/cpu/packed_linear_cpu.h's FastKind): torch-free, raw
// device pointers, launched on the stream the caller passes. Compiles with
// plain nvcc; the ATen wrapper (csrc/ops/cuda_packed_linear.cpp) is built
// only where torch has CUDA.
//
// Numerics: W takes exactly the contract's decoded values (NaN canonical,
// 0x7FC00000); every product x*w is rounded to binary32 and added with a
// binary32 add (__fmul_rn/__fadd_rn: never fused). The reduction order per
// output element is fixed by k alone: the columns are cut into U units of
// 32 (the last may hold 16) and the units into 32 slices, slice l holding
// units floor(U*l/32) .. floor(U*(l+1)/32) - 1 (some empty when U < 32);
// each slice sum adds, from +0.0, its products in ascending column order;
// the 32 slice sums are combined by the adjacent-pairs tree
// ((s0+s1)+(s2+s3))+... (a warp's butterfly xor 1, 2, 4, 8, 16); the bias is
// added
// last. The result does not depend on the batch size, the grid or the GPU.
// (It is not the CPU law, grit/linear_law.h: CPU and CUDA agree within the
// float32 summation bound, not bit for bit.)
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace grit {
namespace cuda {

enum class Kind : int { kNibble = 1, kNibbleAffine = 2, kInt8Sparse24 = 3 };
enum class DType : int { kFloat32 = 0, kBFloat16 = 1, kFloat16 = 2 };
// How a kNibble grade's per-tensor level-1 scale is stored in plane 2.
enum class TensorScale : int { kNone = 0, kBinary32 = 1, kBinary16 = 2 };

// Passed by value to the kernels (kernel parameter space).
struct Plan {
  const uint8_t* planes[4];
  int64_t n, k;
  Kind kind;
  int k0;                 // 16 or 32
  uint32_t k1;            // kNibbleAffine: groups per level-1 pair (0: one pair)
  TensorScale tensor_scale;
  bool s0_e8m0;           // s0 is 2^(c-127) (arithmetic instead of the table)
  float elem[16];         // 4-bit element code -> value
  float s0[256];          // scale0 code -> value (the grade's decode of the code alone)
  float zp[256];          // zero-point code -> z (+1 under zpc=minus1)
};

// y[m, n] = x[m, k] W^T (+ bias[n]); x, bias and y of the given dtypes,
// contiguous. `flag` is a zeroed device int the kernels set when the planes
// need the exact fallback (an I8S24 quad naming one position twice); a
// one-block kernel then recomputes everything, on the same stream, in
// ascending k. `scratch` holds n + 1 int64 (used only by that fallback).
cudaError_t packed_linear(const Plan& p, const void* x, DType x_type, int64_t m, const void* bias,
                          DType bias_type, void* y, DType y_type, int* flag, int64_t* scratch,
                          cudaStream_t stream);

// out[n, k] = W as float32, the contract's values bit for bit.
cudaError_t dequantize(const Plan& p, float* out, int* flag, int64_t* scratch, cudaStream_t stream);

}  // namespace cuda
}  // namespace grit
