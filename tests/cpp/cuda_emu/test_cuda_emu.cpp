// The CUDA kernels of csrc/kernels/cuda, run on the CPU emulator (emu.h),
// against the core and against plain models of their documented orders:
// quantize = grit::encode's bytes, INT4G quantize = grit::int4g_encode's,
// dequantize = grit::decode's bits, packed_linear (GEMV and GEMM) and
// grad_input = the slice / lane orders of packed_linear_cuda.h,
// grad_input_cuda.h and int4g_linear_cuda.h bit for bit, on every device
// kind, ragged shapes, NaN and infinite scales, irregular sparse quads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "grit/grit.h"
#include "grit/exact_linear.h"
#include "grit/int4_groups.h"
#include "kernels/common/block_encode.h"
#include "kernels/cuda/device_plan.h"
#include "kernels/cuda/exact_linear_cuda.h"
#include "kernels/cuda/grad_input_cuda.h"
#include "kernels/cuda/int4g_linear_cuda.h"
#include "kernels/cuda/int4g_quantize_cuda.h"
#include "kernels/cuda/packed_linear_cuda.h"
#include "kernels/cuda/quantize_cuda.h"

namespace {

using grit::cuda::DType;

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// Equal bits, or NaN in both.
::testing::AssertionResult same(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << what << ": sizes differ";
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) && std::isnan(want[i])) continue;
    if (bits(got[i]) != bits(want[i]))
      return ::testing::AssertionFailure() << what << ": element " << i << " is " << got[i] << " (0x" << std::hex
                                           << bits(got[i]) << "), the model says " << want[i] << " (0x"
                                           << bits(want[i]) << ")";
  }
  return ::testing::AssertionSuccess();
}

grit::Grade grade_of(const std::string& text) {
  if (const grit::ReferenceGrade* r = grit::reference_grade(text)) return *r->grade;
  grit::Grade g;
  EXPECT_TRUE(grit::grade_parse(text, &g).ok()) << text;
  return g;
}

std::vector<float> normal(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng) * scale;
  return v;
}

// Random plane bytes for grade g and n x k (every byte pattern is a plane, so
// NaN and infinite scales occur); I8S24 quads name two positions unless
// irregular.
std::vector<std::vector<uint8_t>> random_planes(const grit::Grade& g, int64_t n, int64_t k, uint32_t seed,
                                                bool irregular = false) {
  uint64_t sizes[4];
  EXPECT_TRUE(grit::grade_plane_bytes(g, static_cast<uint64_t>(n * k), sizes).ok());
  std::mt19937 rng(seed);
  std::vector<std::vector<uint8_t>> p(4);
  for (int i = 0; i < 4; ++i) {
    p[i].resize(sizes[i]);
    for (auto& b : p[i]) b = static_cast<uint8_t>(rng());
  }
  if (g.has_sp && !irregular)
    for (uint64_t q = 0; q < static_cast<uint64_t>(n * k / 4); ++q) {
      const uint32_t a = rng() % 4, b = (a + 1 + rng() % 3) % 4;
      const uint8_t nib = static_cast<uint8_t>(a | (b << 2));
      uint8_t& byte = p[3][q / 2];
      byte = static_cast<uint8_t>(q % 2 ? (byte & 0x0F) | (nib << 4) : (byte & 0xF0) | nib);
    }
  return p;
}

void as_planes(const std::vector<std::vector<uint8_t>>& p, grit::Plane out[4]) {
  for (int i = 0; i < 4; ++i) out[i] = grit::Plane{p[i].data(), p[i].size()};
}

std::vector<float> core_decode(const grit::Grade& g, const grit::Plane planes[4], int64_t n, int64_t k) {
  std::vector<float> w(static_cast<size_t>(n * k));
  EXPECT_TRUE(grit::decode(g, planes, static_cast<uint64_t>(n * k), w.data()).ok());
  return w;
}

