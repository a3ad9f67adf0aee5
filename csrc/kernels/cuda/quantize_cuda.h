// CUDA kernel of grit::quantize for the reference encoders' families
// (MXFP4, Q4KS, NVF4, I8S24 and their esr/er siblings): torch-free, raw
// device pointers, launched on the stream the caller passes.
//
// Numerics: each thread encodes one block with the functions of
// kernels/common/block_encode.h, the same code the CPU op runs and the C++
// tests hold equal to the core's encoder byte for byte (this file builds
// with -fmad=false, and the block functions use only correctly rounded
// binary32/binary64 operations). NVF4 first reduces the largest finite
// magnitude over the whole tensor (a max: order-free), then encodes.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/common/block_encode.h"

namespace grit {
namespace cuda {

// P: v and the four planes are device pointers, the planes sized by
// blockenc::plane_bytes. amax_bits: one device uint32 (NVF4's reduction;
// zeroed here). refused: a zeroed device int set to 1 where a block refuses
// (a Q4KS step beyond binary32): the caller then runs the core's encoder
// for its message; the planes are garbage.
cudaError_t quantize(const blockenc::Planes& P, uint32_t* amax_bits, int* refused, cudaStream_t stream);

}  // namespace cuda
}  // namespace grit
