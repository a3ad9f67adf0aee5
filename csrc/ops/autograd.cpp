// Autograd of the grit:: ops, in C++ under the Autograd key (every device).
// Gradients flow to x (and bias); the packed planes are frozen. The rules:
//   packed_linear:            grad_x = packed_linear_grad_input(grad_y, W),
//                             grad_bias = sum of grad_y over the batch (float32,
//                             then the bias's dtype)
//   packed_linear_grad_input: linear in grad_y, so its gradient is
//                             packed_linear(grad_grad_x, W) (double backward)
//   packed_linear_tiled:      as packed_linear, with packed_linear_grad_input_tiled
//                             (W decoded from the tiles, never untiled first)
//   packed_linear_grad_input_tiled: packed_linear_tiled(grad_grad_x, W)
//   packed_linear_bf16:       grad_x = packed_linear_bf16_grad_input(grad_y, W)
//                             (straight through x's rounding to bfloat16),
//                             grad_bias as above; packed_linear_bf16_grad_input's
//                             gradient is packed_linear_bf16 (double backward)
//   packed_linear_s8:         the straight-through estimator: grad_x =
//                             packed_linear_grad_input(grad_y, W) (the packing's
//                             rounding taken as the identity), grad_bias as above
//   pack_activations, packed_linear_exact: no gradient (the exact mode is for
//                             inference); backward refuses with a message.
// A call where nothing needs a gradient (inference, torch.no_grad, frozen x)
// goes straight to the backend kernel: no graph node, no Python. The rules
// used to be Python (torch.library.register_autograd), which cost about 7 us
// per call whether or not a gradient was wanted (a 32x64 MXFP4 call: 13.8 us
// against 6.6 us under inference_mode).
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace grit_ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

using LinearSig = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                             const at::Tensor&, c10::string_view, c10::IntArrayRef,
                             const std::optional<at::Tensor>&);
using GradInputSig = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                const at::Tensor&, c10::string_view, c10::IntArrayRef);
using PackSig = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, int64_t);
using ExactSig = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                            const at::Tensor&, const at::Tensor&, c10::string_view, c10::IntArrayRef,
                            const std::optional<at::Tensor>&);

template <class Sig>
c10::TypedOperatorHandle<Sig> handle(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Sig>();
}
const c10::TypedOperatorHandle<LinearSig>& linear_op() {
  static const auto op = handle<LinearSig>("grit::packed_linear");
  return op;
}
const c10::TypedOperatorHandle<GradInputSig>& grad_input_op() {
  static const auto op = handle<GradInputSig>("grit::packed_linear_grad_input");
  return op;
}

const c10::TypedOperatorHandle<LinearSig>& tiled_linear_op() {
  static const auto op = handle<LinearSig>("grit::packed_linear_tiled");
  return op;
}
const c10::TypedOperatorHandle<GradInputSig>& tiled_grad_input_op() {
  static const auto op = handle<GradInputSig>("grit::packed_linear_grad_input_tiled");
  return op;
}
const c10::TypedOperatorHandle<LinearSig>& bf16_linear_op() {
  static const auto op = handle<LinearSig>("grit::packed_linear_bf16");
  return op;
}
const c10::TypedOperatorHandle<GradInputSig>& bf16_grad_input_op() {
  static const auto op = handle<GradInputSig>("grit::packed_linear_bf16_grad_input");
  return op;
}

// The forward / grad_input pairs that are each other's gradients: the
// row-major planes, the CPU tile layout, and the bf16 activation law.
enum Family : int { kPlanes = 0, kTiled = 1, kBf16 = 2 };

bool wants_grad(const at::Tensor& t) { return t.defined() && t.requires_grad(); }
bool recording() { return at::GradMode::is_enabled(); }

// The planes and how to read them, saved for backward.
void save_weight(AutogradContext* ctx, const at::Tensor& data, const at::Tensor& scale0, const at::Tensor& scale1,
                 const at::Tensor& aux, c10::string_view grade, c10::IntArrayRef shape) {
  ctx->save_for_backward({data, scale0, scale1, aux});
  ctx->saved_data["grade"] = std::string(grade);
  ctx->saved_data["shape"] = shape.vec();
}

