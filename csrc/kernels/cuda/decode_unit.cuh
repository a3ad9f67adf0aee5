// The device decode of one 32-column unit of a packed row (the contract's
// values, NaN canonical), shared by the packed_linear, dequantize and
// grad_input kernels. The grade's code tables sit in shared memory.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/packed_linear_cuda.h"

namespace grit {
namespace cuda {

struct Tables {
  float elem[16];
  float s0[256];
  float zp[256];
};

__device__ __forceinline__ float e8m0(uint32_t c) {
  if (c == 0) return __int_as_float(0x00400000);  // 2^-127
  if (c == 255) return __int_as_float(0x7FC00000);
  return __int_as_float(static_cast<int>(c << 23));
}

__device__ __forceinline__ void load_tables(const Plan& p, Tables* t) {
  for (int i = threadIdx.x; i < 16; i += blockDim.x) t->elem[i] = p.elem[i];
  for (int i = threadIdx.x; i < 256; i += blockDim.x) {
    t->s0[i] = p.s0[i];
    t->zp[i] = p.zp[i];
  }
  __syncthreads();
}

// The per-tensor level-1 scale of a kNibble grade (1 when there is none).
__device__ __forceinline__ float tensor_scale(const Plan& p) {
  if (p.tensor_scale == TensorScale::kBinary32) {
    const uint8_t* b = p.planes[2];
    return __int_as_float(static_cast<int>(b[0] | (b[1] << 8) | (b[2] << 16) |
                                           (static_cast<uint32_t>(b[3]) << 24)));
  }
  if (p.tensor_scale == TensorScale::kBinary16)
    return __half2float(__ushort_as_half(static_cast<unsigned short>(p.planes[2][0] | (p.planes[2][1] << 8))));
  return 1.0f;
}

__device__ __forceinline__ float nibble_scale(const Plan& p, const Tables& t, uint32_t code, float s1) {
  const float s0 = p.s0_e8m0 ? e8m0(code) : t.s0[code];
  return p.tensor_scale == TensorScale::kNone ? s0 : __fmul_rn(s1, s0);  // outermost first
}

// Unit u (columns 32u .. 32u+31, or 16 at the end of a k0 = 16 row) of row
// r: the contract's values into w; returns the column count.
template <Kind K>
__device__ __forceinline__ int decode_unit(const Plan& p, const Tables& t, float s1, int64_t r,
                                           int64_t u, float w[32], bool* irregular) {
  const int64_t k = p.k;
  const int64_t c0 = 32 * u;
  const int nc = (k - c0) < 32 ? static_cast<int>(k - c0) : 32;
  if (K == Kind::kNibble) {
    // Row starts are 8-byte aligned (k is a multiple of 16): two 8-byte loads.
    const uint2* d = reinterpret_cast<const uint2*>(p.planes[0] + r * (k / 2) + c0 / 2);
    uint32_t words[4];
    const uint2 a = d[0];
    words[0] = a.x;
    words[1] = a.y;
    if (nc == 32) {
      const uint2 b = d[1];
      words[2] = b.x;
      words[3] = b.y;
    }
    float sa, sb;
    if (p.k0 == 32) {
      sa = sb = nibble_scale(p, t, p.planes[1][r * (k / 32) + u], s1);
    } else {
      const uint8_t* sc = p.planes[1] + r * (k / 16) + 2 * u;
      sa = nibble_scale(p, t, sc[0], s1);
      sb = nc == 32 ? nibble_scale(p, t, sc[1], s1) : sa;
    }
#pragma unroll
    for (int e = 0; e < 32; ++e) {
      if (e < nc) w[e] = canon(__fmul_rn(e < 16 ? sa : sb, t.elem[(words[e >> 3] >> (4 * (e & 7))) & 15]));
    }
  } else if (K == Kind::kNibbleAffine) {
    const int64_t g0 = r * (k / 32) + u;
    const uint4 d = *reinterpret_cast<const uint4*>(p.planes[0] + 16 * g0);
    const uint32_t words[4] = {d.x, d.y, d.z, d.w};
    const int64_t g1 = p.k1 ? g0 / p.k1 : 0;
    const uint32_t pair = *reinterpret_cast<const uint32_t*>(p.planes[2] + 4 * g1);
    const float dd = __half2float(__ushort_as_half(static_cast<unsigned short>(pair & 0xFFFF)));
    const float dmin = __half2float(__ushort_as_half(static_cast<unsigned short>(pair >> 16)));
    const float s = __fmul_rn(dd, t.s0[p.planes[1][g0]]);
    const float z = __fmul_rn(dmin, t.zp[p.planes[3][g0]]);
#pragma unroll
    for (int e = 0; e < 32; ++e)
      w[e] = canon(__fsub_rn(__fmul_rn(s, t.elem[(words[e >> 3] >> (4 * (e & 7))) & 15]), z));
  } else {
    // 2:4 int8: quads of 4 columns, two stored codes, two 2-bit positions.
    const int64_t g0 = r * (k / 32) + u;
    const uint4 d = *reinterpret_cast<const uint4*>(p.planes[0] + 16 * g0);
    const uint32_t words[4] = {d.x, d.y, d.z, d.w};
    const uint32_t meta = *reinterpret_cast<const uint32_t*>(p.planes[3] + 4 * g0);
    const uint16_t hs = *reinterpret_cast<const uint16_t*>(p.planes[1] + 2 * g0);
    const float s = __half2float(__ushort_as_half(hs));
#pragma unroll
    for (int q = 0; q < 8; ++q) {
      const uint32_t i0 = (meta >> (4 * q)) & 3, i1 = (meta >> (4 * q + 2)) & 3;
      if (i0 == i1) *irregular = true;
      const uint32_t lo = i0 < i1 ? i0 : i1, hi = i0 < i1 ? i1 : i0;
      const uint32_t two = words[q >> 1] >> (16 * (q & 1));
      const float a = canon(__fmul_rn(s, static_cast<float>(static_cast<int8_t>(two & 0xFF))));
      const float b = canon(__fmul_rn(s, static_cast<float>(static_cast<int8_t>((two >> 8) & 0xFF))));
#pragma unroll
      for (int j = 0; j < 4; ++j) w[4 * q + j] = j == static_cast<int>(lo) ? a : j == static_cast<int>(hi) ? b : 0.0f;
    }
  }
  return nc;
}

}  // namespace cuda
}  // namespace grit
