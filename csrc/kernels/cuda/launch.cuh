// Kernel launches go through GRIT_LAUNCH(grid, block, shared_bytes, stream,
// kernel)(args...): a plain <<<...>>> launch under nvcc, and a call into the
// CPU emulator of tests/cpp/cuda_emu (which runs every kernel of this folder
// on the host, thread by thread, in `make test`) when GRIT_CUDA_EMU is set.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#ifdef GRIT_CUDA_EMU
#define GRIT_LAUNCH(grid, block, shared_bytes, stream, ...) \
  ((void)(shared_bytes), (void)(stream), ::grit_emu::launch(grid, block, __VA_ARGS__))
#else
#define GRIT_LAUNCH(grid, block, shared_bytes, stream, ...) __VA_ARGS__<<<grid, block, shared_bytes, stream>>>
#endif

// The most blocks a launch may have along y: CUDA's limit. The emulator's
// build sets it to 1, so that its small batches cross it as a training
// batch of 262,144 rows crosses 65535 blocks of 4 rows.
#ifndef GRIT_MAX_GRID_Y
#define GRIT_MAX_GRID_Y 65535
#endif

namespace grit {
namespace cuda {

// A batch of m rows whose blocks take `per_block` rows each along y, in
// launches of at most GRIT_MAX_GRID_Y such blocks: launch_rows(first, rows)
// launches rows [first, first + rows). Each output is one block's work in
// either case, so the bits do not depend on the cut. The first launch error
// ends it.
template <class F>
cudaError_t over_batch(int64_t m, int64_t per_block, F launch_rows) {
  const int64_t step = static_cast<int64_t>(GRIT_MAX_GRID_Y) * per_block;
  for (int64_t first = 0; first < m; first += step) {
    launch_rows(first, m - first < step ? m - first : step);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace cuda
}  // namespace grit