// packed_linear with packed_linear_grad_input, (kTiled) their tiled twins,
// which read the same planes in the CPU tile layout, and (kBf16) the bf16
// law's pair: its forward's gradient is its grad_input (straight through
// the rounding of x to bfloat16, as autocast's), and back.
template <int kFam>
struct LinearFn : public torch::autograd::Function<LinearFn<kFam>> {
  static const c10::TypedOperatorHandle<LinearSig>& op() {
    return kFam == kTiled ? tiled_linear_op() : (kFam == kBf16 ? bf16_linear_op() : linear_op());
  }
  static const c10::TypedOperatorHandle<GradInputSig>& grad_op() {
    return kFam == kTiled ? tiled_grad_input_op() : (kFam == kBf16 ? bf16_grad_input_op() : grad_input_op());
  }
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& data,
                            const at::Tensor& scale0, const at::Tensor& scale1, const at::Tensor& aux,
                            c10::string_view grade, c10::IntArrayRef shape, const std::optional<at::Tensor>& bias) {
    save_weight(ctx, data, scale0, scale1, aux, grade, shape);
    const bool has_bias = bias.has_value() && bias->defined();
    ctx->saved_data["has_bias"] = has_bias;
    if (has_bias) ctx->saved_data["bias_dtype"] = bias->scalar_type();
    at::AutoDispatchBelowADInplaceOrView below;
    return op().call(x, data, scale0, scale1, aux, grade, shape, bias);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const std::string grade = ctx->saved_data["grade"].toStringRef();
    const std::vector<int64_t> shape = ctx->saved_data["shape"].toIntVector();
    const at::Tensor& gy = grads[0];
    at::Tensor gx, gbias;
    // Edges: x, the four planes, then bias where one was given.
    if (ctx->needs_input_grad(0) && gy.defined())
      gx = grad_op().call(gy, saved[0], saved[1], saved[2], saved[3], grade, shape);
    if (ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(5) && gy.defined())
      gbias = gy.reshape({-1, shape[0]}).sum(0, false, at::kFloat).to(ctx->saved_data["bias_dtype"].toScalarType());
    return {gx, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), gbias};
  }
};

template <int kFam>
struct GradInputFn : public torch::autograd::Function<GradInputFn<kFam>> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& grad_y, const at::Tensor& data,
                            const at::Tensor& scale0, const at::Tensor& scale1, const at::Tensor& aux,
                            c10::string_view grade, c10::IntArrayRef shape) {
    save_weight(ctx, data, scale0, scale1, aux, grade, shape);
    at::AutoDispatchBelowADInplaceOrView below;
    return LinearFn<kFam>::grad_op().call(grad_y, data, scale0, scale1, aux, grade, shape);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    at::Tensor ggy;
    if (ctx->needs_input_grad(0) && grads[0].defined())
      ggy = LinearFn<kFam>::op().call(grads[0], saved[0], saved[1], saved[2], saved[3],
                             ctx->saved_data["grade"].toStringRef(), ctx->saved_data["shape"].toIntVector(),
                             std::nullopt);
    return {ggy, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

[[noreturn]] void no_gradient(const char* op) {
  TORCH_CHECK(false, op,
              " has no gradient: the exact integer mode is for inference (its int8 codes are not "
              "differentiable); train with packed_linear(..., exact=False)");
}

struct PackActivationsFn : public torch::autograd::Function<PackActivationsFn> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, int64_t block) {
    at::AutoDispatchBelowADInplaceOrView below;
    static const auto op = handle<PackSig>("grit::pack_activations");
    auto out = op.call(x, block);
    ctx->mark_non_differentiable({std::get<0>(out)});
    return {std::get<0>(out), std::get<1>(out)};
  }
  static variable_list backward(AutogradContext*, variable_list) { no_gradient("grit::pack_activations"); }
};

struct ExactFn : public torch::autograd::Function<ExactFn> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& codes, const at::Tensor& scales,
                            const at::Tensor& data, const at::Tensor& scale0, const at::Tensor& scale1,
                            const at::Tensor& aux, c10::string_view grade, c10::IntArrayRef shape,
                            const std::optional<at::Tensor>& bias) {
    at::AutoDispatchBelowADInplaceOrView below;
    static const auto op = handle<ExactSig>("grit::packed_linear_exact");
    return op.call(codes, scales, data, scale0, scale1, aux, grade, shape, bias);
  }
  static variable_list backward(AutogradContext*, variable_list) { no_gradient("grit::packed_linear_exact"); }
};

const c10::TypedOperatorHandle<LinearSig>& s8_linear_op() {
  static const auto op = handle<LinearSig>("grit::packed_linear_s8");
  return op;
}