// packed_linear's CUDA order (packed_linear_cuda.h, int4g_linear_cuda.h):
// `unit`-column units in 32 slices, each slice summed in column order from
// +0.0, the slice sums in the adjacent-pairs tree, the bias last.
template <class Product>
std::vector<float> slice_order(int64_t m, int64_t n, int64_t k, int unit, Product product, const float* bias) {
  const int64_t units = (k + unit - 1) / unit;
  std::vector<float> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t r = 0; r < n; ++r) {
      float leaf[32];
      for (int l = 0; l < 32; ++l) {
        float s = 0.0f;
        const int64_t c_end = std::min<int64_t>(k, unit * (units * (l + 1) / 32));
        for (int64_t c = unit * (units * l / 32); c < c_end; ++c) s = s + product(i, r, c);
        leaf[l] = s;
      }
      for (int width = 32; width > 1; width /= 2)
        for (int j = 0; j < width / 2; ++j) leaf[j] = leaf[2 * j] + leaf[2 * j + 1];
      y[static_cast<size_t>(i * n + r)] = bias ? leaf[0] + bias[r] : leaf[0];
    }
  return y;
}

// grad_input's CUDA order: lane l sums rows l, l+32, ... ascending from +0.0,
// then the butterfly xor 16, 8, 4, 2, 1 (lane 0's value).
template <class Product>
std::vector<float> lane_order(int64_t m, int64_t n, int64_t k, Product product) {
  std::vector<float> gx(static_cast<size_t>(m * k));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t c = 0; c < k; ++c) {
      float lane[32] = {};
      for (int64_t r = 0; r < n; ++r) lane[r % 32] = lane[r % 32] + product(i, r, c);
      for (int off = 16; off > 0; off /= 2) {
        float next[32];
        for (int l = 0; l < 32; ++l) next[l] = lane[l] + lane[l ^ off];
        std::memcpy(lane, next, sizeof lane);
      }
      gx[static_cast<size_t>(i * k + c)] = lane[0];
    }
  return gx;
}

// ---------------------------------------------------------------- quantize

TEST(CudaEmu, QuantizeIsTheCoreEncoder) {
  for (const char* name : {"MXFP4", "MXFP4_RNE", "NVF4", "NVF4_RTZ", "Q4KS", "I8S24"}) {
    const grit::Grade g = grade_of(name);
    grit::EncoderChoice c;
    ASSERT_TRUE(grit::choose_encoder(g, &c).ok());
    for (int variant = 0; variant < 3; ++variant) {
      std::vector<float> v = normal(2048, 7 + variant, variant == 2 ? 1e30f : 1.0f);
      if (variant == 1) {
        v[5] = NAN;
        v[300] = INFINITY;
        for (int i = 512; i < 768; ++i) v[i] = 0.0f;
      }
      grit::EncodedPlanes want;
      ASSERT_TRUE(grit::encode(g, v.data(), v.size(), &want).ok()) << name;
      grit::blockenc::Planes P{};
      P.v = v.data();
      P.n = v.size();
      P.family = static_cast<int>(c.family);
      P.rule = static_cast<int>(c.rule);
      P.rtz = c.elem_rounding == grit::Rounding::kRtz;
      std::vector<uint8_t> got[4];
      for (int i = 0; i < 4; ++i) {
        got[i].assign(grit::blockenc::plane_bytes(P.family, P.n, i), 0xCD);
        P.p[i] = got[i].data();
      }
      uint32_t amax = 0;
      int refused = 0;
      ASSERT_EQ(grit::cuda::quantize(P, &amax, &refused, nullptr), cudaSuccess);
      EXPECT_EQ(refused, 0);
      for (int i = 0; i < 4; ++i) EXPECT_EQ(got[i], want.plane[i]) << name << " variant " << variant << " plane " << i;
    }
  }
  // A Q4KS step beyond binary32 is refused, as the core refuses the tensor.
  std::vector<float> v(256, 3.0e38f);
  v[0] = -3.0e38f;
  grit::blockenc::Planes P{};
  P.v = v.data();
  P.n = v.size();
  P.family = grit::blockenc::kQ4ks;
  std::vector<uint8_t> planes[4];
  for (int i = 0; i < 4; ++i) {
    planes[i].resize(grit::blockenc::plane_bytes(P.family, P.n, i));
    P.p[i] = planes[i].data();
  }
  uint32_t amax = 0;
  int refused = 0;
  ASSERT_EQ(grit::cuda::quantize(P, &amax, &refused, nullptr), cudaSuccess);
  EXPECT_EQ(refused, 1);
}

