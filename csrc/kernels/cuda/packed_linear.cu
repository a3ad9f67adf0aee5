// CUDA packed_linear and dequantize (see packed_linear_cuda.h for the
// numerics and the reduction order). Batch 1 to 8 (GEMV): one warp per
// output row; lane l decodes the units of its slice of the row straight
// from the planes and multiplies them with up to 8 batch rows held in
// registers. Larger batches (GEMM): 64 x 64 output tiles, activations and
// decoded weights staged in shared memory a unit at a time, each thread 4 x
// 4 outputs carrying the same slice sums and the same tree. The code tables
// of the grade sit in shared memory.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/decode_unit.cuh"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/packed_linear_cuda.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/reduce_order.cuh"

namespace grit {
namespace cuda {
namespace {

constexpr int kWarps = 4;  // rows per block of the linear kernel

// 32 (or 16) activations of one batch row as float; p is 16-byte aligned
// (the wrapper passes contiguous x with k a multiple of 16).
template <class T>
__device__ __forceinline__ void load_x(const T* p, int nc, float xs[32]) {
  constexpr int kPer = 16 / sizeof(T);  // elements per 16-byte load
  const uint4* v = reinterpret_cast<const uint4*>(p);
#pragma unroll
  for (int j = 0; j < 32 / kPer; ++j) {
    if (j * kPer < nc) {
      const uint4 q = v[j];
      T e[kPer];
      memcpy(e, &q, 16);  // not a pointer cast: the elements are read as T, never through a uint4
#pragma unroll
      for (int i = 0; i < kPer; ++i) xs[j * kPer + i] = to_f(e[i]);
    }
  }
}


// GEMV: one warp per output row; lane l sums slice l for MB batch rows,
// then the butterfly xor 1, 2, 4, 8, 16 (the adjacent-pairs tree).
template <Kind K, int MB, class XT, class YT, class BT>
__global__ void __launch_bounds__(32 * kWarps) linear_kernel(Plan p, const XT* x, int64_t m,
                                                             const BT* bias, YT* y, int* flag) {
  __shared__ Tables t;
  load_tables(p, &t);
  const int lane = threadIdx.x & 31;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  const int64_t i0 = static_cast<int64_t>(blockIdx.y) * MB;
  if (r >= p.n) return;
  const int64_t k = p.k, units = (k + 31) / 32;
  const float s1 = K == Kind::kNibble ? tensor_scale(p) : 1.0f;
  float acc[MB];
#pragma unroll
  for (int i = 0; i < MB; ++i) acc[i] = 0.0f;
  bool irregular = false;
  const int64_t u_end = slice_begin(units, lane + 1);
  for (int64_t u = slice_begin(units, lane); u < u_end; ++u) {
    float w[32];
    const int nc = decode_unit<K>(p, t, s1, r, u, w, &irregular);
#pragma unroll
    for (int i = 0; i < MB; ++i) {
      if (i0 + i < m) {
        float xs[32] = {};  // a 16-column unit fills half
        load_x<XT>(x + (i0 + i) * k + 32 * u, nc, xs);
        if (nc == 32) {
#pragma unroll
          for (int e = 0; e < 32; ++e) acc[i] = __fadd_rn(acc[i], __fmul_rn(xs[e], w[e]));
        } else {
#pragma unroll
          for (int e = 0; e < 16; ++e) acc[i] = __fadd_rn(acc[i], __fmul_rn(xs[e], w[e]));
        }
      }
    }
  }
  if (irregular) atomicOr(flag, 1);
#pragma unroll
  for (int i = 0; i < MB; ++i) {
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) acc[i] = __fadd_rn(acc[i], __shfl_xor_sync(0xFFFFFFFFu, acc[i], off));
  }
  if (lane == 0) {
    const float b = bias ? to_f(bias[r]) : 0.0f;
#pragma unroll
    for (int i = 0; i < MB; ++i)
      if (i0 + i < m) y[(i0 + i) * p.n + r] = from_f<YT>(bias ? __fadd_rn(acc[i], b) : acc[i]);
  }
}

// GEMM: a block owns kTile batch rows x kTile weight rows, each thread 4 x 4
// of them (batch rows ty + 16a, weight rows tx + 16b). Per unit the block
// stages the activations (as float) and the decoded weights in shared
// memory, then every thread adds its products in ascending column order.
// A thread keeps, per output, the running sum of the current slice and the
// pending left operands of the adjacent-pairs tree (leaf l completes after
// slice l; it merges with one pending value per trailing one bit of l), so
// it performs exactly the GEMV's operations on exactly the same values.
constexpr int kTile = 64;
constexpr int kGemmThreads = 256;

template <Kind K, class XT, class YT, class BT>
__global__ void __launch_bounds__(kGemmThreads) gemm_kernel(Plan p, const XT* x, int64_t m, const BT* bias,
                                                            YT* y, int* flag) {
  __shared__ Tables t;
  __shared__ float xs[kTile][33];  // padded: a column read hits 32 banks
  __shared__ float ws[kTile][33];
  load_tables(p, &t);
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kTile, i0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int64_t k = p.k, units = (k + 31) / 32;
  const float s1 = K == Kind::kNibble ? tensor_scale(p) : 1.0f;
  float acc[4][4], pending[5][4][4];
  bool irregular = false;
  for (int l = 0; l < 32; ++l) {
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int b = 0; b < 4; ++b) acc[a][b] = 0.0f;
    const int64_t u_end = slice_begin(units, l + 1);
    for (int64_t u = slice_begin(units, l); u < u_end; ++u) {
      const int nc = (k - 32 * u) < 32 ? static_cast<int>(k - 32 * u) : 32;
      for (int e = tid; e < kTile * 32; e += kGemmThreads) {
        const int row = e / 32, col = e % 32;
        const int64_t gi = i0 + row;
        xs[row][col] = (gi < m && col < nc) ? to_f(x[gi * k + 32 * u + col]) : 0.0f;
      }
      if (tid < kTile) {
        float w[32];
#pragma unroll
        for (int e = 0; e < 32; ++e) w[e] = 0.0f;
        if (r0 + tid < p.n) decode_unit<K>(p, t, s1, r0 + tid, u, w, &irregular);
#pragma unroll
        for (int e = 0; e < 32; ++e) ws[tid][e] = w[e];
      }
      __syncthreads();
      for (int c = 0; c < nc; ++c) {
        float xv[4], wv[4];
#pragma unroll
        for (int a = 0; a < 4; ++a) xv[a] = xs[ty + 16 * a][c];
#pragma unroll
        for (int b = 0; b < 4; ++b) wv[b] = ws[tx + 16 * b][c];
#pragma unroll
        for (int a = 0; a < 4; ++a)
#pragma unroll
          for (int b = 0; b < 4; ++b) acc[a][b] = __fadd_rn(acc[a][b], __fmul_rn(xv[a], wv[b]));
      }
      __syncthreads();
    }
    fold_slice(l, acc, pending);  // leaf l of the tree
  }
  if (irregular) atomicOr(flag, 1);
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    const int64_t gi = i0 + ty + 16 * a;
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const int64_t gr = r0 + tx + 16 * b;
      if (gi < m && gr < p.n)
        y[gi * p.n + gr] = from_f<YT>(bias ? __fadd_rn(acc[a][b], to_f(bias[gr])) : acc[a][b]);
    }
  }
}

