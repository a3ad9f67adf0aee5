// CPU kernels of the grit:: ops for seed 001's int4 row groups ("INT4G<g>").
// Each grit:: op's CPU impl calls its counterpart here first thing when the
// grade string names INT4G (int4g_group_arg); the layout of the planes is in
// int4g_args.h.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <optional>
#include <vector>

namespace grit_ops {

// w: float32, bfloat16, float16 or float64 (converted exactly to binary64).
std::vector<at::Tensor> int4g_quantize_cpu(const at::Tensor& w, uint64_t group);

// A group encoder refused (a non-finite weight): run the core's encoder on
// the host values `v` and raise its message.
[[noreturn]] void raise_int4g_refusal(const char* op, const at::Tensor& v, uint64_t group);

// The core decode (binary64), cast once to dtype.
at::Tensor int4g_dequantize_cpu(const at::Tensor& data, const at::Tensor& scale0,
                                const at::Tensor& scale1, const at::Tensor& aux, uint64_t group,
                                c10::IntArrayRef shape, at::ScalarType dtype);

at::Tensor int4g_packed_linear_cpu(const at::Tensor& x, const at::Tensor& data,
                                   const at::Tensor& scale0, const at::Tensor& scale1,
                                   const at::Tensor& aux, uint64_t group, c10::IntArrayRef shape,
                                   const std::optional<at::Tensor>& bias);

at::Tensor int4g_packed_linear_grad_input_cpu(const at::Tensor& grad_y, const at::Tensor& data,
                                              const at::Tensor& scale0, const at::Tensor& scale1,
                                              const at::Tensor& aux, uint64_t group,
                                              c10::IntArrayRef shape);

// The core reader's validation; true or raises.
bool int4g_check_cpu(const at::Tensor& data, const at::Tensor& scale0, const at::Tensor& scale1,
                     const at::Tensor& aux, uint64_t group, c10::IntArrayRef shape);

}  // namespace grit_ops
