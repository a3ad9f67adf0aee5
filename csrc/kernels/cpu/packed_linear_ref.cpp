#include "kernels/cpu/packed_linear_ref.h"

#include <vector>

#include "grit/linear_law.h"
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

namespace {

// The reference's tile loop: start(i, row) is the first value of each acc,
// store(i, row, acc) takes the chain's result.
template <class Start, class Store>
Status law_tiles(const PackedWeight& w, const float* x, int64_t m, int64_t tile_begin, int64_t tile_end,
                 Start start, Store store) {
  constexpr int64_t R = kLinearTileRows;
  const Grade& g = *w.grade;
  const int64_t k = w.k, groups = k / g.k0;
  std::vector<float> e(static_cast<size_t>(R * k)), S(static_cast<size_t>(R * groups));
  const uint64_t numel = static_cast<uint64_t>(w.n) * static_cast<uint64_t>(k);
  uint64_t cursor = sparse_cursor(g, w.planes, static_cast<uint64_t>(tile_begin * R * k));
  for (int64_t t = tile_begin; t < tile_end; ++t) {
    const int64_t r0 = t * R;
    const int64_t nr = (w.n - r0) < R ? (w.n - r0) : R;
    const Status s = decode_factors_range(g, w.planes, numel, static_cast<uint64_t>(r0 * k),
                                          static_cast<uint64_t>((r0 + nr) * k), &cursor, e.data(),
                                          S.data());
    if (!s.ok()) return s;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < nr; ++j) {
        store(i, r0 + j, law_dot_from(start(i, r0 + j), e.data() + j * k, S.data() + j * groups, x + i * k, k,
                                      g.k0));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status linear_tiles(const PackedWeight& w, const float* x, int64_t m, const float* bias,
                    int64_t tile_begin, int64_t tile_end, float* y) {
  return law_tiles(
      w, x, m, tile_begin, tile_end, [](int64_t, int64_t) { return 0.0f; },
      [&](int64_t i, int64_t j, float acc) {
        y[i * w.n + j] = law_finish(acc, bias != nullptr ? bias + j : nullptr);
      });
}

Status linear_tiles_continue(const PackedWeight& w, const float* x, int64_t m, int64_t tile_begin,
                             int64_t tile_end, float* acc) {
  return law_tiles(
      w, x, m, tile_begin, tile_end, [&](int64_t i, int64_t j) { return acc[i * w.n + j]; },
      [&](int64_t i, int64_t j, float a) { acc[i * w.n + j] = a; });
}

void grad_input_accumulate(const PackedWeight& w, const float* grad_y, const float* w_rows,
                           int64_t row_begin, int64_t row_end, int64_t m_begin, int64_t m_end,
                           int64_t col_begin, int64_t col_end, float* grad_x) {
  accumulate_grad_input(grad_y, w_rows, w.n, w.k, row_begin, row_end, m_begin, m_end, col_begin, col_end,
                        grad_x);
}

}  // namespace cpu
}  // namespace grit
