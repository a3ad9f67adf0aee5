// Stand-in for the CUDA runtime header under the CPU emulator (../emu.h).
#pragma once

#include <cstddef>
#include <cstring>

#include "../emu.h"

typedef int cudaError_t;
constexpr cudaError_t cudaSuccess = 0;
constexpr cudaError_t cudaErrorInvalidValue = 1;
constexpr cudaError_t cudaErrorInvalidConfiguration = 9;
typedef struct CUstream_st* cudaStream_t;

inline cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t = nullptr) {
  std::memset(p, value, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaGetLastError() { return ::grit_emu::take_last_error(); }
inline const char* cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : (e == cudaErrorInvalidValue ? "invalid argument" : "invalid configuration");
}