TEST(CudaEmu, Int4gQuantizeIsTheCoreEncoder) {
  for (auto [rows, cols, group] : {std::tuple<int64_t, int64_t, int64_t>{37, 45, 8}, {16, 64, 32}, {5, 3, 1}}) {
    const std::vector<float> f = normal(static_cast<size_t>(rows * cols), static_cast<uint32_t>(cols));
    std::vector<double> v(f.begin(), f.end());
    std::vector<uint8_t> want_codes;
    std::vector<double> want_scales;
    ASSERT_TRUE(grit::int4g_encode(v.data(), rows, cols, group, &want_codes, &want_scales).ok());
    std::vector<int8_t> tmp(static_cast<size_t>(rows * cols));
    std::vector<uint8_t> codes((rows * cols + 1) / 2, 0xCD);
    std::vector<double> scales(want_scales.size(), -1.0);
    int refused = 0;
    ASSERT_EQ(grit::cuda::int4g_quantize(v.data(), rows, cols, group, tmp.data(), codes.data(), scales.data(),
                                         &refused, nullptr),
              cudaSuccess);
    EXPECT_EQ(refused, 0);
    EXPECT_EQ(codes, want_codes);
    EXPECT_EQ(std::memcmp(scales.data(), want_scales.data(), 8 * scales.size()), 0);
    v[7] = NAN;
    ASSERT_EQ(grit::cuda::int4g_quantize(v.data(), rows, cols, group, tmp.data(), codes.data(), scales.data(),
                                         &refused, nullptr),
              cudaSuccess);
    EXPECT_EQ(refused, 1);
  }
}

// ------------------------------------------------- dequantize, packed_linear

struct Case {
  const char* grade;
  int64_t n, k;
};
// Rows of U < 32 units (empty slices) and U >= 32 (ragged last slice).
const Case kCases[] = {{"MXFP4", 17, 96}, {"MXFP4", 9, 1056}, {"NVF4", 17, 48}, {"NVF4", 6, 1040},
                       {"Q4KS", 24, 256}, {"Q4KS", 5, 2304}, {"I8S24", 17, 96}, {"I8S24", 7, 1056},
                       {"MXFP4_RNE", 3, 160}, {"NVF4_RTZ", 3, 160}};

TEST(CudaEmu, DequantizeIsTheCoreDecode) {
  for (const Case& t : kCases)
    for (bool irregular : {false, true}) {
      const grit::Grade g = grade_of(t.grade);
      if (irregular && !g.has_sp) continue;
      const auto p = random_planes(g, t.n, t.k, 11, irregular);
      grit::Plane planes[4];
      as_planes(p, planes);
      grit::cuda::Plan plan;
      ASSERT_TRUE(grit::cuda::make_device_plan(g, planes, t.n, t.k, &plan)) << t.grade;
      std::vector<float> got(static_cast<size_t>(t.n * t.k), -1.0f);
      int flag = 0;
      std::vector<int64_t> scratch(static_cast<size_t>(t.n + 1));
      ASSERT_EQ(grit::cuda::dequantize(plan, got.data(), &flag, scratch.data(), nullptr), cudaSuccess);
      EXPECT_TRUE(same(got, core_decode(g, planes, t.n, t.k), std::string(t.grade) + (irregular ? " irregular" : "")));
    }
}

template <class T>
T to_dtype(float v);
template <>
float to_dtype<float>(float v) { return v; }
template <>
__nv_bfloat16 to_dtype<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__half to_dtype<__half>(float v) { return __float2half_rn(v); }
float as_float(float v) { return v; }
float as_float(__nv_bfloat16 v) { return __bfloat162float(v); }
float as_float(__half v) { return __half2float(v); }

