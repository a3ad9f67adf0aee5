#include "format.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

namespace grit {
namespace {

constexpr FormatRow kFormats[] = {
    {"e2m1", kE2M1}, {"e4m3", kE4M3}, {"e8m0", kE8M0}, {"binary16", kBinary16},
    {"binary32", kBinary32}, {"u2", kU2}, {"u4", kU4}, {"u6", kU6},
    {"u8", kU8}, {"s4", kS4}, {"s8", kS8},
};

// double -> binary32 with IEEE overflow (no UB for out-of-range doubles).
float to_f32(double v) {
  if (std::isnan(v)) return canonical_nan();
  // Values at or above FLT_MAX + half an ulp round to infinity.
  constexpr double kOverflow = 3.4028235677973366e38;  // 2^128 - 2^103
  if (v >= kOverflow) return std::numeric_limits<float>::infinity();
  if (v <= -kOverflow) return -std::numeric_limits<float>::infinity();
  return static_cast<float>(v);
}

}  // namespace

const FormatRow* registered_formats(size_t* count) {
  *count = sizeof(kFormats) / sizeof(kFormats[0]);
  return kFormats;
}

const char* format_name(fmt_t word) {
  for (const auto& r : kFormats)
    if (r.word == word) return r.name;
  return nullptr;
}

bool format_by_name(std::string_view name, fmt_t* out) {
  for (const auto& r : kFormats) {
    if (name == r.name) {
      *out = r.word;
      return true;
    }
  }
  return false;
}

float canonical_nan() {
  uint32_t b = 0x7FC00000u;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

uint32_t f32_bits(float x) {
  if (std::isnan(x)) return 0x7FC00000u;
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

float f32_from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return std::isnan(f) ? canonical_nan() : f;
}

uint16_t f16_bits_of(float x, bool sat_finite) {
  if (std::isnan(x)) return 0x7E00;
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0x0000;
  const double a = std::fabs(static_cast<double>(x));
  if (std::isinf(a)) return sign | 0x7C00;
  // 65504 + half an ulp (16) ties to even, which is the next binade: overflow.
  if (a >= 65520.0) return sign | (sat_finite ? 0x7BFF : 0x7C00);
  if (a < 0x1p-14) {
    // Subnormal quantum 2^-24; the scaled value is exact in binary64.
    const double q = std::nearbyint(a * 0x1p24);
    return sign | static_cast<uint16_t>(q);  // q == 1024 is the smallest normal
  }
  int e;
  const double m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const int ex = e - 1;                // a = (2m) * 2^ex
  double mant = std::nearbyint((2.0 * m - 1.0) * 1024.0);
  int biased = ex + 15;
  if (mant >= 1024.0) {
    mant = 0.0;
    ++biased;
  }
  return sign | static_cast<uint16_t>((biased << 10) | static_cast<int>(mant));
}

float f16_value(uint16_t bits) {
  const int s = bits >> 15, e = (bits >> 10) & 0x1F, m = bits & 0x3FF;
  double v;
  if (e == 0x1F) {
    if (m != 0) return canonical_nan();
    v = std::numeric_limits<double>::infinity();
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), -24);
  } else {
    v = std::ldexp(static_cast<double>(m | 0x400), e - 25);
  }
  return static_cast<float>(s ? -v : v);
}

