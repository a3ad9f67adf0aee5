// CUDA kernel of grit::quantize: the CPU op's argument checks, then the
// block encoders on the device (csrc/kernels/cuda/quantize_cuda.h) on the
// current stream. A Q4KS tensor a block refuses is re-encoded by the core on
// a host copy, which raises its own message. INT4G (seed 001's groups) has
// its own kernel (cuda_int4g.h). Grades only the general encoder takes are
// encoded on a host copy and moved to the device.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <vector>

#include "kernels/cuda/quantize_cuda.h"
#include "ops/cuda_int4g.h"
#include "ops/int4g_args.h"
#include "ops/quantize_args.h"

namespace grit_ops {
namespace {

std::vector<at::Tensor> quantize_cuda(const at::Tensor& w, c10::string_view grade_text) {
  const char* op = "grit::quantize";
  if (const uint64_t g = int4g_group_arg(op, grade_text)) return int4g_quantize_cuda(w, g);
  QuantizeArgs a = quantize_args(op, w, grade_text);
  const c10::cuda::CUDAGuard guard(w.device());
  const at::Tensor v = w.to(at::kFloat).contiguous();
  if (a.general) {
    // The general encoder has no device copy: it runs on a host copy.
    std::vector<at::Tensor> planes = quantize_general_cpu(op, *a.grade, v.cpu());
    for (auto& p : planes) p = p.to(w.device());
    return planes;
  }
  std::vector<at::Tensor> planes = alloc_planes(&a, w.options());
  a.plan.v = v.const_data_ptr<float>();
  const at::Tensor scratch = at::empty({2}, w.options().dtype(at::kInt));
  int* s = scratch.mutable_data_ptr<int>();
  const cudaError_t err = grit::cuda::quantize(a.plan, reinterpret_cast<uint32_t*>(s), s + 1,
                                               c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, op, ": CUDA kernel launch failed: ", cudaGetErrorString(err));
  // Only a Q4KS block can refuse: the other families need no read-back.
  if (a.plan.family == grit::blockenc::kQ4ks && scratch[1].item<int>() != 0)
    raise_encoder_refusal(op, *a.grade, v.cpu());
  return planes;
}

}  // namespace

TORCH_LIBRARY_IMPL(grit, CUDA, m) { m.impl("quantize", &quantize_cuda); }

}  // namespace grit_ops
