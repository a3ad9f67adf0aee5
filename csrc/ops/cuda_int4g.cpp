// CUDA kernels of the grit:: ops for "INT4G<g>" (cuda_int4g.h): argument
// checks that read no byte, the device kernels of
// csrc/kernels/cuda/int4g_linear_cuda.h on the current stream, then the
// kernels' verdict read back; where they flagged a code or scale, the core's
// reader runs on host copies and refuses with its own message (or passes:
// a huge scale whose codes stay finite).
#include "ops/cuda_int4g.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <vector>

#include "kernels/cuda/int4g_linear_cuda.h"
#include "kernels/cuda/int4g_quantize_cuda.h"
#include "ops/int4g_args.h"
#include "ops/int4g_ops.h"
#include "ops/cuda_dtype.h"
#include "ops/op_args.h"

namespace grit_ops {
namespace {

// The scale plane is read as binary64: an unaligned view is copied.
at::Tensor aligned8(const at::Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.const_data_ptr()) % 8 == 0 ? t : t.clone();
}

grit::cuda::Int4gPlan device_plan(const grit::cpu::Int4gWeight& w) {
  grit::cuda::Int4gPlan p;
  p.codes = w.codes;
  p.scales = w.scales;
  p.code_bytes = static_cast<int64_t>(w.code_bytes);
  p.n = w.n;
  p.k = w.k;
  p.group = static_cast<int64_t>(w.group);
  return p;
}

// The kernels' flag, read back (a sync on the current stream); where set,
// the core's reader on host copies raises or passes.
void settle(const char* op, const at::Tensor& flag, const at::Tensor& data, const at::Tensor& scale0,
            const at::Tensor& scale1, const at::Tensor& aux, uint64_t group, c10::IntArrayRef shape) {
  if (flag.item<int>() == 0) return;
  std::vector<double> copy;
  int4g_weight(op, data.cpu(), scale0.cpu(), scale1.cpu(), aux.cpu(), group, shape, c10::Device(c10::kCPU), &copy,
               Int4gCheck::kWhole);
}

}  // namespace

at::Tensor int4g_packed_linear_cuda(const at::Tensor& x, const at::Tensor& data, const at::Tensor& scale0,
                                    const at::Tensor& scale1, const at::Tensor& aux, uint64_t group,
                                    c10::IntArrayRef shape, const std::optional<at::Tensor>& bias) {
  const char* op = "grit::packed_linear";
  check_int4g_shape(op, group, shape);
  const int64_t n = shape[0], k = shape[1];
  check_activation(op, "x", x, k, "in-features (shape[1])", shape);
  const bool has_bias = check_bias(op, bias, n, x.device());
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor s0 = aligned8(scale0);
  std::vector<double> unused;
  const grit::cpu::Int4gWeight w =
      int4g_weight(op, data, s0, scale1, aux, group, shape, x.device(), &unused, Int4gCheck::kLengths);
  const int64_t m = batch_rows(x);
  const at::Tensor x2 = x.reshape({m, k}).contiguous();
  at::Tensor y = at::empty({m, n}, x.options());
  // An empty batch reads no code: the planes are still checked, on the host.
  const at::Tensor flag = m > 0 ? at::zeros({1}, x.options().dtype(at::kInt))
                                : at::ones({1}, x.options().dtype(at::kInt));
  if (m > 0) {
    const at::Tensor b32 = has_bias ? bias->to(at::kFloat).contiguous() : at::Tensor();
    const cudaError_t err = grit::cuda::int4g_linear(
        device_plan(w), x2.const_data_ptr(), cuda_dtype_of(x.scalar_type()), m,
        has_bias ? b32.const_data_ptr<float>() : nullptr, y.mutable_data_ptr(), flag.mutable_data_ptr<int>(),
        c10::cuda::getCurrentCUDAStream().stream());
    TORCH_CHECK(err == cudaSuccess, op, ": CUDA kernel launch failed: ", cudaGetErrorString(err));
  }
  settle(op, flag, data, s0, scale1, aux, group, shape);
  return y.view(with_last(x.sizes(), n));
}

