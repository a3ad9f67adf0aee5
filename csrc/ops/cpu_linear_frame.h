// The frame the CPU packed-linear ops share (packed_linear,
// packed_linear_tiled): x as float32 [m, k] and y as float32 [m, n];
// body(x, m, bias, y, grain) fills y (bias null or float32 [n]; grain: the
// 16-row tiles per at::parallel_for task); an empty weight gives the bias
// (or nothing); y comes back in x's dtype and leading shape. A large batch
// is handed to body in chunks of rows whose float32 x fits about 8 MiB:
// every tile of W streams its chunk of x, which then stays in the
// last-level cache instead of coming from DRAM once per tile. A row's
// output never depends on the other rows (the kernels' batch invariance),
// so the chunks change no bit.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <optional>

#include "kernels/cpu/packed_linear_cpu.h"
#include "ops/op_args.h"

namespace grit_ops {

template <class Body>
at::Tensor cpu_linear_frame(const at::Tensor& x, int64_t n, int64_t k, const std::optional<at::Tensor>& bias,
                            bool has_bias, Body&& body) {
  const int64_t m = batch_rows(x);
  const at::Tensor x32 = x.reshape({m, k}).to(at::kFloat).contiguous();
  at::Tensor y = at::empty({m, n}, x.options().dtype(at::kFloat));
  if (m > 0 && n > 0) {
    const at::Tensor b32 = has_bias ? bias->to(at::kFloat).contiguous() : at::Tensor();
    const int64_t chunk = std::max<int64_t>(64, (int64_t{8} << 20) / (4 * std::max<int64_t>(1, k)));
    for (int64_t i0 = 0; i0 < m; i0 += chunk) {
      const int64_t mc = std::min(chunk, m - i0);
      const int64_t tile_work = std::max<int64_t>(1, mc * k * grit::cpu::kLinearTileRows);
      body(x32.const_data_ptr<float>() + i0 * k, mc, has_bias ? b32.const_data_ptr<float>() : nullptr,
           y.mutable_data_ptr<float>() + i0 * n, std::max<int64_t>(1, kLinearTaskWork / tile_work));
    }
  } else if (m > 0 && has_bias) {
    y.copy_(bias->to(at::kFloat).expand({m, n}));
  }
  return y.to(x.scalar_type()).view(with_last(x.sizes(), n));
}

// The variant kt's linear_tiles over every 16-row tile of plan's weight,
// `grain` tiles per at::parallel_for task (each task decodes its own
// tiles). True when some task fell back: the caller reruns the reference.
inline bool parallel_linear_tiles(const char* op, const grit::cpu::KernelTable& kt,
                                  const grit::cpu::LinearPlan& plan, const float* x, int64_t m, const float* bias,
                                  float* y, int64_t grain) {
  std::atomic<bool> fallback{false};
  at::parallel_for(0, grit::cpu::linear_tile_count(plan.w.n), grain, [&](int64_t b, int64_t e) {
    bool fb = false;
    const grit::Status s = kt.linear_tiles(plan, x, m, bias, b, e, y, &fb);
    TORCH_CHECK(s.ok(), op, ": ", s.message);
    if (fb) fallback.store(true);
  });
  return fallback.load();
}

}  // namespace grit_ops
