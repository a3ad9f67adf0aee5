// The dispatch table of the packed_linear CPU kernels and the per-call plan
// (which fast decoder a grade gets, and its code tables). Plain C++: no
// instruction beyond the baseline runs here.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <memory>
#include <string>
#include <unordered_map>

#include "grit/bits.h"
#include "kernels/cpu/packed_linear_cpu.h"
#include "kernels/cpu/tile_accumulate.h"

namespace grit {
namespace cpu {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx512Bf16: return "avx512_bf16";
  }
  return "?";
}

bool isa_parse(const char* text, Isa* out) {
  for (Isa i : kAllIsas) {
    if (std::strcmp(text, isa_name(i)) == 0) {
      *out = i;
      return true;
    }
  }
  return false;
}

bool isa_supported(Isa isa) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi2");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kAvx2: return avx2;
    case Isa::kAvx512: return avx512;
    case Isa::kAvx512Bf16: {
      if (!avx512 || !__builtin_cpu_supports("avx512bf16")) return false;
      static const bool pairs_are_fmas = avx512_bf16_pair_mismatches(4096, 1) == 0;
      return pairs_are_fmas;
    }
  }
  return false;
#else
  return isa == Isa::kScalar;
#endif
}

const char* fast_kind_name(FastKind kind) {
  switch (kind) {
    case FastKind::kNone: return "reference";
    case FastKind::kNibble: return "nibble";
    case FastKind::kNibbleAffine: return "nibble_affine";
    case FastKind::kInt8Sparse24: return "int8_sparse24";
    case FastKind::kInt8Dense: return "int8_dense";
    case FastKind::kNibbleZp: return "nibble_zp";
    case FastKind::kNibbleFs: return "nibble_fs";
  }
  return "?";
}

// ---------------------------------------------------------------------------
// Dispatch

const KernelTable& kernels_for(Isa isa) {
  switch (isa) {
    case Isa::kAvx512Bf16: return avx512_bf16_kernels();
    case Isa::kAvx512: return avx512_kernels();
    case Isa::kAvx2: return avx2_kernels();
    case Isa::kScalar: break;
  }
  return scalar_kernels();
}

namespace {

struct Selection {
  Status status;
  Isa isa = Isa::kScalar;
};

const Selection& startup_selection() {
  static const Selection sel = [] {
    Selection s;
    Isa best = Isa::kScalar;
    for (Isa i : kAllIsas)  // in ascending order of preference
      if (isa_supported(i)) best = i;
    s.isa = best;
    const char* env = std::getenv("GRIT_CPU_ISA");
    if (env != nullptr && *env != '\0') {
      Isa want;
      if (!isa_parse(env, &want)) {
        s.status = Status::Fail(Error::kBadValue,
                                std::string("GRIT_CPU_ISA='") + env +
                                    "' names no kernel variant; expected scalar, avx2, avx512 or avx512_bf16 "
                                    "(or unset it to use the best this CPU has: " +
                                    isa_name(best) + ")");
      } else if (!isa_supported(want)) {
        s.status = Status::Fail(Error::kBadValue,
                                std::string("GRIT_CPU_ISA=") + env +
                                    ", but this CPU cannot run the " + env +
                                    " kernels; the best it has is " + isa_name(best));
      } else {
        s.isa = want;
      }
    }
    return s;
  }();
  return sel;
}

std::atomic<int> g_override{-1};

}  // namespace

Status active_isa(Isa* out) {
  const int o = g_override.load(std::memory_order_acquire);
  if (o >= 0) {
    *out = static_cast<Isa>(o);
    return Status::Ok();
  }
  const Selection& s = startup_selection();
  *out = s.isa;
  return s.status;
}

Status set_active_isa(Isa isa, Isa* previous) {
  if (!isa_supported(isa))
    return Status::Fail(Error::kBadValue, std::string("this CPU cannot run the ") + isa_name(isa) +
                                              " kernels");
  const int o = g_override.load(std::memory_order_acquire);
  *previous = o >= 0 ? static_cast<Isa>(o) : startup_selection().isa;
  g_override.store(static_cast<int>(isa), std::memory_order_release);
  return Status::Ok();
}

