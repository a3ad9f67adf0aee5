// CUDA packed_linear, grad_input and dequantize for INT4G (see
// int4g_linear_cuda.h for the numerics, the reduction orders and the
// checks). packed_linear up to batch 8: one warp per output row, lane l
// takes the 8-column units of slice l of its row, up to 8 batch rows in
// registers; above: 64 x 64 tiles staged in shared memory, the same
// operations in the same order.
#include <cfloat>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/int4g_linear_cuda.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/reduce_order.cuh"

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
  const int64_t units = (k + 7) / 8, u_end = slice_begin(units, lane + 1);
  for (int64_t u = slice_begin(units, lane); u < u_end; ++u) {
    const int64_t c0 = 8 * u, c1 = k - c0 < 8 ? k : c0 + 8;
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
    for (int off = 1; off < 32; off <<= 1) acc[i] = __fadd_rn(acc[i], __shfl_xor_sync(0xFFFFFFFFu, acc[i], off));
  }
  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < MB; ++i)
      if (i0 + i < m) y[(i0 + i) * p.n + r] = from_f<XT>(canon(bias ? __fadd_rn(acc[i], bias[r]) : acc[i]));
  }
}

// W[r, c] = q * s in binary64, flags OR-ed into *bad.
__device__ __forceinline__ double weight_at(const Int4gPlan& p, int64_t per_row, int64_t r, int64_t c, int* bad) {
  const double s = p.scales[r * per_row + c / p.group];
  *bad |= scale_flag(s);
  return __dmul_rn(static_cast<double>(code_at(p.codes, r * p.k + c, bad)), s);
}

// GEMM (batch > 8): 64 x 64 output tiles, each thread 4 x 4 (batch rows
// ty + 16a, weight rows tx + 16b); per step up to 4 units (32 columns, never
// past a slice's end) of activations and binary64 weights staged in shared
// memory. A thread carries each output's slice sum and the pending values of
// the adjacent-pairs tree, so it performs the GEMV's operations in its order.
constexpr int kTile = 64;
constexpr int kGemmThreads = 256;

template <class XT>
__global__ void __launch_bounds__(kGemmThreads) gemm_kernel(Int4gPlan p, const XT* x, int64_t m,
                                                            const float* bias, XT* y, int* flag) {
  __shared__ float xs[kTile][33];
  __shared__ double ws[kTile][33];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kTile, i0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int64_t k = p.k, units = (k + 7) / 8, per_row = (k + p.group - 1) / p.group;
  int bad = blockIdx.x == 0 && blockIdx.y == 0 && tid == 0 ? padding_flag(p) : 0;
  float acc[4][4], pending[5][4][4];
  for (int l = 0; l < 32; ++l) {
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int b = 0; b < 4; ++b) acc[a][b] = 0.0f;
    const int64_t u_end = slice_begin(units, l + 1);
    for (int64_t u = slice_begin(units, l); u < u_end; u += 4) {
      const int64_t c0 = 8 * u, c1 = min(min(k, c0 + 32), 8 * u_end);
      const int nc = static_cast<int>(c1 - c0);
      for (int e = tid; e < kTile * 32; e += kGemmThreads) {
        const int row = e / 32, col = e % 32;
        const int64_t gi = i0 + row, gr = r0 + row;
        xs[row][col] = (gi < m && col < nc) ? to_f(x[gi * k + c0 + col]) : 0.0f;
        ws[row][col] = (gr < p.n && col < nc) ? weight_at(p, per_row, gr, c0 + col, &bad) : 0.0;
      }
      __syncthreads();
      for (int c = 0; c < nc; ++c) {
        double xv[4], wv[4];
#pragma unroll
        for (int a = 0; a < 4; ++a) xv[a] = static_cast<double>(xs[ty + 16 * a][c]);
#pragma unroll
        for (int b = 0; b < 4; ++b) wv[b] = ws[tx + 16 * b][c];
#pragma unroll
        for (int a = 0; a < 4; ++a)
#pragma unroll
          for (int b = 0; b < 4; ++b) acc[a][b] = __fadd_rn(acc[a][b], __double2float_rn(__dmul_rn(xv[a], wv[b])));
      }
      __syncthreads();
    }
    fold_slice(l, acc, pending);  // leaf l of the tree
  }
  if (bad) atomicOr(flag, bad);
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    const int64_t gi = i0 + ty + 16 * a;
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const int64_t gr = r0 + tx + 16 * b;
      if (gi < m && gr < p.n) y[gi * p.n + gr] = from_f<XT>(canon(bias ? __fadd_rn(acc[a][b], bias[gr]) : acc[a][b]));
    }
  }
}

