// Kernel launches go through GRIT_LAUNCH(grid, block, shared_bytes, stream,
// kernel)(args...): a plain <<<...>>> launch under nvcc, and a call into the
// CPU emulator of tests/cpp/cuda_emu (which runs every kernel of this folder
// on the host, thread by thread, in `make test`) when GRIT_CUDA_EMU is set.
#pragma once

#ifdef GRIT_CUDA_EMU
#define GRIT_LAUNCH(grid, block, shared_bytes, stream, ...) \
  ((void)(shared_bytes), (void)(stream), ::grit_emu::launch(grid, block, __VA_ARGS__))
#else
#define GRIT_LAUNCH(grid, block, shared_bytes, stream, ...) __VA_ARGS__<<<grid, block, shared_bytes, stream>>>
#endif
