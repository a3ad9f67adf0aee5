// CUDA packed_linear and dequantize for INT4G (see int4g_linear_cuda.h for
// the numerics, the reduction order and the checks). One warp per output
// row: lane l takes the 8-column units l, l+32, ... of its row (four code
// bytes per unit when the row starts on a byte), up to MB batch rows in
// registers; the batch is tiled by MB (1, 2, 4, 8, then 16).
#include <cfloat>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/int4g_linear_cuda.h"

namespace grit {
namespace cuda {
namespace {

constexpr int kWarps = 4;  // rows per block of the linear kernel

__device__ __forceinline__ int scale_flag(double s) { return s > 0.0 && 7.0 * s <= DBL_MAX ? 0 : kInt4gScale; }

// Nibble idx of the code stream, and its flag if it is the reserved 8.
__device__ __forceinline__ int code_at(const uint8_t* codes, int64_t idx, int* bad) {
  const int nib = (codes[idx >> 1] >> (4 * (idx & 1))) & 15;
  if (nib == 8) *bad |= kInt4gReserved;
  return (nib ^ 8) - 8;
}

__device__ __forceinline__ int padding_flag(const Int4gPlan& p) {
  return (p.n * p.k) % 2 == 1 && (p.codes[p.code_bytes - 1] & 0xF0) != 0 ? kInt4gPadding : 0;
}

template <int MB, class XT>
__global__ void __launch_bounds__(32 * kWarps) linear_kernel(Int4gPlan p, const XT* x, int64_t m,
                                                             const float* bias, XT* y, int* flag) {
  const int lane = threadIdx.x & 31;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  const int64_t i0 = static_cast<int64_t>(blockIdx.y) * MB;
  if (r >= p.n) return;
  const int64_t k = p.k, g = p.group, per_row = (k + g - 1) / g;
  const double* srow = p.scales + r * per_row;
  float acc[MB];
#pragma unroll
  for (int i = 0; i < MB; ++i) acc[i] = 0.0f;
  int bad = r == 0 && lane == 0 && blockIdx.y == 0 ? padding_flag(p) : 0;
  for (int64_t c0 = 8 * static_cast<int64_t>(lane); c0 < k; c0 += 256) {
    const int64_t c1 = k - c0 < 8 ? k : c0 + 8;
    int64_t gi = c0 / g, next = (gi + 1) * g;
    double s = srow[gi];
    bad |= scale_flag(s);
    for (int64_t c = c0; c < c1; ++c) {
      if (c == next) {
        s = srow[++gi];
        bad |= scale_flag(s);
        next += g;
      }
      const double w = __dmul_rn(static_cast<double>(code_at(p.codes, r * k + c, &bad)), s);
#pragma unroll
      for (int i = 0; i < MB; ++i) {
        if (i0 + i < m) {
          const double xv = static_cast<double>(to_f(x[(i0 + i) * k + c]));
          acc[i] = __fadd_rn(acc[i], __double2float_rn(__dmul_rn(xv, w)));
        }
      }
    }
  }
  if (bad) atomicOr(flag, bad);
#pragma unroll
  for (int i = 0; i < MB; ++i) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc[i] = __fadd_rn(acc[i], __shfl_xor_sync(0xFFFFFFFFu, acc[i], off));
  }
  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < MB; ++i)
      if (i0 + i < m) y[(i0 + i) * p.n + r] = from_f<XT>(canon(bias ? __fadd_rn(acc[i], bias[r]) : acc[i]));
  }
}

__global__ void dequantize_kernel(Int4gPlan p, double* out, int* flag) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= p.n * p.k) return;
  const int64_t r = idx / p.k, c = idx % p.k, per_row = (p.k + p.group - 1) / p.group;
  const double s = p.scales[r * per_row + c / p.group];
  int bad = scale_flag(s) | (idx == 0 ? padding_flag(p) : 0);
  out[idx] = __dmul_rn(static_cast<double>(code_at(p.codes, idx, &bad)), s);
  if (bad) atomicOr(flag, bad);
}

template <int MB, class XT>
cudaError_t launch(const Int4gPlan& p, const XT* x, int64_t m, const float* bias, XT* y, int* flag,
                   cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>((p.n + kWarps - 1) / kWarps), static_cast<unsigned>((m + MB - 1) / MB));
  linear_kernel<MB, XT><<<grid, 32 * kWarps, 0, s>>>(p, x, m, bias, y, flag);
  return cudaGetLastError();
}

template <class XT>
cudaError_t by_batch(const Int4gPlan& p, const void* x, int64_t m, const float* bias, void* y, int* flag,
                     cudaStream_t s) {
  const XT* xp = static_cast<const XT*>(x);
  XT* yp = static_cast<XT*>(y);
  if (m <= 1) return launch<1>(p, xp, m, bias, yp, flag, s);
  if (m <= 2) return launch<2>(p, xp, m, bias, yp, flag, s);
  if (m <= 4) return launch<4>(p, xp, m, bias, yp, flag, s);
  if (m <= 8) return launch<8>(p, xp, m, bias, yp, flag, s);
  return launch<16>(p, xp, m, bias, yp, flag, s);
}

}  // namespace

cudaError_t int4g_linear(const Int4gPlan& p, const void* x, DType x_type, int64_t m, const float* bias,
                         void* y, int* flag, cudaStream_t stream) {
  if (p.n <= 0 || m <= 0) return cudaSuccess;
  switch (x_type) {
    case DType::kFloat32: return by_batch<float>(p, x, m, bias, y, flag, stream);
    case DType::kBFloat16: return by_batch<__nv_bfloat16>(p, x, m, bias, y, flag, stream);
    case DType::kFloat16: return by_batch<__half>(p, x, m, bias, y, flag, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t int4g_dequantize(const Int4gPlan& p, double* out, int* flag, cudaStream_t stream) {
  const int64_t total = p.n * p.k;
  if (total <= 0) return cudaSuccess;
  dequantize_kernel<<<static_cast<unsigned>((total + 255) / 256), 256, 0, stream>>>(p, out, flag);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace grit