template <class T>
void check_packed_linear(DType dt) {
  for (const Case& t : kCases) {
    const grit::Grade g = grade_of(t.grade);
    const auto p = random_planes(g, t.n, t.k, 21);
    grit::Plane planes[4];
    as_planes(p, planes);
    grit::cuda::Plan plan;
    ASSERT_TRUE(grit::cuda::make_device_plan(g, planes, t.n, t.k, &plan));
    const std::vector<float> w = core_decode(g, planes, t.n, t.k);
    for (int64_t m : {1, 3, 8, 9, 70}) {  // GEMV up to 8 rows, GEMM above
      std::vector<float> xf = normal(static_cast<size_t>(m * t.k), static_cast<uint32_t>(m));
      xf[3] = NAN;  // a NaN, an infinity and a subnormal activation
      xf[xf.size() - 2] = -INFINITY;
      xf[xf.size() / 2] = 1e-40f;
      std::vector<T> x(xf.size());
      std::vector<float> xv(xf.size());
      for (size_t i = 0; i < xf.size(); ++i) {
        x[i] = to_dtype<T>(xf[i]);
        xv[i] = as_float(x[i]);
      }
      const std::vector<float> bias = normal(static_cast<size_t>(t.n), 99);
      std::vector<T> y(static_cast<size_t>(m * t.n));
      int flag = 0;
      std::vector<int64_t> scratch(static_cast<size_t>(t.n + 1));
      ASSERT_EQ(grit::cuda::packed_linear(plan, x.data(), dt, m, bias.data(), DType::kFloat32, y.data(), dt, &flag,
                                          scratch.data(), nullptr),
                cudaSuccess);
      EXPECT_EQ(flag, 0);
      const auto product = [&](int64_t i, int64_t r, int64_t c) { return xv[i * t.k + c] * w[r * t.k + c]; };
      const std::vector<float> want = slice_order(m, t.n, t.k, 32, product, bias.data());
      std::vector<float> got(y.size()), want_t(y.size());
      for (size_t i = 0; i < y.size(); ++i) {
        got[i] = as_float(y[i]);
        want_t[i] = as_float(to_dtype<T>(want[i]));
      }
      EXPECT_TRUE(same(got, want_t, std::string(t.grade) + " n=" + std::to_string(t.n) + " k=" +
                                        std::to_string(t.k) + " m=" + std::to_string(m)));
    }
  }
}

TEST(CudaEmu, PackedLinearIsTheSliceOrderFloat32) { check_packed_linear<float>(DType::kFloat32); }
TEST(CudaEmu, PackedLinearIsTheSliceOrderBFloat16) { check_packed_linear<__nv_bfloat16>(DType::kBFloat16); }
TEST(CudaEmu, PackedLinearIsTheSliceOrderFloat16) { check_packed_linear<__half>(DType::kFloat16); }

TEST(CudaEmu, IrregularSparsePlanesTakeTheAscendingPath) {
  const grit::Grade g = grade_of("I8S24");
  const int64_t n = 9, k = 96;
  const auto p = random_planes(g, n, k, 5, true);
  grit::Plane planes[4];
  as_planes(p, planes);
  grit::cuda::Plan plan;
  ASSERT_TRUE(grit::cuda::make_device_plan(g, planes, n, k, &plan));
  const std::vector<float> w = core_decode(g, planes, n, k);
  for (int64_t m : {2, 12}) {
    const std::vector<float> x = normal(static_cast<size_t>(m * k), 3);
    std::vector<float> y(static_cast<size_t>(m * n));
    int flag = 0;
    std::vector<int64_t> scratch(static_cast<size_t>(n + 1));
    ASSERT_EQ(grit::cuda::packed_linear(plan, x.data(), DType::kFloat32, m, nullptr, DType::kFloat32, y.data(),
                                        DType::kFloat32, &flag, scratch.data(), nullptr),
              cudaSuccess);
    EXPECT_EQ(flag, 1);
    std::vector<float> want(y.size());
    for (int64_t i = 0; i < m; ++i)
      for (int64_t r = 0; r < n; ++r) {
        float s = 0.0f;
        for (int64_t c = 0; c < k; ++c) s = s + x[i * k + c] * w[r * k + c];
        want[i * n + r] = s;
      }
    EXPECT_TRUE(same(y, want, "irregular m=" + std::to_string(m)));
  }
}