// grad_x = grad_y W: a warp owns 32 columns and up to MB batch rows; lane l
// walks rows l, l+32, ... in ascending order (products in binary64, rounded
// once), the 32 lane sums meet in the butterfly xor 16, 8, 4, 2, 1.
template <int MB, class GT>
__global__ void __launch_bounds__(32 * kWarps) grad_input_kernel(Int4gPlan p, const GT* gy, int64_t m, float* gx,
                                                                 int* flag) {
  const int lane = threadIdx.x & 31;
  const int64_t c0 = 32 * (static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5));
  const int64_t i0 = static_cast<int64_t>(blockIdx.y) * MB;
  if (c0 >= p.k) return;
  const int64_t k = p.k, per_row = (k + p.group - 1) / p.group;
  const int nc = k - c0 < 32 ? static_cast<int>(k - c0) : 32;
  float acc[MB][32];
#pragma unroll
  for (int i = 0; i < MB; ++i)
#pragma unroll
    for (int e = 0; e < 32; ++e) acc[i][e] = 0.0f;
  int bad = c0 == 0 && lane == 0 && blockIdx.y == 0 ? padding_flag(p) : 0;
  for (int64_t r = lane; r < p.n; r += 32) {
    double w[32];
#pragma unroll
    for (int e = 0; e < 32; ++e) w[e] = e < nc ? weight_at(p, per_row, r, c0 + e, &bad) : 0.0;
#pragma unroll
    for (int i = 0; i < MB; ++i) {
      if (i0 + i < m) {
        const double g = static_cast<double>(to_f(gy[(i0 + i) * p.n + r]));
#pragma unroll
        for (int e = 0; e < 32; ++e) acc[i][e] = __fadd_rn(acc[i][e], __double2float_rn(__dmul_rn(g, w[e])));
      }
    }
  }
  if (bad) atomicOr(flag, bad);
  butterfly_store<MB>(acc, lane, nc, i0, m, k, c0, gx);
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
  return over_batch(m, MB, [&](int64_t i, int64_t rows) {
    const dim3 grid(static_cast<unsigned>((p.n + kWarps - 1) / kWarps), static_cast<unsigned>((rows + MB - 1) / MB));
    GRIT_LAUNCH(grid, 32 * kWarps, 0, s, linear_kernel<MB, XT>)(p, x + i * p.k, rows, bias, y + i * p.n, flag);
  });
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
  return over_batch(m, kTile, [&](int64_t i, int64_t rows) {
    const dim3 grid(static_cast<unsigned>((p.n + kTile - 1) / kTile), static_cast<unsigned>((rows + kTile - 1) / kTile));
    GRIT_LAUNCH(grid, kGemmThreads, 0, s, gemm_kernel<XT>)(p, xp + i * p.k, rows, bias, yp + i * p.n, flag);
  });
}

template <int MB, class GT>
cudaError_t launch_grad(const Int4gPlan& p, const GT* gy, int64_t m, float* gx, int* flag, cudaStream_t s) {
  const int64_t col_units = (p.k + 31) / 32;
  return over_batch(m, MB, [&](int64_t i, int64_t rows) {
    const dim3 grid(static_cast<unsigned>((col_units + kWarps - 1) / kWarps), static_cast<unsigned>((rows + MB - 1) / MB));
    GRIT_LAUNCH(grid, 32 * kWarps, 0, s, grad_input_kernel<MB, GT>)(p, gy + i * p.n, rows, gx + i * p.k, flag);
  });
}

template <class GT>
cudaError_t grad_by_batch(const Int4gPlan& p, const void* gy, int64_t m, float* gx, int* flag, cudaStream_t s) {
  const GT* g = static_cast<const GT*>(gy);
  if (m <= 1) return launch_grad<1>(p, g, m, gx, flag, s);
  if (m <= 2) return launch_grad<2>(p, g, m, gx, flag, s);
  return launch_grad<4>(p, g, m, gx, flag, s);
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

cudaError_t int4g_grad_input(const Int4gPlan& p, const void* gy, DType gy_type, int64_t m, float* gx, int* flag,
                             cudaStream_t stream) {
  if (m <= 0 || p.k <= 0) return cudaSuccess;
  switch (gy_type) {
    case DType::kFloat32: return grad_by_batch<float>(p, gy, m, gx, flag, stream);
    case DType::kBFloat16: return grad_by_batch<__nv_bfloat16>(p, gy, m, gx, flag, stream);
    case DType::kFloat16: return grad_by_batch<__half>(p, gy, m, gx, flag, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t int4g_dequantize(const Int4gPlan& p, double* out, int* flag, cudaStream_t stream) {
  const int64_t total = p.n * p.k;
  if (total <= 0) return cudaSuccess;
  GRIT_LAUNCH(static_cast<unsigned>((total + 255) / 256), 256, 0, stream, dequantize_kernel)(p, out, flag);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace grit