float fmt_decode(fmt_t word, uint32_t code) {
  const FmtInfo f = fmt_unpack(word);
  const int w = f.width;
  const uint64_t mask = (w >= 32) ? 0xFFFFFFFFull : ((1ull << w) - 1);
  uint64_t c = code & mask;

  if (f.is_integer()) {
    if (f.is_unsigned) return static_cast<float>(c);
    int64_t v = static_cast<int64_t>(c);
    if (c >= (1ull << (w - 1))) v -= static_cast<int64_t>(1ull << w);
    return static_cast<float>(v);
  }
  if (f.is_exponent_only()) {
    if (f.nan_enc != kNanNone && c == mask) return canonical_nan();
    const int64_t bias = static_cast<int64_t>((1ull << (w - 1)) - 1);
    const int64_t ex = static_cast<int64_t>(c) - bias;
    if (ex > 1100) return std::numeric_limits<float>::infinity();
    if (ex < -1100) return 0.0f;
    return to_f32(std::ldexp(1.0, static_cast<int>(ex)));
  }
  if (word == kBinary16) return f16_value(static_cast<uint16_t>(c));
  if (word == kBinary32) return f32_from_bits(static_cast<uint32_t>(c));

  const int mb = f.mantissa_bits();
  const int eb = f.exponent_bits();
  if (eb <= 0 || mb < 0 || eb > 30) return canonical_nan();
  const int64_t bias = (1ll << (eb - 1)) - 1;
  const uint64_t m = c & ((1ull << mb) - 1);
  const uint64_t e = (c >> mb) & ((1ull << eb) - 1);
  const int s = f.sign_bits() ? static_cast<int>((c >> (mb + eb)) & 1) : 0;
  const double frac = std::ldexp(static_cast<double>(m), -mb);
  double v;
  auto scaled = [](double sig, int64_t ex) {
    if (ex > 1100) return sig == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
    if (ex < -1100) return 0.0;
    return std::ldexp(sig, static_cast<int>(ex));
  };
  if (e == (1ull << eb) - 1) {
    if (f.has_inf) {
      if (m != 0) return canonical_nan();
      v = std::numeric_limits<double>::infinity();
    } else if (f.nan_enc == kNanOne && m == (1ull << mb) - 1) {
      return canonical_nan();
    } else if (f.nan_enc == kNanAll && m != 0) {
      return canonical_nan();
    } else {
      v = scaled(1.0 + frac, static_cast<int64_t>(e) - bias);  // E2M1: an ordinary value
    }
  } else if (e == 0) {
    v = scaled(frac, 1 - bias);
  } else {
    v = scaled(1.0 + frac, static_cast<int64_t>(e) - bias);
  }
  const float r = to_f32(v);
  return s ? -r : r;
}

bool fmt_nan_code(fmt_t word, uint32_t* code) {
  const FmtInfo f = fmt_unpack(word);
  if (f.nan_enc == kNanNone || f.is_integer()) return false;
  if (f.is_exponent_only()) {
    *code = static_cast<uint32_t>((f.width >= 32) ? 0xFFFFFFFFull : ((1ull << f.width) - 1));
    return true;
  }
  if (word == kBinary16) { *code = 0x7E00; return true; }
  if (word == kBinary32) { *code = 0x7FC00000u; return true; }
  const int mb = f.mantissa_bits(), eb = f.exponent_bits();
  if (eb <= 0 || mb < 0 || eb + mb > 31) return false;
  *code = static_cast<uint32_t>((((1ull << eb) - 1) << mb) | ((1ull << mb) - 1));
  return true;
}

Ladder make_ladder(fmt_t word) {
  const FmtInfo f = fmt_unpack(word);
  Ladder l;
  if (f.width > 8) return l;
  const uint32_t hi = 1u << (f.width - f.sign_bits());
  std::vector<std::pair<double, uint32_t>> pairs;
  for (uint32_t c = 0; c < hi; ++c) {
    const float v = fmt_decode(word, c);
    if (!std::isfinite(v)) continue;
    pairs.emplace_back(std::fabs(static_cast<double>(v)), c);
  }
  std::sort(pairs.begin(), pairs.end());
  for (const auto& p : pairs) {
    l.mags.push_back(p.first);
    l.codes.push_back(p.second);
  }
  return l;
}

namespace {
const Ladder& cached_ladder(fmt_t word, Ladder* scratch) {
  static const Ladder e2m1 = make_ladder(kE2M1);
  static const Ladder e4m3 = make_ladder(kE4M3);
  static const Ladder e8m0 = make_ladder(kE8M0);
  if (word == kE2M1) return e2m1;
  if (word == kE4M3) return e4m3;
  if (word == kE8M0) return e8m0;
  *scratch = make_ladder(word);
  return *scratch;
}
}  // namespace

double fmt_maxnorm(fmt_t word) {
  Ladder scratch;
  const Ladder& l = cached_ladder(word, &scratch);
  return l.mags.empty() ? 0.0 : l.mags.back();
}