namespace {
std::atomic<uint64_t> g_pair_path_calls{0};
}  // namespace

uint64_t pair_path_calls() { return g_pair_path_calls.load(std::memory_order_relaxed); }
void count_pair_path_call() { g_pair_path_calls.fetch_add(1, std::memory_order_relaxed); }

namespace {
std::atomic<int> g_pair_gemm{-1};
bool vendor_pair_gemm() {
#if defined(__x86_64__)
  static const bool amd = [] {
    __builtin_cpu_init();
    return __builtin_cpu_is("amd") != 0;
  }();
  return amd;
#else
  return false;
#endif
}
}  // namespace

bool pair_gemm_enabled() {
  const int mode = g_pair_gemm.load(std::memory_order_acquire);
  return mode < 0 ? vendor_pair_gemm() : mode != 0;
}

int set_pair_gemm(int mode) { return g_pair_gemm.exchange(mode < 0 ? -1 : (mode != 0), std::memory_order_acq_rel); }

namespace {

// Binary32 exponent field of v (0 for zero and subnormals, 255 non-finite),
// and whether its low 16 bits are zero (v is bfloat16-exact).
inline uint32_t exponent_field(float v, bool* bf16_exact) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  *bf16_exact = (u & 0xFFFFu) == 0;
  return (u >> 23) & 0xFFu;
}

}  // namespace

