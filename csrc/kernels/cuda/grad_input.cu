// CUDA packed_linear_grad_input (see grad_input_cuda.h for the numerics and
// the order). Block: kWarps warps, each a 32-column unit of W; grid.y tiles
// the batch by MB rows. Lane l walks rows l, l+32, ... of its unit, decodes
// 32 weights per row (16 bytes) and keeps MB x 32 sums in registers.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/decode_unit.cuh"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/grad_input_cuda.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/reduce_order.cuh"

namespace grit {
namespace cuda {
namespace {

constexpr int kWarps = 4;

template <Kind K, int MB, class GT>
__global__ void __launch_bounds__(32 * kWarps) grad_input_kernel(Plan p, const GT* gy, int64_t m, float* gx,
                                                                 int* flag) {
  __shared__ Tables t;
  load_tables(p, &t);
  const int lane = threadIdx.x & 31;
  const int64_t units = (p.k + 31) / 32;
  const int64_t u = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  const int64_t i0 = static_cast<int64_t>(blockIdx.y) * MB;
  if (u >= units) return;
  const float s1 = K == Kind::kNibble ? tensor_scale(p) : 1.0f;
  float acc[MB][32];
#pragma unroll
  for (int i = 0; i < MB; ++i)
#pragma unroll
    for (int e = 0; e < 32; ++e) acc[i][e] = 0.0f;
  bool irregular = false;
  for (int64_t r = lane; r < p.n; r += 32) {
    float w[32];
#pragma unroll
    for (int e = 0; e < 32; ++e) w[e] = 0.0f;
    decode_unit<K>(p, t, s1, r, u, w, &irregular);
#pragma unroll
    for (int i = 0; i < MB; ++i) {
      if (i0 + i < m) {
        const float g = to_f(gy[(i0 + i) * p.n + r]);
#pragma unroll
        for (int e = 0; e < 32; ++e) acc[i][e] = __fadd_rn(acc[i][e], __fmul_rn(g, w[e]));
      }
    }
  }
  if (irregular) atomicOr(flag, 1);
  const int nc = (p.k - 32 * u) < 32 ? static_cast<int>(p.k - 32 * u) : 32;
  butterfly_store<MB>(acc, lane, nc, i0, m, p.k, 32 * u, gx);
}

template <Kind K, int MB, class GT>
cudaError_t launch(const Plan& p, const GT* gy, int64_t m, float* gx, int* flag, cudaStream_t s) {
  const int64_t units = (p.k + 31) / 32;
  return over_batch(m, MB, [&](int64_t i, int64_t rows) {
    const dim3 grid(static_cast<unsigned>((units + kWarps - 1) / kWarps), static_cast<unsigned>((rows + MB - 1) / MB));
    GRIT_LAUNCH(grid, 32 * kWarps, 0, s, grad_input_kernel<K, MB, GT>)(p, gy + i * p.n, rows, gx + i * p.k, flag);
  });
}

template <Kind K, class GT>
cudaError_t by_batch(const Plan& p, const GT* gy, int64_t m, float* gx, int* flag, cudaStream_t s) {
  if (m <= 1) return launch<K, 1>(p, gy, m, gx, flag, s);
  if (m <= 2) return launch<K, 2>(p, gy, m, gx, flag, s);
  return launch<K, 4>(p, gy, m, gx, flag, s);
}

template <class GT>
cudaError_t by_kind(const Plan& p, const void* gy, int64_t m, float* gx, int* flag, cudaStream_t s) {
  const GT* g = static_cast<const GT*>(gy);
  switch (p.kind) {
    case Kind::kNibble: return by_batch<Kind::kNibble>(p, g, m, gx, flag, s);
    case Kind::kNibbleAffine: return by_batch<Kind::kNibbleAffine>(p, g, m, gx, flag, s);
    case Kind::kInt8Sparse24: return by_batch<Kind::kInt8Sparse24>(p, g, m, gx, flag, s);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t packed_linear_grad_input(const Plan& p, const void* gy, DType gy_type, int64_t m, float* gx,
                                     int* flag, cudaStream_t stream) {
  if (m <= 0 || p.k <= 0) return cudaSuccess;
  if (p.n <= 0) return cudaMemsetAsync(gx, 0, sizeof(float) * m * p.k, stream);
  switch (gy_type) {
    case DType::kFloat32: return by_kind<float>(p, gy, m, gx, flag, stream);
    case DType::kBFloat16: return by_kind<__nv_bfloat16>(p, gy, m, gx, flag, stream);
    case DType::kFloat16: return by_kind<__half>(p, gy, m, gx, flag, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace cuda
}  // namespace grit
