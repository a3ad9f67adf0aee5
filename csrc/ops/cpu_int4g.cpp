// CPU kernels of the grit:: ops for "INT4G<g>": the core's encoder (a group
// at a time, kernels/common/int4g_encode.h, over threads), reader and decoder
// (csrc/grit/int4_groups.h) and the packed-linear kernels of
// csrc/kernels/cpu (the active variant's KernelTable::int4g_tiles, the
// reference's bits; packed_linear_int4g.h for grad_x) behind argument
// checks and at::parallel_for. Threads own disjoint output elements and
// every element is reduced in one fixed order, so results do not depend on
// the thread count or the instruction set.
#include "ops/int4g_ops.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "grit/int4_groups.h"
#include "kernels/common/int4g_encode.h"
#include "kernels/cpu/packed_linear_cpu.h"
#include "ops/grad_input_blocks.h"
#include "ops/int4g_args.h"
#include "ops/op_args.h"

namespace grit_ops {

namespace {

// Rows [b, e) of W in binary64, the core's values: the variant's decoder
// where rows start on a byte, else the core's.
void rows64(const grit::cpu::KernelTable& kt, const grit::cpu::Int4gWeight& w, int64_t b, int64_t e, double* out) {
  if (w.k % 2 == 0 && kt.int4g_decode_rows != nullptr)
    kt.int4g_decode_rows(w, b, e, out, nullptr);
  else
    grit::cpu::int4g_rows(w, b, e, out);
}

}  // namespace

std::vector<at::Tensor> int4g_quantize_cpu(const at::Tensor& w, uint64_t group) {
  const char* op = "grit::quantize";
  const Int4gQuantizeArgs a = int4g_quantize_args(op, w, group);
  const at::Tensor v = w.to(at::kDouble).contiguous();
  const auto u8 = w.options().dtype(at::kByte);
  at::Tensor data = at::zeros({a.code_bytes}, u8);  // codes are OR-ed in, a nibble at a time
  at::Tensor scale0 = at::empty({a.scale_bytes}, u8);
  const int64_t n = a.rows, k = a.cols, g = static_cast<int64_t>(group), per_row = (k + g - 1) / g;
  const double* vp = v.const_data_ptr<double>();
  uint8_t* codes = data.mutable_data_ptr<uint8_t>();
  uint8_t* scales = scale0.mutable_data_ptr<uint8_t>();
  // Units of two rows start on a byte even when a row's length is odd (a
  // byte then holds the last code of a row and the first of the next), so
  // no two tasks write one byte; the bytes do not depend on the split.
  std::atomic<bool> ok{true};
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, k));
  at::parallel_for(0, (n + 1) / 2, grain, [&](int64_t b, int64_t e) {
    for (int64_t r = 2 * b; r < std::min(2 * e, n); ++r)
      for (int64_t gi = 0; gi < per_row; ++gi) {
        const int64_t c0 = gi * g, c1 = std::min(c0 + g, k);
        double s;
        if (!grit::int4genc::group_scale(vp + r * k + c0, c1 - c0, &s)) {
          ok = false;
          return;
        }
        std::memcpy(scales + 8 * (r * per_row + gi), &s, 8);
        for (int64_t c = c0; c < c1; ++c) {
          const int64_t i = r * k + c;
          const int q = grit::int4genc::code(vp[i], s);
          codes[i / 2] |= static_cast<uint8_t>((q & 0xF) << (4 * (i % 2)));
        }
      }
  });
  if (!ok) raise_int4g_refusal(op, v, group);
  return {data, scale0, at::empty({0}, u8), at::empty({0}, u8)};
}

void raise_int4g_refusal(const char* op, const at::Tensor& v, uint64_t group) {
  const at::Tensor d = v.cpu().to(at::kDouble).contiguous();
  std::vector<uint8_t> packed;
  std::vector<double> scales;
  const grit::Status s = grit::int4g_encode(d.const_data_ptr<double>(), static_cast<uint64_t>(d.size(0)),
                                            static_cast<uint64_t>(d.size(1)), group, &packed, &scales);
  TORCH_CHECK_VALUE(s.ok(), op, ": cannot quantize argument 'w' ", shape_str(d.sizes()), " to ",
                    int4g_name(group), ": ", s.message, " (", grit::error_name(s.code), ")");
  TORCH_CHECK(false, op, ": internal error: a group encoder refused a tensor the core's INT4G encoder takes");
}

