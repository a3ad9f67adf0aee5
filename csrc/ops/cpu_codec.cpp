// CPU kernels of grit::quantize and grit::dequantize: the reference encoder
// and decoder of csrc/grit behind argument checks.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cstring>
#include <vector>

#include "ops/int4g_ops.h"
#include "ops/int4g_args.h"
#include "ops/op_args.h"

namespace grit_ops {
namespace {

std::vector<at::Tensor> quantize_cpu(const at::Tensor& w, c10::string_view grade_text) {
  const char* op = "grit::quantize";
  if (const uint64_t g = int4g_group_arg(op, grade_text)) return int4g_quantize_cpu(w, g);
  const auto grade = grade_arg(op, grade_text);
  check_float_arg(op, "w", w);
  TORCH_CHECK_VALUE(w.dim() == 2, op, ": argument 'w' must be a 2-D weight [out, in], found ", w.dim(),
              " dimensions ", shape_str(w.sizes()));
  check_weight_shape(op, *grade, w.sizes());
  // The other shape rules (k1 groups, sparsity quads) are the size equations'.
  const grit::Descriptor d = canonical_descriptor(*grade, 2);
  grit::PlaneSizes sizes;
  const grit::CheckResult r = grit::expected_plane_bytes(d, w.sizes().data(), 2, &sizes);
  TORCH_CHECK_VALUE(r.ok(), op, ": grade ", grade->canonical, " cannot hold a weight of shape ",
              shape_str(w.sizes()), ": ", grit::describe(r, d));

  const at::Tensor v = w.to(at::kFloat).contiguous();
  grit::EncodedPlanes enc;
  const grit::Status s = grit::encode(*grade, v.const_data_ptr<float>(),
                                      static_cast<uint64_t>(v.numel()), &enc);
  TORCH_CHECK_VALUE(s.ok(), op, ": cannot quantize to ", grade->canonical, ": ", s.message);

  std::vector<at::Tensor> planes;
  for (int i = 0; i < 4; ++i) {
    const auto& bytes = enc.plane[i];
    TORCH_CHECK(bytes.size() == sizes.bytes[i], op, ": internal error: the encoder wrote ",
                bytes.size(), " bytes for plane ", i, ", the size equations say ", sizes.bytes[i]);
    at::Tensor p = at::empty({static_cast<int64_t>(bytes.size())}, w.options().dtype(at::kByte));
    if (!bytes.empty()) std::memcpy(p.mutable_data_ptr<uint8_t>(), bytes.data(), bytes.size());
    planes.push_back(std::move(p));
  }
  return planes;
}

at::Tensor dequantize_cpu(const at::Tensor& data, const at::Tensor& scale0,
                          const at::Tensor& scale1, const at::Tensor& aux,
                          c10::string_view grade_text, c10::IntArrayRef shape,
                          at::ScalarType dtype) {
  const char* op = "grit::dequantize";
  if (const uint64_t g = int4g_group_arg(op, grade_text))
    return int4g_dequantize_cpu(data, scale0, scale1, aux, g, shape, dtype);
  const auto grade = grade_arg(op, grade_text);
  TORCH_CHECK_TYPE(at::isFloatingType(dtype), op, ": argument 'dtype' must be a floating dtype, found ",
              dtype);
  const PlaneArgs p = plane_args(op, data, scale0, scale1, aux, *grade, shape, data.device());

  at::Tensor out = at::empty(shape, data.options().dtype(at::kFloat));
  const int64_t numel = out.numel();
  const int64_t row = shape.back();  // a multiple of k0 (and of M): the check says so
  if (numel > 0) {
    float* o = out.mutable_data_ptr<float>();
    // Chunks of whole rows; a chunk finds its own sparse cursor, and there
    // are at most as many chunks as threads, so the scans stay cheap.
    const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / row);
    at::parallel_for(0, numel / row, grain, [&](int64_t b, int64_t e) {
      uint64_t cursor = grit::sparse_cursor(*grade, p.plane, static_cast<uint64_t>(b * row));
      const grit::Status s =
          grit::decode_range(*grade, p.plane, static_cast<uint64_t>(numel),
                             static_cast<uint64_t>(b * row), static_cast<uint64_t>(e * row),
                             &cursor, o + b * row);
      TORCH_CHECK(s.ok(), op, ": ", s.message);
    });
  }
  return dtype == at::kFloat ? out : out.to(dtype);
}

}  // namespace

TORCH_LIBRARY_IMPL(grit, CPU, m) {
  m.impl("quantize", &quantize_cpu);
  m.impl("dequantize", &dequantize_cpu);
}

}  // namespace grit_ops
