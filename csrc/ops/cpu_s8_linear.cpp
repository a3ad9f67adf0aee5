// CPU kernel of grit::packed_linear_s8: y = x W^T + b under the s8
// activation law (csrc/grit/s8_linear.h). Each row of x is packed to int8
// blocks once (the exact mode's packing), then threads own 16-row weight
// tiles (kernels/cpu/s8_tile.h: decoded from the planes into an L2-sized
// buffer, never the whole weight) and run every batch row over them, four
// at a time. Under the avx512 and avx512_bf16 kernel variants on a CPU with
// VNNI the fused tile kernel runs for dense 4-bit and 8-bit codes (read from
// the data plane in registers, vpdpbusd; from 16 batch rows up on a CPU
// with AMX-INT8, decoded once per tile and multiplied on tiles), the tile
// kernel for the rest (codes expanded into the tile buffer, vpdpwssd); under the other vector variants
// the fused kernel's AVX2 copy (vpmaddubsw) takes the dense codes; otherwise
// (and for odd blocks) the core's own s8::dot, one output at a time. Either way each output is the law's pure
// function of its row's codes and the weight: the same bits for any thread
// count, variant or batch composition.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "grit/exact_linear.h"
#include "grit/s8_linear.h"
#include "kernels/cpu/exact_decode.h"
#include "kernels/cpu/packed_linear_cpu.h"
#include "kernels/cpu/s8_tile.h"
#include "ops/exact_args.h"
#include "ops/int4g_args.h"
#include "ops/op_args.h"