struct S8Fn : public torch::autograd::Function<S8Fn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& data,
                            const at::Tensor& scale0, const at::Tensor& scale1, const at::Tensor& aux,
                            c10::string_view grade, c10::IntArrayRef shape, const std::optional<at::Tensor>& bias) {
    save_weight(ctx, data, scale0, scale1, aux, grade, shape);
    const bool has_bias = bias.has_value() && bias->defined();
    ctx->saved_data["has_bias"] = has_bias;
    if (has_bias) ctx->saved_data["bias_dtype"] = bias->scalar_type();
    at::AutoDispatchBelowADInplaceOrView below;
    return s8_linear_op().call(x, data, scale0, scale1, aux, grade, shape, bias);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& gy = grads[0];
    const auto shape = ctx->saved_data["shape"].toIntVector();
    at::Tensor gx, gbias;
    if (ctx->needs_input_grad(0) && gy.defined())
      gx = grad_input_op().call(gy, saved[0], saved[1], saved[2], saved[3], ctx->saved_data["grade"].toStringRef(),
                                shape);
    if (ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(5) && gy.defined())
      gbias = gy.reshape({-1, shape[0]}).sum(0, false, at::kFloat).to(ctx->saved_data["bias_dtype"].toScalarType());
    return {gx, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), gbias};
  }
};

at::Tensor s8_autograd(const at::Tensor& x, const at::Tensor& data, const at::Tensor& scale0,
                       const at::Tensor& scale1, const at::Tensor& aux, c10::string_view grade,
                       c10::IntArrayRef shape, const std::optional<at::Tensor>& bias) {
  if (!recording() || !(wants_grad(x) || (bias.has_value() && wants_grad(*bias)))) {
    at::AutoDispatchBelowADInplaceOrView below;
    return s8_linear_op().call(x, data, scale0, scale1, aux, grade, shape, bias);
  }
  return S8Fn::apply(x, data, scale0, scale1, aux, grade, shape, bias);
}

template <int kFam>
at::Tensor linear_autograd(const at::Tensor& x, const at::Tensor& data, const at::Tensor& scale0,
                           const at::Tensor& scale1, const at::Tensor& aux, c10::string_view grade,
                           c10::IntArrayRef shape, const std::optional<at::Tensor>& bias) {
  if (!recording() || !(wants_grad(x) || (bias.has_value() && wants_grad(*bias)))) {
    at::AutoDispatchBelowADInplaceOrView below;
    return LinearFn<kFam>::op().call(x, data, scale0, scale1, aux, grade, shape, bias);
  }
  return LinearFn<kFam>::apply(x, data, scale0, scale1, aux, grade, shape, bias);
}

template <int kFam>
at::Tensor grad_input_autograd(const at::Tensor& grad_y, const at::Tensor& data, const at::Tensor& scale0,
                               const at::Tensor& scale1, const at::Tensor& aux, c10::string_view grade,
                               c10::IntArrayRef shape) {
  if (!recording() || !wants_grad(grad_y)) {
    at::AutoDispatchBelowADInplaceOrView below;
    return LinearFn<kFam>::grad_op().call(grad_y, data, scale0, scale1, aux, grade, shape);
  }
  return GradInputFn<kFam>::apply(grad_y, data, scale0, scale1, aux, grade, shape);
}

std::tuple<at::Tensor, at::Tensor> pack_activations_autograd(const at::Tensor& x, int64_t block) {
  const auto out = PackActivationsFn::apply(x, block);
  return {out[0], out[1]};
}

at::Tensor exact_autograd(const at::Tensor& codes, const at::Tensor& scales, const at::Tensor& data,
                          const at::Tensor& scale0, const at::Tensor& scale1, const at::Tensor& aux,
                          c10::string_view grade, c10::IntArrayRef shape, const std::optional<at::Tensor>& bias) {
  return ExactFn::apply(codes, scales, data, scale0, scale1, aux, grade, shape, bias);
}

}  // namespace

TORCH_LIBRARY_IMPL(grit, Autograd, m) {
  m.impl("packed_linear", &linear_autograd<kPlanes>);
  m.impl("packed_linear_grad_input", &grad_input_autograd<kPlanes>);
  m.impl("packed_linear_tiled", &linear_autograd<kTiled>);
  m.impl("packed_linear_grad_input_tiled", &grad_input_autograd<kTiled>);
  m.impl("packed_linear_bf16", &linear_autograd<kBf16>);
  m.impl("packed_linear_bf16_grad_input", &grad_input_autograd<kBf16>);
  m.impl("pack_activations", &pack_activations_autograd);
  m.impl("packed_linear_exact", &exact_autograd);
  m.impl("packed_linear_s8", &s8_autograd);
}

}  // namespace grit_ops
