// The bf16 activation law's reduction (grit/bf16_linear.h, step 2) on
// AVX512_BF16's vdpbf16ps, for CPUs without AMX: the same layouts A and B
// as the tile kernel (bf16_amx.h) and the same bits. Internal to
// bf16_amx.cpp's bf16_gemm, which picks the route.
//
// A vdpbf16ps lane adds two products to its float32 sum one after the
// other, the high half's first, each an exact product rounded once, with
// subnormal inputs read as zero and subnormal results flushed (Intel's
// statement of the instruction; checked on the running CPU). The law keeps
// two chains per chunk, the even positions' and the odd ones', so the
// kernel pairs positions two apart: (t, t + 2) for E and (t + 1, t + 3)
// for O, t = 0, 4, ..., 28, with t in the high half. Each instruction then
// takes two steps of one chain in the law's order; E + O and acc + (E + O)
// close the chunk as the law does, under MXCSR's flush-to-zero.
#pragma once

#include <cstdint>

namespace grit {
namespace cpu {

// AVX512_BF16 and AVX512BW, and vdpbf16ps found to follow the order above
// on this CPU (random operands over six data sets, every output against
// grit::bf16::chunk: normal, wide exponents, subnormal inputs, sums near
// 2^-126, infinities, zero accumulators). Checked once per process.
bool bf16_dp_ready();

// bf16_gemm's contract (bf16_amx.h) on vdpbf16ps; only where bf16_dp_ready().
void bf16_gemm_dp(const uint16_t* A, int64_t a_chunks, int64_t c0, int64_t nc, int64_t mp, const uint16_t* B,
                  int64_t b_chunks, int64_t npairs, float* C, int64_t ldc, bool accumulate);

}  // namespace cpu
}  // namespace grit