bool pairs_allowed(const LinearPlan& plan, const uint8_t* codes, uint64_t n_codes, const float* grad_y,
                   int64_t count) {
  if (plan.kind != FastKind::kNibble || !plan.factor || plan.w.grade == nullptr || plan.w.grade->scale0 != kE8M0)
    return false;
  // Elements: zero, or bfloat16-exact multiples of 1/2 below 8 (e2m1's are).
  for (float e : plan.elem) {
    bool exact;
    exponent_field(e, &exact);
    if (e != 0.0f && !(exact && std::fabs(e) < 8.0f && std::fabs(e) * 2.0f == std::floor(std::fabs(e) * 2.0f)))
      return false;
  }
  // w = e * 2^(c-127): a multiple of 2^(c-128) below 2^(c-124).
  for (uint64_t i = 0; i < n_codes; ++i) {
    const uint8_t c = codes[i];
    if (c != 255 && (c < 72 || c > 187)) return false;
  }
  // grad_y: bfloat16-exact, zero or non-finite or in [2^-56, 2^62): exponent fields 71..188.
  for (int64_t i = 0; i < count; ++i) {
    bool exact;
    const uint32_t f = exponent_field(grad_y[i], &exact);
    if (!exact || (grad_y[i] != 0.0f && f != 255 && (f < 71 || f > 188))) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// The scalar variant is the reference kernel itself.

namespace {

Status scalar_linear_tiles(const LinearPlan& p, const float* x, int64_t m, const float* bias,
                           int64_t tile_begin, int64_t tile_end, float* y, bool* /*fallback*/) {
  return p.continued ? linear_tiles_continue(p.w, x, m, tile_begin, tile_end, y)
                     : linear_tiles(p.w, x, m, bias, tile_begin, tile_end, y);
}

Status scalar_decode_tiles(const LinearPlan& p, int64_t tile_begin, int64_t tile_end, float* out,
                           bool* /*fallback*/) {
  const int64_t r0 = tile_begin * kLinearTileRows;
  int64_t r1 = tile_end * kLinearTileRows;
  if (r1 > p.w.n) r1 = p.w.n;
  if (r0 >= r1) return Status::Ok();
  uint64_t cursor =
      sparse_cursor(*p.w.grade, p.w.planes, static_cast<uint64_t>(r0) * static_cast<uint64_t>(p.w.k));
  return decode_rows(p.w, r0, r1, &cursor, out);
}

Status scalar_int4g_tiles(const Int4gWeight& w, const float* x, int64_t m, const float* bias,
                          int64_t tile_begin, int64_t tile_end, float* y, bool* suspect) {
  int4g_linear_tiles(w, x, m, bias, tile_begin, tile_end, y);
  *suspect = true;  // the reference reads without checking
  return Status::Ok();
}

void scalar_grad_input_rows(const float* grad_y, int64_t n, const float* w_rows, int64_t row_begin,
                            int64_t row_end, int64_t m, int64_t k, int64_t col_begin, int64_t col_end,
                            float* grad_x) {
  accumulate_grad_input(grad_y, w_rows, n, k, row_begin, row_end, 0, m, col_begin, col_end, grad_x);
}

const KernelTable kScalarTable{Isa::kScalar, &scalar_linear_tiles, &scalar_decode_tiles,
                               &scalar_int4g_tiles, false, &scalar_grad_input_rows};

}  // namespace

const KernelTable& scalar_kernels() { return kScalarTable; }

// ---------------------------------------------------------------------------
// Plans

namespace {

bool byte_code(fmt_t f) { return f != kFmtAbsent && fmt_width(f) <= 8; }

float canonical(float v) { return std::isnan(v) ? canonical_nan() : v; }

bool same_bits(float a, float b) {
  uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y;
}

// The shortcut a variant may use for a 256-entry code table, checked on
// every code against the table itself.
void choose_map(const float table[256], CodeMap* map, uint32_t* mask) {
  bool e8m0 = true;
  for (uint32_t c = 0; c < 256 && e8m0; ++c) {
    const uint32_t bits = c == 0 ? 0x00400000u : c == 255 ? 0x7FC00000u : c << 23;
    float v;
    std::memcpy(&v, &bits, 4);
    e8m0 = same_bits(table[c], v);
  }
  if (e8m0) {
    *map = CodeMap::kE8M0;
    return;
  }
  for (uint32_t m : {0x0Fu, 0x3Fu, 0xFFu}) {
    bool ok = true;
    for (uint32_t c = 0; c < 256 && ok; ++c) ok = same_bits(table[c], static_cast<float>(c & m));
    if (ok) {
      *map = CodeMap::kIntMask;
      *mask = m;
      return;
    }
  }
  *map = CodeMap::kTable;
}

// Whether table[c] == mul * e4m3(c), finite, for every normal E4M3 code
// (magnitude bits 8..126): sign, then the code's exponent and fraction
// fields moved into binary32's, the exponent rebiased by 127 - 7. The
// SIMD decoders form exactly these bits (packed_linear_simd.inc).
bool e4m3_shortcut(const float table[256], float mul) {
  for (uint32_t c = 0; c < 256; ++c) {
    const uint32_t mag = c & 0x7Fu;
    if (mag < 8 || mag == 0x7F) continue;
    const uint32_t bits = ((c & 0x80u) << 24) | ((mag << 20) + (120u << 23));
    float v;
    std::memcpy(&v, &bits, 4);
    v = mul * v;
    if (!std::isfinite(v) || !same_bits(table[c], v)) return false;
  }
  return true;
}

// Significant bits of a nonnegative integer.
int bit_length(uint32_t v) {
  int n = 0;
  for (; v != 0; v >>= 1) ++n;
  return n;
}

// LinearPlan::affine_fma: S = d * s0(code), d binary16 (11 significant
// bits), s0 the integer code & mask; the elements integers. Then S * e has
// at most 11 + bits(mask) + bits(max |e|) significant bits and is exact
// (its magnitude stays far inside binary32's normal range).
bool affine_products_exact(const LinearPlan& p) {
  if (p.s0_map != CodeMap::kIntMask) return false;
  uint32_t emax = 0;
  for (float e : p.elem) {
    if (e != std::floor(e) || std::fabs(e) > 65535.0f) return false;
    emax = std::max(emax, static_cast<uint32_t>(std::fabs(e)));
  }
  return 11 + bit_length(p.s0_mask) + bit_length(emax) <= 24;
}

// Element tables of 4-bit formats, packed low nibble first, one code per
// nibble, every value finite (a code that decodes to NaN or an infinity
// would need the per-element NaN rule; those grades use the reference).
bool nibble_elements(const Grade& g, float elem[16]) {
  if (fmt_width(g.elem) != 4 || g.pad8 || g.msb_first) return false;
  for (uint32_t c = 0; c < 16; ++c) {
    elem[c] = fmt_decode(g.elem, c);
    if (!std::isfinite(elem[c])) return false;
  }
  return true;
}

}  // namespace

FastKind fast_kind_of(const Grade& g) {
  float elem[16];
  if (!g.has_sp && !g.has_zp && (g.k0 == 16 || g.k0 == 32) && byte_code(g.scale0) &&
      (!g.has_l1 || g.k1 == 0) && nibble_elements(g, elem))
    return FastKind::kNibble;
  if (!g.has_sp && g.has_zp && g.zp_l1 && g.has_l1 && g.scale1 == kBinary16 && g.k0 == 32 &&
      byte_code(g.scale0) && byte_code(g.zp) && nibble_elements(g, elem))
    return FastKind::kNibbleAffine;
  if (g.elem == kS8 && g.has_sp && g.sp_n == 2 && g.sp_m == 4 && g.sp_meta_bits == 2 &&
      g.scale0 == kBinary16 && !g.has_l1 && !g.has_zp && g.k0 == 32)
    return FastKind::kInt8Sparse24;
  const bool float_scale = g.scale0 == kBinary16 || g.scale0 == kBinary32;
  // Groups of 32, 64 or 128, or one group per row (k0 > 128, a multiple of 32:
  // make_plan asks k0 == k).
  const bool float_groups = g.k0 == 32 || g.k0 == 64 || g.k0 == 128 || (g.k0 > 128 && g.k0 % 32 == 0);
  if (g.elem == kS8 && !g.has_sp && float_scale && !g.has_l1 && !g.has_zp && float_groups)
    return FastKind::kInt8Dense;
  if (!g.has_sp && g.has_zp && !g.zp_l1 && !g.has_l1 && g.scale0 == kBinary16 && byte_code(g.zp) &&
      (g.k0 == 32 || g.k0 == 64 || g.k0 == 128) && nibble_elements(g, elem))
    return FastKind::kNibbleZp;
  if (!g.has_sp && !g.has_zp && !g.has_l1 && float_scale && float_groups && nibble_elements(g, elem))
    return FastKind::kNibbleFs;
  return FastKind::kNone;
}

void make_grade_tables(const Grade& g, LinearPlan* p) {
  p->factor = law_factors_grade(g, &p->elem_maxabs);
  p->kind = fast_kind_of(g);
  p->k0 = static_cast<int>(g.k0);
  p->k1 = g.k1;
  switch (p->kind) {
    case FastKind::kNone:
    case FastKind::kInt8Sparse24:
      return;
    case FastKind::kInt8Dense:
      p->s0_width = fmt_width(g.scale0);
      return;
    case FastKind::kNibbleFs:
      nibble_elements(g, p->elem);
      p->s0_width = fmt_width(g.scale0);
      return;
    case FastKind::kNibbleZp:
      nibble_elements(g, p->elem);
      for (uint32_t c = 0; c < 256; ++c) {
        float z = fmt_decode(g.zp, c);
        if (g.zp_minus1) z = z + 1.0f;
        p->zp[c] = z;
      }
      choose_map(p->zp, &p->zp_map, &p->zp_mask);
      return;
    case FastKind::kNibble:
    case FastKind::kNibbleAffine:
      nibble_elements(g, p->elem);
      for (uint32_t c = 0; c < 256; ++c) p->s0[c] = fmt_decode(g.scale0, c);
      choose_map(p->s0, &p->s0_map, &p->s0_mask);
      p->s0_e4m3 = p->kind == FastKind::kNibble && !p->factor && e4m3_shortcut(p->s0, 1.0f);
      p->s0_factor_from = 256;
      for (uint32_t c = 0; c < 256 && p->factor; ++c)
        if (!law_group_factored(p->s0[c], p->elem_maxabs)) {
          p->s0_factor_from = c;
          break;
        }
      if (p->kind == FastKind::kNibbleAffine) {
        for (uint32_t c = 0; c < 256; ++c) {
          float z = fmt_decode(g.zp, c);
          if (g.zp_minus1) z = z + 1.0f;
          p->zp[c] = z;
        }
        choose_map(p->zp, &p->zp_map, &p->zp_mask);
        p->affine_fma = affine_products_exact(*p);
      }
      return;
  }
}

namespace {

// make_grade_tables once per grade (keyed by its canonical string; they
// depend on the grade alone): 1-3 us a call saved on every packed_linear.
// Past kMaxGrades distinct grades the tables are built per call.
constexpr size_t kMaxGrades = 256;

void cached_grade_tables(const Grade& g, LinearPlan* p) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::unique_ptr<const LinearPlan>> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(g.canonical);
    if (it != cache.end()) {
      *p = *it->second;
      return;
    }
  }
  *p = LinearPlan{};
  make_grade_tables(g, p);
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() < kMaxGrades) cache.emplace(g.canonical, std::make_unique<const LinearPlan>(*p));
}

}  // namespace

