// CPU kernels of grit::packed_linear_bf16 and grit::packed_linear_bf16_grad_input:
// the bf16 activation law (csrc/grit/bf16_linear.h) through the tile kernel
// of kernels/cpu/bf16_amx.h. The activations (or grad_y) are packed to
// bfloat16 once per call. The forward's threads own blocks of 128 weight
// rows: each decodes its rows 32 at a time with the active variant's decoder
// (the reference decode where there is none), packs them, and runs every
// batch row over them. grad_input takes the batch in passes of up to 1024 rows
// and walks W in blocks of 1024 to 2048 rows: the
// threads decode and pack a block together, then split its columns; the
// running sums stay in a float32 buffer between blocks, which continues
// the law's chain exactly. W is never decoded as a whole, and every output
// is the law's function of its own row: the same bits for any thread count
// or batch composition.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "grit/bf16_linear.h"
#include "kernels/cpu/bf16_amx.h"
#include "kernels/cpu/packed_linear_cpu.h"
#include "kernels/cpu/packed_linear_ref.h"
#include "ops/int4g_args.h"
#include "ops/op_args.h"

namespace grit_ops {
namespace {

using grit::cpu::kBf16Tile;

constexpr int64_t kForwardRows = 128;  // weight rows per forward task: four column pairs
constexpr int64_t kForwardBatch = 512; // batch rows per multiply over a task's packed rows
// Chunks of the reduction per forward multiply: a task's B for them (four
// pairs: 1 MiB) and a 32-row block's A (256 KiB) stay in L2 together. A
// longer reduction runs in parts that continue the sums in C; with the
// whole of k at once, 4096x11008 ran at 0.55x torch's bfloat16 F.linear
// at batch 1024, in parts at 0.84-0.89x.
constexpr int64_t kForwardChunks = 128;
// grad_input walks W in blocks of rows; one multiply runs a few column pairs
// of a block over every batch row, so that its part of B (kGradMultiplyChunks
// chunks of 2 KiB: 1 MiB) stays in L2 while the batch rows stream past. A
// longer block re-reads and re-writes the float32 sums fewer times: at batch
// 2048 (4096x4096, two threads, AMX), blocks of 2048 rows with 8 pairs a
// multiply ran 0.91-0.95x torch's gy @ W against 0.79-0.86x for blocks of
// 1024 with 16 pairs, and 1 MiB of B a multiply beat 2 and 4 MiB. A block's
// B holds rows * k bfloat16 values, capped near 16 MiB: weights with more
// than 4096 in-features take shorter blocks, down to 1024 rows.
constexpr int64_t kGradRowsMin = 1024, kGradRowsMax = 2048;
constexpr int64_t kGradBlockBytes = int64_t{16} << 20;
constexpr int64_t kGradMultiplyChunks = 512;
// The forward's batch rows per pass over the whole weight: as many as keep
// the packed x that every weight block re-reads within about 4 MiB, at
// least kForwardBatch; a larger batch decodes the weight once per pass. At
// batch 2048 (4096x4096) passes of 512 rows ran 0.95-1.02x torch against
// 0.84-0.98x for passes of 8 MiB (1024 rows).
constexpr int64_t kPassBytes = int64_t{4} << 20;
int64_t forward_pass_rows(int64_t bytes_per_row) {
  return std::max<int64_t>(kForwardBatch, kPassBytes / bytes_per_row / 32 * 32);
}

int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

// grad_input's batch rows per pass (a multiple of 32): kGradPassRows, fewer
// where the pass's float32 sums would pass kGradPassBytes, so that they stay
// in the thread's scratch between calls (under kKeepBytes) instead of
// costing a page fault per 4 KiB each call. Each pass decodes the weight
// again. At batch 2048 (two threads, AMX, 2026-12-07) passes of 1024 rows
// ran 0.97-1.00x torch's gy @ W at 4096x4096 against 0.89-0.90x for one pass,
// and 0.91-0.96x at 4096x11008 against 0.71-0.73x for one pass of 88 MiB of
// sums given back after each call; passes of 16 MiB at 4096x11008 (384
// rows) ran 0.75x.
constexpr int64_t kGradPassRows = 1024;
constexpr int64_t kGradPassBytes = int64_t{48} << 20;
int64_t grad_pass_rows(int64_t kp) {
  return std::min(kGradPassRows, std::max<int64_t>(32, kGradPassBytes / (4 * kp) / 32 * 32));
}

// grad_input's rows per block of W (a multiple of 32) for k in-features.
int64_t grad_block_rows(int64_t k) {
  const int64_t fit = kGradBlockBytes / (2 * round_up(std::max<int64_t>(k, 1), 32)) / 32 * 32;
  return std::clamp(fit, kGradRowsMin, kGradRowsMax);
}

// A 64-byte aligned scratch buffer of T that keeps its memory between calls
// (thread_local below): a fresh allocation per call cost more in page faults
// than the tile multiplies of a 512-row batch. Not zeroed.
template <class T>
struct Scratch {
  std::unique_ptr<T[]> raw;
  size_t cap = 0;
  T* get(size_t n) {
    if (n > cap) {
      raw.reset(new T[n + 64 / sizeof(T)]);
      cap = n;
    }
    return grit::cpu::align64(raw.get());
  }
  // Gives the memory back when it holds more than `bytes` (after a call with
  // an unusually large batch, so that no thread keeps it for good).
  void trim(size_t bytes) {
    if (cap * sizeof(T) > bytes) {
      raw.reset();
      cap = 0;
    }
  }
};

// What a thread's scratch may keep between calls.
constexpr size_t kKeepBytes = size_t{64} << 20;

// Per thread: the packed activations (the calling thread), the weight rows
// in float32 and packed, and the forward's sums.
struct ThreadScratch {
  Scratch<uint16_t> a, b;
  Scratch<float> rows, c;
};
ThreadScratch& thread_scratch() {
  static thread_local ThreadScratch s;
  return s;
}

// Rows of W decoded to float32: the active variant's decoder, else (no fast
// decoder, or planes it cannot take) the reference decode.
struct RowDecoder {
  const char* op;
  const grit::cpu::KernelTable& kt;
  const grit::cpu::PackedWeight& w;
  grit::cpu::LinearPlan plan;
  bool fast;

