// The fixed summation orders the CUDA kernels share (their headers document
// them): the 32 slices of a row's units with the adjacent-pairs tree that
// packed_linear's GEMV and GEMM both follow, and the lane butterfly of the
// grad_input kernels.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_math.cuh"

namespace grit {
namespace cuda {

// The first unit of slice l (0..32) of a row of `units` units.
__device__ __forceinline__ int64_t slice_begin(int64_t units, int l) { return units * l / 32; }

// A GEMM thread's 4 x 4 outputs after slice l: each slice sum in acc is leaf
// l of the adjacent-pairs tree. It merges with the pending left operand of
// each level whose bit of l is set and parks at the first clear bit; after
// leaf 31 acc holds the whole tree: the GEMV's butterfly xor 1, 2, 4, 8, 16,
// the same additions of the same values.
__device__ __forceinline__ void fold_slice(int l, float acc[4][4], float pending[5][4][4]) {
#pragma unroll
  for (int a = 0; a < 4; ++a)
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      float v = acc[a][b];
      bool parked = false;
#pragma unroll
      for (int j = 0; j < 5; ++j) {
        if (!parked) {
          if ((l >> j) & 1) {
            v = __fadd_rn(pending[j][a][b], v);
          } else {
            pending[j][a][b] = v;
            parked = true;
          }
        }
      }
      acc[a][b] = v;
    }
}

// grad_input: every lane holds MB x 32 lane sums of the warp's 32 columns;
// the butterfly xor 16, 8, 4, 2, 1 gives every lane the same totals (a + b
// == b + a), and lane e stores column e (of nc) of each batch row i0 + i < m
// into gx[row * k + c0 + e], the canonical NaN for any NaN.
template <int MB>
__device__ __forceinline__ void butterfly_store(float acc[MB][32], int lane, int nc, int64_t i0, int64_t m,
                                                int64_t k, int64_t c0, float* gx) {
#pragma unroll
  for (int i = 0; i < MB; ++i) {
#pragma unroll
    for (int e = 0; e < 32; ++e) {
      float v = acc[i][e];
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xFFFFFFFFu, v, off));
      if (e == lane && e < nc && i0 + i < m) gx[(i0 + i) * k + c0 + e] = canon(v);
    }
  }
}

}  // namespace cuda
}  // namespace grit