at::Tensor int4g_grad_input_cuda(const at::Tensor& grad_y, const at::Tensor& data, const at::Tensor& scale0,
                                 const at::Tensor& scale1, const at::Tensor& aux, uint64_t group,
                                 c10::IntArrayRef shape) {
  const char* op = "grit::packed_linear_grad_input";
  check_int4g_shape(op, group, shape);
  const int64_t n = shape[0], k = shape[1];
  check_activation(op, "grad_y", grad_y, n, "out-features (shape[0])", shape);
  const c10::cuda::CUDAGuard guard(grad_y.device());
  const at::Tensor s0 = aligned8(scale0);
  std::vector<double> unused;
  const grit::cpu::Int4gWeight w =
      int4g_weight(op, data, s0, scale1, aux, group, shape, grad_y.device(), &unused, Int4gCheck::kLengths);
  const int64_t m = batch_rows(grad_y);
  at::Tensor gx = at::empty({m, k}, grad_y.options().dtype(at::kFloat));
  // An empty batch reads no code: the planes are still checked, on the host.
  const at::Tensor flag = m > 0 ? at::zeros({1}, grad_y.options().dtype(at::kInt))
                                : at::ones({1}, grad_y.options().dtype(at::kInt));
  if (m > 0) {
    const at::Tensor gy = grad_y.reshape({m, n}).contiguous();
    const cudaError_t err = grit::cuda::int4g_grad_input(device_plan(w), gy.const_data_ptr(),
                                                         cuda_dtype_of(grad_y.scalar_type()), m,
                                                         gx.mutable_data_ptr<float>(), flag.mutable_data_ptr<int>(),
                                                         c10::cuda::getCurrentCUDAStream().stream());
    TORCH_CHECK(err == cudaSuccess, op, ": CUDA kernel launch failed: ", cudaGetErrorString(err));
  }
  settle(op, flag, data, s0, scale1, aux, group, shape);
  return gx.to(grad_y.scalar_type()).view(with_last(grad_y.sizes(), k));
}

std::vector<at::Tensor> int4g_quantize_cuda(const at::Tensor& w, uint64_t group) {
  const char* op = "grit::quantize";
  const Int4gQuantizeArgs a = int4g_quantize_args(op, w, group);
  const c10::cuda::CUDAGuard guard(w.device());
  const at::Tensor v = w.to(at::kDouble).contiguous();
  const auto u8 = w.options().dtype(at::kByte);
  at::Tensor data = at::empty({a.code_bytes}, u8);
  at::Tensor scale0 = at::empty({a.scale_bytes}, u8);  // device allocations are 256-byte aligned
  const at::Tensor codes = at::empty({a.rows * a.cols}, w.options().dtype(at::kChar));
  const at::Tensor flag = at::empty({1}, w.options().dtype(at::kInt));
  const cudaError_t err = grit::cuda::int4g_quantize(
      v.const_data_ptr<double>(), a.rows, a.cols, static_cast<int64_t>(group), codes.mutable_data_ptr<int8_t>(),
      data.mutable_data_ptr<uint8_t>(), reinterpret_cast<double*>(scale0.mutable_data_ptr<uint8_t>()),
      flag.mutable_data_ptr<int>(), c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, op, ": CUDA kernel launch failed: ", cudaGetErrorString(err));
  if (flag.item<int>() != 0) raise_int4g_refusal(op, v.cpu(), group);
  return {data, scale0, at::empty({0}, u8), at::empty({0}, u8)};
}

at::Tensor int4g_dequantize_cuda(const at::Tensor& data, const at::Tensor& scale0, const at::Tensor& scale1,
                                 const at::Tensor& aux, uint64_t group, c10::IntArrayRef shape,
                                 at::ScalarType dtype) {
  const char* op = "grit::dequantize";
  TORCH_CHECK_TYPE(at::isFloatingType(dtype), op, ": argument 'dtype' must be a floating dtype, found ", dtype);
  check_int4g_shape(op, group, shape);
  const c10::cuda::CUDAGuard guard(data.device());
  const at::Tensor s0 = aligned8(scale0);
  std::vector<double> unused;
  const grit::cpu::Int4gWeight w =
      int4g_weight(op, data, s0, scale1, aux, group, shape, data.device(), &unused, Int4gCheck::kLengths);
  at::Tensor out = at::empty(shape, data.options().dtype(at::kDouble));
  const at::Tensor flag = at::zeros({1}, data.options().dtype(at::kInt));
  const cudaError_t err = grit::cuda::int4g_dequantize(device_plan(w), out.mutable_data_ptr<double>(),
                                                       flag.mutable_data_ptr<int>(),
                                                       c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, op, ": CUDA kernel launch failed: ", cudaGetErrorString(err));
  settle(op, flag, data, s0, scale1, aux, group, shape);
  return dtype == at::kDouble ? out : out.to(dtype);
}

bool int4g_check_cuda(const at::Tensor& data, const at::Tensor& scale0, const at::Tensor& scale1,
                      const at::Tensor& aux, uint64_t group, c10::IntArrayRef shape) {
  const char* op = "grit::check";
  const at::Tensor* t[4] = {&data, &scale0, &scale1, &aux};
  for (const at::Tensor* p : t)
    TORCH_CHECK_VALUE(p->device() == data.device(), op, ": every plane must be on ", data.device(),
                      " like plane 'data', found ", p->device());
  return int4g_check_cpu(data.cpu(), scale0.cpu(), scale1.cpu(), aux.cpu(), group, shape);
}

}  // namespace grit_ops
