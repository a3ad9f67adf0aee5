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

bool tile_layout_kind(FastKind kind) { return kind != FastKind::kNone; }

int64_t tiled_data_row_bytes(const Grade& g, int64_t k) {
  return g.has_sp ? k / 2 : k * fmt_width(g.elem) / 8;  // 2:4 int8: two codes per 4; 4- or 8-bit codes
}

int64_t tiled_scale_row_bytes(const Grade& g, int64_t k) {
  return k / static_cast<int64_t>(g.k0) * ((fmt_width(g.scale0) + 7) / 8);  // byte codes (u6 padded), binary16
}

bool sparse_quads_regular(const uint8_t* meta, uint64_t bytes) {
  // A quad's nibble: positions i0 (bits 0-1) and i1 (bits 2-3); equal when
  // (i0 ^ i1) == 0.
  for (uint64_t i = 0; i < bytes; ++i) {
    const uint32_t x = (meta[i] ^ (meta[i] >> 2)) & 0x33u;
    if ((x & 0x03u) == 0 || (x & 0x30u) == 0) return false;
  }
  return true;
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
      : data(static_cast<size_t>((r1 - r0) * tiled_data_row_bytes(*w.grade, w.k))),
        scale0(static_cast<size_t>((r1 - r0) * tiled_scale_row_bytes(*w.grade, w.k))) {
    untile_plane(w.data, tiled_data_row_bytes(*w.grade, w.k), r0, r1, data.data());
    untile_plane(w.scale0, tiled_scale_row_bytes(*w.grade, w.k), r0, r1, scale0.data());
    sub.grade = w.grade;
    sub.n = r1 - r0;
    sub.k = w.k;
    sub.planes[0] = Plane{data.data(), data.size()};
    sub.planes[1] = Plane{scale0.data(), scale0.size()};
    sub.planes[2] = w.scale1;
    sub.planes[3] = w.aux;
  }
};

// Whether rows of the weight are a weight of their own (rows r0..r1 of the
// planes and the whole scale1 and aux): no zero points, positions or
// level-1 scales per row group, as for every kNibble grade. Q4KS's and
// I8S24's rows read aux (and Q4KS's scale1) at row-dependent places.
bool rows_stand_alone(const Grade& g) { return !g.has_sp && !g.has_zp && (!g.has_l1 || g.k1 == 0); }

// Tiles [t0, t1) over the whole weight untiled into scratch planes (rows
// that do not stand alone): the table's linear_tiles, the reference where
// it falls back.
Status whole_untiled_tiles(const KernelTable& kt, const TiledNibbles& w, const LinearPlan& plan, const float* x,
                           int64_t m, const float* bias, int64_t t0, int64_t t1, float* y) {
  const UntiledRows u(w, 0, w.n);
  LinearPlan sp = plan;
  sp.w = u.sub;
  bool fallback = false;
  Status s = plan.kind == FastKind::kNone ? linear_tiles(u.sub, x, m, bias, t0, t1, y)
                                          : kt.linear_tiles(sp, x, m, bias, t0, t1, y, &fallback);
  if (s.ok() && fallback) s = linear_tiles(u.sub, x, m, bias, t0, t1, y);
  return s;
}

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


// Sparse planes read by rows need every row's codes at r * k/2: a tiled
// I8S24 weight must be regular (tile_nibbles refuses others).
Status check_regular(const TiledNibbles& w) {
  if (!w.grade->has_sp || sparse_quads_regular(w.aux.data, w.aux.size)) return Status::Ok();
  return Status::Fail(Error::kBadValue,
                      "tiled planes of a sparse grade need every quad to name two distinct positions (aux "
                      "plane); this weight has a quad that names one twice, so its codes do not start at "
                      "fixed row offsets: keep its GRIT planes");
}

}  // namespace

Status tiled_linear_tiles(const KernelTable& kt, const TiledNibbles& w, const float* x, int64_t m,
                          const float* bias, int64_t tile_begin, int64_t tile_end, float* y) {
  if (tile_begin >= tile_end) return Status::Ok();
  LinearPlan plan;
  if (tiled_plan_in_place(kt, w, &plan)) {
    bool fallback = false;
    const Status s = kt.linear_tiles(plan, x, m, bias, tile_begin, tile_end, y, &fallback);
    if (!s.ok() || !fallback) return s;
    // Only an irregular sparse quad makes a tiled plan fall back (refused
    // below); the reference kernel recomputes every tile otherwise.
    plan.tiled = false;
    plan.w.planes[0] = plan.w.planes[1] = Plane{};
  }
  const Status regular = check_regular(w);
  if (!regular.ok()) return regular;
  if (!rows_stand_alone(*w.grade)) return whole_untiled_tiles(kt, w, plan, x, m, bias, tile_begin, tile_end, y);
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

bool tiled_plan_in_place(const KernelTable& kt, const TiledNibbles& w, LinearPlan* plan) {
  tiled_grade_plan(w, plan);
  if (!kt.reads_tiles || !tile_layout_kind(plan->kind)) return false;
  plan->tiled = true;
  plan->w.planes[0] = Plane{w.data, static_cast<uint64_t>(tiled_plane_bytes(w.n, tiled_data_row_bytes(*w.grade, w.k)))};
  plan->w.planes[1] =
      Plane{w.scale0, static_cast<uint64_t>(tiled_plane_bytes(w.n, tiled_scale_row_bytes(*w.grade, w.k)))};
  return true;
}

Status tiled_decode_tiles(const KernelTable& kt, const TiledNibbles& w, int64_t tile_begin, int64_t tile_end,
                          float* out) {
  if (tile_begin >= tile_end) return Status::Ok();
  LinearPlan plan;
  if (tiled_plan_in_place(kt, w, &plan)) {
    bool fallback = false;
    const Status s = kt.decode_tiles(plan, tile_begin, tile_end, out, &fallback);
    if (!s.ok() || !fallback) return s;
  }
  const Status regular = check_regular(w);
  if (!regular.ok()) return regular;
  const int64_t r0 = tile_begin * kLinearTileRows, r1 = std::min(w.n, tile_end * kLinearTileRows);
  if (!rows_stand_alone(*w.grade)) {
    const UntiledRows whole(w, 0, w.n);
    // Regular quads: row r0's codes start at r0 * k/2, the sparse cursor.
    uint64_t cursor = static_cast<uint64_t>(r0 * tiled_data_row_bytes(*w.grade, w.k));
    return decode_rows(whole.sub, r0, r1, &cursor, out);
  }
  const UntiledRows u(w, r0, r1);
  uint64_t cursor = 0;  // dense codes: no sparse cursor
  return decode_rows(u.sub, 0, u.sub.n, &cursor, out);
}

Status tiled_decode_strips(const KernelTable& kt, const TiledNibbles& w, int64_t tile_begin, int64_t tile_end,
                           float* out, int64_t width, int64_t stride, bool* fallback) {
  if (tile_begin >= tile_end) return Status::Ok();
  LinearPlan plan;
  if (kt.decode_strips == nullptr || !tiled_plan_in_place(kt, w, &plan)) {
    *fallback = true;
    return Status::Ok();
  }
  return kt.decode_strips(plan, tile_begin, tile_end, out, width, stride, fallback);
}

}  // namespace cpu
}  // namespace grit
