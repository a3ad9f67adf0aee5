#include "ops/exact_args.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "ops/int4g_args.h"

namespace grit_ops {

void check_pack_args(const char* op, const at::Tensor& x, int64_t block) {
  check_float_arg(op, "x", x);
  TORCH_CHECK_VALUE(x.dim() >= 1, op, ": argument 'x' must have at least 1 dimension [..., k], found a scalar");
  TORCH_CHECK_VALUE(block >= 1, op, ": argument 'block' must be >= 1, found ", block);
  TORCH_CHECK_VALUE(x.size(-1) % block == 0, op, ": argument 'x' has k=", x.size(-1),
                    " in its last dimension ", shape_str(x.sizes()), ", which block=", block,
                    " does not divide; pack with the weight grade's k0 and pad k to a multiple of it");
}

void refuse_non_finite(const char* op, const at::Tensor& x) {
  if (x.numel() == 0) return;
  if (x.scalar_type() == at::kFloat && x.is_contiguous() && x.device().is_cpu()) {
    // One pass over the bits (an exponent of all ones is Inf or NaN); the
    // tensor ops below only name the first bad value.
    const uint32_t* bits = reinterpret_cast<const uint32_t*>(x.const_data_ptr<float>());
    std::atomic<bool> any{false};
    at::parallel_for(0, x.numel(), int64_t{1} << 16, [&](int64_t b, int64_t e) {
      uint32_t top = 0;
      for (int64_t i = b; i < e; ++i) top = std::max(top, bits[i] & 0x7F800000u);
      if (top == 0x7F800000u) any = true;
    });
    if (!any) return;
  }
  const at::Tensor bad = at::logical_not(at::isfinite(x));
  if (!bad.any().item<bool>()) return;
  const at::Tensor at0 = bad.nonzero()[0].cpu();
  const int64_t i = at0[0].item<int64_t>(), j = at0[1].item<int64_t>();
  TORCH_CHECK_VALUE(false, op, ": argument 'x' holds a non-finite value (", x[i][j].item<float>(),
                    ") at row ", i, ", column ", j,
                    " (rows are x's leading dimensions flattened); int8 codes with a finite scale "
                    "cannot represent it");
}

std::vector<int64_t> pack_scale_sizes(const at::Tensor& x, int64_t block) {
  std::vector<int64_t> s(x.sizes().begin(), x.sizes().end());
  s.back() /= block;
  return s;
}

ExactArgs exact_args(const char* op, const at::Tensor& codes, const at::Tensor& scales,
                     const at::Tensor& data, const at::Tensor& scale0, const at::Tensor& scale1,
                     const at::Tensor& aux, c10::string_view grade_text, c10::IntArrayRef shape,
                     const std::optional<at::Tensor>& bias) {
  if (const uint64_t g = int4g_group_arg(op, grade_text)) {
    TORCH_CHECK_VALUE(false, op, ": grade ", int4g_name(g),
                      " has no exact integer law here: its binary64 group scales carry 53 significant "
                      "bits, and a block term D * (activation significand, 24 bits) * (scale significand, "
                      "53 bits) would exceed the int64 accumulator (2^63) that makes the sum order-free; "
                      "use packed_linear without exact=True, or a grade with binary16/e8m0 block scales "
                      "(I8S24, MXFP4)");
  }
  ExactArgs a;
  const auto grade = grade_arg(op, grade_text);
  const grit::Status st = grit::exact::exact_law(*grade, &a.law);
  TORCH_CHECK_VALUE(st.ok(), op, ": ", st.message);
  check_weight_shape(op, *grade, shape);
  a.n = shape[0];
  a.k = shape[1];
  const int64_t k0 = a.law.k0;
  TORCH_CHECK_VALUE(a.law.sp_m == 0 || a.k % a.law.sp_m == 0, op, ": the weight has ", a.k,
                    " in-features, not a multiple of the sparsity quad M=", a.law.sp_m);
  TORCH_CHECK_TYPE(codes.scalar_type() == at::kChar, op,
                   ": argument 'codes' must be int8 (from pack_activations), found ", codes.scalar_type());
  TORCH_CHECK_VALUE(codes.dim() >= 1 && codes.size(-1) == a.k, op, ": argument 'codes' has shape ",
                    shape_str(codes.sizes()), " but the weight of shape ", shape_str(shape), " has ", a.k,
                    " in-features: its last dimension must be ", a.k);
  TORCH_CHECK_TYPE(scales.scalar_type() == at::kFloat, op,
                   ": argument 'scales' must be float32 (from pack_activations), found ", scales.scalar_type());
  bool lead = scales.dim() == codes.dim();
  for (int64_t d = 0; lead && d + 1 < codes.dim(); ++d) lead = scales.size(d) == codes.size(d);
  TORCH_CHECK_VALUE(lead && scales.size(-1) == a.k / k0, op, ": argument 'scales' has shape ",
                    shape_str(scales.sizes()), " but codes ", shape_str(codes.sizes()), " under grade ",
                    grade->canonical, " (blocks of k0=", k0, ") need one scale per row and block: ",
                    shape_str(pack_scale_sizes(codes, k0)), "; pack the activations with block=", k0);
  TORCH_CHECK_VALUE(scales.device() == codes.device(), op, ": argument 'scales' must be on ", codes.device(),
                    " like codes, found ", scales.device());
  a.planes = plane_args(op, data, scale0, scale1, aux, *grade, shape, codes.device());
  a.has_bias = bias.has_value() && bias->defined();
  if (a.has_bias) {
    check_float_arg(op, "bias", *bias);
    TORCH_CHECK_VALUE(bias->dim() == 1 && bias->size(0) == a.n, op, ": argument 'bias' must have shape [", a.n,
                      "] (the weight's out-features), found ", shape_str(bias->sizes()));
    TORCH_CHECK_VALUE(bias->device() == codes.device(), op, ": argument 'bias' must be on ", codes.device(),
                      " like codes, found ", bias->device());
  }
  a.m = a.k ? codes.numel() / a.k : 1;
  if (a.k == 0)
    for (int64_t d = 0; d + 1 < codes.dim(); ++d) a.m *= codes.size(d);
  return a;
}

std::vector<int64_t> exact_out_sizes(const at::Tensor& codes, int64_t n) {
  std::vector<int64_t> s(codes.sizes().begin(), codes.sizes().end());
  s.back() = n;
  return s;
}

}  // namespace grit_ops
