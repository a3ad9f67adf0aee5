// The CPU tile layout (nibble_tiles.h): tiling, untiling, packed_linear
// and decode over tiled planes.
#include "kernels/cpu/nibble_tiles.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace grit {
namespace cpu {

void tile_plane(const uint8_t* rows, int64_t n, int64_t row_bytes, uint8_t* tiled) {
  const int64_t q_row = tiled_row_dwords(row_bytes), tiles = linear_tile_count(n);
  std::memset(tiled, 0, static_cast<size_t>(tiled_plane_bytes(n, row_bytes)));
  for (int64_t t = 0; t < tiles; ++t) {
    uint8_t* tile = tiled + t * q_row * 64;
    for (int64_t r = 0; r < kLinearTileRows && t * kLinearTileRows + r < n; ++r) {
      const uint8_t* src = rows + (t * kLinearTileRows + r) * row_bytes;
      for (int64_t q = 0; q * 4 < row_bytes; ++q)
        std::memcpy(tile + q * 64 + r * 4, src + q * 4, static_cast<size_t>(std::min<int64_t>(4, row_bytes - q * 4)));
    }
  }
}

void untile_plane(const uint8_t* tiled, int64_t row_bytes, int64_t r0, int64_t r1, uint8_t* out) {
  const int64_t q_row = tiled_row_dwords(row_bytes);
  for (int64_t row = r0; row < r1; ++row) {
    const uint8_t* tile = tiled + (row / kLinearTileRows) * q_row * 64 + (row % kLinearTileRows) * 4;
    uint8_t* dst = out + (row - r0) * row_bytes;
    for (int64_t q = 0; q * 4 < row_bytes; ++q)
      std::memcpy(dst + q * 4, tile + q * 64, static_cast<size_t>(std::min<int64_t>(4, row_bytes - q * 4)));
  }
}

namespace {

// Rows [r0, r1) of a tiled weight untiled into scratch planes: `sub` is
// those rows as GRIT planes (scale1 and aux the whole weight's).
struct UntiledRows {
  std::vector<uint8_t> data, scale0;
  PackedWeight sub;
  UntiledRows(const TiledNibbles& w, int64_t r0, int64_t r1)
      : data(static_cast<size_t>((r1 - r0) * (w.k / 2))),
        scale0(static_cast<size_t>((r1 - r0) * (w.k / w.grade->k0))) {
    untile_plane(w.data, w.k / 2, r0, r1, data.data());
    untile_plane(w.scale0, w.k / w.grade->k0, r0, r1, scale0.data());
    sub.grade = w.grade;
    sub.n = r1 - r0;
    sub.k = w.k;
    sub.planes[0] = Plane{data.data(), data.size()};
    sub.planes[1] = Plane{scale0.data(), scale0.size()};
    sub.planes[2] = w.scale1;
    sub.planes[3] = w.aux;
  }
};

// Tiles [t0, t1) through scratch planes: untiled rows, the table's
// linear_tiles on them (the reference where it falls back), y scattered
// into its columns when m > 1.
Status untiled_tiles(const KernelTable& kt, const TiledNibbles& w, const LinearPlan& plan, const float* x,
                     int64_t m, const float* bias, int64_t t0, int64_t t1, float* y) {
  const int64_t r0 = t0 * kLinearTileRows, r1 = std::min(w.n, t1 * kLinearTileRows), rows = r1 - r0;
  const UntiledRows u(w, r0, r1);
  const PackedWeight& sub = u.sub;
  LinearPlan sp = plan;  // the grade's tables (and the level-1 scale) are the whole weight's
  sp.w = sub;
  std::vector<float> ys;
  float* out = y + r0;
  if (m > 1) {
    ys.resize(static_cast<size_t>(m * rows));
    out = ys.data();
  }
  const float* b = bias ? bias + r0 : nullptr;
  const int64_t tiles = linear_tile_count(rows);
  bool fallback = false;
  Status s = plan.kind == FastKind::kNone ? linear_tiles(sub, x, m, b, 0, tiles, out)
                                          : kt.linear_tiles(sp, x, m, b, 0, tiles, out, &fallback);
  if (s.ok() && fallback) s = linear_tiles(sub, x, m, b, 0, tiles, out);
  if (!s.ok()) return s;
  if (m > 1)
    for (int64_t i = 0; i < m; ++i)
      std::memcpy(y + i * w.n + r0, ys.data() + i * rows, static_cast<size_t>(rows) * sizeof(float));
  return Status::Ok();
}

// The grade's plan for w; where kt reads tiles in place and the grade is a
// kNibble one, pointed at the tiles (plan->tiled) and true.
bool plan_in_place(const KernelTable& kt, const TiledNibbles& w, LinearPlan* plan) {
  tiled_grade_plan(w, plan);
  if (!kt.reads_tiles || plan->kind != FastKind::kNibble) return false;
  plan->tiled = true;
  plan->w.planes[0] = Plane{w.data, static_cast<uint64_t>(tiled_plane_bytes(w.n, w.k / 2))};
  plan->w.planes[1] = Plane{w.scale0, static_cast<uint64_t>(tiled_plane_bytes(w.n, w.k / w.grade->k0))};
  return true;
}

}  // namespace

Status tiled_linear_tiles(const KernelTable& kt, const TiledNibbles& w, const float* x, int64_t m,
                          const float* bias, int64_t tile_begin, int64_t tile_end, float* y) {
  if (tile_begin >= tile_end) return Status::Ok();
  LinearPlan plan;
  if (plan_in_place(kt, w, &plan)) {
    bool fallback = false;
    const Status s = kt.linear_tiles(plan, x, m, bias, tile_begin, tile_end, y, &fallback);
    if (!s.ok() || !fallback) return s;
    // A kNibble plan never falls back today; if one did, the reference
    // kernel below recomputes every tile.
    plan.tiled = false;
    plan.w.planes[0] = plan.w.planes[1] = Plane{};
  }
  // A table that reads row-major planes only: runs of tiles, a few at a
  // time (a scratch buffer of 64 rows).
  constexpr int64_t kRun = 4;
  for (int64_t t = tile_begin; t < tile_end; t += kRun) {
    const Status s = untiled_tiles(kt, w, plan, x, m, bias, t, std::min(tile_end, t + kRun), y);
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

void tiled_grade_plan(const TiledNibbles& w, LinearPlan* plan) {
  // The plan's tables depend on the grade and the level-1 plane only.
  PackedWeight whole;
  whole.grade = w.grade;
  whole.n = w.n;
  whole.k = w.k;
  whole.planes[2] = w.scale1;
  whole.planes[3] = w.aux;
  make_plan(whole, plan);
}

Status tiled_decode_tiles(const KernelTable& kt, const TiledNibbles& w, int64_t tile_begin, int64_t tile_end,
                          float* out) {
  if (tile_begin >= tile_end) return Status::Ok();
  LinearPlan plan;
  if (plan_in_place(kt, w, &plan)) {
    bool fallback = false;
    const Status s = kt.decode_tiles(plan, tile_begin, tile_end, out, &fallback);
    if (!s.ok() || !fallback) return s;
  }
  const UntiledRows u(w, tile_begin * kLinearTileRows, std::min(w.n, tile_end * kLinearTileRows));
  uint64_t cursor = 0;  // dense codes: no sparse cursor
  return decode_rows(u.sub, 0, u.sub.n, &cursor, out);
}

Status tiled_decode_strips(const KernelTable& kt, const TiledNibbles& w, int64_t tile_begin, int64_t tile_end,
                           float* out, int64_t width, int64_t stride, bool* fallback) {
  if (tile_begin >= tile_end) return Status::Ok();
  LinearPlan plan;
  if (kt.decode_strips == nullptr || !plan_in_place(kt, w, &plan)) {
    *fallback = true;
    return Status::Ok();
  }
  return kt.decode_strips(plan, tile_begin, tile_end, out, width, stride, fallback);
}

}  // namespace cpu
}  // namespace grit
