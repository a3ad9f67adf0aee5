// CPU kernels of grit::packed_linear and grit::packed_linear_grad_input: the
// torch-free kernels of csrc/kernels/cpu behind argument checks and
// at::parallel_for. The forward runs the instruction-set variant chosen at
// start-up (packed_linear_cpu.h; GRIT_CPU_ISA overrides), every variant
// bit-identical to the reference. Threads split the output into disjoint
// 16-row tiles and every element is reduced in one fixed order, so results
// do not depend on the thread count. The backward decodes W with the same
// variant's decoder, a block of rows at a time (grad_input_blocks.h), and
// adds the products with the variant's register-blocked kernel
// (KernelTable::grad_input_rows), the reference's operations in its order.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu/packed_linear_cpu.h"
#include "kernels/cpu/packed_linear_ref.h"
#include "ops/cpu_linear_frame.h"
#include "ops/grad_input_blocks.h"
#include "ops/int4g_args.h"
#include "ops/int4g_ops.h"
#include "ops/op_args.h"

namespace grit_ops {
namespace {

at::Tensor packed_linear_cpu(const at::Tensor& x, const at::Tensor& data, const at::Tensor& scale0,
                             const at::Tensor& scale1, const at::Tensor& aux,
                             c10::string_view grade_text, c10::IntArrayRef shape,
                             const std::optional<at::Tensor>& bias) {
  const char* op = "grit::packed_linear";
  // INT4G has no fast decoder: its own reference kernel (packed_linear_int4g.h).
  if (const uint64_t g = int4g_group_arg(op, grade_text))
    return int4g_packed_linear_cpu(x, data, scale0, scale1, aux, g, shape, bias);
  const auto grade = grade_arg(op, grade_text);
  check_weight_shape(op, *grade, shape);
  const int64_t n = shape[0], k = shape[1];
  check_activation(op, "x", x, k, "in-features (shape[1])", shape);
  const PlaneArgs p = plane_args(op, data, scale0, scale1, aux, *grade, shape, x.device());
  const bool has_bias = check_bias(op, bias, n, x.device());

  const grit::cpu::PackedWeight w = packed_weight(*grade, p, n, k);
  return cpu_linear_frame(x, n, k, bias, has_bias, [&](const float* xp, int64_t m, const float* bp, float* yp,
                                                      int64_t grain) {
    const grit::cpu::KernelTable& kt = active_cpu_kernels(op);
    grit::cpu::LinearPlan plan;
    grit::cpu::make_plan(w, &plan);
    // Planes the fast decoder cannot take (a sparse quad naming one position
    // twice): the reference kernel recomputes every tile (at most one task
    // per thread, so the sparse cursor scan each task starts with stays cheap).
    if (parallel_linear_tiles(op, kt, plan, xp, m, bp, yp, grain)) {
      at::parallel_for(0, grit::cpu::linear_tile_count(n), grain, [&](int64_t b, int64_t e) {
        const grit::Status s = grit::cpu::linear_tiles(w, xp, m, bp, b, e, yp);
        TORCH_CHECK(s.ok(), op, ": ", s.message);
      });
    }
  });
}

at::Tensor packed_linear_grad_input_cpu(const at::Tensor& grad_y, const at::Tensor& data,
                                        const at::Tensor& scale0, const at::Tensor& scale1,
                                        const at::Tensor& aux, c10::string_view grade_text,
                                        c10::IntArrayRef shape) {
  const char* op = "grit::packed_linear_grad_input";
  if (const uint64_t g = int4g_group_arg(op, grade_text))
    return int4g_packed_linear_grad_input_cpu(grad_y, data, scale0, scale1, aux, g, shape);
  const auto grade = grade_arg(op, grade_text);
  check_weight_shape(op, *grade, shape);
  const int64_t n = shape[0], k = shape[1];
  check_activation(op, "grad_y", grad_y, n, "out-features (shape[0])", shape);
  const PlaneArgs p = plane_args(op, data, scale0, scale1, aux, *grade, shape, grad_y.device());
  const grit::cpu::KernelTable& kt = active_cpu_kernels(op);
  if (n == 0 || k == 0 || batch_rows(grad_y) == 0)  // nothing to decode: zeros of grad_x's shape
    return grad_input_float(
        op, grad_y, n, k, kt, nullptr, [](int64_t, int64_t, float*) {},
        [](int64_t, int64_t, float*, int64_t, int64_t) { return true; }, [](const float*, int64_t) { return false; });

  const grit::cpu::PackedWeight w = packed_weight(*grade, p, n, k);
  grit::cpu::LinearPlan plan;
  grit::cpu::make_plan(w, &plan);
  // The variant's decoder (the reference decode's bits), tiles in
  // parallel; the scalar variant, a grade without a fast decoder, and
  // planes the fast decoder cannot take (it says so) decode in order with
  // the reference, carrying the sparse cursor.
  bool fast = kt.isa != grit::cpu::Isa::kScalar && plan.kind != grit::cpu::FastKind::kNone;
  uint64_t cursor = 0;
  auto decode = [&](int64_t r0, int64_t r1, float* out) {
    if (fast) {
      if (tiles_in_parallel(op, r0, r1, out, k, [&](int64_t b, int64_t e, float* at, bool* fb) {
            return kt.decode_tiles(plan, b, e, at, fb);
          }))
        return;
      fast = false;
      cursor = grit::sparse_cursor(*w.grade, w.planes, static_cast<uint64_t>(r0) * static_cast<uint64_t>(k));
    }
    const grit::Status s = grit::cpu::decode_rows(w, r0, r1, &cursor, out);
    TORCH_CHECK(s.ok(), op, ": ", s.message);
  };
  // The same tiles straight into grad_input's strips, while the fast
  // decoder can take them.
  auto decode_strips = [&](int64_t r0, int64_t r1, float* out, int64_t width, int64_t stride) {
    return fast && kt.decode_strips != nullptr &&
           tiles_in_parallel(op, r0, r1, out, width, [&](int64_t b, int64_t e, float* at, bool* fb) {
             return kt.decode_strips(plan, b, e, at, width, stride, fb);
           });
  };
  const bool fused = fast;  // decode may clear fast; the fused route runs before it
  return grad_input_float(op, grad_y, n, k, kt, fused ? &plan : nullptr, decode, decode_strips,
                          [&](const float* gy, int64_t count) {
    return grit::cpu::pairs_allowed(plan, p.plane[1].data, p.plane[1].size, gy, count);
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(grit, CPU, m) {
  m.impl("packed_linear", &packed_linear_cpu);
  m.impl("packed_linear_grad_input", &packed_linear_grad_input_cpu);
}

}  // namespace grit_ops
