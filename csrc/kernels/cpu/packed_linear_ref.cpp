#include "kernels/cpu/packed_linear_ref.h"

#include <vector>

#include "kernels/cpu/tile_accumulate.h"

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
  std::vector<float> wt(static_cast<size_t>(k * R));
  uint64_t cursor = sparse_cursor(*w.grade, w.planes, static_cast<uint64_t>(tile_begin * R * k));
  for (int64_t t = tile_begin; t < tile_end; ++t) {
    const int64_t r0 = t * R;
    const int64_t nr = (w.n - r0) < R ? (w.n - r0) : R;
    const Status s = decode_rows(w, r0, r0 + nr, &cursor, rows.data());
    if (!s.ok()) return s;
    transpose_tile<R>(rows.data(), nr, k, wt.data());
    accumulate_tile<R>(wt.data(), k, x, m, bias, w.n, r0, nr, y);
  }
  return Status::Ok();
}

void grad_input_accumulate(const PackedWeight& w, const float* grad_y, const float* w_rows,
                           int64_t row_begin, int64_t row_end, int64_t m_begin, int64_t m_end,
                           float* grad_x) {
  accumulate_grad_input(grad_y, w_rows, w.n, w.k, row_begin, row_end, m_begin, m_end, grad_x);
}

}  // namespace cpu
}  // namespace grit
