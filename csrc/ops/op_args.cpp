#include "ops/op_args.h"

#include "ops/int4g_args.h"

#include <c10/util/Exception.h>

#include <mutex>
#include <sstream>
#include <unordered_map>

namespace grit_ops {

namespace {
constexpr size_t kGradeCacheMax = 256;  // distinct strings kept; more are parsed each call
const char* const kPlaneNames[4] = {"data", "scale0", "scale1", "aux"};
}  // namespace

std::shared_ptr<const grit::Grade> grade_arg(const char* op, c10::string_view text) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::shared_ptr<const grit::Grade>> cache;
  std::string key(text.data(), text.size());
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  std::shared_ptr<const grit::Grade> grade;
  if (const grit::ReferenceGrade* ref = grit::reference_grade(key)) {
    grade = std::make_shared<const grit::Grade>(*ref->grade);
  } else {
    auto g = std::make_shared<grit::Grade>();
    const grit::Status s = grit::grade_parse(key, g.get());
    if (!s.ok()) refuse_int4g(op, text);  // not a GRIT grade, and no kernel here for it
    TORCH_CHECK_VALUE(s.ok(), op, ": argument 'grade' (\"", key, "\") is not a grade: ",
                grit::error_name(s.code), ": ", s.message,
                ". Pass a canonical grade string such as "
                "\"grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)\" or a reference name "
                "(MXFP4, NVF4, Q4KS, I8S24).");
    grade = std::move(g);
  }
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() < kGradeCacheMax) cache.emplace(std::move(key), grade);
  return grade;
}

