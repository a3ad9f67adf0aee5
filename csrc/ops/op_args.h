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
#include <optional>
#include <string>
#include <vector>

#include "grit/grit.h"
#include "kernels/cpu/packed_linear_cpu.h"

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

// The torch-free kernels' view of a checked [n, k] weight: grade and planes.
grit::cpu::PackedWeight packed_weight(const grit::Grade& grade, const PlaneArgs& p, int64_t n, int64_t k);

// One plane tensor (`name` for messages): uint8, 1-D, contiguous, on `device`.
void check_plane_tensor(const char* op, const char* name, const at::Tensor& p, c10::Device device);
// The level-1 check alone (what grit::check runs): raises with
// grit::describe's sentence on failure.
void check_lengths(const char* op, const grit::Grade& grade, c10::IntArrayRef shape,
                   const uint64_t lengths[4]);

// The canonical descriptor the ops assume for `grade` and a tensor of `rank`.
grit::Descriptor canonical_descriptor(const grit::Grade& grade, size_t rank);

// A [out, in] weight shape, with `in` a multiple of the grade's k0.
void check_weight_shape(const char* op, const grit::Grade& grade, c10::IntArrayRef shape);

// ---- The packed-linear ops' activations (CPU impls of every grade). ----

// Multiply-adds worth one at::parallel_for task; rows of W decoded per
// backward step.
constexpr int64_t kLinearTaskWork = int64_t{1} << 16;
constexpr int64_t kGradTileRows = 64;

// The CPU kernel variant the packed-linear ops run (chosen once at the first
// call, GRIT_CPU_ISA overrides); raises, naming op, when GRIT_CPU_ISA names
// a variant this CPU cannot run.
const grit::cpu::KernelTable& active_cpu_kernels(const char* op);

// t's leading dimensions as one batch dimension (numel / K fails for K = 0).
int64_t batch_rows(const at::Tensor& t);

// `sizes` with its last entry replaced.
std::vector<int64_t> with_last(c10::IntArrayRef sizes, int64_t last);

// A floating activation of at least 1 dimension whose last has `want`
// features (`what`: which side of the weight `shape` that is).
void check_activation(const char* op, const char* name, const at::Tensor& t, int64_t want,
                      const char* what, c10::IntArrayRef shape);

// An optional floating bias of shape [n] on `device`; whether one is given.
bool check_bias(const char* op, const std::optional<at::Tensor>& bias, int64_t n, c10::Device device);

}  // namespace grit_ops