namespace grit_ops {
namespace {

constexpr int64_t kTileRows = grit::cpu::kS8TileRows;

at::Tensor packed_linear_s8_cpu(const at::Tensor& x, const at::Tensor& data, const at::Tensor& scale0,
                                const at::Tensor& scale1, const at::Tensor& aux, c10::string_view grade_text,
                                c10::IntArrayRef shape, const std::optional<at::Tensor>& bias) {
  const char* op = "grit::packed_linear_s8";
  if (const uint64_t g = int4g_group_arg(op, grade_text))
    TORCH_CHECK_VALUE(false, op, ": grade ", int4g_name(g),
                      " has no s8 activation law here: its group scales are binary64 and its planes are "
                      "not GRIT planes; run it with float activations, or quantize to S4_G", g,
                      " (signed int4, binary16 scales) for activations=\"s8\"");
  const auto grade = grade_arg(op, grade_text);
  grit::s8::Law L;
  const grit::Status law = grit::s8::s8_law(*grade, &L);
  TORCH_CHECK_VALUE(law.ok(), op, ": ", law.message);
  check_weight_shape(op, *grade, shape);
  const int64_t n = shape[0], k = shape[1];
  TORCH_CHECK_VALUE(L.sp_m == 0 || k % L.sp_m == 0, op, ": the weight has ", k,
                    " in-features, not a multiple of the sparsity quad M=", L.sp_m);
  check_float_arg(op, "x", x);
  TORCH_CHECK_VALUE(x.dim() >= 1 && x.size(-1) == k, op, ": argument 'x' has shape ", shape_str(x.sizes()),
                    " but the weight of shape ", shape_str(shape), " has ", k,
                    " in-features: its last dimension must be ", k);
  const PlaneArgs planes = plane_args(op, data, scale0, scale1, aux, *grade, shape, x.device());
  const bool has_bias = check_bias(op, bias, n, x.device());
  const int64_t m = batch_rows(x), B = k / L.kb;
  at::Tensor y = at::empty({m, n}, x.options().dtype(at::kFloat));
  if (m > 0 && n > 0) {
    const at::Tensor x32 = x.reshape({m, k}).to(at::kFloat).contiguous();
    refuse_non_finite(op, x32);
    std::vector<int8_t> codes(static_cast<size_t>(m * k));
    std::vector<float> scales(static_cast<size_t>(m * B));
    const float* xp = x32.const_data_ptr<float>();
    at::parallel_for(0, m * B, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, L.kb)), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t i = r / B, c = r % B;
        const float* xb = xp + i * k + c * L.kb;
        int8_t* qb = codes.data() + i * k + c * L.kb;
        if (!grit::cpu::s8_pack_block(xb, L.kb, qb, &scales[r])) scales[r] = grit::exact::pack_block(xb, L.kb, qb);
      }
    });
    // The data-plane cursor of each row start (a prefix of per-row counts for sparse grades).
    std::vector<uint64_t> start(static_cast<size_t>(n), 0);
    const grit::Plane* pl = planes.plane;
    if (L.sp_m) {
      grit::exact::Law layout;
      layout.k0 = L.k0;
      layout.elem_bits = L.elem_bits;
      layout.sp_n = L.sp_n;
      layout.sp_m = L.sp_m;
      layout.sp_meta_bits = L.sp_meta_bits;
      std::vector<uint64_t> count(static_cast<size_t>(n));
      at::parallel_for(0, n, 16, [&](int64_t b, int64_t e) {
        for (int64_t j = b; j < e; ++j) count[j] = grit::cpu::exact_row_stored(layout, pl[3].data, j, k);
      });
      for (int64_t j = 1; j < n; ++j) start[j] = start[j - 1] + count[j - 1];
    }
    const at::Tensor b32 = has_bias ? bias->to(at::kFloat).contiguous() : at::Tensor();
    const float* bp = has_bias ? b32.const_data_ptr<float>() : nullptr;
    float* yp = y.mutable_data_ptr<float>();
    grit::cpu::Isa isa;
    const grit::Status sel = grit::cpu::active_isa(&isa);
    TORCH_CHECK_VALUE(sel.ok(), op, ": ", sel.message);
    const bool tiled = (isa == grit::cpu::Isa::kAvx512 || isa == grit::cpu::Isa::kAvx512Bf16) &&
                       grit::cpu::s8_tile_supported(L, k);
    // The fused kernel reads dense 4-bit / 8-bit codes straight from the data plane.
    grit::cpu::S8Fused fused;
    grit::cpu::S8Terms terms;  // the scale planes' readers, once per call
    grit::cpu::s8_terms_plan(*grade, pl, &terms);
    const bool fuse = tiled && grit::cpu::s8_fused_plan(L, k, &fused);
    // Where that kernel does not apply (the avx2 variant, AVX-512 without VNNI, I8S24 without VBMI2)
    // its AVX2 copy.
    const bool fuse2 = !fuse && isa != grit::cpu::Isa::kScalar && grit::cpu::s8_fused_plan_avx2(L, k, &fused);
    // On a CPU with AMX-INT8 the fused kernel's codes go through tile multiplies from 16 batch rows up.
    grit::cpu::S8Amx amx_plan;
    const bool amx = fuse && grit::cpu::s8_amx_plan(L, fused, m, &amx_plan);
    std::vector<grit::cpu::S8Activation> act(tiled || fuse2 ? static_cast<size_t>(m) : 0);
    std::vector<std::vector<int32_t>> quads(fuse || fuse2 ? static_cast<size_t>(m) : 0);
    if (tiled || fuse2)
      at::parallel_for(0, m, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          grit::cpu::s8_activation(L, codes.data() + i * k, scales.data() + i * B, k, &act[i]);
          if (fuse || fuse2) grit::cpu::s8_fused_activation(L, fused, codes.data() + i * k, k, &quads[i]);
        }
      });
    // The AMX kernel's activation words, a block of 16 rows at a time.
    grit::cpu::S8AmxActivations aq;
    std::vector<const grit::cpu::S8Activation*> actp(amx ? static_cast<size_t>(m) : 0);
    if (amx) {
      grit::cpu::s8_amx_activations(L, quads.data(), act.data(), m, k, &aq);
      for (int64_t i = 0; i < m; ++i) actp[i] = &act[i];
    }
    const uint64_t numel = static_cast<uint64_t>(n * k);
    std::mutex fail_mu;
    std::string failure;
    const int64_t grain = std::max<int64_t>(kTileRows, (int64_t{1} << 15) / std::max<int64_t>(1, k * m));
    auto failed = [&](const grit::Status& st) {  // the first failure is reported; the chunk stops
      if (st.ok()) return false;
      std::lock_guard<std::mutex> lock(fail_mu);
      failure = st.message;
      return true;
    };
    at::parallel_for(0, n, grain, [&](int64_t b, int64_t e) {
      grit::cpu::S8Tile tile;
      std::vector<uint8_t> scratch;  // the AVX2 sparse path's expanded rows
      grit::cpu::S8AmxScratch amx_scratch;
      const int64_t G = k / L.k0;
      std::vector<int16_t> c;
      std::vector<float> S, O;
      std::vector<int32_t> zi;
      for (int64_t j0 = b; j0 < e; j0 += kTileRows) {
        const int rows = static_cast<int>(std::min(e, j0 + kTileRows) - j0);
        if (fuse2) {
          const grit::Status st =
              grit::cpu::s8_tile_terms(terms, *grade, L, pl, numel, start.data() + j0, j0, rows, k, &tile);
          if (failed(st)) return;
          for (int64_t i = 0; i < m; i += 4) {
            const int na = static_cast<int>(std::min<int64_t>(4, m - i));
            const grit::cpu::S8Activation* rowsp[4];
            const int32_t* qp[4];
            for (int t = 0; t < na; ++t) {
              rowsp[t] = &act[i + t];
              qp[t] = quads[i + t].data();
            }
            if (fused.sparse)
              grit::cpu::s8_sparse_tile_avx2(L, fused, qp, rowsp, na, tile, pl[0].data, pl[3].data, start.data() + j0,
                                             j0, k, i == 0, bp ? bp + j0 : nullptr, yp + i * n + j0, n, &scratch);
            else
              grit::cpu::s8_fused_tile_avx2(L, fused, qp, rowsp, na, tile, pl[0].data, j0, k,
                                            bp ? bp + j0 : nullptr, yp + i * n + j0, n);
          }
          continue;
        }
        if (fuse) {
          const grit::Status st =
              grit::cpu::s8_tile_terms_vector(terms, *grade, L, j0, rows, k, &tile)
                  ? grit::Status::Ok()
                  : grit::cpu::s8_tile_terms(terms, *grade, L, pl, numel, start.data() + j0, j0, rows, k, &tile);
          if (failed(st)) return;
          if (amx) {
            grit::cpu::s8_amx_tile(L, amx_plan, aq, actp.data(), m, tile, pl[0].data, pl[3].data,
                                   start.data() + j0, j0, k, n, bp ? bp + j0 : nullptr, yp + j0, n, &amx_scratch);
            continue;
          }
          // batch rows 8 at a time (each tile's bytes decoded once per 8), then 4, 3, 2 or 1
          for (int64_t i = 0; i < m;) {
            const int na = m - i >= 8 ? 8 : static_cast<int>(std::min<int64_t>(4, m - i));
            const grit::cpu::S8Activation* rowsp[8];
            const int32_t* qp[8];
            for (int t = 0; t < na; ++t) {
              rowsp[t] = &act[i + t];
              qp[t] = quads[i + t].data();
            }
            grit::cpu::s8_fused_tile(L, fused, qp, rowsp, na, tile, pl[0].data, pl[3].data, start.data() + j0, j0,
                                     k, n, i == 0, bp ? bp + j0 : nullptr, yp + i * n + j0, n);
            i += na;
          }
          continue;
        }
        if (tiled) {
          const grit::Status st =
              grit::cpu::s8_tile_from_planes(terms, *grade, L, pl, numel, start.data() + j0, j0, rows, k, &tile);
          if (failed(st)) return;
          for (int64_t i = 0; i < m; i += 4) {
            const int na = static_cast<int>(std::min<int64_t>(4, m - i));
            const grit::cpu::S8Activation* rowsp[4] = {&act[i], &act[i + (na > 1)], &act[i + 2 * (na > 2)],
                                                       &act[i + 3 * (na > 3)]};
            grit::cpu::s8_dot_tile(L, rowsp, na, tile, k, bp ? bp + j0 : nullptr, yp + i * n + j0, n);
          }
          continue;
        }
        c.resize(static_cast<size_t>(k));
        S.resize(static_cast<size_t>(G));
        O.resize(static_cast<size_t>(G));
        zi.resize(static_cast<size_t>(G));
        for (int64_t j = j0; j < j0 + rows; ++j) {
          uint64_t stored = start[j];
          const grit::Status st =
              grit::s8::weight_row_terms(*grade, L, pl, numel, j, k, &stored, c.data(), S.data(), O.data(), zi.data());
          if (failed(st)) return;
          for (int64_t i = 0; i < m; ++i)
            yp[i * n + j] = grit::s8::dot(L, codes.data() + i * k, scales.data() + i * B, c.data(), S.data(),
                                          O.data(), zi.data(), k, bp ? bp + j : nullptr);
        }
      }
    });
    TORCH_CHECK_VALUE(failure.empty(), op, ": ", failure);
  }
  const at::Tensor out = y.view(with_last(x.sizes(), n));
  return x.scalar_type() == at::kFloat ? out : out.to(x.scalar_type());
}

}  // namespace

TORCH_LIBRARY_IMPL(grit, CPU, m) { m.impl("packed_linear_s8", &packed_linear_s8_cpu); }

}  // namespace grit_ops
