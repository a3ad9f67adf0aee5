// Reference CPU kernels for packed_linear: the scalar truth that fast
// kernels are tested against. Torch-free (raw pointers and sizes) and
// single-threaded: the caller partitions the work, and no result depends
// on how it does.
//
// W is the [n, k] weight the planes decode to (row-major stream order,
// groups along k). Numerics: y follows the law of grit/linear_law.h on the
// core's factored decode (decode_factors_range); grad_x takes one fused
// multiply-add per product grad_y * w into a +0.0 accumulator, ascending n.
// W is never materialised: a tile of rows is decoded at a time.
#pragma once

#include <cstdint>

#include "grit/decode.h"

namespace grit {
namespace cpu {

struct PackedWeight {
  const Grade* grade = nullptr;
  Plane planes[4];
  int64_t n = 0;  // rows: out features
  int64_t k = 0;  // columns: in features (a multiple of k0, checked by the caller)
};

// Rows of W decoded per forward tile; y's columns are computed in tiles.
constexpr int64_t kLinearTileRows = 16;

inline int64_t linear_tile_count(int64_t n) { return (n + kLinearTileRows - 1) / kLinearTileRows; }

// Decode rows [row_begin, row_end) of W into out (row-major). `cursor` is
// the sparse data-plane cursor at row_begin (sparse_cursor, or carried from
// the previous call) and is advanced; dense grades ignore it.
Status decode_rows(const PackedWeight& w, int64_t row_begin, int64_t row_end, uint64_t* cursor,
                   float* out);

// y[i, j] = sum_k x[i, k] * W[j, k] (+ bias[j]) for every batch row i < m
// and the columns j of tiles [tile_begin, tile_end). x is [m, k] and y is
// [m, n], both row-major float32; bias may be null.
Status linear_tiles(const PackedWeight& w, const float* x, int64_t m, const float* bias,
                    int64_t tile_begin, int64_t tile_end, float* y);

// The law's acc continued (linear_law.h, law_dot_from): acc[i, j] becomes
// the chain over this weight's groups started from the acc[i, j] it holds,
// for the columns j of tiles [tile_begin, tile_end); no bias, no NaN
// canonicalisation (the caller finishes). acc is [m, n] float32.
Status linear_tiles_continue(const PackedWeight& w, const float* x, int64_t m, int64_t tile_begin,
                             int64_t tile_end, float* acc);

// grad_x[i, :] += grad_y[i, j] * W[j, :], one fused multiply-add each (the
// product never rounded alone), for j in [row_begin, row_end) in
// ascending order, for batch rows i in [m_begin, m_end) and columns
// [col_begin, col_end) of grad_x. grad_y is [m, n], grad_x is [m, k]; w_rows
// holds the decoded rows [row_begin, row_end).
void grad_input_accumulate(const PackedWeight& w, const float* grad_y, const float* w_rows,
                           int64_t row_begin, int64_t row_end, int64_t m_begin, int64_t m_end,
                           int64_t col_begin, int64_t col_end, float* grad_x);

}  // namespace cpu
}  // namespace grit
