// packed_linear for AVX2: INT4G at batches of many rows
// (int4g_batch_simd.inc). A file of its own so that a parallel build
// compiles it beside packed_linear_avx2.cpp, which calls it.
#include <algorithm>

#include "kernels/cpu/packed_linear_cpu.h"

#if defined(__x86_64__) || defined(__i386__)

#include "kernels/cpu/simd_avx2.inc"

// Blocking: batch rows side by side, and grad_x's 16-column vectors per row
// (their sums and W's binary64 rows in registers).
constexpr int kI4bRows = 2;
constexpr int kI4bGradVecs = 1;

#include "kernels/cpu/int4g_batch_simd.inc"
#include "kernels/cpu/simd_end.inc"

#endif
