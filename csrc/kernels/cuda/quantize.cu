// CUDA grit::quantize (see quantize_cuda.h): one thread per block, a
// grid-stride loop; NVF4's tensor amax by warp reduction and atomicMax on
// the binary32 bits (a non-negative float orders as its bits).
#include "kernels/cuda/quantize_cuda.h"
#include "kernels/cuda/launch.cuh"

namespace grit {
namespace cuda {
namespace {

constexpr int kThreads = 256;

__global__ void finite_amax_kernel(const float* v, uint64_t n, uint32_t* amax_bits) {
  uint32_t m = 0;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const float a = blockenc::magnitude(v[i]);
    if (blockenc::finite(a)) m = max(m, blockenc::bits_of(a));
  }
  for (int off = 16; off > 0; off >>= 1) m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, off));
  if ((threadIdx.x & 31) == 0 && m != 0) atomicMax(amax_bits, m);
}

__global__ void encode_kernel(blockenc::Planes P, const uint32_t* amax_bits, int* refused) {
  if (P.family == blockenc::kNvf4) {
    P.tensor_scale = blockenc::nvf4_tensor_scale(blockenc::float_of(*amax_bits));
    if (blockIdx.x == 0 && threadIdx.x == 0) blockenc::put_tensor_scale(P);
  }
  const uint64_t blocks = blockenc::block_count(P);
  for (uint64_t b = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; b < blocks;
       b += static_cast<uint64_t>(gridDim.x) * blockDim.x)
    if (!blockenc::encode_block(P, b)) *refused = 1;
}

unsigned grid_for(uint64_t items) {
  const uint64_t g = (items + kThreads - 1) / kThreads;
  return static_cast<unsigned>(g < 1 ? 1 : (g > 65535 ? 65535 : g));
}

}  // namespace

cudaError_t quantize(const blockenc::Planes& P, uint32_t* amax_bits, int* refused, cudaStream_t stream) {
  cudaError_t err = cudaMemsetAsync(amax_bits, 0, sizeof(uint32_t), stream);
  if (err != cudaSuccess) return err;
  err = cudaMemsetAsync(refused, 0, sizeof(int), stream);
  if (err != cudaSuccess) return err;
  if (P.family == blockenc::kNvf4 && P.n > 0) {
    GRIT_LAUNCH(grid_for(P.n), kThreads, 0, stream, finite_amax_kernel)(P.v, P.n, amax_bits);
    err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  GRIT_LAUNCH(grid_for(blockenc::block_count(P)), kThreads, 0, stream, encode_kernel)(P, amax_bits, refused);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace grit
