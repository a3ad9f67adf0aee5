// CUDA kernel of grit::quantize for seed 001's INT4G<g>: torch-free, raw
// device pointers, launched on the stream the caller passes. One thread per
// group computes its binary64 scale and codes with kernels/common/
// int4g_encode.h (the core's encoder, group by group; -fmad=false), one
// byte per thread then packs two codes (low nibble first, a zero padding
// nibble after an odd count).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace grit {
namespace cuda {

// v: rows*cols binary64 values; codes: rows*cols int8 scratch; packed:
// ceil(rows*cols/2) bytes; scales: rows*ceil(cols/group) binary64.
// refused: a zeroed device int set to 1 where a group refuses (a
// non-finite value): the caller then runs the core's encoder for its
// message; the planes are garbage.
cudaError_t int4g_quantize(const double* v, int64_t rows, int64_t cols, int64_t group, int8_t* codes,
                           uint8_t* packed, double* scales, int* refused, cudaStream_t stream);

}  // namespace cuda
}  // namespace grit