at::Tensor int4g_dequantize_cpu(const at::Tensor& data, const at::Tensor& scale0,
                                const at::Tensor& scale1, const at::Tensor& aux, uint64_t group,
                                c10::IntArrayRef shape, at::ScalarType dtype) {
  const char* op = "grit::dequantize";
  TORCH_CHECK_TYPE(at::isFloatingType(dtype), op,
                   ": argument 'dtype' must be a floating dtype, found ", dtype);
  std::vector<double> scales;
  const grit::cpu::Int4gWeight w =
      int4g_weight(op, data, scale0, scale1, aux, group, shape, data.device(), &scales);
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / w.k);
  const grit::cpu::KernelTable& kt = active_cpu_kernels(op);
  if (dtype == at::kDouble) {
    at::Tensor out = at::empty(shape, data.options().dtype(at::kDouble));
    double* o = out.mutable_data_ptr<double>();
    at::parallel_for(0, w.n, grain, [&](int64_t b, int64_t e) { rows64(kt, w, b, e, o + b * w.k); });
    return out;
  }
  const auto simd = w.k % 2 == 0 ? kt.int4g_decode_rows : nullptr;
  if (simd != nullptr) {  // binary64 rounded once to float32, as below
    at::Tensor out = at::empty(shape, data.options().dtype(at::kFloat));
    float* o = out.mutable_data_ptr<float>();
    at::parallel_for(0, w.n, grain, [&](int64_t b, int64_t e) { simd(w, b, e, nullptr, o + b * w.k); });
    return dtype == at::kFloat ? out : out.to(dtype);
  }
  // Any other dtype: binary64 a few rows at a time, rounded once to float32
  // (what .to() does first for every narrower dtype), then cast.
  at::Tensor out = at::empty(shape, data.options().dtype(at::kFloat));
  float* o = out.mutable_data_ptr<float>();
  at::parallel_for(0, w.n, grain, [&](int64_t b, int64_t e) {
    std::vector<double> rows(static_cast<size_t>(grain * w.k));
    for (int64_t r = b; r < e; r += grain) {
      const int64_t r1 = std::min(e, r + grain);
      grit::cpu::int4g_rows(w, r, r1, rows.data());
      for (int64_t i = 0; i < (r1 - r) * w.k; ++i) o[r * w.k + i] = static_cast<float>(rows[static_cast<size_t>(i)]);
    }
  });
  return dtype == at::kFloat ? out : out.to(dtype);
}

at::Tensor int4g_packed_linear_cpu(const at::Tensor& x, const at::Tensor& data,
                                   const at::Tensor& scale0, const at::Tensor& scale1,
                                   const at::Tensor& aux, uint64_t group, c10::IntArrayRef shape,
                                   const std::optional<at::Tensor>& bias) {
  const char* op = "grit::packed_linear";
  check_int4g_shape(op, group, shape);
  const int64_t n = shape[0], k = shape[1];
  check_activation(op, "x", x, k, "in-features (shape[1])", shape);
  std::vector<double> scales;
  // Codes and scales are checked by the kernel as it reads them; the whole
  // reader runs only when it asks (and always on the scalar variant).
  grit::cpu::Int4gWeight w = int4g_weight(op, data, scale0, scale1, aux, group, shape, x.device(), &scales,
                                          Int4gCheck::kLayout);
  const bool has_bias = check_bias(op, bias, n, x.device());
  const int64_t m = batch_rows(x);
  const grit::cpu::KernelTable& kt = active_cpu_kernels(op);
  // An odd row length: rows start mid-byte in the stream, so the vector
  // kernels take a copy with every row on a byte (one pass over the codes).
  at::Tensor row_codes;
  if (k % 2 != 0 && m > 0 && kt.isa != grit::cpu::Isa::kScalar) {
    const int64_t stride = grit::cpu::int4g_row_stride(k);
    row_codes = at::empty({n * stride}, data.options());
    uint8_t* rc = row_codes.mutable_data_ptr<uint8_t>();
    at::parallel_for(0, n, std::max<int64_t>(1, (int64_t{1} << 16) / stride), [&](int64_t b, int64_t e) {
      grit::cpu::int4g_align_rows(w, b, e, rc + b * stride);
    });
    w.row_codes = rc;
  }
  const at::Tensor x32 = x.reshape({m, k}).to(at::kFloat).contiguous();
  at::Tensor y = at::empty({m, n}, x.options().dtype(at::kFloat));
  if (m > 0) {
    const at::Tensor b32 = has_bias ? bias->to(at::kFloat).contiguous() : at::Tensor();
    const float* xp = x32.const_data_ptr<float>();
    const float* bp = has_bias ? b32.const_data_ptr<float>() : nullptr;
    float* yp = y.mutable_data_ptr<float>();
    const int64_t tile_work = std::max<int64_t>(1, m * k * grit::cpu::kInt4gTileRows);
    const int64_t grain = std::max<int64_t>(1, kLinearTaskWork / tile_work);
    std::atomic<bool> suspect{false};
    at::parallel_for(0, grit::cpu::int4g_tile_count(n), grain, [&](int64_t b, int64_t e) {
      bool s = false;
      const grit::Status st = kt.int4g_tiles(w, xp, m, bp, b, e, yp, &s);
      TORCH_CHECK(st.ok(), op, ": ", st.message);
      if (s) suspect.store(true);
    });
    if (suspect.load()) int4g_require_valid(op, w);
  } else {
    int4g_require_valid(op, w);
  }
  return y.to(x.scalar_type()).view(with_last(x.sizes(), n));
}

