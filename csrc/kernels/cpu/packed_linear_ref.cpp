#include "kernels/cpu/packed_linear_ref.h"

#include <vector>

namespace grit {
namespace cpu {

Status decode_rows(const PackedWeight& w, int64_t row_begin, int64_t row_end, uint64_t* cursor,
                   float* out) {
  const uint64_t numel = static_cast<uint64_t>(w.n) * static_cast<uint64_t>(w.k);
  const uint64_t begin = static_cast<uint64_t>(row_begin) * static_cast<uint64_t>(w.k);
  const uint64_t end = static_cast<uint64_t>(row_end) * static_cast<uint64_t>(w.k);
  return decode_range(*w.grade, w.planes, numel, begin, end, cursor, out);
}

Status linear_tiles(const PackedWeight& w, const float* x, int64_t m, const float* bias,
                    int64_t tile_begin, int64_t tile_end, float* y) {
  constexpr int64_t R = kLinearTileRows;
  const int64_t k = w.k;
  std::vector<float> rows(static_cast<size_t>(R * k));
  // The tile transposed to [k, R] (zero-padded past the last row), so the
  // inner loop runs over R independent accumulators: it vectorises while
  // each accumulator still adds its products in ascending k.
  std::vector<float> wt(static_cast<size_t>(k * R), 0.0f);
  uint64_t cursor = sparse_cursor(*w.grade, w.planes, static_cast<uint64_t>(tile_begin * R * k));
  for (int64_t t = tile_begin; t < tile_end; ++t) {
    const int64_t r0 = t * R;
    const int64_t nr = (w.n - r0) < R ? (w.n - r0) : R;
    const Status s = decode_rows(w, r0, r0 + nr, &cursor, rows.data());
    if (!s.ok()) return s;
    for (int64_t j = 0; j < nr; ++j)
      for (int64_t kk = 0; kk < k; ++kk) wt[kk * R + j] = rows[j * k + kk];
    for (int64_t j = nr; j < R; ++j)
      for (int64_t kk = 0; kk < k; ++kk) wt[kk * R + j] = 0.0f;

    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x + i * k;
      float acc[R];
      for (int64_t j = 0; j < R; ++j) acc[j] = 0.0f;
      for (int64_t kk = 0; kk < k; ++kk) {
        const float xv = xi[kk];
        const float* wk = wt.data() + kk * R;
        for (int64_t j = 0; j < R; ++j) {
          const float p = xv * wk[j];
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
  return Status::Ok();
}

void grad_input_accumulate(const PackedWeight& w, const float* grad_y, const float* w_rows,
                           int64_t row_begin, int64_t row_end, int64_t m_begin, int64_t m_end,
                           float* grad_x) {
  const int64_t k = w.k;
  for (int64_t i = m_begin; i < m_end; ++i) {
    float* gx = grad_x + i * k;
    const float* gy = grad_y + i * w.n;
    for (int64_t j = row_begin; j < row_end; ++j) {
      const float g = gy[j];
      const float* wr = w_rows + (j - row_begin) * k;
      for (int64_t kk = 0; kk < k; ++kk) {
        const float p = g * wr[kk];
        gx[kk] = gx[kk] + p;
      }
    }
  }
}

}  // namespace cpu
}  // namespace grit
