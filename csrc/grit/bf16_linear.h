// The bf16 activation law: y = x W^T + b with x and the decoded W both
// rounded to bfloat16 and their products summed in the order of an AMX-BF16
// tile multiply (activations="bf16", the training mode). This header
// defines the bits; the CPU kernel (kernels/cpu/bf16_amx.h) is a fast copy,
// tested equal to it.
//
// 1. Operands. Every value v that enters a product (an activation, a
//    decoded weight, a gradient) is taken as bfloat16 by `from_float`:
//    zero of v's sign when |v| < 2^-126 (float32 subnormals and zeros), a
//    quiet NaN for a NaN, else v rounded to nearest even (an overflow gives
//    an infinity). A bfloat16 operand is read by `value`: a subnormal one
//    counts as zero of its sign. The weight is the contract's decode
//    (decode.h) rounded so; for e2m1 or small integer codes times a power of
//    two (MXFP4, the integer grades' codes) the rounding changes nothing
//    except out of bfloat16's exponent range.
//
// 2. Chunks. The reduction (in_features for y, out_features for grad_x)
//    runs in chunks of 32 positions from 0; positions past its end count as
//    products +0 * +0. Per output, from acc = +0.0:
//      E = p_0, O = p_1 (each rounded to float32 and flushed, see below);
//      E = fma(a_t, b_t, E) for even t = 2, 4, ..., 30 in order,
//      O = fma(a_t, b_t, O) for odd t = 3, 5, ..., 31 in order;
//      acc = acc + (E + O)
//    where every step is one rounding to nearest even of the exact result,
//    then flushed: a subnormal result becomes zero of its sign.
//
// 3. y = acc + bias (if any, float32, no flush), grad_x = acc; a NaN result
//    is the canonical 0x7FC00000; the op returns it in x's dtype (round to
//    nearest even for bfloat16).
//
// Why this law: it is the order a tdpbf16ps tile multiply follows on the
// Intel cores measured (benchmarks/probe_amx_bf16_order.cpp: two float32
// chains over the even and odd positions of its 32 columns, joined by one
// add, subnormal inputs read as zero and subnormal sums flushed), so a
// kernel can keep the whole reduction in AMX tiles, at torch's bfloat16
// GEMM speed. Each output is a pure function of its row of x and of W: the
// same bits for any batch composition, thread count or blocking. Because
// the order is measured rather than documented, the kernel checks it on the
// running CPU before its first use and otherwise runs a scalar copy of this
// law. The rounding of the weight to bfloat16 is an error the float modes do
// not have (up to 2^-9 of each weight for grades whose values bfloat16 does
// not hold, NVF4, Q4KS, I8S24); the float32 summation bound covers the rest.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "decode.h"
#include "format.h"
#include "grade.h"
#include "status.h"

namespace grit {
namespace bf16 {

// Positions per chunk: one AMX-BF16 tile multiply (16 pairs).
constexpr int64_t kChunk = 32;

inline int64_t chunks(int64_t len) { return (len + kChunk - 1) / kChunk; }

inline uint32_t bits_of(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
}

inline float float_of(uint32_t u) {
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}

// Step 1: the law's bfloat16 of a float32 value.
inline uint16_t from_float(float v) {
  const uint32_t u = bits_of(v);
  if ((u & 0x7F800000u) == 0) return static_cast<uint16_t>((u >> 16) & 0x8000u);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// Step 1: a bfloat16 operand's value (subnormals read as zero).
inline float value(uint16_t h) {
  if ((h & 0x7F80u) == 0) h &= 0x8000u;
  return float_of(static_cast<uint32_t>(h) << 16);
}

// Step 2's flush: a subnormal float32 becomes zero of its sign.
inline float flush(float v) {
  const uint32_t u = bits_of(v);
  return (u & 0x7F800000u) == 0 ? float_of(u & 0x80000000u) : v;
}

// Step 2 for one chunk: acc + (E + O) over a[0..32) and b[0..32) (operand
// values as `value` gives them).
inline float chunk(float acc, const float* a, const float* b) {
  float E = flush(std::fma(a[0], b[0], -0.0f)), O = flush(std::fma(a[1], b[1], -0.0f));
  for (int t = 2; t < kChunk; t += 2) {
    E = flush(std::fma(a[t], b[t], E));
    O = flush(std::fma(a[t + 1], b[t + 1], O));
  }
  return flush(acc + flush(E + O));
}

// Step 3: y from acc (bias null or one value), NaN canonical.
inline float finish(float acc, const float* bias) {
  const float y = bias != nullptr ? acc + *bias : acc;
  return std::isnan(y) ? canonical_nan() : y;
}

// One output over a whole reduction of len positions: a[t] and b[t * b_stride]
// are bfloat16 operands (bits); the chunks of step 2 from acc = +0.0.
float dot(const uint16_t* a, const uint16_t* b, int64_t b_stride, int64_t len);

// W [n, k] as the law's bfloat16 operands (bits, row-major): the decode of
// the planes (checked here) through from_float.
Status decode_weight(const Grade& g, const Plane planes[4], int64_t n, int64_t k, uint16_t* out);

// Host references on operands already in bfloat16 (bits):
//   y [m, n] = x [m, k] W^T (+ bias [n], float32 or null), step 3 included;
//   grad_x [m, k] = grad_y [m, n] W, NaN canonical.
void linear(const uint16_t* x, int64_t m, const uint16_t* w, int64_t n, int64_t k, const float* bias, float* y);
void grad_input(const uint16_t* grad_y, int64_t m, const uint16_t* w, int64_t n, int64_t k, float* grad_x);

}  // namespace bf16
}  // namespace grit
