#include "kernels/cpu/packed_linear_int4g.h"

#include <vector>

#include "grit/int4_groups.h"

namespace grit {
namespace cpu {

Status int4g_check(const Int4gWeight& w) {
  return int4g_validate(static_cast<uint64_t>(w.n), static_cast<uint64_t>(w.k), w.group, w.codes,
                        w.code_bytes, w.scales, w.n_scales);
}

void int4g_rows(const Int4gWeight& w, int64_t row_begin, int64_t row_end, double* out) {
  int4g_decode_rows(static_cast<uint64_t>(w.n), static_cast<uint64_t>(w.k), w.group, w.codes,
                    w.scales, static_cast<uint64_t>(row_begin), static_cast<uint64_t>(row_end), out);
}

void int4g_linear_tiles(const Int4gWeight& w, const float* x, int64_t m, const float* bias,
                        int64_t tile_begin, int64_t tile_end, float* y) {
  constexpr int64_t R = kInt4gTileRows;
  const int64_t k = w.k;
  std::vector<double> rows(static_cast<size_t>(R * k));
  // The tile transposed to [k, R] (zero past the last row): the inner loop
  // runs over R independent accumulators, each adding its products in
  // ascending k.
  std::vector<double> wt(static_cast<size_t>(k * R), 0.0);
  for (int64_t t = tile_begin; t < tile_end; ++t) {
    const int64_t r0 = t * R;
    const int64_t nr = (w.n - r0) < R ? (w.n - r0) : R;
    int4g_rows(w, r0, r0 + nr, rows.data());
    for (int64_t j = 0; j < nr; ++j)
      for (int64_t kk = 0; kk < k; ++kk) wt[kk * R + j] = rows[j * k + kk];
    for (int64_t j = nr; j < R; ++j)
      for (int64_t kk = 0; kk < k; ++kk) wt[kk * R + j] = 0.0;

    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x + i * k;
      float acc[R];
      for (int64_t j = 0; j < R; ++j) acc[j] = 0.0f;
      for (int64_t kk = 0; kk < k; ++kk) {
        const double xv = static_cast<double>(xi[kk]);
        const double* wk = wt.data() + kk * R;
        for (int64_t j = 0; j < R; ++j) {
          const float p = static_cast<float>(xv * wk[j]);
          acc[j] = acc[j] + p;
        }
      }
      float* yi = y + i * w.n + r0;
      if (bias != nullptr) {
        for (int64_t j = 0; j < nr; ++j) yi[j] = acc[j] + bias[r0 + j];
      } else {
        for (int64_t j = 0; j < nr; ++j) yi[j] = acc[j];
      }
    }
  }
}

void int4g_grad_input_accumulate(const Int4gWeight& w, const float* grad_y, const double* w_rows,
                                 int64_t row_begin, int64_t row_end, int64_t m_begin,
                                 int64_t m_end, float* grad_x) {
  const int64_t k = w.k;
  for (int64_t i = m_begin; i < m_end; ++i) {
    float* gx = grad_x + i * k;
    const float* gy = grad_y + i * w.n;
    for (int64_t j = row_begin; j < row_end; ++j) {
      const double g = static_cast<double>(gy[j]);
      const double* wr = w_rows + (j - row_begin) * k;
      for (int64_t kk = 0; kk < k; ++kk) {
        const float p = static_cast<float>(g * wr[kk]);
        gx[kk] = gx[kk] + p;
      }
    }
  }
}

}  // namespace cpu
}  // namespace grit