template <Kind K>
__global__ void dequantize_kernel(Plan p, float* out, int* flag) {
  __shared__ Tables t;
  load_tables(p, &t);
  const int64_t units = (p.k + 31) / 32;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= p.n * units) return;
  const int64_t r = idx / units, u = idx % units;
  const float s1 = K == Kind::kNibble ? tensor_scale(p) : 1.0f;
  float w[32];
  bool irregular = false;
  const int nc = decode_unit<K>(p, t, s1, r, u, w, &irregular);
  if (irregular) atomicOr(flag, 1);
  float* o = out + r * p.k + 32 * u;
  for (int e = 0; e < nc; ++e) o[e] = w[e];
}

// The exact path for I8S24 planes whose quads name one position twice (each
// such quad stores one code, so row starts move): one block, run only when
// `flag` is set. Row starts by a count and a scan; then every output in
// ascending k (or every weight, for dequantize).
template <class XT, class YT, class BT>
__global__ void sparse_fallback_kernel(Plan p, const XT* x, int64_t m, const BT* bias, YT* y,
                                       float* out, const int* flag, int64_t* start) {
  if (*flag == 0) return;
  const int64_t n = p.n, k = p.k, quads = k / 4;
  for (int64_t r = threadIdx.x; r < n; r += blockDim.x) {
    int64_t c = 0;
    for (int64_t q = 0; q < quads; ++q) {
      const uint32_t nib = (p.planes[3][(r * quads + q) / 2] >> (4 * ((r * quads + q) & 1))) & 15;
      c += (nib & 3) == (nib >> 2) ? 1 : 2;
    }
    start[r + 1] = c;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    start[0] = 0;
    for (int64_t r = 0; r < n; ++r) start[r + 1] += start[r];
  }
  __syncthreads();
  const int64_t rows = out ? n : n * m;
  for (int64_t idx = threadIdx.x; idx < rows; idx += blockDim.x) {
    const int64_t r = idx % n, i = idx / n;
    int64_t cursor = start[r];
    float acc = 0.0f;
    uint32_t keep = 0;
    for (int64_t c = 0; c < k; ++c) {
      const int64_t q = r * quads + c / 4;
      if (c % 4 == 0) {
        const uint32_t nib = (p.planes[3][q / 2] >> (4 * (q & 1))) & 15;
        keep = (1u << (nib & 3)) | (1u << (nib >> 2));
      }
      float v = 0.0f;
      if ((keep >> (c % 4)) & 1u) {
        const int8_t code = static_cast<int8_t>(p.planes[0][cursor++]);
        const int64_t g0 = (r * k + c) / 32;
        const uint16_t hs = static_cast<uint16_t>(p.planes[1][2 * g0] | (p.planes[1][2 * g0 + 1] << 8));
        v = canon(__fmul_rn(__half2float(__ushort_as_half(hs)), static_cast<float>(code)));
      }
      if (out)
        out[r * k + c] = v;
      else
        acc = __fadd_rn(acc, __fmul_rn(to_f(x[i * k + c]), v));
    }
    if (!out) y[i * n + r] = from_f<YT>(bias ? __fadd_rn(acc, to_f(bias[r])) : acc);
  }
}

