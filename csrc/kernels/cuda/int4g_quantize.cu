// CUDA INT4G quantize (see int4g_quantize_cuda.h).
#include "kernels/common/int4g_encode.h"
#include "kernels/cuda/int4g_quantize_cuda.h"
#include "kernels/cuda/launch.cuh"

namespace grit {
namespace cuda {
namespace {

constexpr int kThreads = 256;

__global__ void group_kernel(const double* v, int64_t rows, int64_t cols, int64_t group, int8_t* codes,
                             double* scales, int* refused) {
  const int64_t per_row = (cols + group - 1) / group;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < rows * per_row;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = idx / per_row, c0 = (idx % per_row) * group;
    const int64_t c1 = c0 + group < cols ? c0 + group : cols;
    const double* row = v + r * cols;
    double s;
    if (!int4genc::group_scale(row + c0, c1 - c0, &s)) {
      *refused = 1;
      continue;
    }
    scales[idx] = s;
    for (int64_t c = c0; c < c1; ++c) codes[r * cols + c] = static_cast<int8_t>(int4genc::code(row[c], s));
  }
}

__global__ void pack_kernel(const int8_t* codes, int64_t count, uint8_t* packed) {
  const int64_t bytes = (count + 1) / 2;
  for (int64_t b = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; b < bytes;
       b += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int lo = codes[2 * b], hi = 2 * b + 1 < count ? codes[2 * b + 1] : 0;
    packed[b] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
  }
}

unsigned grid_for(int64_t items) {
  const int64_t g = (items + kThreads - 1) / kThreads;
  return static_cast<unsigned>(g < 1 ? 1 : (g > 65535 ? 65535 : g));
}

}  // namespace

cudaError_t int4g_quantize(const double* v, int64_t rows, int64_t cols, int64_t group, int8_t* codes,
                           uint8_t* packed, double* scales, int* refused, cudaStream_t stream) {
  cudaError_t err = cudaMemsetAsync(refused, 0, sizeof(int), stream);
  if (err != cudaSuccess || rows * cols == 0) return err;
  const int64_t groups = rows * ((cols + group - 1) / group);
  GRIT_LAUNCH(grid_for(groups), kThreads, 0, stream, group_kernel)(v, rows, cols, group, codes, scales, refused);
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  GRIT_LAUNCH(grid_for((rows * cols + 1) / 2), kThreads, 0, stream, pack_kernel)(codes, rows * cols, packed);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace grit
