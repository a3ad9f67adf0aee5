// The data sets behind the bf16 law's once-per-process checks of a CPU's
// instructions (bf16_amx.cpp for tdpbf16ps, bf16_dpbf16.cpp for
// vdpbf16ps): random bfloat16 operands and float32 sums of the kinds the
// law meets. Scalar code; torch-free.
#pragma once

#include <cstdint>

#include "grit/bf16_linear.h"

namespace grit {
namespace cpu {

// A xorshift64 stream of operands; each check holds its own.
struct Bf16CheckData {
  uint64_t state;

  uint64_t next() {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  }

  // A bfloat16 with exponent field in [lo, hi]; a quarter subnormal when
  // asked, one in 64 infinite when asked.
  uint16_t operand(int lo, int hi, bool subnormals, bool specials) {
    const uint64_t r = next();
    int e = lo + static_cast<int>(r % static_cast<uint64_t>(hi - lo + 1));
    if (subnormals && (r >> 40) % 4 == 0) e = 0;
    if (specials && (r >> 44) % 64 == 0) return static_cast<uint16_t>(((r >> 20) & 1) << 15 | 0x7F80);
    return static_cast<uint16_t>(((r >> 20) & 1) << 15 | e << 7 | ((r >> 8) & 0x7F));
  }

  // A float32 sum as the law leaves one: normal (any mantissa, exponent
  // field 120-135), or zero when asked.
  float sum(bool zero) {
    const uint32_t u = static_cast<uint32_t>(next());
    return zero ? 0.0f : bf16::flush(bf16::float_of((u & 0x807FFFFFu) | (120u + u % 16) << 23));
  }
};

}  // namespace cpu
}  // namespace grit