std::string shape_str(c10::IntArrayRef shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

void check_float_arg(const char* op, const char* name, const at::Tensor& t) {
  const auto st = t.scalar_type();
  TORCH_CHECK_TYPE(st == at::kFloat || st == at::kBFloat16 || st == at::kHalf, op, ": argument '", name,
              "' must be float32, bfloat16 or float16, found ", st);
}

grit::Descriptor canonical_descriptor(const grit::Grade& grade, size_t rank) {
  return grit::descriptor_for(grade, grit::default_placements(grade),
                              static_cast<int16_t>(static_cast<int64_t>(rank) - 1));
}

void check_lengths(const char* op, const grit::Grade& grade, c10::IntArrayRef shape,
                   const uint64_t lengths[4]) {
  TORCH_CHECK_VALUE(!shape.empty() && shape.size() <= grit::kMaxRank, op,
              ": argument 'shape' must have 1 to ", grit::kMaxRank, " dimensions, found ",
              shape_str(shape));
  const grit::Descriptor d = canonical_descriptor(grade, shape.size());
  const grit::CheckResult r =
      grit::check_level1(d, shape.data(), shape.size(), lengths, &grade);
  if (r.ok()) return;
  const char* fix = r.field == grit::CheckField::kPlaneBytes
                        ? " (pass the planes quantize() made for this grade and shape)"
                        : "";
  TORCH_CHECK_VALUE(false, op, ": planes do not match grade ", grade.canonical, " with shape ",
              shape_str(shape), ": ", grit::describe(r, d), fix);
}

void check_plane_tensor(const char* op, const char* name, const at::Tensor& p, c10::Device device) {
  TORCH_CHECK_TYPE(p.scalar_type() == at::kByte, op, ": plane '", name,
              "' must be a uint8 tensor of bytes, found ", p.scalar_type());
  TORCH_CHECK_VALUE(p.dim() == 1, op, ": plane '", name,
              "' must be 1-D, found ", p.dim(), " dimensions ", shape_str(p.sizes()),
              " (flatten it with .reshape(-1))");
  TORCH_CHECK_VALUE(p.is_contiguous(), op, ": plane '", name,
              "' must be contiguous, found stride ", p.stride(0), " (call .contiguous())");
  TORCH_CHECK_VALUE(p.device() == device, op, ": plane '", name, "' must be on ", device,
              " like the other arguments, found ", p.device());
}

PlaneArgs plane_args(const char* op, const at::Tensor& data, const at::Tensor& scale0,
                     const at::Tensor& scale1, const at::Tensor& aux, const grit::Grade& grade,
                     c10::IntArrayRef shape, c10::Device device) {
  const at::Tensor* t[4] = {&data, &scale0, &scale1, &aux};
  PlaneArgs out;
  uint64_t lengths[4];
  for (int i = 0; i < 4; ++i) {
    const at::Tensor& p = *t[i];
    check_plane_tensor(op, kPlaneNames[i], p, device);
    lengths[i] = static_cast<uint64_t>(p.numel());
    out.plane[i].data = p.numel() ? p.const_data_ptr<uint8_t>() : nullptr;
    out.plane[i].size = lengths[i];
  }
  check_lengths(op, grade, shape, lengths);
  return out;
}

grit::cpu::PackedWeight packed_weight(const grit::Grade& grade, const PlaneArgs& p, int64_t n, int64_t k) {
  grit::cpu::PackedWeight w;
  w.grade = &grade;
  for (int i = 0; i < 4; ++i) w.planes[i] = p.plane[i];
  w.n = n;
  w.k = k;
  return w;
}

void check_weight_shape(const char* op, const grit::Grade& grade, c10::IntArrayRef shape) {
  TORCH_CHECK_VALUE(shape.size() == 2, op, ": argument 'shape' must be the 2-D weight shape [out, in], found ",
              shape_str(shape));
  TORCH_CHECK_VALUE(shape[0] >= 0 && shape[1] >= 0, op, ": argument 'shape' has a negative extent: ",
              shape_str(shape));
  TORCH_CHECK_VALUE(grade.k0 > 0 && shape[1] % grade.k0 == 0, op, ": the weight has ", shape[1],
              " in-features (shape[1]) but grade ", grade.canonical, " groups k0=", grade.k0,
              " values along that axis: shape[1] must be a multiple of ", grade.k0);
}

const grit::cpu::KernelTable& active_cpu_kernels(const char* op) {
  grit::cpu::Isa isa;
  const grit::Status sel = grit::cpu::active_isa(&isa);
  TORCH_CHECK_VALUE(sel.ok(), op, ": ", sel.message);
  return grit::cpu::kernels_for(isa);
}

int64_t batch_rows(const at::Tensor& t) {
  int64_t m = 1;
  for (int64_t d = 0; d + 1 < t.dim(); ++d) m *= t.size(d);
  return m;
}

std::vector<int64_t> with_last(c10::IntArrayRef sizes, int64_t last) {
  std::vector<int64_t> out(sizes.begin(), sizes.end());
  out.back() = last;
  return out;
}

void check_activation(const char* op, const char* name, const at::Tensor& t, int64_t want,
                      const char* what, c10::IntArrayRef shape) {
  check_float_arg(op, name, t);
  TORCH_CHECK_VALUE(t.dim() >= 1, op, ": argument '", name,
                    "' must have at least 1 dimension, found a scalar");
  TORCH_CHECK_VALUE(t.size(-1) == want, op, ": argument '", name, "' has ", t.size(-1),
                    " features in its last dimension ", shape_str(t.sizes()),
                    ", but the weight of shape ", shape_str(shape), " has ", want, " ", what);
}

bool check_bias(const char* op, const std::optional<at::Tensor>& bias, int64_t n, c10::Device device) {
  if (!bias.has_value() || !bias->defined()) return false;
  check_float_arg(op, "bias", *bias);
  TORCH_CHECK_VALUE(bias->dim() == 1 && bias->size(0) == n, op, ": argument 'bias' must have shape [", n,
                    "] (the weight's out-features), found ", shape_str(bias->sizes()));
  TORCH_CHECK_VALUE(bias->device() == device, op, ": argument 'bias' must be on ", device,
                    " like x, found ", bias->device());
  return true;
}

}  // namespace grit_ops