  RowDecoder(const char* op_name, const grit::cpu::PackedWeight& weight)
      : op(op_name), kt(active_cpu_kernels(op_name)), w(weight) {
    grit::cpu::make_plan(w, &plan);
    fast = kt.isa != grit::cpu::Isa::kScalar && plan.kind != grit::cpu::FastKind::kNone;
  }

  // The forward's B for rows [r0, r1) (r0 a multiple of 32, at most 32
  // rows): from the decoder's registers where the variant packs
  // (KernelTable::bf16_pack_tile), else through its columns (scratch: 32 * k
  // floats); false where the variant has no such route or its decoder
  // cannot take the planes (the caller then decodes rows).
  bool columns(int64_t r0, int64_t r1, float* scratch, uint16_t* B) const {
    if (!fast) return false;
    if (kt.bf16_pack_tile != nullptr) {  // straight from the decoder's registers into B
      const int64_t tiles = (r1 - r0 + 15) / 16;
      bool fb = false;
      for (int64_t h = 0; h < tiles && !fb; ++h) {
        const grit::Status s = kt.bf16_pack_tile(plan, r0 / 16 + h, B + h * kBf16Tile, &fb);
        TORCH_CHECK(s.ok(), op, ": ", s.message);
      }
      if (fb) return false;
      if (tiles == 1)  // the pair's second half: no outputs, zero words
        for (int64_t c = 0; c < grit::bf16::chunks(w.k); ++c)
          std::memset(B + (c * 2 + 1) * kBf16Tile, 0, kBf16Tile * sizeof(uint16_t));
      return true;
    }
    if (kt.decode_columns == nullptr) return false;
    bool fb = false;
    const grit::Status s = kt.decode_columns(plan, r0 / 16, (r1 + 15) / 16, scratch, &fb);
    TORCH_CHECK(s.ok(), op, ": ", s.message);
    if (fb) return false;
    grit::cpu::bf16_pack_weight_columns(scratch, static_cast<int>((r1 - r0 + 15) / 16), w.k, B);
    return true;
  }

  // grad_input's B for the tile from row r0 (a multiple of 16): positions
  // first .. first + 15 of a block of block_chunks chunks, from the
  // decoder's registers (KernelTable::bf16_pack_cols_tile); false where the
  // variant has no such route or its decoder cannot take the planes.
  bool pack_cols(int64_t r0, int64_t first, int64_t block_chunks, uint16_t* B) const {
    if (!fast || kt.bf16_pack_cols_tile == nullptr) return false;
    bool fb = false;
    const grit::Status s = kt.bf16_pack_cols_tile(plan, r0 / 16, first, block_chunks, B, &fb);
    TORCH_CHECK(s.ok(), op, ": ", s.message);
    return !fb;
  }

