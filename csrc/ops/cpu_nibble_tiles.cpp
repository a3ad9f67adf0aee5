// CPU kernels of the tile-layout ops (kernels/cpu/nibble_tiles.h):
// grit::tile_nibbles and grit::untile_nibbles move a weight's data and
// scale0 planes (every grade with a fast CPU decoder) into and out of the
// layout, bit for bit; grit::dequantize_tiled is grit::dequantize over the
// tiled planes, its bits, decoded in place;
// grit::packed_linear_tiled is grit::packed_linear over the tiled planes,
// with its bits (the same law, the same kernels; batch 1 reads the tiles in
// place). Threads split the output into 16-row tiles as packed_linear does.
// grit::packed_linear_grad_input_tiled is packed_linear_grad_input with W
// decoded from the tiles (in place on every SIMD variant), its bits too.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "kernels/cpu/nibble_tiles.h"
#include "ops/cpu_linear_frame.h"
#include "ops/grad_input_blocks.h"
#include "ops/op_args.h"

namespace grit_ops {
namespace {

// The grade, checked to be one the layout holds, and its shape.
std::shared_ptr<const grit::Grade> tiled_grade(const char* op, c10::string_view text, c10::IntArrayRef shape) {
  auto grade = grade_arg(op, text);
  TORCH_CHECK_VALUE(grit::cpu::tile_layout_kind(grit::cpu::fast_kind_of(*grade)), op,
                    ": the tile layout holds the grades with a fast CPU decoder (MXFP4, NVF4, Q4KS, I8S24, "
                    "ggml Q8_0's and the int8 groups, GPTQ/AWQ's u4 with zero points, the s4 groups and their "
                    "siblings); grade ", grade->canonical,
                    " is not one (keep its planes and call packed_linear)");
  check_weight_shape(op, *grade, shape);
  return grade;
}

// Bytes per row of the data and scale0 planes.
int64_t data_row_bytes(const grit::Grade& g, int64_t k) { return grit::cpu::tiled_data_row_bytes(g, k); }
int64_t scale_row_bytes(const grit::Grade& g, int64_t k) { return grit::cpu::tiled_scale_row_bytes(g, k); }

// A sparse grade's positions must let every row's codes start at r * k/2.
void check_regular_quads(const char* op, const grit::Grade& g, const grit::Plane& aux) {
  TORCH_CHECK_VALUE(!g.has_sp || grit::cpu::sparse_quads_regular(aux.data, aux.size), op,
                    ": plane 'aux' (the 2:4 positions of grade ", g.canonical,
                    ") has a quad that names one position twice, so the codes of a row do not start at a "
                    "fixed offset and the tile layout cannot hold them; keep the GRIT planes");
}

void check_tiled(const char* op, const char* name, const at::Tensor& t, int64_t want, c10::IntArrayRef shape,
                 c10::Device device) {
  check_plane_tensor(op, name, t, device);
  TORCH_CHECK_VALUE(t.numel() == want, op, ": plane '", name, "' must hold ", want,
                    " bytes for a tiled weight of shape ", shape_str(shape), ", found ", t.numel(),
                    " (make it with tile_nibbles from the GRIT planes)");
}

// scale1 and aux as GRIT planes, with the level-1 length check of the whole
// weight (data and scale0 at their untiled lengths).
void check_side_planes(const char* op, const at::Tensor& scale1, const at::Tensor& aux, const grit::Grade& g,
                       c10::IntArrayRef shape, c10::Device device) {
  check_plane_tensor(op, "scale1", scale1, device);
  check_plane_tensor(op, "aux", aux, device);
  const uint64_t lengths[4] = {static_cast<uint64_t>(shape[0] * data_row_bytes(g, shape[1])),
                               static_cast<uint64_t>(shape[0] * scale_row_bytes(g, shape[1])),
                               static_cast<uint64_t>(scale1.numel()), static_cast<uint64_t>(aux.numel())};
  check_lengths(op, g, shape, lengths);
}

std::tuple<at::Tensor, at::Tensor> tile_nibbles_cpu(const at::Tensor& data, const at::Tensor& scale0,
                                                    const at::Tensor& scale1, const at::Tensor& aux,
                                                    c10::string_view grade_text, c10::IntArrayRef shape) {
  const char* op = "grit::tile_nibbles";
  const auto grade = tiled_grade(op, grade_text, shape);
  const PlaneArgs p = plane_args(op, data, scale0, scale1, aux, *grade, shape, data.device());
  check_regular_quads(op, *grade, p.plane[3]);
  const int64_t n = shape[0], k = shape[1];
  const int64_t db = data_row_bytes(*grade, k), sb = scale_row_bytes(*grade, k);
  at::Tensor td = at::empty({grit::cpu::tiled_plane_bytes(n, db)}, data.options());
  at::Tensor ts = at::empty({grit::cpu::tiled_plane_bytes(n, sb)}, data.options());
  if (n > 0 && k > 0) {
    grit::cpu::tile_plane(p.plane[0].data, n, db, td.mutable_data_ptr<uint8_t>());
    grit::cpu::tile_plane(p.plane[1].data, n, sb, ts.mutable_data_ptr<uint8_t>());
  } else {
    td.zero_();
    ts.zero_();
  }
  return {td, ts};
}

std::tuple<at::Tensor, at::Tensor> untile_nibbles_cpu(const at::Tensor& tdata, const at::Tensor& tscale0,
                                                      c10::string_view grade_text, c10::IntArrayRef shape) {
  const char* op = "grit::untile_nibbles";
  const auto grade = tiled_grade(op, grade_text, shape);
  const int64_t n = shape[0], k = shape[1];
  const int64_t db = data_row_bytes(*grade, k), sb = scale_row_bytes(*grade, k);
  check_tiled(op, "data", tdata, grit::cpu::tiled_plane_bytes(n, db), shape, tdata.device());
  check_tiled(op, "scale0", tscale0, grit::cpu::tiled_plane_bytes(n, sb), shape, tdata.device());
  at::Tensor d = at::empty({n * db}, tdata.options());
  at::Tensor s = at::empty({n * sb}, tdata.options());
  if (n > 0 && k > 0) {
    // Whole 16-row tiles per thread: each output row is written by one thread, byte for byte
    // what one pass writes (dequantize of a tiled weight untiles first: this is on its path).
    const uint8_t* td = tdata.const_data_ptr<uint8_t>();
    const uint8_t* ts = tscale0.const_data_ptr<uint8_t>();
    uint8_t* dp = d.mutable_data_ptr<uint8_t>();
    uint8_t* sp = s.mutable_data_ptr<uint8_t>();
    const int64_t rows = grit::cpu::kLinearTileRows;
    at::parallel_for(0, (n + rows - 1) / rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(db, 1)),
                     [&](int64_t b, int64_t e) {
      const int64_t r0 = b * rows, r1 = std::min(n, e * rows);
      grit::cpu::untile_plane(td, db, r0, r1, dp + r0 * db);
      grit::cpu::untile_plane(ts, sb, r0, r1, sp + r0 * sb);
    });
  }
  return {d, s};
}

// The tiled planes, checked against the weight's shape, as the kernels take them.
grit::cpu::TiledNibbles tiled_weight(const char* op, const grit::Grade& grade, const at::Tensor& tdata,
                                     const at::Tensor& tscale0, const at::Tensor& scale1, const at::Tensor& aux,
                                     c10::IntArrayRef shape, c10::Device device) {
  const int64_t n = shape[0], k = shape[1];
  check_tiled(op, "data", tdata, grit::cpu::tiled_plane_bytes(n, data_row_bytes(grade, k)), shape, device);
  check_tiled(op, "scale0", tscale0, grit::cpu::tiled_plane_bytes(n, scale_row_bytes(grade, k)), shape, device);
  check_side_planes(op, scale1, aux, grade, shape, device);
  grit::cpu::TiledNibbles w;
  w.grade = &grade;
  w.n = n;
  w.k = k;
  w.data = tdata.const_data_ptr<uint8_t>();
  w.scale0 = tscale0.const_data_ptr<uint8_t>();
  w.scale1 = grit::Plane{scale1.numel() ? scale1.const_data_ptr<uint8_t>() : nullptr,
                         static_cast<uint64_t>(scale1.numel())};
  w.aux = grit::Plane{aux.numel() ? aux.const_data_ptr<uint8_t>() : nullptr, static_cast<uint64_t>(aux.numel())};
  return w;
}

// grit::dequantize over the tiled planes: the variant's decoders read the
// tiles in place (the reference, where they fall back), tiles in parallel;
// dequantize's bits, with no untiled copy of the planes.
at::Tensor dequantize_tiled_cpu(const at::Tensor& tdata, const at::Tensor& tscale0, const at::Tensor& scale1,
                                const at::Tensor& aux, c10::string_view grade_text, c10::IntArrayRef shape,
                                at::ScalarType dtype) {
  const char* op = "grit::dequantize_tiled";
  const auto grade = tiled_grade(op, grade_text, shape);
  TORCH_CHECK_TYPE(at::isFloatingType(dtype), op, ": argument 'dtype' must be a floating dtype, found ", dtype);
  const int64_t n = shape[0], k = shape[1];
  const grit::cpu::TiledNibbles w = tiled_weight(op, *grade, tdata, tscale0, scale1, aux, shape, tdata.device());
  at::Tensor out = at::empty({n, k}, tdata.options().dtype(at::kFloat));
  if (n > 0 && k > 0) {
    float* o = out.mutable_data_ptr<float>();
    const grit::cpu::KernelTable& kt = active_cpu_kernels(op);
    const int64_t rows = grit::cpu::kLinearTileRows;
    at::parallel_for(0, grit::cpu::linear_tile_count(n), std::max<int64_t>(1, (int64_t{1} << 16) / (rows * k)),
                     [&](int64_t b, int64_t e) {
      const grit::Status s = grit::cpu::tiled_decode_tiles(kt, w, b, e, o + b * rows * k);
      TORCH_CHECK(s.ok(), op, ": ", s.message);
    });
  }
  return dtype == at::kFloat ? out : out.to(dtype);
}

at::Tensor packed_linear_tiled_cpu(const at::Tensor& x, const at::Tensor& tdata, const at::Tensor& tscale0,
                                   const at::Tensor& scale1, const at::Tensor& aux, c10::string_view grade_text,
                                   c10::IntArrayRef shape, const std::optional<at::Tensor>& bias) {
  const char* op = "grit::packed_linear_tiled";
  const auto grade = tiled_grade(op, grade_text, shape);
  const int64_t n = shape[0], k = shape[1];
  check_activation(op, "x", x, k, "in-features (shape[1])", shape);
  const grit::cpu::TiledNibbles w = tiled_weight(op, *grade, tdata, tscale0, scale1, aux, shape, x.device());
  const bool has_bias = check_bias(op, bias, n, x.device());
  return cpu_linear_frame(x, n, k, bias, has_bias, [&](const float* xp, int64_t m, const float* bp, float* yp,
                                                      int64_t grain) {
    const grit::cpu::KernelTable& kt = active_cpu_kernels(op);
    at::parallel_for(0, grit::cpu::linear_tile_count(n), grain, [&](int64_t b, int64_t e) {
      const grit::Status s = grit::cpu::tiled_linear_tiles(kt, w, xp, m, bp, b, e, yp);
      TORCH_CHECK(s.ok(), op, ": ", s.message);
    });
  });
}

at::Tensor packed_linear_grad_input_tiled_cpu(const at::Tensor& grad_y, const at::Tensor& tdata,
                                              const at::Tensor& tscale0, const at::Tensor& scale1,
                                              const at::Tensor& aux, c10::string_view grade_text,
                                              c10::IntArrayRef shape) {
  const char* op = "grit::packed_linear_grad_input_tiled";
  const auto grade = tiled_grade(op, grade_text, shape);
  const int64_t n = shape[0], k = shape[1];
  check_activation(op, "grad_y", grad_y, n, "out-features (shape[0])", shape);
  const grit::cpu::TiledNibbles w = tiled_weight(op, *grade, tdata, tscale0, scale1, aux, shape, grad_y.device());
  const grit::cpu::KernelTable& kt = active_cpu_kernels(op);
  auto decode = [&](int64_t r0, int64_t r1, float* out) {
    tiles_in_parallel(op, r0, r1, out, k, [&](int64_t b, int64_t e, float* at, bool*) {
      return grit::cpu::tiled_decode_tiles(kt, w, b, e, at);
    });
  };
  auto decode_strips = [&](int64_t r0, int64_t r1, float* out, int64_t width, int64_t stride) {
    return tiles_in_parallel(op, r0, r1, out, width, [&](int64_t b, int64_t e, float* at, bool* fb) {
      return grit::cpu::tiled_decode_strips(kt, w, b, e, at, width, stride, fb);
    });
  };
  grit::cpu::LinearPlan fused_plan;
  const bool in_place = grit::cpu::tiled_plan_in_place(kt, w, &fused_plan);
  // The pair route asks for GRIT's scale0 codes: untiled once, only when it may apply.
  return grad_input_float(op, grad_y, n, k, kt, in_place ? &fused_plan : nullptr, decode, decode_strips,
                          [&](const float* gy, int64_t count) {
    grit::cpu::LinearPlan plan;
    grit::cpu::tiled_grade_plan(w, &plan);
    if (!grit::cpu::pairs_allowed(plan, nullptr, 0, gy, 0)) return false;  // the grade alone rules it out
    std::vector<uint8_t> codes(static_cast<size_t>(n * scale_row_bytes(*grade, k)));
    grit::cpu::untile_plane(w.scale0, scale_row_bytes(*grade, k), 0, n, codes.data());
    return grit::cpu::pairs_allowed(plan, codes.data(), codes.size(), gy, count);
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(grit, CPU, m) {
  m.impl("tile_nibbles", &tile_nibbles_cpu);
  m.impl("untile_nibbles", &untile_nibbles_cpu);
  m.impl("dequantize_tiled", &dequantize_tiled_cpu);
  m.impl("packed_linear_tiled", &packed_linear_tiled_cpu);
  m.impl("packed_linear_grad_input_tiled", &packed_linear_grad_input_tiled_cpu);
}

}  // namespace grit_ops