// The decoders' assumptions about the law's form: a factoring kNibble plan
// has the E8M0 map, kInt8Sparse24 and kInt8Dense factor with binary16 scales (not binary32), kNibbleFs takes either form, kNibbleAffine never
// (zero points). Anything else takes the reference kernel.
static bool form_supported(const LinearPlan& p) {
  switch (p.kind) {
    case FastKind::kNone: return true;
    case FastKind::kNibble: return !p.factor || p.s0_map == CodeMap::kE8M0;
    case FastKind::kNibbleAffine: return !p.factor;
    case FastKind::kInt8Sparse24: return p.factor;
    case FastKind::kInt8Dense: return p.factor == (p.s0_width == 16);  // binary16 factors, binary32 does not
    case FastKind::kNibbleZp: return !p.factor;
    case FastKind::kNibbleFs: return p.s0_width == 16 || !p.factor;
  }
  return false;
}

void make_plan(const PackedWeight& w, LinearPlan* p) {
  const Grade& g = *w.grade;
  if (w.n <= 0 || w.k <= 0) {
    *p = LinearPlan{};
    p->w = w;
    return;
  }
  cached_grade_tables(g, p);
  p->w = w;
  if (p->kind == FastKind::kNibble && g.has_l1) {
    // A per-tensor level-1 scale: S = s1 * s0 (outermost first, one
    // rounding), the same product for every group that shares a code.
    const int w1 = fmt_width(g.scale1);
    if (w.planes[2].size * 8 < static_cast<uint64_t>(w1)) {  // the caller's check failed
      p->kind = FastKind::kNone;
      return;
    }
    const float s1 = fmt_decode(g.scale1, read_bits_lsb(w.planes[2].data, 0, w1));
    for (uint32_t c = 0; c < 256; ++c) p->s0[c] = canonical(s1 * p->s0[c]);
    choose_map(p->s0, &p->s0_map, &p->s0_mask);
    p->s0_e4m3_mul = s1;
    p->s0_e4m3 = !p->factor && e4m3_shortcut(p->s0, s1);
  }
  if ((p->kind == FastKind::kNibbleZp || p->kind == FastKind::kInt8Dense || p->kind == FastKind::kNibbleFs) &&
      w.k % p->k0 != 0)
    p->kind = FastKind::kNone;  // groups straddle rows
  if ((p->kind == FastKind::kInt8Dense || p->kind == FastKind::kNibbleFs) && p->k0 > 128 && p->k0 != w.k)
    p->kind = FastKind::kNone;  // groups wider than a super-block: one per row only
  if (!form_supported(*p)) p->kind = FastKind::kNone;
}

}  // namespace cpu
}  // namespace grit
