// CUDA impls of the grit:: ops for seed 001's int4 row groups ("INT4G<g>"):
// each CUDA op of cuda_packed_linear.cpp calls its counterpart here first
// thing when the grade names INT4G (int4g_group_arg). Built only where torch
// has CUDA.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace grit_ops {

// The device kernel (csrc/kernels/cuda/int4g_linear_cuda.h); it checks
// codes and scales as it reads them, and where it asks, the core's reader
// runs on host copies (one 4-byte read back per call, a sync).
at::Tensor int4g_packed_linear_cuda(const at::Tensor& x, const at::Tensor& data, const at::Tensor& scale0,
                                    const at::Tensor& scale1, const at::Tensor& aux, uint64_t group,
                                    c10::IntArrayRef shape, const std::optional<at::Tensor>& bias);

// The device kernel of the backward to x; flags and checks as packed_linear.
at::Tensor int4g_grad_input_cuda(const at::Tensor& grad_y, const at::Tensor& data, const at::Tensor& scale0,
                                 const at::Tensor& scale1, const at::Tensor& aux, uint64_t group,
                                 c10::IntArrayRef shape);

// The device encoder (csrc/kernels/cuda/int4g_quantize_cuda.h): the core
// encoder's planes; a refused weight raises the core's message (a host run).
std::vector<at::Tensor> int4g_quantize_cuda(const at::Tensor& w, uint64_t group);

// The device decode (binary64, the core's bits), cast once to dtype.
at::Tensor int4g_dequantize_cuda(const at::Tensor& data, const at::Tensor& scale0, const at::Tensor& scale1,
                                 const at::Tensor& aux, uint64_t group, c10::IntArrayRef shape,
                                 at::ScalarType dtype);

// The core's reader on host copies; true or raises.
bool int4g_check_cuda(const at::Tensor& data, const at::Tensor& scale0, const at::Tensor& scale1,
                      const at::Tensor& aux, uint64_t group, c10::IntArrayRef shape);

}  // namespace grit_ops