  // The 16-row tile from row r0 (a multiple of 16) column by column into
  // out (16 * k floats); false where the variant has no such route or its
  // decoder cannot take the planes.
  bool tile_columns(int64_t r0, float* out) const {
    if (!fast || kt.decode_columns == nullptr) return false;
    bool fb = false;
    const grit::Status s = kt.decode_columns(plan, r0 / 16, r0 / 16 + 1, out, &fb);
    TORCH_CHECK(s.ok(), op, ": ", s.message);
    return !fb;
  }

  // rows [r0, r1) (r0 a multiple of 16) into out, k floats a row
  void operator()(int64_t r0, int64_t r1, float* out) const {
    if (fast) {
      bool fb = false;
      const grit::Status s = kt.decode_tiles(plan, r0 / 16, (r1 + 15) / 16, out, &fb);
      TORCH_CHECK(s.ok(), op, ": ", s.message);
      if (!fb) return;
    }
    uint64_t cursor = grit::sparse_cursor(*w.grade, w.planes, static_cast<uint64_t>(r0) * static_cast<uint64_t>(w.k));
    const grit::Status s = grit::cpu::decode_rows(w, r0, r1, &cursor, out);
    TORCH_CHECK(s.ok(), op, ": ", s.message);
  }
};

// t ([m, len] after reshape) packed into layout A with mp rows.
void pack_activations(const at::Tensor& t, int64_t m, int64_t len, int64_t mp, uint16_t* A) {
  const at::Tensor t2 = t.reshape({m, len});
  if (t2.scalar_type() == at::kBFloat16) {
    const at::Tensor c = t2.contiguous();
    const uint16_t* src = reinterpret_cast<const uint16_t*>(c.const_data_ptr<at::BFloat16>());
    at::parallel_for(0, mp / 16, 1, [&](int64_t b, int64_t e) {
      for (int64_t q = b; q < e; ++q) {
        const int64_t rows = std::max<int64_t>(0, std::min<int64_t>(16, m - 16 * q));
        grit::cpu::bf16_pack_rows_bits(src + 16 * q * len, len, rows, len, 16,
                                       A + q * grit::bf16::chunks(len) * kBf16Tile);
      }
    });
    return;
  }
  const at::Tensor c = t2.to(at::kFloat).contiguous();
  const float* src = c.const_data_ptr<float>();
  at::parallel_for(0, mp / 16, 1, [&](int64_t b, int64_t e) {
    for (int64_t q = b; q < e; ++q) {
      const int64_t rows = std::max<int64_t>(0, std::min<int64_t>(16, m - 16 * q));
      grit::cpu::bf16_pack_rows(src + 16 * q * len, len, rows, len, 16, A + q * grit::bf16::chunks(len) * kBf16Tile);
    }
  });
}

// The op's grade: INT4G (its own planes, not GRIT's) is refused with the alternative.
std::shared_ptr<const grit::Grade> bf16_grade(const char* op, c10::string_view grade_text) {
  if (const uint64_t g = int4g_group_arg(op, grade_text))
    TORCH_CHECK_VALUE(false, op, ": grade ", int4g_name(g),
                      " has no bf16 activation law here: its planes are not GRIT planes; run it with float "
                      "activations, or quantize to S4_G", g, " (signed int4, binary16 scales) for activations=\"bf16\"");
  return grade_arg(op, grade_text);
}

at::Tensor packed_linear_bf16_cpu(const at::Tensor& x, const at::Tensor& data, const at::Tensor& scale0,
                                  const at::Tensor& scale1, const at::Tensor& aux, c10::string_view grade_text,
                                  c10::IntArrayRef shape, const std::optional<at::Tensor>& bias) {
  const char* op = "grit::packed_linear_bf16";
  const auto grade_ptr = bf16_grade(op, grade_text);
  const grit::Grade& grade = *grade_ptr;
  check_weight_shape(op, grade, shape);
  const int64_t n = shape[0], k = shape[1];
  check_activation(op, "x", x, k, "in-features (shape[1])", shape);
  const PlaneArgs p = plane_args(op, data, scale0, scale1, aux, grade, shape, x.device());
  const bool has_bias = check_bias(op, bias, n, x.device());
  const int64_t m = batch_rows(x);
  // y straight in x's dtype for float32 and bfloat16 (others through float32)
  const bool out_bf16 = x.scalar_type() == at::kBFloat16;
  const bool direct = out_bf16 || x.scalar_type() == at::kFloat;
  at::Tensor y = at::empty({m, n}, x.options().dtype(direct ? x.scalar_type() : at::kFloat));
  if (m > 0 && n > 0 && k == 0) {
    y.zero_();
    if (has_bias) y.add_(bias->to(at::kFloat));
  } else if (m > 0 && n > 0) {
    const int64_t kc = grit::bf16::chunks(k), mp = round_up(m, 32);
    const int64_t pass = forward_pass_rows(kc * 32 * 2);
    // one pass's rows of x, packed (the pass's first row at A)
    uint16_t* A = thread_scratch().a.get(static_cast<size_t>(std::min(mp, pass) * kc * kBf16Tile));
    const at::Tensor x2 = x.reshape({m, k});
    const at::Tensor b32 = has_bias ? bias->to(at::kFloat).contiguous() : at::Tensor();
    const float* bp = has_bias ? b32.const_data_ptr<float>() : nullptr;
    char* yp = static_cast<char*>(y.mutable_data_ptr());
    const int64_t esize = y.element_size();
    const grit::cpu::PackedWeight w = packed_weight(grade, p, n, k);
    const RowDecoder decode(op, w);
    for (int64_t s0 = 0; s0 < mp; s0 += pass) {
    const int64_t s1 = std::min(mp, s0 + pass);
    pack_activations(x2.narrow(0, s0, std::min(m, s1) - s0), std::min(m, s1) - s0, k, s1 - s0, A);
    at::parallel_for(0, (n + kForwardRows - 1) / kForwardRows, 1, [&](int64_t tb, int64_t te) {
      ThreadScratch& ts = thread_scratch();
      float* wrows = ts.rows.get(static_cast<size_t>(32 * k));
      uint16_t* B = ts.b.get(static_cast<size_t>(4 * kc * 2 * kBf16Tile));
      float* C = ts.c.get(static_cast<size_t>(std::min(mp, kForwardBatch) * kForwardRows));
      for (int64_t task = tb; task < te; ++task) {
        const int64_t r0 = task * kForwardRows, rows = std::min(kForwardRows, n - r0);
        const int64_t pairs = (rows + 31) / 32;
        for (int64_t pr = 0; pr < pairs; ++pr) {
          const int64_t a = r0 + 32 * pr, b = std::min(a + 32, n);
          uint16_t* Bp = B + pr * kc * 2 * kBf16Tile;
          if (!decode.columns(a, b, wrows, Bp)) {
            decode(a, b, wrows);
            grit::cpu::bf16_pack_weight_rows(wrows, k, static_cast<int>(b - a), k, Bp);
          }
        }
        for (int64_t i0 = s0; i0 < s1; i0 += kForwardBatch) {
          const int64_t mc = std::min(kForwardBatch, s1 - i0);
          for (int64_t c0 = 0; c0 < kc; c0 += kForwardChunks)  // the law's chain continues in C
            grit::cpu::bf16_gemm(A + ((i0 - s0) / 16) * kc * kBf16Tile, kc, c0, std::min(kForwardChunks, kc - c0), mc,
                                 B + c0 * 2 * kBf16Tile, kc, pairs, C, kForwardRows, c0 > 0);
          for (int64_t i = i0; i < std::min(m, i0 + mc); ++i) {
            const float* acc = C + (i - i0) * kForwardRows;
            void* out = yp + (i * n + r0) * esize;
            grit::cpu::bf16_finish_row(acc, bp != nullptr ? bp + r0 : nullptr, rows, out, out_bf16);
          }
        }
      }
    });
    }
    thread_scratch().a.trim(kKeepBytes);
  } else if (m > 0 && has_bias) {
    y.copy_(bias->to(at::kFloat).expand({m, n}));
  }
  return y.to(x.scalar_type()).view(with_last(x.sizes(), n));  // a no-op when direct
}

at::Tensor packed_linear_bf16_grad_input_cpu(const at::Tensor& grad_y, const at::Tensor& data,
                                             const at::Tensor& scale0, const at::Tensor& scale1,
                                             const at::Tensor& aux, c10::string_view grade_text,
                                             c10::IntArrayRef shape) {
  const char* op = "grit::packed_linear_bf16_grad_input";
  const auto grade_ptr = bf16_grade(op, grade_text);
  const grit::Grade& grade = *grade_ptr;
  check_weight_shape(op, grade, shape);
  const int64_t n = shape[0], k = shape[1];
  check_activation(op, "grad_y", grad_y, n, "out-features (shape[0])", shape);
  const PlaneArgs p = plane_args(op, data, scale0, scale1, aux, grade, shape, grad_y.device());
  const int64_t m = batch_rows(grad_y);
  if (m == 0 || k == 0 || n == 0)
    return at::zeros({m, k}, grad_y.options()).view(with_last(grad_y.sizes(), k));
  const int64_t nc = grit::bf16::chunks(n), kp = round_up(k, 32), pairs = kp / 32, mp = round_up(m, 32);
  const int64_t pass = grad_pass_rows(kp);
  const bool out_bf16 = grad_y.scalar_type() == at::kBFloat16;
  const bool direct = out_bf16 || grad_y.scalar_type() == at::kFloat;
  at::Tensor out = at::empty({m, k}, grad_y.options().dtype(direct ? grad_y.scalar_type() : at::kFloat));
  char* op_ = static_cast<char*>(out.mutable_data_ptr());
  const int64_t esize = out.element_size();
  const at::Tensor gy2 = grad_y.reshape({m, n});
  ThreadScratch& ts = thread_scratch();
  uint16_t* A = ts.a.get(static_cast<size_t>(std::min(mp, pass) * nc * kBf16Tile));
  float* gp = ts.c.get(static_cast<size_t>(std::min(mp, pass) * kp));
  const int64_t block_rows = grad_block_rows(k), block_chunks = grit::bf16::chunks(std::min(block_rows, n));
  // shared by the threads; the forward's per-thread B of the calling thread is free here
  uint16_t* B = ts.b.get(static_cast<size_t>(pairs * block_chunks * 2 * kBf16Tile));
  const grit::cpu::PackedWeight w = packed_weight(grade, p, n, k);
  const RowDecoder decode(op, w);
  for (int64_t s0 = 0; s0 < mp; s0 += pass) {
    const int64_t s1 = std::min(mp, s0 + pass), live = std::min(m, s1) - s0;
    pack_activations(gy2.narrow(0, s0, live), live, n, s1 - s0, A);
    for (int64_t r0 = 0; r0 < n; r0 += block_rows) {
      const int64_t rows = std::min(block_rows, n - r0), bc = grit::bf16::chunks(rows);
      const int64_t pairs_per_multiply = std::clamp<int64_t>(kGradMultiplyChunks / bc, 1, 16);
      // the block's rows, 16 at a time (zero rows past n), into every column pair's part of B
      at::parallel_for(0, 2 * bc, 1, [&](int64_t gb, int64_t ge) {
        float* wrows = thread_scratch().rows.get(static_cast<size_t>(16 * k));
        for (int64_t g = gb; g < ge; ++g) {
          const int64_t a = r0 + 16 * g, got = std::max<int64_t>(0, std::min<int64_t>(16, n - a));
          if (got > 0 && decode.pack_cols(a, 16 * g, bc, B)) continue;
          if (got > 0 && decode.tile_columns(a, wrows)) {
            grit::cpu::bf16_pack_weight_cols_from_columns(wrows, static_cast<int>(got), k, 16 * g, bc, B);
            continue;
          }
          if (got > 0) decode(a, a + got, wrows);
          grit::cpu::bf16_pack_weight_cols(wrows, k, static_cast<int>(got), k, 16 * g, bc, B);
        }
      });
      at::parallel_for(0, pairs, pairs_per_multiply, [&](int64_t pb, int64_t pe) {
        for (int64_t q = pb; q < pe; q += pairs_per_multiply) {
          const int64_t np = std::min(pairs_per_multiply, pe - q);
          grit::cpu::bf16_gemm(A, nc, r0 / 32, bc, s1 - s0, B + q * bc * 2 * kBf16Tile, bc, np, gp + 32 * q, kp,
                               r0 > 0);
        }
      });
    }
    at::parallel_for(0, live, 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        grit::cpu::bf16_finish_row(gp + i * kp, nullptr, k, op_ + (s0 + i) * k * esize, out_bf16);
    });
  }
  ts.a.trim(kKeepBytes);
  ts.b.trim(kKeepBytes);
  ts.c.trim(kKeepBytes);
  return out.to(grad_y.scalar_type()).view(with_last(grad_y.sizes(), k));
}

}  // namespace

TORCH_LIBRARY_IMPL(grit, CPU, m) {
  m.impl("packed_linear_bf16", &packed_linear_bf16_cpu);
  m.impl("packed_linear_bf16_grad_input", &packed_linear_bf16_grad_input_cpu);
}

}  // namespace grit_ops