TEST(CudaEmu, GradInputIsTheLaneOrder) {
  for (const Case& t : kCases) {
    const grit::Grade g = grade_of(t.grade);
    const auto p = random_planes(g, t.n, t.k, 31);
    grit::Plane planes[4];
    as_planes(p, planes);
    grit::cuda::Plan plan;
    ASSERT_TRUE(grit::cuda::make_device_plan(g, planes, t.n, t.k, &plan));
    const std::vector<float> w = core_decode(g, planes, t.n, t.k);
    for (int64_t m : {1, 2, 5}) {
      const std::vector<float> gy = normal(static_cast<size_t>(m * t.n), static_cast<uint32_t>(40 + m));
      std::vector<float> gx(static_cast<size_t>(m * t.k), -1.0f);
      int flag = 0;
      ASSERT_EQ(grit::cuda::packed_linear_grad_input(plan, gy.data(), DType::kFloat32, m, gx.data(), &flag, nullptr),
                cudaSuccess);
      const auto product = [&](int64_t i, int64_t r, int64_t c) { return gy[i * t.n + r] * w[r * t.k + c]; };
      EXPECT_TRUE(same(gx, lane_order(m, t.n, t.k, product),
                       std::string(t.grade) + " k=" + std::to_string(t.k) + " m=" + std::to_string(m)));
    }
  }
}

// Beyond the reference grades: seeded grades of every device kind (other
// element, scale and zero-point formats, group sizes, level-1 scales, zero
// points minus 1, unordered sparse metadata), whose decode the device plan
// takes from the CPU kernels' grade tables: dequantize, packed_linear (GEMV
// and GEMM) and grad_input against the core and the documented orders.
struct SpaceCase {
  std::string grade;
  int64_t n, k;
  bool unit_l1 = false;  // a level-1 binary32/binary16 scale planted as exactly 1
};

std::vector<SpaceCase> grade_space(int count, uint32_t seed) {
  static const char* const kElems[] = {"e2m1", "u4", "s4"};
  static const char* const kCodes[] = {"e2m1", "e4m3", "e8m0", "u2", "u4", "u6", "u8", "s4", "s8"};
  static const char* const kLevel1[] = {"", "binary32", "binary16", "e8m0", "u8"};
  std::mt19937 rng(seed);
  auto pick = [&](auto& a) { return std::string(a[rng() % (sizeof(a) / sizeof(a[0]))]); };
  std::vector<SpaceCase> out;
  for (int i = 0; i < count; ++i) {
    SpaceCase c;
    const int kind = i % 4;  // nibble twice, affine, sparse
    int64_t k0 = 32, k1 = 0;
    if (kind <= 1) {
      k0 = rng() % 2 ? 32 : 16;
      const std::string l1 = pick(kLevel1);
      c.grade = "grit1(e=" + pick(kElems) + ",k0=" + std::to_string(k0) + ",s0=" + pick(kCodes) +
                (l1.empty() ? "" : ",k1=0,s1=" + l1) + ",esr=ratiomaxabs)";
      c.unit_l1 = (l1 == "binary32" || l1 == "binary16") && rng() % 2;
    } else if (kind == 2) {
      k1 = 1 + rng() % 12;
      c.grade = "grit1(e=" + pick(kElems) + ",k0=32,s0=" + pick(kCodes) + ",k1=" + std::to_string(k1) +
                ",s1=binary16,zp=" + pick(kCodes) + ",zps=l1" + (rng() % 2 ? ",zpc=minus1" : "") +
                ",esr=affineminmax)";
    } else {
      c.grade = std::string("grit1(e=s8,k0=32,s0=binary16,sp=2:4:u2:") + (rng() % 2 ? "unord" : "asclsb") +
                ",esr=ratiomaxabs)";
    }
    const int64_t groups = 1 + rng() % 40;  // past 32 units: ragged slices
    c.k = k0 * groups;
    c.n = 1 + rng() % 24;
    if (k1)  // level-1 groups straddle rows: n * k / 32 a multiple of k1
      while ((c.n * groups) % k1) ++c.n;
    out.push_back(c);
  }
  return out;
}