template <Kind K, int MB, class XT, class YT, class BT>
cudaError_t launch_linear(const Plan& p, const XT* x, int64_t m, const BT* bias, YT* y, int* flag,
                          int64_t* scratch, cudaStream_t s) {
  const cudaError_t err = over_batch(m, MB, [&](int64_t i, int64_t rows) {
    const dim3 grid(static_cast<unsigned>((p.n + kWarps - 1) / kWarps), static_cast<unsigned>((rows + MB - 1) / MB));
    GRIT_LAUNCH(grid, 32 * kWarps, 0, s, linear_kernel<K, MB, XT, YT, BT>)(p, x + i * p.k, rows, bias, y + i * p.n,
                                                                          flag);
  });
  if (err != cudaSuccess) return err;
  if (K == Kind::kInt8Sparse24)
    GRIT_LAUNCH(1, 1024, 0, s, sparse_fallback_kernel<XT, YT, BT>)(p, x, m, bias, y, nullptr, flag, scratch);
  return cudaGetLastError();
}

template <Kind K, class XT, class YT, class BT>
cudaError_t launch_gemm(const Plan& p, const XT* x, int64_t m, const BT* bias, YT* y, int* flag,
                        int64_t* scratch, cudaStream_t s) {
  const cudaError_t err = over_batch(m, kTile, [&](int64_t i, int64_t rows) {
    const dim3 grid(static_cast<unsigned>((p.n + kTile - 1) / kTile), static_cast<unsigned>((rows + kTile - 1) / kTile));
    GRIT_LAUNCH(grid, kGemmThreads, 0, s, gemm_kernel<K, XT, YT, BT>)(p, x + i * p.k, rows, bias, y + i * p.n, flag);
  });
  if (err != cudaSuccess) return err;
  if (K == Kind::kInt8Sparse24)
    GRIT_LAUNCH(1, 1024, 0, s, sparse_fallback_kernel<XT, YT, BT>)(p, x, m, bias, y, nullptr, flag, scratch);
  return cudaGetLastError();
}

