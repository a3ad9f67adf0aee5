// Reference CPU kernels of packed_linear for seed 001's int4 row groups
// ("INT4G<g>", csrc/grit/int4_groups.h). Torch-free (raw pointers, sizes)
// and single-threaded: the caller partitions the work into disjoint output
// elements, so no result depends on how it does. The SIMD variants
// (KernelTable::int4g_tiles, packed_linear_int4g_simd.inc) return these
// kernels' bits.
//
// W [n, k] takes exactly the binary64 values the core decodes (code times
// its group's binary64 scale); a tile of rows is decoded at a time, never W
// as a whole. Numerics, for every output element, in the order of the GRIT
// reference kernel (packed_linear_ref.h): each product is formed in binary64
// from the binary32 activation and the binary64 weight and rounded once to
// binary32; the products are added to a +0.0 binary32 accumulator in one
// fixed order (ascending k for y, ascending n for grad_x); a bias is added
// last, in binary32; a NaN result is the canonical 0x7FC00000. Compiled
// with -ffp-contract=off (no FMA).
#pragma once

#include <cstdint>

#include "grit/status.h"

namespace grit {
namespace cpu {

struct Int4gWeight {
  const uint8_t* codes = nullptr;  // ceil(n*k/2) packed code bytes, row-major, low nibble first
  const double* scales = nullptr;  // n * ceil(k/group) binary64 scales
  uint64_t code_bytes = 0;
  uint64_t n_scales = 0;
  int64_t n = 0;                   // rows: out features
  int64_t k = 0;                   // columns: in features (any length; a short final group)
  uint64_t group = 0;
  // Odd k only, optional: the same codes with every row starting on a byte,
  // int4g_row_stride(k) bytes per row, a zero high nibble ending each row
  // (int4g_align_rows). The vector kernels need it to take an odd k; without
  // it they run the reference kernel.
  const uint8_t* row_codes = nullptr;
};

inline int64_t int4g_row_stride(int64_t k) { return (k + 1) / 2; }

// Rows [row_begin, row_end) of w's code stream into the row-aligned layout
// (out points at row row_begin's first byte there).
void int4g_align_rows(const Int4gWeight& w, int64_t row_begin, int64_t row_end, uint8_t* out);

// Rows of W decoded per forward tile.
constexpr int64_t kInt4gTileRows = 16;

inline int64_t int4g_tile_count(int64_t n) { return (n + kInt4gTileRows - 1) / kInt4gTileRows; }

// The core reader's validation of the planes (every refusal class).
Status int4g_check(const Int4gWeight& w);
// Its checks that need no pass over the planes (layout, lengths, padding):
// enough for a kernel that checks codes and scales as it reads them
// (KernelTable::int4g_tiles).
Status int4g_check_layout(const Int4gWeight& w);

// Rows [row_begin, row_end) of W, binary64, row-major into out. w must have
// passed int4g_check.
void int4g_rows(const Int4gWeight& w, int64_t row_begin, int64_t row_end, double* out);

// y[i, j] = sum_k x[i, k] * W[j, k] (+ bias[j]) for batch rows i < m and
// the rows j of W in tiles [tile_begin, tile_end). x is [m, k], y is
// [m, n], float32 row-major; bias may be null. w must have passed int4g_check.
void int4g_linear_tiles(const Int4gWeight& w, const float* x, int64_t m, const float* bias,
                        int64_t tile_begin, int64_t tile_end, float* y);

// grad_x[i, :] += grad_y[i, j] * W[j, :] for j in [row_begin, row_end) in
// ascending order, for batch rows i in [m_begin, m_end) and columns
// [col_begin, col_end) of grad_x. grad_y is [m, n], grad_x is [m, k];
// w_rows holds the decoded rows [row_begin, row_end).
void int4g_grad_input_accumulate(const Int4gWeight& w, const float* grad_y, const double* w_rows,
                                 int64_t row_begin, int64_t row_end, int64_t m_begin,
                                 int64_t m_end, int64_t col_begin, int64_t col_end, float* grad_x);

}  // namespace cpu
}  // namespace grit
