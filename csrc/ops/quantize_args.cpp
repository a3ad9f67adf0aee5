#include "ops/quantize_args.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "ops/op_args.h"

namespace grit_ops {

QuantizeArgs quantize_args(const char* op, const at::Tensor& w, c10::string_view grade_text) {
  QuantizeArgs a;
  a.grade = grade_arg(op, grade_text);
  const grit::Grade& grade = *a.grade;
  check_float_arg(op, "w", w);
  TORCH_CHECK_VALUE(w.dim() == 2, op, ": argument 'w' must be a 2-D weight [out, in], found ", w.dim(),
                    " dimensions ", shape_str(w.sizes()));
  check_weight_shape(op, grade, w.sizes());
  // The other shape rules (k1 groups, sparsity quads) are the size equations'.
  const grit::Descriptor d = canonical_descriptor(grade, 2);
  grit::PlaneSizes sizes;
  const grit::CheckResult r = grit::expected_plane_bytes(d, w.sizes().data(), 2, &sizes);
  TORCH_CHECK_VALUE(r.ok(), op, ": grade ", grade.canonical, " cannot hold a weight of shape ",
                    shape_str(w.sizes()), ": ", grit::describe(r, d));
  grit::EncoderChoice c;
  const grit::Status s = grit::choose_encoder(grade, &c);
  TORCH_CHECK_VALUE(s.ok(), op, ": cannot quantize to ", grade.canonical, ": ", s.message);

  a.plan = grit::blockenc::Planes{};
  a.plan.n = static_cast<uint64_t>(w.numel());
  a.plan.family = static_cast<int>(c.family);
  a.plan.rule = static_cast<int>(c.rule);
  a.plan.rtz = c.elem_rounding == grit::Rounding::kRtz;
  TORCH_CHECK(a.plan.n % grit::blockenc::unit_of(a.plan.family) == 0, op,
              ": internal error: the shape checks let through ", a.plan.n, " values for ", grade.canonical);
  for (int i = 0; i < 4; ++i)
    TORCH_CHECK(grit::blockenc::plane_bytes(a.plan.family, a.plan.n, i) == sizes.bytes[i], op,
                ": internal error: the block encoder would write ",
                grit::blockenc::plane_bytes(a.plan.family, a.plan.n, i), " bytes for plane ", i,
                ", the size equations say ", sizes.bytes[i]);
  return a;
}

std::vector<at::Tensor> alloc_planes(QuantizeArgs* a, const at::TensorOptions& options) {
  std::vector<at::Tensor> planes;
  for (int i = 0; i < 4; ++i) {
    const auto bytes = static_cast<int64_t>(grit::blockenc::plane_bytes(a->plan.family, a->plan.n, i));
    planes.push_back(at::empty({bytes}, options.dtype(at::kByte)));
    a->plan.p[i] = planes.back().mutable_data_ptr<uint8_t>();
  }
  return planes;
}

void raise_encoder_refusal(const char* op, const grit::Grade& grade, const at::Tensor& v_cpu) {
  const at::Tensor v = v_cpu.to(at::kFloat).contiguous();
  grit::EncodedPlanes enc;
  const grit::Status s = grit::encode(grade, v.const_data_ptr<float>(), static_cast<uint64_t>(v.numel()), &enc);
  TORCH_CHECK_VALUE(s.ok(), op, ": cannot quantize to ", grade.canonical, ": ", s.message);
  TORCH_CHECK(false, op, ": internal error: a block encoder refused a tensor the core's encoder takes (",
              grade.canonical, ")");
}

}  // namespace grit_ops