Status fmt_encode(fmt_t word, float xf, Rounding rnd, Saturation sat, uint32_t* code) {
  const FmtInfo f = fmt_unpack(word);
  const double x = xf;

  if (f.is_integer()) {
    const int w = f.width;
    if (std::isnan(x))
      return Status::Fail(Error::kBadValue, "an integer format cannot represent NaN");
    int64_t lo, hi;
    if (f.is_unsigned) {
      lo = 0;
      hi = static_cast<int64_t>((1ull << w) - 1);
    } else if (sat == Saturation::kSatFinite) {
      lo = -static_cast<int64_t>((1ull << (w - 1)) - 1);
      hi = static_cast<int64_t>((1ull << (w - 1)) - 1);
    } else {
      lo = -static_cast<int64_t>(1ull << (w - 1));
      hi = static_cast<int64_t>((1ull << (w - 1)) - 1);
    }
    double r;
    switch (rnd) {
      case Rounding::kRne: r = std::nearbyint(x); break;
      case Rounding::kRna: r = std::round(x); break;
      case Rounding::kRtz: r = std::trunc(x); break;
      case Rounding::kRtp: r = std::ceil(x); break;
      default: r = std::floor(x); break;
    }
    int64_t q = r <= static_cast<double>(lo) ? lo : (r >= static_cast<double>(hi) ? hi : static_cast<int64_t>(r));
    const uint64_t mask = (w >= 64) ? ~0ull : ((1ull << w) - 1);
    *code = static_cast<uint32_t>(static_cast<uint64_t>(q) & mask);
    return Status::Ok();
  }
  if (word == kBinary16) {
    *code = f16_bits_of(xf, sat != Saturation::kOvfInf);
    return Status::Ok();
  }
  if (word == kBinary32) {
    *code = f32_bits(xf);
    return Status::Ok();
  }
  if (std::isnan(x)) {
    if (fmt_nan_code(word, code)) return Status::Ok();
    return Status::Fail(Error::kBadValue,
                        "this format has no NaN encoding; the group scale carries the poison");
  }
  if (f.width > 8)
    return Status::Fail(Error::kBadValue, "narrow-format encode needs a width of at most 8");
  Ladder scratch;
  const Ladder& l = cached_ladder(word, &scratch);
  if (l.mags.empty()) return Status::Fail(Error::kBadValue, "format has no finite codes");
  const bool neg = std::signbit(x);
  const double a = std::fabs(x);
  const size_t n = l.mags.size();
  uint32_t c;
  if (a >= l.mags[n - 1]) {
    if (sat == Saturation::kOvfInf && f.has_inf && a > l.mags[n - 1])
      return Status::Fail(Error::kBadValue, "ovfinf overflow is not supported for this format");
    c = l.codes[n - 1];
  } else if (a < l.mags[0]) {
    // Below the smallest magnitude (e8m0 has no zero): the smallest code,
    // as the reference's ladder walk (i = 0) gives. There is no mags[i] <= a.
    c = l.codes[0];
  } else {
    // Largest i with mags[i] <= a; a < mags[n-1] so i + 1 exists.
    const size_t i = static_cast<size_t>(std::upper_bound(l.mags.begin(), l.mags.end(), a) - l.mags.begin()) - 1;
    const double d_lo = a - l.mags[i], d_hi = l.mags[i + 1] - a;
    bool up;
    switch (rnd) {
      case Rounding::kRtz: up = false; break;
      case Rounding::kRtp: up = !neg && d_lo > 0.0; break;
      case Rounding::kRtn: up = neg && d_lo > 0.0; break;
      case Rounding::kRna: up = d_hi <= d_lo; break;
      default:
        up = d_hi < d_lo || (d_hi == d_lo && (l.codes[i] & 1u) != 0);
        break;
    }
    c = up ? l.codes[i + 1] : l.codes[i];
  }
  if (neg && f.sign_bits()) c |= 1u << (f.width - 1);
  *code = c;
  return Status::Ok();
}

}  // namespace grit