TEST(CudaEmu, GradeSpaceIsTheCoreAndTheOrders) {
  int planned = 0;
  for (const SpaceCase& t : grade_space(48, 2026)) {
    const grit::Grade g = grade_of(t.grade);
    auto p = random_planes(g, t.n, t.k, 51);
    if (t.unit_l1) {
      const float one = 1.0f;
      if (g.scale1 == grit::kBinary32) std::memcpy(p[2].data(), &one, 4);
      else p[2][0] = 0x00, p[2][1] = 0x3C;  // binary16 1.0
    }
    grit::Plane planes[4];
    as_planes(p, planes);
    grit::cuda::Plan plan;
    if (!grit::cuda::make_device_plan(g, planes, t.n, t.k, &plan)) continue;  // a host round trip (its own test)
    ++planned;
    const std::string what = t.grade + " n=" + std::to_string(t.n) + " k=" + std::to_string(t.k);
    const std::vector<float> w = core_decode(g, planes, t.n, t.k);
    int flag = 0;
    std::vector<int64_t> scratch(static_cast<size_t>(t.n + 1));
    std::vector<float> got(w.size(), -1.0f);
    ASSERT_EQ(grit::cuda::dequantize(plan, got.data(), &flag, scratch.data(), nullptr), cudaSuccess);
    EXPECT_TRUE(same(got, w, "dequantize " + what));
    for (int64_t m : {1, 9}) {  // GEMV, GEMM
      const std::vector<float> x = normal(static_cast<size_t>(m * t.k), static_cast<uint32_t>(m + t.k));
      std::vector<float> y(static_cast<size_t>(m * t.n));
      flag = 0;
      ASSERT_EQ(grit::cuda::packed_linear(plan, x.data(), DType::kFloat32, m, nullptr, DType::kFloat32, y.data(),
                                          DType::kFloat32, &flag, scratch.data(), nullptr),
                cudaSuccess);
      const auto xw = [&](int64_t i, int64_t r, int64_t c) { return x[i * t.k + c] * w[r * t.k + c]; };
      EXPECT_TRUE(same(y, slice_order(m, t.n, t.k, 32, xw, nullptr), "packed_linear " + what + " m=" + std::to_string(m)));
      const std::vector<float> gy = normal(static_cast<size_t>(m * t.n), static_cast<uint32_t>(m + t.n));
      std::vector<float> gx(static_cast<size_t>(m * t.k), -1.0f);
      flag = 0;
      ASSERT_EQ(grit::cuda::packed_linear_grad_input(plan, gy.data(), DType::kFloat32, m, gx.data(), &flag, nullptr),
                cudaSuccess);
      const auto gw = [&](int64_t i, int64_t r, int64_t c) { return gy[i * t.n + r] * w[r * t.k + c]; };
      EXPECT_TRUE(same(gx, lane_order(m, t.n, t.k, gw), "grad_input " + what + " m=" + std::to_string(m)));
    }
  }
  EXPECT_GE(planned, 30);  // of 48: a level-1 scale other than binary32/16 has no device kernel (35 here)
}

// ------------------------------------------------------------------ INT4G

struct Int4gCase {
  int64_t n, k, group;
};
const Int4gCase kInt4g[] = {{17, 131, 7}, {40, 264, 32}, {5, 2, 1}, {9, 1000, 128}};

struct Int4gPlanes {
  std::vector<uint8_t> codes;
  std::vector<double> scales;
  std::vector<double> w;  // the core's decode
  grit::cuda::Int4gPlan plan;
};

