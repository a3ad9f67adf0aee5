// Argument checks shared by the grit:: op kernels of every backend. Each
// failure names the op and the argument, what was expected, what was found
// and, where there is one, the fix. A wrong dtype is TORCH_CHECK_TYPE
// (Python TypeError), anything else TORCH_CHECK_VALUE (ValueError), as the
// design asks of every bad input; plain TORCH_CHECK is left for internal
// errors.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/string_view.h>

#include <memory>
#include <string>

#include "grit/grit.h"

namespace grit_ops {

// The grade a string names: any accepted spelling of a grade, or a reference
// name ("MXFP4", "GRADE_NVF4"). Parsed once per distinct string (a small
// thread-safe cache), since ops receive the same few strings on every call.
std::shared_ptr<const grit::Grade> grade_arg(const char* op, c10::string_view text);

// "[64, 256]"
std::string shape_str(c10::IntArrayRef shape);

// A floating activation-like argument: float32, bfloat16 or float16.
void check_float_arg(const char* op, const char* name, const at::Tensor& t);

struct PlaneArgs {
  grit::Plane plane[4];
};

// The four plane tensors: uint8, 1-D, contiguous, on `device`; then the
// level-1 check of the canonical descriptor (default placements, groups along
// the last dimension) of `shape` against their byte lengths.
PlaneArgs plane_args(const char* op, const at::Tensor& data, const at::Tensor& scale0,
                     const at::Tensor& scale1, const at::Tensor& aux, const grit::Grade& grade,
                     c10::IntArrayRef shape, c10::Device device);

// The level-1 check alone (what grit::check runs): raises with
// grit::describe's sentence on failure.
void check_lengths(const char* op, const grit::Grade& grade, c10::IntArrayRef shape,
                   const uint64_t lengths[4]);

// The canonical descriptor the ops assume for `grade` and a tensor of `rank`.
grit::Descriptor canonical_descriptor(const grit::Grade& grade, size_t rank);

// A [out, in] weight shape, with `in` a multiple of the grade's k0.
void check_weight_shape(const char* op, const grit::Grade& grade, c10::IntArrayRef shape);

}  // namespace grit_ops