at::Tensor int4g_packed_linear_grad_input_cpu(const at::Tensor& grad_y, const at::Tensor& data,
                                              const at::Tensor& scale0, const at::Tensor& scale1,
                                              const at::Tensor& aux, uint64_t group,
                                              c10::IntArrayRef shape) {
  const char* op = "grit::packed_linear_grad_input";
  check_int4g_shape(op, group, shape);
  const int64_t n = shape[0], k = shape[1];
  check_activation(op, "grad_y", grad_y, n, "out-features (shape[0])", shape);
  std::vector<double> scales;
  const grit::cpu::Int4gWeight w =
      int4g_weight(op, data, scale0, scale1, aux, group, shape, grad_y.device(), &scales);
  const int64_t m = batch_rows(grad_y);
  at::Tensor gx = at::zeros({m, k}, grad_y.options().dtype(at::kFloat));
  if (m > 0) {
    const at::Tensor gy = grad_y.reshape({m, n}).to(at::kFloat).contiguous();
    const float* gyp = gy.const_data_ptr<float>();
    float* gxp = gx.mutable_data_ptr<float>();
    // The variant's kernel (the reference's bits) where it has one: blocks
    // of W as large as fit about 8 MiB in binary64, since every block reads
    // and writes grad_x once more.
    const grit::cpu::KernelTable& kt = active_cpu_kernels(op);
    const auto simd = kt.int4g_grad_input;
    const int64_t block_rows =
        simd == nullptr ? kGradTileRows
                        : std::max<int64_t>(kGradTileRows, std::min<int64_t>(512, (int64_t{8} << 20) / (8 * k)) / 16 * 16);
    grad_input_blocks<double>(
        n, k, m, block_rows,
        [&](int64_t r0, int64_t r1, double* out) {
          at::parallel_for(r0, r1, 8, [&](int64_t b, int64_t e) { rows64(kt, w, b, e, out + (b - r0) * k); });
        },
        [&](int64_t r0, int64_t r1, const double* rows, int64_t c0, int64_t c1) {
          if (simd != nullptr)
            simd(gyp, n, rows, r0, r1, m, k, c0, c1, gxp);
          else
            grit::cpu::int4g_grad_input_accumulate(w, gyp, rows, r0, r1, 0, m, c0, c1, gxp);
        });
    // NaN results canonical, as y's are: which NaN an add passes on depends
    // on its operands' order, which a compiler may swap.
    at::parallel_for(0, m * k, int64_t{1} << 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        if (std::isnan(gxp[i])) gxp[i] = grit::canonical_nan();
    });
  }
  return gx.to(grad_y.scalar_type()).view(with_last(grad_y.sizes(), k));
}

bool int4g_check_cpu(const at::Tensor& data, const at::Tensor& scale0, const at::Tensor& scale1,
                     const at::Tensor& aux, uint64_t group, c10::IntArrayRef shape) {
  std::vector<double> scales;
  int4g_weight("grit::check", data, scale0, scale1, aux, group, shape, data.device(), &scales);
  return true;
}

}  // namespace grit_ops
