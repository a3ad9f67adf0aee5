// CUDA kernels of the exact integer mode (csrc/grit/exact_linear.h): they
// call the same GRIT_HD functions as the CPU op (pack_block, weight_row,
// exact_dot), compiled with -fmad=false, so CPU and CUDA give the same bits.
// Torch-free: raw device pointers, launched on the stream the caller passes.
// One thread per packed block, per weight row and per output element: the
// kernels are written for the equality, not tuned for speed.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "grit/exact_linear.h"

namespace grit {
namespace cuda {

// codes[m, k], scales[m, k / block] from finite float32 x[m, k].
cudaError_t exact_pack(const float* x, int64_t m, int64_t k, int64_t block, int8_t* codes, float* scales,
                       cudaStream_t stream);

// Stored codes per weight row (sparse grades; the caller scans them into
// row starts).
cudaError_t exact_row_counts(const exact::Law& law, const uint8_t* meta, int64_t n, int64_t k,
                             int64_t* counts, cudaStream_t stream);

// The weight [n, k] as integer codes and k / k0 block scales per row;
// `start` (sparse grades only, else null) holds each row's first data index.
cudaError_t exact_weight(const exact::Law& law, const uint8_t* data, const uint8_t* s0, const uint8_t* meta,
                         const int64_t* start, int64_t n, int64_t k, int16_t* codes, exact::WScale* scales,
                         cudaStream_t stream);

// y[m, n] by exact_dot; bias may be null.
cudaError_t exact_linear(const exact::Law& law, const int8_t* a, const float* as, int64_t m, const int16_t* w,
                         const exact::WScale* ws, int64_t n, int64_t k, const float* bias, float* y,
                         cudaStream_t stream);

}  // namespace cuda
}  // namespace grit
