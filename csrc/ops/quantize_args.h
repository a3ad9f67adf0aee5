// grit::quantize's arguments and the block-encoder plan, shared by the CPU
// and CUDA kernels of the op (both run kernels/common/block_encode.h).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

#include <memory>
#include <vector>

#include "grit/grit.h"
#include "kernels/common/block_encode.h"

namespace grit_ops {

struct QuantizeArgs {
  std::shared_ptr<const grit::Grade> grade;
  grit::blockenc::Planes plan;  // family, rule, rtz and n; no pointers yet
  bool general = false;         // the core's general encoder, not a block family
};

// w: a floating 2-D weight [out, in] the grade can hold; the grade: one a
// reference encoder takes. Raises (naming op, the argument, what was
// expected and found) before anything is allocated.
QuantizeArgs quantize_args(const char* op, const at::Tensor& w, c10::string_view grade_text);

// The four planes, uninitialised, sized for `a` (the blocks write every
// byte), with `options`' device; plan.p points into them.
std::vector<at::Tensor> alloc_planes(QuantizeArgs* a, const at::TensorOptions& options);

// The general encoder (grit::encode_general) on a float32 CPU copy of the
// weight [rows, cols], chunks of rows in parallel: the four planes on the CPU.
std::vector<at::Tensor> quantize_general_cpu(const char* op, const grit::Grade& grade, const at::Tensor& v_cpu);

// A block encoder refused (a Q4KS step left binary32): run the core's
// encoder on the host values and raise its message.
[[noreturn]] void raise_encoder_refusal(const char* op, const grit::Grade& grade, const at::Tensor& v_cpu);

}  // namespace grit_ops
