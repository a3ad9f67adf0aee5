// CUDA kernels of the exact integer mode (see exact_linear_cuda.h): thin
// launchers around the GRIT_HD functions of csrc/grit/exact_linear.h.
#include "kernels/cuda/exact_linear_cuda.h"
#include "kernels/cuda/launch.cuh"

namespace grit {
namespace cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t count) { return static_cast<unsigned>((count + kThreads - 1) / kThreads); }

__global__ void pack_kernel(const float* x, int64_t m, int64_t k, int64_t block, int8_t* codes, float* scales) {
  const int64_t nb = k / block;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= m * nb) return;
  const int64_t i = r / nb, b = r % nb;
  scales[r] = exact::pack_block(x + i * k + b * block, block, codes + i * k + b * block);
}

__global__ void row_count_kernel(exact::Law law, const uint8_t* meta, int64_t n, int64_t k, int64_t* counts) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j < n) counts[j] = static_cast<int64_t>(exact::row_stored(law, meta, j, k));
}

__global__ void weight_kernel(exact::Law law, const uint8_t* data, const uint8_t* s0, const uint8_t* meta,
                              const int64_t* start, int64_t n, int64_t k, int16_t* codes,
                              exact::WScale* scales) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= n) return;
  const uint64_t cursor = start ? static_cast<uint64_t>(start[j]) : 0;
  exact::weight_row(law, data, s0, meta, j, k, cursor, codes + j * k, scales + j * (k / law.k0));
}

__global__ void linear_kernel(exact::Law law, const int8_t* a, const float* as, int64_t m, const int16_t* w,
                              const exact::WScale* ws, int64_t n, int64_t k, const float* bias, float* y) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= m * n) return;
  const int64_t i = r / n, j = r % n, nb = k / law.k0;
  y[r] = exact::exact_dot(law, a + i * k, as + i * nb, w + j * k, ws + j * nb, k, bias != nullptr,
                          bias ? bias[j] : 0.0f);
}

}  // namespace

cudaError_t exact_pack(const float* x, int64_t m, int64_t k, int64_t block, int8_t* codes, float* scales,
                       cudaStream_t stream) {
  const int64_t total = block > 0 ? m * (k / block) : 0;
  if (total <= 0) return cudaSuccess;
  GRIT_LAUNCH(blocks_for(total), kThreads, 0, stream, pack_kernel)(x, m, k, block, codes, scales);
  return cudaGetLastError();
}

cudaError_t exact_row_counts(const exact::Law& law, const uint8_t* meta, int64_t n, int64_t k,
                             int64_t* counts, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  GRIT_LAUNCH(blocks_for(n), kThreads, 0, stream, row_count_kernel)(law, meta, n, k, counts);
  return cudaGetLastError();
}

cudaError_t exact_weight(const exact::Law& law, const uint8_t* data, const uint8_t* s0, const uint8_t* meta,
                         const int64_t* start, int64_t n, int64_t k, int16_t* codes, exact::WScale* scales,
                         cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  GRIT_LAUNCH(blocks_for(n), kThreads, 0, stream, weight_kernel)(law, data, s0, meta, start, n, k, codes, scales);
  return cudaGetLastError();
}

cudaError_t exact_linear(const exact::Law& law, const int8_t* a, const float* as, int64_t m, const int16_t* w,
                         const exact::WScale* ws, int64_t n, int64_t k, const float* bias, float* y,
                         cudaStream_t stream) {
  if (m <= 0 || n <= 0) return cudaSuccess;
  GRIT_LAUNCH(blocks_for(m * n), kThreads, 0, stream, linear_kernel)(law, a, as, m, w, ws, n, k, bias, y);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace grit
