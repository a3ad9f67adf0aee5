// Device helpers shared by the CUDA kernels: the canonical NaN and the
// conversions between the activation dtypes and float (round to nearest
// even on the way back).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace grit {
namespace cuda {

__device__ __forceinline__ float canon(float v) { return v != v ? __int_as_float(0x7FC00000) : v; }

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }

template <class T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }

}  // namespace cuda
}  // namespace grit
