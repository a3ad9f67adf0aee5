// CUDA kernels of the grit:: ops: argument checks, then the torch-free
// kernels of csrc/kernels/cuda on the current stream. Built only where torch
// has CUDA (setup.py).
//
// packed_linear and dequantize run on the device for every grade with a fast
// decoder (the reference grades and their siblings) and for INT4G
// (cuda_int4g.h), and packed_linear_grad_input for those and INT4G
// (grad_input_cuda.h); quantize has its own file (cuda_quantize.cpp). Other
// grades run the CPU kernels on host copies (a host round trip, said once by
// a warning): their results are the CPU's.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <vector>

#include "kernels/cpu/packed_linear_cpu.h"
#include "kernels/cuda/device_plan.h"
#include "kernels/cuda/grad_input_cuda.h"
#include "kernels/cuda/packed_linear_cuda.h"
#include "ops/cuda_int4g.h"
#include "ops/int4g_args.h"
#include "ops/cuda_dtype.h"
#include "ops/op_args.h"

namespace grit_ops {
namespace {

// The kernels read planes with 16-byte loads: an unaligned view is copied.
at::Tensor aligned(const at::Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.const_data_ptr()) % 16 == 0 ? t : t.clone();
}

// The planes as the kernels take them: 16-byte aligned (copies kept alive
// here for the launch), checked by plane_args, and the grade's device plan
// for an [n, k] weight; ok is false when no CUDA kernel decodes the grade.
struct DevicePlanes {
  at::Tensor keep[4];
  grit::cuda::Plan plan;
  bool ok = false;
};

DevicePlanes device_planes(const char* op, const at::Tensor& data, const at::Tensor& scale0,
                           const at::Tensor& scale1, const at::Tensor& aux, const grit::Grade& grade,
                           c10::IntArrayRef shape, c10::Device device, int64_t n, int64_t k) {
  DevicePlanes d;
  d.keep[0] = aligned(data);
  d.keep[1] = aligned(scale0);
  d.keep[2] = aligned(scale1);
  d.keep[3] = aligned(aux);
  const PlaneArgs p = plane_args(op, d.keep[0], d.keep[1], d.keep[2], d.keep[3], grade, shape, device);
  d.ok = grit::cuda::make_device_plan(grade, p.plane, n, k, &d.plan);
  return d;
}

void warn_round_trip(const char* op, const grit::Grade& grade) {
  TORCH_WARN_ONCE(op, ": grade ", grade.canonical,
                  " has no CUDA kernel; it runs the CPU kernel on host copies (a round trip)");
}

std::optional<at::Tensor> cpu_opt(const std::optional<at::Tensor>& t) {
  if (!t.has_value() || !t->defined()) return std::nullopt;
  return t->cpu();
}

at::Tensor packed_linear_cuda(const at::Tensor& x, const at::Tensor& data, const at::Tensor& scale0,
                              const at::Tensor& scale1, const at::Tensor& aux,
                              c10::string_view grade_text, c10::IntArrayRef shape,
                              const std::optional<at::Tensor>& bias) {
  const char* op = "grit::packed_linear";
  if (const uint64_t g = int4g_group_arg(op, grade_text))
    return int4g_packed_linear_cuda(x, data, scale0, scale1, aux, g, shape, bias);
  const auto grade = grade_arg(op, grade_text);
  check_weight_shape(op, *grade, shape);
  const int64_t n = shape[0], k = shape[1];
  check_activation(op, "x", x, k, "in-features (shape[1])", shape);
  const bool has_bias = check_bias(op, bias, n, x.device());
  const c10::cuda::CUDAGuard guard(x.device());
  const DevicePlanes dp = device_planes(op, data, scale0, scale1, aux, *grade, shape, x.device(), n, k);
  const grit::cuda::Plan& plan = dp.plan;
  if (!dp.ok) {
    warn_round_trip(op, *grade);
    static auto cpu_op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("grit::packed_linear", "")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                               const at::Tensor&, const at::Tensor&, c10::string_view,
                                               c10::IntArrayRef, const std::optional<at::Tensor>&)>();
    return cpu_op.call(x.cpu(), data.cpu(), scale0.cpu(), scale1.cpu(), aux.cpu(), grade_text, shape,
                       cpu_opt(bias)).to(x.device());
  }

