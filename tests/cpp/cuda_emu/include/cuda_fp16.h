// Stand-in for cuda_fp16.h under the CPU emulator: binary16 through GCC's
// _Float16 (round to nearest even, overflow to infinity, as the device).
#pragma once

#include <cstdint>
#include <cstring>

#include "cuda_runtime.h"

struct __half {
  uint16_t bits;
};
inline float __half2float(__half h) {
  _Float16 f;
  std::memcpy(&f, &h.bits, 2);
  return static_cast<float>(f);
}
inline __half __float2half_rn(float v) {
  const _Float16 f = static_cast<_Float16>(v);
  __half h;
  std::memcpy(&h.bits, &f, 2);
  return h;
}
inline __half __ushort_as_half(unsigned short b) { return __half{b}; }
