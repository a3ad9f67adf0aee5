#include "kernels/cpu/packed_linear_int4g.h"

#include <cstring>
#include <vector>

#include "grit/int4_groups.h"
#include "kernels/cpu/tile_accumulate.h"

namespace grit {
namespace cpu {

Status int4g_check(const Int4gWeight& w) {
  return int4g_validate(static_cast<uint64_t>(w.n), static_cast<uint64_t>(w.k), w.group, w.codes,
                        w.code_bytes, w.scales, w.n_scales);
}

Status int4g_check_layout(const Int4gWeight& w) {
  return int4g_validate_layout(static_cast<uint64_t>(w.n), static_cast<uint64_t>(w.k), w.group,
                               w.codes, w.code_bytes, w.n_scales);
}

void int4g_rows(const Int4gWeight& w, int64_t row_begin, int64_t row_end, double* out) {
  int4g_decode_rows(static_cast<uint64_t>(w.n), static_cast<uint64_t>(w.k), w.group, w.codes,
                    w.scales, static_cast<uint64_t>(row_begin), static_cast<uint64_t>(row_end), out);
}

void int4g_align_rows(const Int4gWeight& w, int64_t row_begin, int64_t row_end, uint8_t* out) {
  const int64_t k = w.k, stride = int4g_row_stride(k);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* in = w.codes + (r * k) / 2;
    uint8_t* o = out + (r - row_begin) * stride;
    if ((r * k) % 2 == 0) {  // starts on a byte: copy, clear what follows the row's last code
      std::memcpy(o, in, static_cast<size_t>(stride));
      if (k % 2 != 0) o[stride - 1] &= 0x0F;
    } else {  // starts in a high nibble: shift by one code
      for (int64_t b = 0; b + 1 < stride; ++b) o[b] = static_cast<uint8_t>((in[b] >> 4) | ((in[b + 1] & 0x0F) << 4));
      o[stride - 1] = static_cast<uint8_t>(in[stride - 1] >> 4);  // (k is odd here)
    }
  }
}

void int4g_linear_tiles(const Int4gWeight& w, const float* x, int64_t m, const float* bias,
                        int64_t tile_begin, int64_t tile_end, float* y) {
  constexpr int64_t R = kInt4gTileRows;
  const int64_t k = w.k;
  std::vector<double> rows(static_cast<size_t>(R * k));
  std::vector<double> wt(static_cast<size_t>(k * R));
  for (int64_t t = tile_begin; t < tile_end; ++t) {
    const int64_t r0 = t * R;
    const int64_t nr = (w.n - r0) < R ? (w.n - r0) : R;
    int4g_rows(w, r0, r0 + nr, rows.data());
    transpose_tile<R>(rows.data(), nr, k, wt.data());
    accumulate_tile<R>(wt.data(), k, x, m, bias, w.n, r0, nr, y);
  }
}

void int4g_grad_input_accumulate(const Int4gWeight& w, const float* grad_y, const double* w_rows,
                                 int64_t row_begin, int64_t row_end, int64_t m_begin,
                                 int64_t m_end, int64_t col_begin, int64_t col_end, float* grad_x) {
  accumulate_grad_input(grad_y, w_rows, w.n, w.k, row_begin, row_end, m_begin, m_end, col_begin, col_end,
                        grad_x);
}

}  // namespace cpu
}  // namespace grit