  int64_t m = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) m *= x.size(d);
  const at::Tensor x2 = aligned(x.reshape({m, k}).contiguous());
  at::Tensor y = at::empty({m, n}, x.options());
  if (m > 0 && n > 0) {
    const at::Tensor b32 = has_bias ? bias->to(at::kFloat).contiguous() : at::Tensor();
    const at::Tensor flag = at::zeros({1}, x.options().dtype(at::kInt));
    const at::Tensor scratch = at::empty({plan.kind == grit::cuda::Kind::kInt8Sparse24 ? n + 1 : 1},
                                         x.options().dtype(at::kLong));
    const cudaError_t err = grit::cuda::packed_linear(
        plan, x2.const_data_ptr(), cuda_dtype_of(x.scalar_type()), m, has_bias ? b32.const_data_ptr() : nullptr,
        grit::cuda::DType::kFloat32, y.mutable_data_ptr(), cuda_dtype_of(x.scalar_type()),
        flag.mutable_data_ptr<int>(), scratch.mutable_data_ptr<int64_t>(),
        c10::cuda::getCurrentCUDAStream().stream());
    TORCH_CHECK(err == cudaSuccess, op, ": CUDA kernel launch failed: ", cudaGetErrorString(err));
  }
  return y.view(with_last(x.sizes(), n));
}

at::Tensor dequantize_cuda(const at::Tensor& data, const at::Tensor& scale0, const at::Tensor& scale1,
                           const at::Tensor& aux, c10::string_view grade_text, c10::IntArrayRef shape,
                           at::ScalarType dtype) {
  const char* op = "grit::dequantize";
  if (const uint64_t g = int4g_group_arg(op, grade_text))
    return int4g_dequantize_cuda(data, scale0, scale1, aux, g, shape, dtype);
  const auto grade = grade_arg(op, grade_text);
  TORCH_CHECK_TYPE(at::isFloatingType(dtype), op, ": argument 'dtype' must be a floating dtype, found ", dtype);
  const c10::cuda::CUDAGuard guard(data.device());
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  const int64_t k = shape.empty() ? 1 : shape.back();
  const int64_t n = k > 0 ? numel / k : 0;
  const DevicePlanes dp = device_planes(op, data, scale0, scale1, aux, *grade, shape, data.device(), n, k);
  const grit::cuda::Plan& plan = dp.plan;
  const bool whole_units = k % 16 == 0 && (k % 32 == 0 || grade->k0 == 16);
  if (shape.empty() || !whole_units || !dp.ok) {
    TORCH_WARN_ONCE(op, ": grade ", grade->canonical, " with shape ", shape_str(shape),
                    " has no CUDA kernel; it runs the CPU kernel on host copies (a round trip)");
    static auto cpu_op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("grit::dequantize", "")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                               const at::Tensor&, c10::string_view, c10::IntArrayRef,
                                               at::ScalarType)>();
    return cpu_op.call(data.cpu(), scale0.cpu(), scale1.cpu(), aux.cpu(), grade_text, shape, dtype)
        .to(data.device());
  }
  at::Tensor out = at::empty(shape, data.options().dtype(at::kFloat));
  if (numel > 0) {
    const at::Tensor flag = at::zeros({1}, data.options().dtype(at::kInt));
    const at::Tensor scratch = at::empty({plan.kind == grit::cuda::Kind::kInt8Sparse24 ? n + 1 : 1},
                                         data.options().dtype(at::kLong));
    const cudaError_t err = grit::cuda::dequantize(plan, out.mutable_data_ptr<float>(),
                                                   flag.mutable_data_ptr<int>(),
                                                   scratch.mutable_data_ptr<int64_t>(),
                                                   c10::cuda::getCurrentCUDAStream().stream());
    TORCH_CHECK(err == cudaSuccess, op, ": CUDA kernel launch failed: ", cudaGetErrorString(err));
  }
  return dtype == at::kFloat ? out : out.to(dtype);
}