Int4gPlanes int4g_planes(const Int4gCase& t, uint32_t seed) {
  Int4gPlanes P;
  const std::vector<float> f = normal(static_cast<size_t>(t.n * t.k), seed);
  const std::vector<double> v(f.begin(), f.end());
  EXPECT_TRUE(grit::int4g_encode(v.data(), t.n, t.k, t.group, &P.codes, &P.scales).ok());
  P.w.resize(v.size());
  EXPECT_TRUE(grit::int4g_decode(t.n, t.k, t.group, P.codes.data(), P.codes.size(), P.scales.data(),
                                 P.scales.size(), P.w.data())
                  .ok());
  P.plan.codes = P.codes.data();
  P.plan.scales = P.scales.data();
  P.plan.code_bytes = static_cast<int64_t>(P.codes.size());
  P.plan.n = t.n;
  P.plan.k = t.k;
  P.plan.group = t.group;
  return P;
}

float int4g_product(float x, double w) { return static_cast<float>(static_cast<double>(x) * w); }

TEST(CudaEmu, Int4gLinearAndGradInputAreTheirOrders) {
  for (const Int4gCase& t : kInt4g) {
    const Int4gPlanes P = int4g_planes(t, static_cast<uint32_t>(t.k));
    std::vector<double> deq(P.w.size());
    int flag = 0;
    ASSERT_EQ(grit::cuda::int4g_dequantize(P.plan, deq.data(), &flag, nullptr), cudaSuccess);
    EXPECT_EQ(flag, 0);
    EXPECT_EQ(std::memcmp(deq.data(), P.w.data(), 8 * deq.size()), 0);
    for (int64_t m : {1, 4, 9, 70}) {
      const std::vector<float> x = normal(static_cast<size_t>(m * t.k), static_cast<uint32_t>(m));
      const std::vector<float> bias = normal(static_cast<size_t>(t.n), 5);
      std::vector<float> y(static_cast<size_t>(m * t.n));
      ASSERT_EQ(grit::cuda::int4g_linear(P.plan, x.data(), DType::kFloat32, m, bias.data(), y.data(), &flag, nullptr),
                cudaSuccess);
      EXPECT_EQ(flag, 0);
      const auto product = [&](int64_t i, int64_t r, int64_t c) { return int4g_product(x[i * t.k + c], P.w[r * t.k + c]); };
      EXPECT_TRUE(same(y, slice_order(m, t.n, t.k, 8, product, bias.data()),
                       "INT4G linear k=" + std::to_string(t.k) + " m=" + std::to_string(m)));
      if (m > 9) continue;
      const std::vector<float> gy = normal(static_cast<size_t>(m * t.n), static_cast<uint32_t>(m + 50));
      std::vector<float> gx(static_cast<size_t>(m * t.k));
      ASSERT_EQ(grit::cuda::int4g_grad_input(P.plan, gy.data(), DType::kFloat32, m, gx.data(), &flag, nullptr),
                cudaSuccess);
      EXPECT_EQ(flag, 0);
      const auto gproduct = [&](int64_t i, int64_t r, int64_t c) { return int4g_product(gy[i * t.n + r], P.w[r * t.k + c]); };
      EXPECT_TRUE(same(gx, lane_order(m, t.n, t.k, gproduct),
                       "INT4G grad_input k=" + std::to_string(t.k) + " m=" + std::to_string(m)));
    }
  }
}

