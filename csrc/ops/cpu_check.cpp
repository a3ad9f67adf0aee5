// CPU kernel of grit::check: the level-1 check of the canonical descriptor
// against the planes' byte lengths. Reads no plane bytes.
#include <torch/library.h>

#include "ops/int4g_args.h"
#include "ops/int4g_ops.h"
#include "ops/op_args.h"

namespace grit_ops {
namespace {

bool check_cpu(const at::Tensor& data, const at::Tensor& scale0, const at::Tensor& scale1,
               const at::Tensor& aux, c10::string_view grade_text, c10::IntArrayRef shape) {
  const char* op = "grit::check";
  if (const uint64_t g = int4g_group_arg(op, grade_text))
    return int4g_check_cpu(data, scale0, scale1, aux, g, shape);
  const auto grade = grade_arg(op, grade_text);
  plane_args(op, data, scale0, scale1, aux, *grade, shape, data.device());
  return true;
}

}  // namespace

TORCH_LIBRARY_IMPL(grit, CPU, m) { m.impl("check", &check_cpu); }

}  // namespace grit_ops
