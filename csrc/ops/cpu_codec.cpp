// CPU kernels of grit::quantize and grit::dequantize: the block encoders
// (kernels/common/block_encode.h, the core's encoder block by block, tested
// equal) over threads; for dequantize, the active variant's decoder
// (packed_linear_cpu.h: the reference decode's bits, tested equal) over
// 16-row tiles in parallel, and the reference decoder of csrc/grit for
// grades without a fast decoder, behind argument checks.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/packed_linear_cpu.h"
#include "ops/int4g_ops.h"
#include "ops/int4g_args.h"
#include "ops/op_args.h"
#include "ops/quantize_args.h"

namespace grit_ops {
namespace {

// Values encoded per at::parallel_for task.
constexpr int64_t kQuantizeGrainValues = int64_t{1} << 16;

std::vector<at::Tensor> quantize_cpu(const at::Tensor& w, c10::string_view grade_text) {
  const char* op = "grit::quantize";
  if (const uint64_t g = int4g_group_arg(op, grade_text)) return int4g_quantize_cpu(w, g);
  QuantizeArgs a = quantize_args(op, w, grade_text);
  const at::Tensor v = w.to(at::kFloat).contiguous();
  if (a.general) return quantize_general_cpu(op, *a.grade, v);
  std::vector<at::Tensor> planes = alloc_planes(&a, w.options());
  namespace be = grit::blockenc;
  be::Planes& P = a.plan;
  P.v = v.const_data_ptr<float>();
  if (P.family == be::kNvf4) {
    const float amax = at::parallel_reduce(
        int64_t{0}, static_cast<int64_t>(P.n), kQuantizeGrainValues, 0.0f,
        [&](int64_t b, int64_t e, float) { return be::finite_max_magnitude(P.v + b, static_cast<uint64_t>(e - b)); },
        [](float x, float y) { return x > y ? x : y; });
    P.tensor_scale = be::nvf4_tensor_scale(amax);
    be::put_tensor_scale(P);
  }
  // Every block is its own: the bytes do not depend on the split.
  std::atomic<bool> ok{true};
  at::parallel_for(0, static_cast<int64_t>(be::block_count(P)),
                   kQuantizeGrainValues / be::unit_of(P.family), [&](int64_t b, int64_t e) {
                     for (int64_t i = b; i < e; ++i)
                       if (!be::encode_block(P, static_cast<uint64_t>(i))) ok = false;
                   });
  if (!ok) raise_encoder_refusal(op, *a.grade, v);
  return planes;
}

// W [n, k] through the active variant's decoder, tiles in parallel; false
// (out untouched or partly written) when the variant is the scalar
// reference, the grade has no fast decoder, or the planes need the
// reference (an irregular sparse quad).
bool decode_fast(const char* op, const grit::Grade& grade, const PlaneArgs& p, int64_t n, int64_t k,
                 float* out) {
  const grit::cpu::KernelTable& kt = active_cpu_kernels(op);
  if (kt.isa == grit::cpu::Isa::kScalar || grit::cpu::fast_kind_of(grade) == grit::cpu::FastKind::kNone)
    return false;
  const grit::cpu::PackedWeight w = packed_weight(grade, p, n, k);
  grit::cpu::LinearPlan plan;
  grit::cpu::make_plan(w, &plan);
  if (plan.kind == grit::cpu::FastKind::kNone) return false;
  std::atomic<bool> fallback{false};
  const int64_t grain = std::max<int64_t>(1, kQuantizeGrainValues / (grit::cpu::kLinearTileRows * k));
  at::parallel_for(0, grit::cpu::linear_tile_count(n), grain, [&](int64_t b, int64_t e) {
    bool fb = false;
    const grit::Status s = kt.decode_tiles(plan, b, e, out + b * grit::cpu::kLinearTileRows * k, &fb);
    TORCH_CHECK(s.ok(), op, ": ", s.message);
    if (fb) fallback.store(true);
  });
  return !fallback.load();
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
  float* o = numel > 0 ? out.mutable_data_ptr<float>() : nullptr;
  if (numel > 0 && shape.size() == 2 && decode_fast(op, *grade, p, shape[0], shape[1], o))
    return dtype == at::kFloat ? out : out.to(dtype);
  if (numel > 0) {
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