TEST(CudaEmu, Int4gKernelsFlagReservedCodesAndBadScales) {
  const Int4gCase t{17, 131, 7};
  Int4gPlanes P = int4g_planes(t, 3);
  P.codes[100] = 0x8F;  // a reserved code (nibble 8) in the high half
  P.scales[20] = 0.0;
  std::vector<float> x = normal(static_cast<size_t>(2 * t.k), 1), y(static_cast<size_t>(2 * t.n));
  for (int64_t m : {2, 12}) {
    x.resize(static_cast<size_t>(m * t.k), 0.5f);
    y.resize(static_cast<size_t>(m * t.n));
    int flag = 0;
    ASSERT_EQ(grit::cuda::int4g_linear(P.plan, x.data(), DType::kFloat32, m, nullptr, y.data(), &flag, nullptr),
              cudaSuccess);
    EXPECT_EQ(flag, grit::cuda::kInt4gReserved | grit::cuda::kInt4gScale) << m;
  }
  std::vector<float> gy(static_cast<size_t>(2 * t.n), 1.0f), gx(static_cast<size_t>(2 * t.k));
  int flag = 0;
  ASSERT_EQ(grit::cuda::int4g_grad_input(P.plan, gy.data(), DType::kFloat32, 2, gx.data(), &flag, nullptr), cudaSuccess);
  EXPECT_EQ(flag, grit::cuda::kInt4gReserved | grit::cuda::kInt4gScale);
}

// ------------------------------------------------------------- exact mode

TEST(CudaEmu, ExactModeIsTheCoreReference) {
  for (const Case& t : {Case{"I8S24", 17, 96}, Case{"MXFP4", 9, 1056}, Case{"MXFP4_RNE", 5, 160}}) {
    const grit::Grade g = grade_of(t.grade);
    grit::exact::Law L;
    ASSERT_TRUE(grit::exact::exact_law(g, &L).ok()) << t.grade;
    for (bool irregular : {false, true}) {
      if (irregular && !g.has_sp) continue;
      const auto p = random_planes(g, t.n, t.k, 61, irregular);
      const int64_t m = 3, nb = t.k / L.k0;
      std::vector<float> x = normal(static_cast<size_t>(m * t.k), 62);
      for (int64_t c = 0; c < 32; ++c) x[c] *= 1e-40f;  // subnormal activations
      std::vector<int8_t> codes(x.size()), dcodes(x.size());
      std::vector<float> scales(static_cast<size_t>(m * nb)), dscales(scales.size());
      ASSERT_TRUE(grit::exact::pack_activations(x.data(), m, t.k, L.k0, codes.data(), scales.data()).ok());
      ASSERT_EQ(grit::cuda::exact_pack(x.data(), m, t.k, L.k0, dcodes.data(), dscales.data(), nullptr), cudaSuccess);
      EXPECT_EQ(dcodes, codes);
      EXPECT_EQ(std::memcmp(dscales.data(), scales.data(), 4 * scales.size()), 0);
      const std::vector<float> bias = normal(static_cast<size_t>(t.n), 63);
      std::vector<float> want(static_cast<size_t>(m * t.n)), got(want.size());
      ASSERT_TRUE(grit::exact::exact_linear(L, codes.data(), scales.data(), m, p[0].data(), p[1].data(), p[3].data(),
                                            t.n, t.k, bias.data(), want.data())
                      .ok());
      std::vector<int64_t> start;
      if (L.sp_m) {
        std::vector<int64_t> counts(static_cast<size_t>(t.n));
        ASSERT_EQ(grit::cuda::exact_row_counts(L, p[3].data(), t.n, t.k, counts.data(), nullptr), cudaSuccess);
        start.assign(counts.size(), 0);
        for (size_t r = 1; r < counts.size(); ++r) start[r] = start[r - 1] + counts[r - 1];
      }
      std::vector<int16_t> w(static_cast<size_t>(t.n * t.k));
      std::vector<grit::exact::WScale> ws(static_cast<size_t>(t.n * nb));
      ASSERT_EQ(grit::cuda::exact_weight(L, p[0].data(), p[1].data(), p[3].data(), L.sp_m ? start.data() : nullptr,
                                         t.n, t.k, w.data(), ws.data(), nullptr),
                cudaSuccess);
      ASSERT_EQ(grit::cuda::exact_linear(L, codes.data(), scales.data(), m, w.data(), ws.data(), t.n, t.k, bias.data(),
                                         got.data(), nullptr),
                cudaSuccess);
      EXPECT_TRUE(same(got, want, std::string("exact ") + t.grade + (irregular ? " irregular" : "")));
    }
  }
}

}  // namespace
