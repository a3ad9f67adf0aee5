// CPU kernel of grit::packed_linear_continue: the law's chains continued
// from a given acc (linear_law.h, law_dot_from) over this weight's groups,
// for a weight that is a column cut of a larger one on group boundaries. A
// tensor-parallel row-wise shard runs it in rank order, each rank taking
// the previous rank's acc, so the last rank's y has the bits one process
// gets from the whole weight (torch_grit/tensor/ordered.py). The active
// instruction-set variant continues the chains (LinearPlan::continued: its
// GEMM, whose accumulators wait in y between chunks, at every batch size),
// the reference kernel (packed_linear_ref.h) where the variant falls back;
// threads split the output into disjoint 16-row tiles, so the bits depend
// on neither the variant nor the thread count.
//
//   finish = false: returns the continued acc, float32, no bias.
//   finish = true:  returns y = acc + bias (NaN canonical), in x's dtype.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>

#include "grit/linear_law.h"
#include "kernels/cpu/packed_linear_cpu.h"
#include "kernels/cpu/packed_linear_ref.h"
#include "ops/cpu_linear_frame.h"
#include "ops/int4g_args.h"
#include "ops/op_args.h"

namespace grit_ops {
namespace {

at::Tensor packed_linear_continue_cpu(const at::Tensor& x, const at::Tensor& data, const at::Tensor& scale0,
                                      const at::Tensor& scale1, const at::Tensor& aux,
                                      c10::string_view grade_text, c10::IntArrayRef shape, const at::Tensor& acc,
                                      const std::optional<at::Tensor>& bias, bool finish) {
  const char* op = "grit::packed_linear_continue";
  TORCH_CHECK_VALUE(int4g_group_arg(op, grade_text) == 0, op,
                    ": INT4G has no group-chain law to continue (its reference sums per row in one "
                    "chain over a float weight); run its row-wise shards with the all-reduce");
  const auto grade = grade_arg(op, grade_text);
  check_weight_shape(op, *grade, shape);
  const int64_t n = shape[0], k = shape[1];
  check_activation(op, "x", x, k, "in-features (shape[1])", shape);
  const PlaneArgs p = plane_args(op, data, scale0, scale1, aux, *grade, shape, x.device());
  const std::vector<int64_t> out_shape = with_last(x.sizes(), n);
  TORCH_CHECK_TYPE(acc.scalar_type() == at::kFloat, op, ": acc must be float32 (the law's running sums), found ",
                   acc.scalar_type());
  TORCH_CHECK_VALUE(acc.device() == x.device(), op, ": acc is on ", acc.device(), ", x on ", x.device());
  TORCH_CHECK_VALUE(acc.sizes().vec() == out_shape, op, ": acc must have shape ", shape_str(out_shape),
                    " (x's leading dimensions and out-features), found ", shape_str(acc.sizes()));
  TORCH_CHECK_VALUE(finish || !bias.has_value(), op,
                    ": a bias is added by the finishing call only (finish=True); found one with finish=False");
  const bool has_bias = check_bias(op, bias, n, x.device());

  const grit::cpu::PackedWeight w = packed_weight(*grade, p, n, k);
  const int64_t m = batch_rows(x);
  const at::Tensor start = acc.reshape({m, n}).contiguous();
  at::Tensor out = start.clone();
  if (m > 0 && n > 0 && k > 0) {
    const at::Tensor x32 = x.reshape({m, k}).to(at::kFloat).contiguous();
    const float* xp = x32.const_data_ptr<float>();
    float* yp = out.mutable_data_ptr<float>();
    const int64_t tile_work = std::max<int64_t>(1, m * k * grit::cpu::kLinearTileRows);
    const int64_t grain = std::max<int64_t>(1, kLinearTaskWork / tile_work);
    const grit::cpu::KernelTable& kt = active_cpu_kernels(op);
    grit::cpu::LinearPlan plan;
    grit::cpu::make_plan(w, &plan);
    plan.continued = true;
    // A variant that fell back may have continued some tiles already: the
    // reference starts again from the acc the call was given.
    if (parallel_linear_tiles(op, kt, plan, xp, m, nullptr, yp, grain)) {
      out.copy_(start);
      at::parallel_for(0, grit::cpu::linear_tile_count(n), grain, [&](int64_t b, int64_t e) {
        const grit::Status s = grit::cpu::linear_tiles_continue(w, xp, m, b, e, yp);
        TORCH_CHECK(s.ok(), op, ": ", s.message);
      });
    }
  }
  if (!finish) return out.view(out_shape);
  float* y = out.mutable_data_ptr<float>();
  const at::Tensor b32 = has_bias ? bias->to(at::kFloat).contiguous() : at::Tensor();
  const float* bp = has_bias ? b32.const_data_ptr<float>() : nullptr;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) y[i * n + j] = grit::law_finish(y[i * n + j], bp != nullptr ? bp + j : nullptr);
  return out.to(x.scalar_type()).view(out_shape);
}

}  // namespace

TORCH_LIBRARY_IMPL(grit, CPU, m) { m.impl("packed_linear_continue", &packed_linear_continue_cpu); }

}  // namespace grit_ops
