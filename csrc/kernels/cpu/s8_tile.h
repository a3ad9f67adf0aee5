// The s8 activation law (grit/s8_linear.h) for 16 weight rows at once, on
// AVX-512 with VNNI: the same bits as grit::s8::dot for every output. The
// tile holds the rows' integer codes as int16 pairs with lane = row (the
// exact mode's layout, exact_tile.h: one vpdpwssd adds two columns of all
// 16 rows), and the group terms S, O, zi the same way (group g of row r at
// g * 16 + r). Per block: D_b in int32 lanes, the zero point's zi * A_b
// subtracted, one multiply and one FMA per row as the law orders them.
// Torch-free; tests/python/test_s8_linear.py holds it equal to the core.
#pragma once

#include <cstdint>
#include <vector>

#include "grit/decode.h"
#include "grit/s8_linear.h"

namespace grit {
namespace cpu {

constexpr int kS8TileRows = 16;

// One batch row of packed activations, taken apart once: codes as int16
// pairs (column pair p at dword p), block sums A_b, block scales.
struct S8Activation {
  std::vector<int32_t> pairs;  // k / 2 (k even)
  std::vector<int32_t> sums;   // k / kb
  const float* scales = nullptr;
};

struct S8Tile {
  int rows = 0;
  std::vector<int32_t> pairs;  // k / 2 * 16
  std::vector<float> S, O;     // G * 16 (rows past `rows`: 0)
  std::vector<int32_t> zi;     // G * 16
};

// Whether this CPU runs the tile path and law L allows it (even blocks, k even).
bool s8_tile_supported(const s8::Law& L, int64_t k);

void s8_activation(const s8::Law& L, const int8_t* codes, const float* scales, int64_t k, S8Activation* out);

// The tile of weight rows r0 .. r0 + rows - 1 (1..16) straight from the
// planes (cursor[r]: the data-plane index of row r0 + r's first stored code).
// Codes through the exact tile's fast readers where the layout allows,
// else the core's weight_row_terms; group terms from the scale planes with
// the decode's arithmetic (tables for 8-bit formats, binary16, binary32),
// else from weight_row_terms. Fails only where the core does.
Status s8_tile_from_planes(const Grade& g, const s8::Law& L, const Plane planes[4], uint64_t numel,
                           const uint64_t* cursor, int64_t r0, int rows, int64_t k, S8Tile* t);

// y[i * ldy + r] for up to 4 activation rows a[0..na) and r < t.rows;
// bias null or one value per tile row.
void s8_dot_tile(const s8::Law& L, const S8Activation* const* a, int na, const S8Tile& t, int64_t k,
                 const float* bias, float* y, int64_t ldy);

}  // namespace cpu
}  // namespace grit
