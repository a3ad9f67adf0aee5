// The CPU tile layout of a weight's code and scale0 planes, and
// packed_linear over it. Grades: every one with a fast decoder (FastKind):
// MXFP4, NVF4, Q4KS, I8S24 (every quad naming two distinct positions: then
// row r's codes start at r * k/2), ggml Q8_0's and the int8 groups,
// GPTQ/AWQ's u4 with zero points, the s4 groups, and their siblings.
//
// The SIMD kernels hold one row of W per 32-bit lane, so reading GRIT's
// row-major planes costs a 16x16 dword transpose per 128 columns of a tile:
// in the batch-1 pair loop that is as much work as the arithmetic. This
// layout stores the code plane (data) and the scale-code plane (scale0)
// already transposed, so a tile's dword is one vector load (the SIMD
// decoders' kTiled forms, selected by LinearPlan::tiled). It is a kernel
// layout, not a GRIT placement: the bytes are GRIT's, permuted and padded;
// untiling gives the planes back bit for bit, and only planes are exported.
//
// Plane with B bytes per row (data: k/2, or k for dense int8; scale0: k/k0
// codes, 2k/k0 or 4k/k0 for binary16 or binary32 scales) over n rows: rows
// are padded with zero bytes to Q*4 bytes, Q = 4*ceil(B/16) dwords, and
// padded to a whole number of 16-row tiles with zero rows. Dword q of row
// 16t + r sits at byte (t*Q + q)*64 + 4r. Size: ceil(n/16) * Q * 64.
#pragma once

#include <cstdint>

#include "kernels/cpu/packed_linear_cpu.h"

namespace grit {
namespace cpu {

// Dwords per padded row of a plane with `row_bytes` bytes per row.
inline int64_t tiled_row_dwords(int64_t row_bytes) { return 4 * ((row_bytes + 15) / 16); }
// Bytes of the tiled form of an n-row plane with `row_bytes` bytes per row.
inline int64_t tiled_plane_bytes(int64_t n, int64_t row_bytes) {
  return linear_tile_count(n) * tiled_row_dwords(row_bytes) * 64;
}

// row-major (n * row_bytes bytes) -> tiled (tiled_plane_bytes), padding zero.
void tile_plane(const uint8_t* rows, int64_t n, int64_t row_bytes, uint8_t* tiled);
// Rows [r0, r1) of a tiled plane, row-major into out ((r1 - r0) * row_bytes).
void untile_plane(const uint8_t* tiled, int64_t row_bytes, int64_t r0, int64_t r1, uint8_t* out);

// Whether the layout holds a grade (by its fast kind: any but kNone;
// I8S24 planes must also be regular: sparse_quads_regular).
bool tile_layout_kind(FastKind kind);
// Bytes per row of the data (plane 0) and scale0 (plane 1) planes of a
// grade the layout holds, for k columns (a multiple of k0).
int64_t tiled_data_row_bytes(const Grade& g, int64_t k);
int64_t tiled_scale_row_bytes(const Grade& g, int64_t k);
// Whether every 2:4 quad of an I8S24-style position plane (two 2-bit
// positions per quad, four bits a quad) names two distinct positions.
bool sparse_quads_regular(const uint8_t* meta, uint64_t bytes);

// A weight in the tile layout: data and scale0 tiled, scale1 (Q4KS's
// level-1 pairs, NVF4's per-tensor scale) and aux (Q4KS's zero points,
// I8S24's positions) as GRIT's planes.
struct TiledNibbles {
  const Grade* grade = nullptr;
  int64_t n = 0, k = 0;
  const uint8_t* data = nullptr;    // tiled_plane_bytes(n, tiled_data_row_bytes)
  const uint8_t* scale0 = nullptr;  // tiled_plane_bytes(n, tiled_scale_row_bytes)
  Plane scale1, aux;
};

// y[i, rows of tiles [tile_begin, tile_end)] for the m rows of x [m, k]
// (float32, row-major; y [m, n]; bias may be null): the bits of
// packed_linear on the untiled planes, with kernel table kt. A table with
// reads_tiles (every SIMD variant) decodes the tiles in place, any batch
// size; the scalar reference untiles 16-64 rows at a time into a scratch
// buffer and runs on those.
Status tiled_linear_tiles(const KernelTable& kt, const TiledNibbles& w, const float* x, int64_t m,
                          const float* bias, int64_t tile_begin, int64_t tile_end, float* y);

// The grade's tables for w (kind, elements, scale0 times the per-tensor
// level-1 scale read from scale1); planes 0 and 1 left empty.
void tiled_grade_plan(const TiledNibbles& w, LinearPlan* plan);

// The grade's plan for w; where kt reads tiles in place and the plan's
// kind has a tiled decoder, pointed at the tiles (plan->tiled) and true.
bool tiled_plan_in_place(const KernelTable& kt, const TiledNibbles& w, LinearPlan* plan);

// Rows of tiles [tile_begin, tile_end) of W, row-major into out (row
// tile_begin*16 first): the reference decode's bits. A table with
// reads_tiles decodes the tiles in place; the scalar reference untiles them
// into scratch planes first.
Status tiled_decode_tiles(const KernelTable& kt, const TiledNibbles& w, int64_t tile_begin, int64_t tile_end,
                          float* out);

// The same rows in KernelTable::decode_strips' layout, decoded in place by
// kt.decode_strips; *fallback set (out unusable) where kt has none or cannot
// read the tiles: the caller then takes tiled_decode_tiles.
Status tiled_decode_strips(const KernelTable& kt, const TiledNibbles& w, int64_t tile_begin, int64_t tile_end,
                           float* out, int64_t width, int64_t stride, bool* fallback);

}  // namespace cpu
}  // namespace grit
