// The scalar accumulation of INT4G (binary64 decoded weights, y and grad_x)
// and of the reference kernel's grad_x (binary32 decoded weights). Each
// product x * w is taken in W's precision and rounded to binary32, then
// added to a +0.0 binary32 accumulator in one fixed order: ascending k for
// y, ascending n for grad_x; a bias is added last. A NaN y is the canonical
// 0x7FC00000 (which NaN an operation passes on is the hardware's choice of
// operand order, not the law's), as in grit/linear_law.h.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "grit/format.h"

namespace grit {
namespace cpu {

// A tile of nr <= R decoded rows ([nr, k], row-major) transposed to [k, R],
// zero past row nr: the inner loop then runs over R independent
// accumulators (it vectorises) while each still adds in ascending k.
template <int64_t R, class W>
void transpose_tile(const W* rows, int64_t nr, int64_t k, W* wt) {
  for (int64_t j = 0; j < R; ++j)
    for (int64_t kk = 0; kk < k; ++kk) wt[kk * R + j] = j < nr ? rows[j * k + kk] : W(0);
}

// y[i, r0 + j] for batch rows i < m and tile rows j < nr, from the
// transposed tile wt. x is [m, k], y is [m, n]; bias may be null.
template <int64_t R, class W>
void accumulate_tile(const W* wt, int64_t k, const float* x, int64_t m, const float* bias, int64_t n,
                     int64_t r0, int64_t nr, float* y) {
  for (int64_t i = 0; i < m; ++i) {
    const float* xi = x + i * k;
    float acc[R];
    for (int64_t j = 0; j < R; ++j) acc[j] = 0.0f;
    for (int64_t kk = 0; kk < k; ++kk) {
      const W xv = static_cast<W>(xi[kk]);
      const W* wk = wt + kk * R;
      for (int64_t j = 0; j < R; ++j) {
        const float p = static_cast<float>(xv * wk[j]);
        acc[j] = acc[j] + p;
      }
    }
    float* yi = y + i * n + r0;
    for (int64_t j = 0; j < nr; ++j) {
      const float v = bias != nullptr ? acc[j] + bias[r0 + j] : acc[j];
      yi[j] = std::isnan(v) ? canonical_nan() : v;
    }
  }
}

// grad_x[i, c] += grad_y[i, j] * W[j, c] for j in [row_begin, row_end)
// ascending, batch rows i in [m_begin, m_end), columns c in [col_begin,
// col_end); w_rows holds those rows (all k columns).
//
// float W (packed_linear_grad_input): each step is one fused multiply-add,
// acc = fma(grad_y[i, j], W[j, c], acc), rounded once to binary32. double W
// (INT4G's law): the product is formed in binary64, rounded to binary32,
// then added.
template <class W>
void accumulate_grad_input(const float* grad_y, const W* w_rows, int64_t n, int64_t k,
                           int64_t row_begin, int64_t row_end, int64_t m_begin, int64_t m_end,
                           int64_t col_begin, int64_t col_end, float* grad_x) {
  for (int64_t i = m_begin; i < m_end; ++i) {
    float* gx = grad_x + i * k;
    const float* gy = grad_y + i * n;
    for (int64_t j = row_begin; j < row_end; ++j) {
      const W g = static_cast<W>(gy[j]);
      const W* wr = w_rows + (j - row_begin) * k;
      for (int64_t kk = col_begin; kk < col_end; ++kk) {
        if constexpr (std::is_same_v<W, float>) {
          gx[kk] = std::fma(g, wr[kk], gx[kk]);
        } else {
          const float p = static_cast<float>(g * wr[kk]);
          gx[kk] = gx[kk] + p;
        }
      }
    }
  }
}

}  // namespace cpu
}  // namespace grit