// Batch 1 to 8: the GEMV kernel, batch rows in registers; above: the tiled
// GEMM. Both give the same bits (the same operations in the same order).
template <Kind K, class XT, class YT, class BT>
cudaError_t by_batch(const Plan& p, const XT* x, int64_t m, const BT* bias, YT* y, int* flag,
                     int64_t* scratch, cudaStream_t s) {
  if (m <= 1) return launch_linear<K, 1>(p, x, m, bias, y, flag, scratch, s);
  if (m <= 2) return launch_linear<K, 2>(p, x, m, bias, y, flag, scratch, s);
  if (m <= 4) return launch_linear<K, 4>(p, x, m, bias, y, flag, scratch, s);
  if (m <= 8) return launch_linear<K, 8>(p, x, m, bias, y, flag, scratch, s);
  return launch_gemm<K>(p, x, m, bias, y, flag, scratch, s);
}

template <class XT, class YT, class BT>
cudaError_t by_kind(const Plan& p, const void* x, int64_t m, const void* bias, void* y, int* flag,
                    int64_t* scratch, cudaStream_t s) {
  const XT* xp = static_cast<const XT*>(x);
  const BT* bp = static_cast<const BT*>(bias);
  YT* yp = static_cast<YT*>(y);
  switch (p.kind) {
    case Kind::kNibble: return by_batch<Kind::kNibble>(p, xp, m, bp, yp, flag, scratch, s);
    case Kind::kNibbleAffine: return by_batch<Kind::kNibbleAffine>(p, xp, m, bp, yp, flag, scratch, s);
    case Kind::kInt8Sparse24: return by_batch<Kind::kInt8Sparse24>(p, xp, m, bp, yp, flag, scratch, s);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t packed_linear(const Plan& p, const void* x, DType x_type, int64_t m, const void* bias,
                          DType bias_type, void* y, DType y_type, int* flag, int64_t* scratch,
                          cudaStream_t stream) {
  if (p.n <= 0 || m <= 0) return cudaSuccess;
  // y and bias take x's dtype or float32 (the wrapper's only combinations).
  if (y_type != x_type) return cudaErrorInvalidValue;
  const bool b32 = bias_type == DType::kFloat32;
  if (!b32 && bias_type != x_type) return cudaErrorInvalidValue;
  switch (x_type) {
    case DType::kFloat32:
      return by_kind<float, float, float>(p, x, m, bias, y, flag, scratch, stream);
    case DType::kBFloat16:
      return b32 ? by_kind<__nv_bfloat16, __nv_bfloat16, float>(p, x, m, bias, y, flag, scratch, stream)
                 : by_kind<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16>(p, x, m, bias, y, flag, scratch, stream);
    case DType::kFloat16:
      return b32 ? by_kind<__half, __half, float>(p, x, m, bias, y, flag, scratch, stream)
                 : by_kind<__half, __half, __half>(p, x, m, bias, y, flag, scratch, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t dequantize(const Plan& p, float* out, int* flag, int64_t* scratch, cudaStream_t stream) {
  const int64_t units = (p.k + 31) / 32;
  const int64_t total = p.n * units;
  if (total <= 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>((total + 255) / 256);
  switch (p.kind) {
    case Kind::kNibble: GRIT_LAUNCH(blocks, 256, 0, stream, dequantize_kernel<Kind::kNibble>)(p, out, flag); break;
    case Kind::kNibbleAffine:
      GRIT_LAUNCH(blocks, 256, 0, stream, dequantize_kernel<Kind::kNibbleAffine>)(p, out, flag);
      break;
    case Kind::kInt8Sparse24:
      GRIT_LAUNCH(blocks, 256, 0, stream, dequantize_kernel<Kind::kInt8Sparse24>)(p, out, flag);
      GRIT_LAUNCH(1, 1024, 0, stream, sparse_fallback_kernel<float, float, float>)(p, nullptr, 0, nullptr, nullptr, out,
                                                                          flag, scratch);
      break;
  }
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace grit
