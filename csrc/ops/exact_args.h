// Argument checks of grit::pack_activations and grit::packed_linear_exact,
// shared by the CPU and CUDA kernels so both refuse alike.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/string_view.h>

#include <optional>
#include <vector>

#include "grit/exact_linear.h"
#include "ops/op_args.h"

namespace grit_ops {

// x: float32/bfloat16/float16, at least 1-D, block >= 1 dividing x.size(-1).
void check_pack_args(const char* op, const at::Tensor& x, int64_t block);

// Raises (naming the first offending row and column and its value) when x
// (float32, [m, k]) holds a NaN or an infinity. On CUDA this reads one flag
// back (a synchronisation).
void refuse_non_finite(const char* op, const at::Tensor& x);

// x's sizes with the last one divided by block.
std::vector<int64_t> pack_scale_sizes(const at::Tensor& x, int64_t block);

struct ExactArgs {
  grit::exact::Law law;
  PlaneArgs planes;
  int64_t m = 0, n = 0, k = 0;
  bool has_bias = false;
};

// Every check of packed_linear_exact: the grade's exact law (or the reason
// it has none, or the bound it breaks), the weight shape, codes int8
// [..., k], scales float32 [..., k/k0], the planes, the bias.
ExactArgs exact_args(const char* op, const at::Tensor& codes, const at::Tensor& scales,
                     const at::Tensor& data, const at::Tensor& scale0, const at::Tensor& scale1,
                     const at::Tensor& aux, c10::string_view grade_text, c10::IntArrayRef shape,
                     const std::optional<at::Tensor>& bias);

// codes' sizes with the last one replaced by n.
std::vector<int64_t> exact_out_sizes(const at::Tensor& codes, int64_t n);

}  // namespace grit_ops
