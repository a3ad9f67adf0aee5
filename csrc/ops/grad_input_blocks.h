// grad_x = grad_y W for the CPU impls of packed_linear_grad_input (every
// grade, INT4G included): W is decoded block_rows rows at a time, never
// whole; threads own disjoint column ranges of grad_x (every batch row), and
// each element adds its n products in ascending n, so the result does not
// depend on the thread count, the block size or how the columns are split.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "kernels/cpu/packed_linear_cpu.h"
#include "ops/op_args.h"

namespace grit_ops {

// The 16-row tiles of rows [r0, r1) of W (r0 a multiple of 16) over
// threads: decode(b, e, at, &fallback) writes tiles [b, e) from `at`, tile
// t0 = r0/16 at out, each tile row_floats * 16 floats after the last. A
// failed Status is raised naming op; false if any range fell back.
template <class DecodeTiles>
bool tiles_in_parallel(const char* op, int64_t r0, int64_t r1, float* out, int64_t row_floats,
                       DecodeTiles&& decode) {
  const int64_t t0 = r0 / grit::cpu::kLinearTileRows;
  std::atomic<bool> fallback{false};
  at::parallel_for(t0, grit::cpu::linear_tile_count(r1), 1, [&](int64_t b, int64_t e) {
    bool fb = false;
    const grit::Status s = decode(b, e, out + (b - t0) * grit::cpu::kLinearTileRows * row_floats, &fb);
    TORCH_CHECK(s.ok(), op, ": ", s.message);
    if (fb) fallback.store(true);
  });
  return !fallback.load();
}

// Columns of grad_x per parallel task for a block of `rows` rows of W over
// m batch rows: about kLinearTaskWork products, at least 64 columns.
inline int64_t grad_column_grain(int64_t m, int64_t rows) {
  return std::max<int64_t>(64, kLinearTaskWork / std::max<int64_t>(1, m * rows));
}

// decode(r0, r1, rows) writes rows [r0, r1) of W (row-major, k columns);
// accumulate(r0, r1, rows, c0, c1) adds their products into columns
// [c0, c1) of grad_x for every batch row.
template <class W, class Decode, class Accumulate>
void grad_input_blocks(int64_t n, int64_t k, int64_t m, int64_t block_rows, Decode&& decode,
                       Accumulate&& accumulate) {
  std::vector<W> rows(static_cast<size_t>(std::min(n, block_rows) * k));
  for (int64_t r0 = 0; r0 < n; r0 += block_rows) {
    const int64_t r1 = std::min(n, r0 + block_rows);
    decode(r0, r1, rows.data());
    const int64_t grain = grad_column_grain(m, r1 - r0);
    at::parallel_for(0, k, grain, [&](int64_t c0, int64_t c1) { accumulate(r0, r1, rows.data(), c0, c1); });
  }
}

// grad_x = grad_y W, [..., k] in grad_y's dtype (errors name op), for a weight whose rows
// decode(r0, r1, out) writes as float32 (r0 a multiple of 16): blocks of as
// many rows as fit about 8 MiB decoded (the last-level cache holds them
// beside grad_x's traffic; every block reads and writes grad_x once more),
// at least kGradTileRows, at most 512 (smaller blocks for small batches
// measured slower: a parallel region per block); the products added by the variant's
// grad_input_rows, or by its grad_input_pairs where grad_y is bfloat16 and
// pairs_ok(gy, count) (KernelTable::grad_input_pairs: the same bits) where
// pair_gemm_enabled() (the CPU's vendor decides, as for the forward: on an
// Intel Xeon with AMX the pairs ran 100 ms against the FMA route's 73-75 ms
// at batch 512).
//
// On the FMA route of a variant with strips (KernelTable::grad_strip),
// decode_strips(r0, r1, out, width, stride) first tries to write the block
// in KernelTable::decode_strips' layout, where grad_input_strips reads it
// without a copy (the row-major decode and the strip copies took about a
// tenth of the call); it returns false where it cannot (a plan that falls
// back to the reference), and that block and every later one take decode
// and grad_input_rows (the reference carries its cursor from block to
// block). The same bits either way.
//
// Small batches (m <= kGradFusedMaxBatch) over a plan the variant's decoder
// takes (fused_plan, null where there is none) first take
// KernelTable::grad_input_fused for W's whole tiles: each thread owns
// columns of grad_x and decodes its columns of every tile a chunk at a time
// into L1, so W is read once and never written out decoded (the block route
// wrote and re-read every weight as float32: at batch 1 ten times the
// forward's time). The rows of a partial last tile continue on the block
// route. A plan the fused route gives up on (it says so) restarts on the
// block route from zero. The same operations in the same order throughout.
// The bound: at 4096x4096 (float32, MXFP4, 2 threads, an Intel Xeon) the
// fused route took 0.14-0.15 ms a batch row at 32 to 64 rows, the block
// route about 4 ms plus 0.073 ms a row: they cross near 53 rows.
constexpr int64_t kGradFusedMaxBatch = 48;

template <class Decode, class DecodeStrips, class PairsOk>
at::Tensor grad_input_float(const char* op, const at::Tensor& grad_y, int64_t n, int64_t k,
                            const grit::cpu::KernelTable& kt,
                            const grit::cpu::LinearPlan* fused_plan, Decode&& decode, DecodeStrips&& decode_strips,
                            PairsOk&& pairs_ok) {
  const int64_t m = batch_rows(grad_y);
  at::Tensor gx = at::zeros({m, k}, grad_y.options().dtype(at::kFloat));
  if (m > 0 && n > 0 && k > 0) {
    const at::Tensor gy = grad_y.reshape({m, n}).to(at::kFloat).contiguous();
    const float* gyp = gy.const_data_ptr<float>();
    float* gxp = gx.mutable_data_ptr<float>();
    int64_t first_row = 0;  // rows [0, first_row) already added by the fused route
    if (fused_plan != nullptr && kt.grad_input_fused != nullptr && m <= kGradFusedMaxBatch &&
        n >= grit::cpu::kLinearTileRows) {
      const int64_t chunks = (k + grit::cpu::kGradFusedColumns - 1) / grit::cpu::kGradFusedColumns;
      std::atomic<bool> fell_back{false};
      at::parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
        bool fb = false;
        const grit::Status s =
            kt.grad_input_fused(*fused_plan, gyp, m, c0 * grit::cpu::kGradFusedColumns,
                                std::min(k, c1 * grit::cpu::kGradFusedColumns), gxp, &fb);
        TORCH_CHECK(s.ok(), op, ": ", s.message);
        if (fb) fell_back.store(true);
      });
      if (fell_back.load())
        gx.zero_();
      else
        first_row = n / grit::cpu::kLinearTileRows * grit::cpu::kLinearTileRows;
    }
    const bool pairs = kt.grad_input_pairs != nullptr && grad_y.scalar_type() == at::kBFloat16 &&
                       grit::cpu::pair_gemm_enabled() && pairs_ok(gyp, m * n);
    const auto accumulate_rows = pairs ? kt.grad_input_pairs : kt.grad_input_rows;
    const int64_t block_rows =
        first_row > 0 ? grit::cpu::kLinearTileRows  // at most the 15 rows of a partial last tile are left
                      : std::max<int64_t>(kGradTileRows, std::min<int64_t>(512, (int64_t{8} << 20) / (4 * k)) / 16 * 16);
    const int64_t width = kt.grad_strip;
    const int64_t strips = width > 0 ? (k + width - 1) / width : 0;
    const int64_t stride = block_rows * width;
    // Zeroed once: the tail of a last partial strip is never written.
    std::vector<float> strip_buf(!pairs && strips > 0 ? static_cast<size_t>(strips * stride + 16) : 0);
    float* const strip_rows = strip_buf.empty() ? nullptr : grit::cpu::align64(strip_buf.data());
    bool use_strips = strip_rows != nullptr;
    std::vector<float> rows;
    for (int64_t r0 = first_row; r0 < n; r0 += block_rows) {
      const int64_t r1 = std::min(n, r0 + block_rows);
      const int64_t grain = grad_column_grain(m, r1 - r0);
      if (use_strips && decode_strips(r0, r1, strip_rows, width, stride)) {
        at::parallel_for(0, strips, std::max<int64_t>(1, grain / width), [&](int64_t s0, int64_t s1) {
          kt.grad_input_strips(gyp, n, strip_rows, stride, r0, r1, m, k, s0 * width, std::min(k, s1 * width), gxp);
        });
        continue;
      }
      use_strips = false;
      if (rows.empty()) rows.resize(static_cast<size_t>(std::min(n, block_rows) * k));
      decode(r0, r1, rows.data());
      at::parallel_for(0, k, grain, [&](int64_t c0, int64_t c1) {
        accumulate_rows(gyp, n, rows.data(), r0, r1, m, k, c0, c1, gxp);
      });
    }
  }
  return gx.to(grad_y.scalar_type()).view(with_last(grad_y.sizes(), k));
}

}  // namespace grit_ops
