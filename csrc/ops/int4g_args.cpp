#include "ops/int4g_args.h"

#include <c10/util/Exception.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "grit/int4_groups.h"
#include "ops/op_args.h"

namespace grit_ops {

namespace {

const char* const kPlaneNames[4] = {"data", "scale0", "scale1", "aux"};

// The plane a reader refusal is about.
const char* refused_plane(grit::Error e) {
  switch (e) {
    case grit::Error::kScaleCount:
    case grit::Error::kBadScale:
      return "plane 'scale0'";
    case grit::Error::kNonFinite:
      return "planes 'data' and 'scale0'";
    case grit::Error::kOutOfRange:
      return "argument 'shape'";
    default:
      return "plane 'data'";
  }
}

void refuse(const char* op, const grit::Status& s, const grit::cpu::Int4gWeight& w) {
  TORCH_CHECK_VALUE(s.ok(), op, ": ", refused_plane(s.code), " does not hold a valid ",
                    int4g_name(w.group), " matrix of shape [", w.n, ", ", w.k, "]: ", s.message,
                    " (", grit::error_name(s.code), ")");
}

}  // namespace

uint64_t int4g_group_arg(const char* op, c10::string_view grade) {
  uint64_t group = 0;
  const grit::Status s = grit::int4g_parse_name(grade.data(), grade.size(), &group);
  if (s.code == grit::Error::kMalformed) return 0;
  TORCH_CHECK_VALUE(s.ok(), op, ": argument 'grade' (\"", std::string(grade.data(), grade.size()),
                    "\"): ", s.message);
  return group;
}

void refuse_int4g(const char* op, c10::string_view grade) {
  const uint64_t g = int4g_group_arg(op, grade);
  TORCH_CHECK_VALUE(g == 0, op, ": grade ", int4g_name(g),
                    " (seed 001's int4 row groups) has no kernel on this path: grit::quantize, "
                    "dequantize, packed_linear, packed_linear_grad_input and check run it on CPU "
                    "tensors; move the planes and inputs to the CPU");
}

std::string int4g_name(uint64_t group) { return "INT4G" + std::to_string(group); }

void int4g_plane_bytes(int64_t rows, int64_t cols, uint64_t group, int64_t* code_bytes,
                       int64_t* scale_bytes) {
  const int64_t per_row = static_cast<int64_t>((static_cast<uint64_t>(cols) + group - 1) / group);
  *code_bytes = (rows * cols + 1) / 2;
  *scale_bytes = 8 * rows * per_row;
}

void check_int4g_shape(const char* op, uint64_t group, c10::IntArrayRef shape) {
  TORCH_CHECK_VALUE(shape.size() == 2 && shape[0] >= 1 && shape[1] >= 1, op, ": grade ",
                    int4g_name(group), " packs a non-empty 2-D matrix: argument 'shape' must be "
                    "[rows, cols] with both >= 1, found ", shape_str(shape));
  uint64_t n = 0, g = 0;
  const grit::Status s = grit::int4g_layout(static_cast<uint64_t>(shape[0]),
                                            static_cast<uint64_t>(shape[1]), group, &n, &g);
  TORCH_CHECK_VALUE(s.ok(), op, ": argument 'shape' ", shape_str(shape), " for grade ",
                    int4g_name(group), ": ", s.message);
}

Int4gQuantizeArgs int4g_quantize_args(const char* op, const at::Tensor& w, uint64_t group) {
  const auto st = w.scalar_type();
  TORCH_CHECK_TYPE(st == at::kFloat || st == at::kBFloat16 || st == at::kHalf || st == at::kDouble,
                   op, ": argument 'w' must be float32, bfloat16, float16 or float64 for ", int4g_name(group),
                   ", found ", st);
  TORCH_CHECK_VALUE(w.dim() == 2, op, ": argument 'w' must be a 2-D weight [out, in], found ",
                    w.dim(), " dimensions ", shape_str(w.sizes()));
  check_int4g_shape(op, group, w.sizes());
  Int4gQuantizeArgs a;
  a.rows = w.size(0);
  a.cols = w.size(1);
  int4g_plane_bytes(a.rows, a.cols, group, &a.code_bytes, &a.scale_bytes);
  return a;
}

grit::cpu::Int4gWeight int4g_weight(const char* op, const at::Tensor& data,
                                    const at::Tensor& scale0, const at::Tensor& scale1,
                                    const at::Tensor& aux, uint64_t group, c10::IntArrayRef shape,
                                    c10::Device device, std::vector<double>* scales,
                                    Int4gCheck check) {
  const std::string name = int4g_name(group);
  check_int4g_shape(op, group, shape);
  const at::Tensor* t[4] = {&data, &scale0, &scale1, &aux};
  for (int i = 0; i < 4; ++i) {
    const at::Tensor& p = *t[i];
    TORCH_CHECK_TYPE(p.scalar_type() == at::kByte, op, ": plane '", kPlaneNames[i],
                     "' must be a uint8 tensor of bytes, found ", p.scalar_type());
    TORCH_CHECK_VALUE(p.dim() == 1, op, ": plane '", kPlaneNames[i], "' must be 1-D, found ",
                      p.dim(), " dimensions ", shape_str(p.sizes()),
                      " (flatten it with .reshape(-1))");
    TORCH_CHECK_VALUE(p.is_contiguous(), op, ": plane '", kPlaneNames[i],
                      "' must be contiguous, found stride ", p.stride(0), " (call .contiguous())");
    TORCH_CHECK_VALUE(p.device() == device, op, ": plane '", kPlaneNames[i], "' must be on ",
                      device, " like the other arguments, found ", p.device());
  }
  for (int i = 2; i < 4; ++i)
    TORCH_CHECK_VALUE(t[i]->numel() == 0, op, ": plane '", kPlaneNames[i], "' must be empty for ",
                      name, " (codes are in 'data', scales in 'scale0'), found ", t[i]->numel(),
                      " bytes");
  TORCH_CHECK_VALUE(scale0.numel() % 8 == 0, op, ": plane 'scale0' holds ", name,
                    "'s binary64 scales, 8 bytes each, but has ", scale0.numel(),
                    " bytes (not a multiple of 8)");
  grit::cpu::Int4gWeight w;
  w.n_scales = static_cast<uint64_t>(scale0.numel() / 8);
  const uint8_t* raw = scale0.numel() ? scale0.const_data_ptr<uint8_t>() : nullptr;
  TORCH_CHECK(check != Int4gCheck::kLengths || reinterpret_cast<uintptr_t>(raw) % alignof(double) == 0, op,
              ": internal error: a device scale plane must be 8-byte aligned here");
  if (reinterpret_cast<uintptr_t>(raw) % alignof(double) == 0) {
    w.scales = reinterpret_cast<const double*>(raw);  // in place (torch's storage is aligned)
  } else {
    scales->resize(static_cast<size_t>(w.n_scales));
    std::memcpy(scales->data(), raw, static_cast<size_t>(scale0.numel()));
    w.scales = scales->data();
  }
  w.codes = data.numel() ? data.const_data_ptr<uint8_t>() : nullptr;
  w.code_bytes = static_cast<uint64_t>(data.numel());
  w.n = shape[0];
  w.k = shape[1];
  w.group = group;
  switch (check) {
    case Int4gCheck::kWhole: int4g_require_valid(op, w); break;
    case Int4gCheck::kLayout: refuse(op, grit::cpu::int4g_check_layout(w), w); break;
    case Int4gCheck::kLengths:
      refuse(op, grit::int4g_validate_lengths(static_cast<uint64_t>(w.n), static_cast<uint64_t>(w.k), w.group,
                                              w.code_bytes, w.n_scales), w);
      break;
  }
  return w;
}

void int4g_require_valid(const char* op, const grit::cpu::Int4gWeight& w) {
  refuse(op, grit::cpu::int4g_check(w), w);
}

}  // namespace grit_ops