at::Tensor packed_linear_grad_input_cuda(const at::Tensor& grad_y, const at::Tensor& data,
                                         const at::Tensor& scale0, const at::Tensor& scale1,
                                         const at::Tensor& aux, c10::string_view grade_text,
                                         c10::IntArrayRef shape) {
  const char* op = "grit::packed_linear_grad_input";
  static auto cpu_op = c10::Dispatcher::singleton()
                           .findSchemaOrThrow("grit::packed_linear_grad_input", "")
                           .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                             const at::Tensor&, const at::Tensor&, c10::string_view,
                                             c10::IntArrayRef)>();
  auto on_host = [&]() {
    return cpu_op.call(grad_y.cpu(), data.cpu(), scale0.cpu(), scale1.cpu(), aux.cpu(), grade_text, shape)
        .to(grad_y.device());
  };
  if (const uint64_t g = int4g_group_arg(op, grade_text))
    return int4g_grad_input_cuda(grad_y, data, scale0, scale1, aux, g, shape);
  const auto grade = grade_arg(op, grade_text);
  check_weight_shape(op, *grade, shape);
  const int64_t n = shape[0], k = shape[1];
  check_activation(op, "grad_y", grad_y, n, "out-features (shape[0])", shape);
  const c10::cuda::CUDAGuard guard(grad_y.device());
  const DevicePlanes dp = device_planes(op, data, scale0, scale1, aux, *grade, shape, grad_y.device(), n, k);
  const grit::cuda::Plan& plan = dp.plan;
  if (!dp.ok) {
    warn_round_trip(op, *grade);
    return on_host();
  }
  const int64_t m = batch_rows(grad_y);
  at::Tensor gx = at::empty({m, k}, grad_y.options().dtype(at::kFloat));
  if (m > 0 && k > 0) {
    const at::Tensor gy = grad_y.reshape({m, n}).contiguous();
    const at::Tensor flag = at::zeros({1}, grad_y.options().dtype(at::kInt));
    const cudaError_t err = grit::cuda::packed_linear_grad_input(
        plan, gy.const_data_ptr(), cuda_dtype_of(grad_y.scalar_type()), m, gx.mutable_data_ptr<float>(),
        flag.mutable_data_ptr<int>(), c10::cuda::getCurrentCUDAStream().stream());
    TORCH_CHECK(err == cudaSuccess, op, ": CUDA kernel launch failed: ", cudaGetErrorString(err));
    // I8S24 planes whose quads name one position twice (rows start where a
    // count says): the CPU kernel's exact path, on host copies.
    if (plan.kind == grit::cuda::Kind::kInt8Sparse24 && flag.item<int>() != 0) return on_host();
  }
  return gx.to(grad_y.scalar_type()).view(with_last(grad_y.sizes(), k));
}

bool check_cuda(const at::Tensor& data, const at::Tensor& scale0, const at::Tensor& scale1,
                const at::Tensor& aux, c10::string_view grade_text, c10::IntArrayRef shape) {
  const char* op = "grit::check";
  if (const uint64_t g = int4g_group_arg(op, grade_text)) return int4g_check_cuda(data, scale0, scale1, aux, g, shape);
  const auto grade = grade_arg(op, grade_text);
  plane_args(op, data, scale0, scale1, aux, *grade, shape, data.device());
  return true;
}

}  // namespace

TORCH_LIBRARY_IMPL(grit, CUDA, m) {
  m.impl("packed_linear", &packed_linear_cuda);
  m.impl("dequantize", &dequantize_cuda);
  m.impl("packed_linear_grad_input", &packed_linear_grad_input_cuda);
  m.impl("check", &check_cuda);
}

}  // namespace grit_ops
