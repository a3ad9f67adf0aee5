#include "ops/quantize_args.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstring>

#include "ops/op_args.h"

namespace grit_ops {

QuantizeArgs quantize_args(const char* op, const at::Tensor& w, c10::string_view grade_text) {
  QuantizeArgs a;
  a.grade = grade_arg(op, grade_text);
  const grit::Grade& grade = *a.grade;
  check_float_arg(op, "w", w);
  TORCH_CHECK_VALUE(w.dim() == 2, op, ": argument 'w' must be a 2-D weight [out, in], found ", w.dim(),
                    " dimensions ", shape_str(w.sizes()));
  check_weight_shape(op, grade, w.sizes());
  // The other shape rules (k1 groups, sparsity quads) are the size equations'.
  const grit::Descriptor d = canonical_descriptor(grade, 2);
  grit::PlaneSizes sizes;
  const grit::CheckResult r = grit::expected_plane_bytes(d, w.sizes().data(), 2, &sizes);
  TORCH_CHECK_VALUE(r.ok(), op, ": grade ", grade.canonical, " cannot hold a weight of shape ",
                    shape_str(w.sizes()), ": ", grit::describe(r, d));
  grit::EncoderChoice c;
  const grit::Status s = grit::choose_encoder(grade, &c);
  TORCH_CHECK_VALUE(s.ok(), op, ": cannot quantize to ", grade.canonical, ": ", s.message);
  if (c.family == grit::EncoderFamily::kGeneral) {
    a.general = true;
    return a;
  }

  a.plan = grit::blockenc::Planes{};
  a.plan.n = static_cast<uint64_t>(w.numel());
  a.plan.family = static_cast<int>(c.family);
  a.plan.rule = static_cast<int>(c.rule);
  a.plan.rtz = c.elem_rounding == grit::Rounding::kRtz;
  TORCH_CHECK(a.plan.n % grit::blockenc::unit_of(a.plan.family) == 0, op,
              ": internal error: the shape checks let through ", a.plan.n, " values for ", grade.canonical);
  for (int i = 0; i < 4; ++i)
    TORCH_CHECK(grit::blockenc::plane_bytes(a.plan.family, a.plan.n, i) == sizes.bytes[i], op,
                ": internal error: the block encoder would write ",
                grit::blockenc::plane_bytes(a.plan.family, a.plan.n, i), " bytes for plane ", i,
                ", the size equations say ", sizes.bytes[i]);
  return a;
}

std::vector<at::Tensor> alloc_planes(QuantizeArgs* a, const at::TensorOptions& options) {
  std::vector<at::Tensor> planes;
  for (int i = 0; i < 4; ++i) {
    const auto bytes = static_cast<int64_t>(grit::blockenc::plane_bytes(a->plan.family, a->plan.n, i));
    planes.push_back(at::empty({bytes}, options.dtype(at::kByte)));
    a->plan.p[i] = planes.back().mutable_data_ptr<uint8_t>();
  }
  return planes;
}

std::vector<at::Tensor> quantize_general_cpu(const char* op, const grit::Grade& grade, const at::Tensor& v) {
  const int64_t rows = v.size(0), cols = v.size(1);
  uint64_t total[4];
  const grit::Status st = grit::grade_plane_bytes(grade, static_cast<uint64_t>(v.numel()), total);
  TORCH_CHECK_VALUE(st.ok(), op, ": ", grade.canonical, ": ", st.message);
  std::vector<at::Tensor> planes;
  for (int i = 0; i < 4; ++i) planes.push_back(at::empty({static_cast<int64_t>(total[i])}, v.options().dtype(at::kByte)));
  // Chunks of 8 rows start on a byte of every plane (8 * cols codes fill whole
  // bytes at any width); each group is its own, so the split changes no byte.
  constexpr int64_t kRowsPerChunk = 8;
  const int64_t chunks = (rows + kRowsPerChunk - 1) / kRowsPerChunk;
  const float* base = v.const_data_ptr<float>();
  std::atomic<bool> ok{true};
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, cols * kRowsPerChunk));
  at::parallel_for(0, chunks, grain, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e && ok; ++c) {
      const int64_t r0 = c * kRowsPerChunk, r1 = std::min(rows, r0 + kRowsPerChunk);
      grit::EncodedPlanes enc;
      uint64_t before[4];
      if (!grit::encode_general(grade, base + r0 * cols, static_cast<uint64_t>((r1 - r0) * cols), &enc).ok() ||
          !grit::grade_plane_bytes(grade, static_cast<uint64_t>(r0 * cols), before).ok()) {
        ok = false;
        return;
      }
      for (int i = 0; i < 4; ++i)
        if (!enc.plane[i].empty())
          std::memcpy(planes[i].mutable_data_ptr<uint8_t>() + before[i], enc.plane[i].data(), enc.plane[i].size());
    }
  });
  if (!ok) raise_encoder_refusal(op, grade, v);
  return planes;
}

void raise_encoder_refusal(const char* op, const grit::Grade& grade, const at::Tensor& v_cpu) {
  const at::Tensor v = v_cpu.to(at::kFloat).contiguous();
  grit::EncodedPlanes enc;
  const grit::Status s = grit::encode(grade, v.const_data_ptr<float>(), static_cast<uint64_t>(v.numel()), &enc);
  TORCH_CHECK_VALUE(s.ok(), op, ": cannot quantize to ", grade.canonical, ": ", s.message);
  TORCH_CHECK(false, op, ": internal error: a block encoder refused a tensor the core's encoder takes (",
              grade.canonical, ")");
}

}  // namespace grit_ops
