// The CPU kernel of the bf16 activation law (grit/bf16_linear.h): operands
// packed to bfloat16 in AMX's tile layouts, the reduction in tdpbf16ps tile
// multiplies. Torch-free; the op (ops/cpu_bf16_linear.cpp) decodes the
// weight a block of rows at a time, packs it, and splits the work between
// threads by output columns.
//
// Layouts (bfloat16 bits, 64-byte aligned, zero where no value falls):
//   A, the activations (or grad_y): rows in blocks of 16, chunk by chunk,
//      A[(b * a_chunks + c) * 512 + r * 32 + t] = row 16b + r, position 32c + t;
//   B, the weight: 32 outputs (a column pair) per run of chunks,
//      B[((pair * nc + c) * 2 + h) * 512 + p * 32 + j * 2 + q]
//        = reduction position 32c + 2p + q, output 32 pair + 16h + j.
// A tile multiply of A's chunk c (16 rows) and B's half h of chunk c is
// step 2 of the law for 16 x 16 outputs, when the CPU follows the order the
// law states. bf16_amx_ready() checks that on this CPU, once, against
// grit::bf16::chunk; where it does not hold (or there is no AMX-BF16) the
// same layouts go through vdpbf16ps (bf16_dpbf16.h, checked the same way)
// or, without AVX512_BF16, a scalar copy of the law.
#pragma once

#include <cstdint>

namespace grit {
namespace cpu {

constexpr int64_t kBf16Tile = 512;  // bfloat16 values per tile of A or B

// AMX-BF16, AMX-TILE and AVX512_BF16, Linux's grant of the tile state, and
// the law's order checked on this CPU.
bool bf16_amx_ready();
// Tests: 0 runs the scalar copy; 1 (or -1, the default) the tile multiplies
// where bf16_amx_ready(), else vdpbf16ps where bf16_dp_ready()
// (bf16_dpbf16.h); 2 vdpbf16ps even where AMX is ready. Returns the
// previous setting.
int set_bf16_amx(int mode);
// Calls of bf16_gemm that ran on tiles, and on vdpbf16ps, for the tests
// that must show it.
uint64_t bf16_amx_calls();
uint64_t bf16_dp_calls();

// Rows src + i * ld (i < m, len positions each, float32 through the law's
// from_float) into layout A with mp rows (a multiple of 16) and
// chunks(len) chunks.
void bf16_pack_rows(const float* src, int64_t ld, int64_t m, int64_t len, int64_t mp, uint16_t* A);
// The same for rows already in bfloat16 (bits copied as they are; the law
// reads a subnormal as zero wherever it is multiplied).
void bf16_pack_rows_bits(const uint16_t* src, int64_t ld, int64_t m, int64_t len, int64_t mp, uint16_t* A);

// The forward's B for one column pair: rows w + r * ld of W (float32, r <
// rows <= 32, k positions each) through from_float; chunks(k) chunks.
void bf16_pack_weight_rows(const float* w, int64_t ld, int rows, int64_t k, uint16_t* B);

// The same from two 16-row tiles decoded column by column
// (KernelTable::decode_columns: tile h's column c, 16 rows, at
// cols + h * 16 * k + c * 16); `tiles` (1 or 2) of them are there, the
// other half of B is zero.
void bf16_pack_weight_columns(const float* cols, int tiles, int64_t k, uint16_t* B);

// grad_input's B for one block of block_chunks chunks of W's rows: the
// `rows` (<= 16) rows w + r * ld (k columns each) are reduction positions
// first + r of the block (first a multiple of 16); every column pair of the
// k columns (chunks(k) of them) gets its part.
void bf16_pack_weight_cols(const float* w, int64_t ld, int rows, int64_t k, int64_t first, int64_t block_chunks,
                           uint16_t* B);

// The same from one 16-row tile decoded column by column (tile column c at
// cols + c * 16; lanes from `rows` on are taken as zero).
void bf16_pack_weight_cols_from_columns(const float* cols, int rows, int64_t k, int64_t first, int64_t block_chunks,
                                        uint16_t* B);

// Step 3 of the law over one row of sums and the store of its outputs:
// out[j] = acc[j] (+ bias[j]), a NaN result canonical, as float32 or
// (to_bf16) rounded to bfloat16 to nearest even as torch rounds (the
// canonical NaN 0x7FC0; subnormals kept).
void bf16_finish_row(const float* acc, const float* bias, int64_t len, void* out, bool to_bf16);

// C[i, 32 pair + j] for rows i < mp (a multiple of 32), pairs [0, npairs):
// chunks [c0, c0 + nc) of A (a_chunks chunks per 16-row block) against nc
// chunks of each pair of B, pair p's t-th at B + (p * b_chunks + t) * 2 *
// 512 (B points at the first chunk to read; b_chunks >= nc is the pairs'
// stride), continuing from C when `accumulate`, else from +0.0. C is
// float32 with leading dimension ldc.
void bf16_gemm(const uint16_t* A, int64_t a_chunks, int64_t c0, int64_t nc, int64_t mp, const uint16_t* B,
               int64_t b_chunks, int64_t npairs, float* C, int64_t ldc, bool accumulate);

}  // namespace cpu
}  // namespace grit
