#include "bf16_linear.h"

#include <vector>

namespace grit {
namespace bf16 {

float dot(const uint16_t* a, const uint16_t* b, int64_t b_stride, int64_t len) {
  float acc = 0.0f;
  float av[kChunk], bv[kChunk];
  for (int64_t c0 = 0; c0 < len; c0 += kChunk) {
    for (int64_t t = 0; t < kChunk; ++t) {
      const bool in = c0 + t < len;
      av[t] = in ? value(a[c0 + t]) : 0.0f;
      bv[t] = in ? value(b[(c0 + t) * b_stride]) : 0.0f;
    }
    acc = chunk(acc, av, bv);
  }
  return acc;
}

Status decode_weight(const Grade& g, const Plane planes[4], int64_t n, int64_t k, uint16_t* out) {
  const uint64_t numel = static_cast<uint64_t>(n) * static_cast<uint64_t>(k);
  std::vector<float> w(numel);
  const Status s = decode(g, planes, numel, w.data());
  if (!s.ok()) return s;
  for (uint64_t i = 0; i < numel; ++i) out[i] = from_float(w[i]);
  return Status::Ok();
}

void linear(const uint16_t* x, int64_t m, const uint16_t* w, int64_t n, int64_t k, const float* bias, float* y) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      y[i * n + j] = finish(dot(x + i * k, w + j * k, 1, k), bias != nullptr ? bias + j : nullptr);
}

void grad_input(const uint16_t* grad_y, int64_t m, const uint16_t* w, int64_t n, int64_t k, float* grad_x) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t c = 0; c < k; ++c) grad_x[i * k + c] = finish(dot(grad_y + i * n, w + c, k, n), nullptr);
}

}  // namespace bf16
}  // namespace grit
