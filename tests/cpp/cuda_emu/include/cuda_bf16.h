// Stand-in for cuda_bf16.h under the CPU emulator: bfloat16 as the high half
// of a binary32, rounded to nearest even (a NaN stays a NaN).
#pragma once

#include <cstdint>
#include <cstring>

#include "cuda_runtime.h"

struct __nv_bfloat16 {
  uint16_t bits;
};
inline float __bfloat162float(__nv_bfloat16 h) {
  const uint32_t b = static_cast<uint32_t>(h.bits) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
inline __nv_bfloat16 __float2bfloat16_rn(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return __nv_bfloat16{static_cast<uint16_t>((b >> 16) | 0x40)};
  b += 0x7FFFu + ((b >> 16) & 1u);
  return __nv_bfloat16{static_cast<uint16_t>(b >> 16)};
}
