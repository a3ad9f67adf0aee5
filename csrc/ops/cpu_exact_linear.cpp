// CPU kernels of grit::pack_activations and grit::packed_linear_exact: the
// exact integer mode of csrc/grit/exact_linear.h behind argument checks and
// at::parallel_for, on the kernels' fast copies of the core's steps
// (kernels/cpu/exact_decode.h, exact_dot.h, exact_tile.h: tested equal to the
// core).
// Threads own disjoint outputs and every output is exact_dot's pure function
// of the codes and scales, so the bits do not depend on the thread count.
// The argument checks are shared with the CUDA wrapper (exact_args.h).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "grit/exact_linear.h"
#include "kernels/cpu/exact_decode.h"
#include "kernels/cpu/exact_dot.h"
#include "kernels/cpu/exact_tile.h"
#include "kernels/cpu/packed_linear_cpu.h"
#include "ops/exact_args.h"
#include "ops/op_args.h"

namespace grit_ops {
namespace {

constexpr int64_t kMinTaskWork = int64_t{1} << 15;  // multiply-adds worth a task
constexpr int64_t kTileRows = grit::cpu::kExactTileRows;  // weight rows decoded at a time (L2-sized at k = 4096)

std::tuple<at::Tensor, at::Tensor> pack_activations_cpu(const at::Tensor& x, int64_t block) {
  const char* op = "grit::pack_activations";
  check_pack_args(op, x, block);
  const int64_t k = x.size(-1), m = k ? x.numel() / k : 0, nb = k / block;
  const at::Tensor x32 = x.reshape({m, k}).to(at::kFloat).contiguous();
  refuse_non_finite(op, x32);
  at::Tensor codes = at::empty(x.sizes(), x.options().dtype(at::kChar));
  at::Tensor scales = at::empty(pack_scale_sizes(x, block), x.options().dtype(at::kFloat));
  const float* xp = x32.const_data_ptr<float>();
  int8_t* cp = codes.mutable_data_ptr<int8_t>();
  float* sp = scales.mutable_data_ptr<float>();
  at::parallel_for(0, m * nb, std::max<int64_t>(1, kMinTaskWork / std::max<int64_t>(1, block)),
                   [&](int64_t b, int64_t e) {
                     for (int64_t r = b; r < e; ++r) {
                       const int64_t i = r / nb, c = r % nb;
                       sp[r] = grit::exact::pack_block(xp + i * k + c * block, block, cp + i * k + c * block);
                     }
                   });
  return {codes, scales};
}

at::Tensor packed_linear_exact_cpu(const at::Tensor& codes, const at::Tensor& scales, const at::Tensor& data,
                                   const at::Tensor& scale0, const at::Tensor& scale1, const at::Tensor& aux,
                                   c10::string_view grade_text, c10::IntArrayRef shape,
                                   const std::optional<at::Tensor>& bias) {
  const char* op = "grit::packed_linear_exact";
  const ExactArgs args = exact_args(op, codes, scales, data, scale0, scale1, aux, grade_text, shape, bias);
  const grit::exact::Law& L = args.law;
  const int64_t m = args.m, n = args.n, k = args.k, nb = k / L.k0;
  at::Tensor y = at::empty({m, n}, codes.options().dtype(at::kFloat));
  if (m > 0 && n > 0) {
    // The data-plane cursor of each row start (a serial prefix of per-row
    // counts for sparse grades).
    const uint8_t* dp = args.planes.plane[0].data;
    const uint8_t* s0 = args.planes.plane[1].data;
    const uint8_t* meta = args.planes.plane[3].data;
    std::vector<uint64_t> start(static_cast<size_t>(n), 0);
    if (L.sp_m) {
      std::vector<uint64_t> count(static_cast<size_t>(n));
      at::parallel_for(0, n, 16, [&](int64_t b, int64_t e) {
        for (int64_t j = b; j < e; ++j) count[j] = grit::cpu::exact_row_stored(L, meta, j, k);
      });
      for (int64_t j = 1; j < n; ++j) start[j] = start[j - 1] + count[j - 1];
    }
    const at::Tensor c2 = codes.reshape({m, k}).contiguous();
    const at::Tensor s2 = scales.reshape({m, nb}).contiguous();
    const at::Tensor b32 = args.has_bias ? bias->to(at::kFloat).contiguous() : at::Tensor();
    const int8_t* ap = c2.const_data_ptr<int8_t>();
    const float* asp = s2.const_data_ptr<float>();
    const float* bp = args.has_bias ? b32.const_data_ptr<float>() : nullptr;
    float* yp = y.mutable_data_ptr<float>();
    // Each batch row taken apart once (exact_dot.h), in parallel.
    std::vector<grit::cpu::ExactActivation> act(static_cast<size_t>(m));
    at::parallel_for(0, m, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) grit::cpu::exact_activation(L, ap + i * k, asp + i * nb, k, &act[i]);
    });
    // Threads own row ranges; each decodes kTileRows weight rows into its own
    // buffer (never the whole weight) and runs every batch row over them.
    const int64_t grain = std::max<int64_t>(kTileRows, kMinTaskWork / std::max<int64_t>(1, k * m));
    // Under the avx512 and avx512_bf16 variants (the CPU kernel variant
    // packed_linear runs, GRIT_CPU_ISA included) on a CPU with VNNI, a
    // tile's 16 rows are laid out lane = row (exact_tile.h) and every batch
    // row runs over all 16 at once; otherwise one output at a time.
    grit::cpu::Isa isa;
    const grit::Status sel = grit::cpu::active_isa(&isa);
    TORCH_CHECK_VALUE(sel.ok(), op, ": ", sel.message);
    const bool tiled = (isa == grit::cpu::Isa::kAvx512 || isa == grit::cpu::Isa::kAvx512Bf16) &&
                       grit::cpu::exact_tile_supported(L);
    at::parallel_for(0, n, grain, [&](int64_t b, int64_t e) {
      std::vector<int16_t> w;  // decoded rows, sized when a tile is decoded
      std::vector<grit::exact::WScale> ws;
      std::vector<int64_t> scratch(static_cast<size_t>(nb));
      grit::cpu::ExactTile tile;
      float yt[kTileRows];
      for (int64_t j0 = b; j0 < e; j0 += kTileRows) {
        const int64_t j1 = std::min(e, j0 + kTileRows);
        const int rows = static_cast<int>(j1 - j0);
        if (!tiled || !grit::cpu::exact_tile_from_planes(L, dp, s0, meta, start.data() + j0, j0, rows, k, &tile)) {
          w.resize(static_cast<size_t>(kTileRows * k));
          ws.resize(static_cast<size_t>(kTileRows * nb));
          for (int64_t j = j0; j < j1; ++j)
            grit::cpu::exact_weight_row(L, dp, s0, meta, j, k, start[j], w.data() + (j - j0) * k,
                                        ws.data() + (j - j0) * nb);
          if (tiled) grit::cpu::exact_tile_pack(L, w.data(), ws.data(), rows, k, &tile);
        }
        if (tiled) {
          for (int64_t i = 0; i < m; ++i) {
            grit::cpu::exact_dot_tile(L, act[i], tile, k, bp ? bp + j0 : nullptr, yt);
            std::copy(yt, yt + (j1 - j0), yp + i * n + j0);
          }
          continue;
        }
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = j0; j < j1; ++j)
            yp[i * n + j] = grit::cpu::exact_dot_row(L, act[i], w.data() + (j - j0) * k, ws.data() + (j - j0) * nb,
                                                     k, bp != nullptr, bp ? bp[j] : 0.0f, scratch.data());
      }
    });
  }
  return y.view(exact_out_sizes(codes, n));
}

}  // namespace

TORCH_LIBRARY_IMPL(grit, CPU, m) {
  m.impl("pack_activations", &pack_activations_cpu);
  m.impl("packed_linear_exact", &packed_linear_exact_cpu);
}

}  // namespace grit_ops
