// CUDA kernels of grit::pack_activations and grit::packed_linear_exact: the
// checks of exact_args.h, then the torch-free kernels of
// csrc/kernels/cuda/exact_linear.cu on the current stream. Built only where
// torch has CUDA (setup.py). pack_activations reads one flag back to refuse
// non-finite x (a synchronisation); packed_linear_exact does not synchronise.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "kernels/cuda/exact_linear_cuda.h"
#include "ops/exact_args.h"

namespace grit_ops {
namespace {

std::tuple<at::Tensor, at::Tensor> pack_activations_cuda(const at::Tensor& x, int64_t block) {
  const char* op = "grit::pack_activations";
  check_pack_args(op, x, block);
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t k = x.size(-1), m = k ? x.numel() / k : 0;
  const at::Tensor x32 = x.reshape({m, k}).to(at::kFloat).contiguous();
  refuse_non_finite(op, x32);
  at::Tensor codes = at::empty(x.sizes(), x.options().dtype(at::kChar));
  at::Tensor scales = at::empty(pack_scale_sizes(x, block), x.options().dtype(at::kFloat));
  const cudaError_t err = grit::cuda::exact_pack(x32.const_data_ptr<float>(), m, k, block,
                                                 codes.mutable_data_ptr<int8_t>(), scales.mutable_data_ptr<float>(),
                                                 c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, op, ": CUDA kernel launch failed: ", cudaGetErrorString(err));
  return {codes, scales};
}

at::Tensor packed_linear_exact_cuda(const at::Tensor& codes, const at::Tensor& scales, const at::Tensor& data,
                                    const at::Tensor& scale0, const at::Tensor& scale1, const at::Tensor& aux,
                                    c10::string_view grade_text, c10::IntArrayRef shape,
                                    const std::optional<at::Tensor>& bias) {
  const char* op = "grit::packed_linear_exact";
  const ExactArgs args = exact_args(op, codes, scales, data, scale0, scale1, aux, grade_text, shape, bias);
  const c10::cuda::CUDAGuard guard(codes.device());
  const grit::exact::Law& L = args.law;
  const int64_t m = args.m, n = args.n, k = args.k, nb = k / L.k0;
  at::Tensor y = at::empty({m, n}, codes.options().dtype(at::kFloat));
  if (m > 0 && n > 0) {
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
    const auto i64 = codes.options().dtype(at::kLong);
    const uint8_t* meta = args.planes.plane[3].data;
    at::Tensor start;
    if (L.sp_m) {
      at::Tensor counts = at::empty({n}, i64);
      cudaError_t err = grit::cuda::exact_row_counts(L, meta, n, k, counts.mutable_data_ptr<int64_t>(), stream);
      TORCH_CHECK(err == cudaSuccess, op, ": CUDA kernel launch failed: ", cudaGetErrorString(err));
      start = (at::cumsum(counts, 0) - counts).contiguous();  // exclusive scan: each row's first code
    }
    at::Tensor w = at::empty({n, k}, codes.options().dtype(at::kShort));
    at::Tensor ws = at::empty({n, nb, 3}, codes.options().dtype(at::kInt));  // WScale {m, x, finite}
    static_assert(sizeof(grit::exact::WScale) == 3 * sizeof(int32_t), "WScale is three int32");
    cudaError_t err = grit::cuda::exact_weight(
        L, args.planes.plane[0].data, args.planes.plane[1].data, meta,
        L.sp_m ? start.const_data_ptr<int64_t>() : nullptr, n, k, w.mutable_data_ptr<int16_t>(),
        reinterpret_cast<grit::exact::WScale*>(ws.mutable_data_ptr<int32_t>()), stream);
    TORCH_CHECK(err == cudaSuccess, op, ": CUDA kernel launch failed: ", cudaGetErrorString(err));
    const at::Tensor c2 = codes.reshape({m, k}).contiguous();
    const at::Tensor s2 = scales.reshape({m, nb}).contiguous();
    const at::Tensor b32 = args.has_bias ? bias->to(at::kFloat).contiguous() : at::Tensor();
    err = grit::cuda::exact_linear(L, c2.const_data_ptr<int8_t>(), s2.const_data_ptr<float>(), m,
                                   w.const_data_ptr<int16_t>(),
                                   reinterpret_cast<const grit::exact::WScale*>(ws.const_data_ptr<int32_t>()), n, k,
                                   args.has_bias ? b32.const_data_ptr<float>() : nullptr,
                                   y.mutable_data_ptr<float>(), stream);
    TORCH_CHECK(err == cudaSuccess, op, ": CUDA kernel launch failed: ", cudaGetErrorString(err));
  }
  return y.view(exact_out_sizes(codes, n));
}

}  // namespace

TORCH_LIBRARY_IMPL(grit, CUDA, m) {
  m.impl("pack_activations", &pack_activations_cuda);
  m.impl("packed_linear_exact", &packed_linear_exact_cuda);
}

}  // namespace grit_ops
