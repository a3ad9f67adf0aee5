#include "encode.h"

#include <cmath>
#include <string>

#include "bits.h"
#include "format.h"

namespace grit {
namespace {

constexpr float kE2M1Max = 6.0f;
constexpr float kE4M3Max = 448.0f;
constexpr float kS8Max = 127.0f;

bool all_finite(const float* v, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i)
    if (!std::isfinite(v[i])) return false;
  return true;
}

uint32_t enc(fmt_t f, float x, Rounding r = Rounding::kRne) {
  uint32_t c = 0;
  fmt_encode(f, x, r, Saturation::kSatFinite, &c);  // callers never pass NaN here
  return c;
}

void put_nibble(std::vector<uint8_t>& p, uint64_t i, uint32_t c) {
  p[i / 2] |= static_cast<uint8_t>((c & 0xF) << (4 * (i % 2)));
}

void put_u16(std::vector<uint8_t>& p, uint16_t v) {
  p.push_back(v & 0xFF);
  p.push_back(v >> 8);
}

Status need_multiple(uint64_t n, uint64_t k, const char* grade) {
  if (n % k == 0) return Status::Ok();
  return Status::Fail(Error::kBadLength, std::string(grade) + " needs a multiple of " +
                                             std::to_string(k) + " values, found " +
                                             std::to_string(n));
}

// Python's round-half-even on a finite value, clamped into [lo, hi].
Status rne_clamp(float x, int lo, int hi, int* out) {
  if (!std::isfinite(x))
    return Status::Fail(Error::kBadValue, "value range overflows binary32 during encode");
  const double r = std::nearbyint(static_cast<double>(x));
  *out = r < lo ? lo : (r > hi ? hi : static_cast<int>(r));
  return Status::Ok();
}

}  // namespace

int shared_exp2_exponent(float amax, ScaleRule rule) {
  int e;
  const double m = std::frexp(static_cast<double>(amax), &e);
  const int e_floor = e - 1;
  const double f = 2.0 * m;  // exact, in [1, 2)
  switch (rule) {
    case ScaleRule::kExp2Floor:
      return e_floor;
    case ScaleRule::kExp2Ceil:
      return f == 1.0 ? e_floor : e_floor + 1;
    case ScaleRule::kExp2Rne: {
      const double ff = f * f;  // exact in binary64 for a binary32 significand
      if (ff > 2.0) return e_floor + 1;
      if (ff < 2.0) return e_floor;
      return (e_floor % 2 == 0) ? e_floor : e_floor + 1;  // unreachable for rationals
    }
  }
  return e_floor;
}

Status encode_mxfp4(const float* v, uint64_t n, ScaleRule rule, EncodedPlanes* out) {
  Status st = need_multiple(n, 32, "MXFP4");
  if (!st.ok()) return st;
  EncodedPlanes p;
  p.plane[0].assign((n + 1) / 2, 0);
  p.plane[1].reserve(n / 32);
  for (uint64_t b = 0; b < n / 32; ++b) {
    const float* blk = v + 32 * b;
    if (!all_finite(blk, 32)) {
      p.plane[1].push_back(0xFF);  // poison: e2m1 has no NaN, the scale carries it
      continue;                     // codes stay 0
    }
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(blk[i]));
    if (amax == 0.0f) {
      p.plane[1].push_back(0x7F);  // 2^0: a zero block never gets a zero scale
      for (int i = 0; i < 32; ++i) put_nibble(p.plane[0], 32 * b + i, enc(kE2M1, blk[i]));
      continue;
    }
    int x = shared_exp2_exponent(amax, rule) - 2;  // e2m1 emax = 2
    x = x < -127 ? -127 : (x > 127 ? 127 : x);
    p.plane[1].push_back(static_cast<uint8_t>(x + 127));
    const float S = static_cast<float>(std::ldexp(1.0, x));
    for (int i = 0; i < 32; ++i) put_nibble(p.plane[0], 32 * b + i, enc(kE2M1, blk[i] / S));
  }
  *out = std::move(p);
  return Status::Ok();
}

Status encode_q4ks(const float* v, uint64_t n, EncodedPlanes* out) {
  Status st = need_multiple(n, 256, "Q4KS");
  if (!st.ok()) return st;
  EncodedPlanes p;
  p.plane[0].assign(n / 2, 0);
  for (uint64_t sb = 0; sb < n / 256; ++sb) {
    const float* blk = v + 256 * sb;
    if (!all_finite(blk, 256)) {
      put_u16(p.plane[2], 0x7E00);  // NaN d poisons the super-block
      put_u16(p.plane[2], 0x0000);
      p.plane[1].insert(p.plane[1].end(), 8, 0);
      p.plane[3].insert(p.plane[3].end(), 8, 0);
      continue;
    }
    float steps[8], offs[8];
    for (int s = 0; s < 8; ++s) {
      const float* sub = blk + 32 * s;
      // Python's min/max keep the first of equal values (-0.0 vs 0.0 matters).
      float mn = sub[0], mx = sub[0];
      for (int i = 1; i < 32; ++i) {
        if (sub[i] < mn) mn = sub[i];
        if (sub[i] > mx) mx = sub[i];
      }
      const float lo = mn < 0.0f ? mn : 0.0f;  // zero forced into the range
      const float hi = mx > 0.0f ? mx : 0.0f;
      steps[s] = (hi - lo) / 15.0f;
      offs[s] = -lo;
    }
    float smax = steps[0], omax = offs[0];
    for (int s = 1; s < 8; ++s) {
      if (steps[s] > smax) smax = steps[s];
      if (offs[s] > omax) omax = offs[s];
    }
    const uint16_t d_bits = f16_bits_of(smax / 63.0f);
    const uint16_t dmin_bits = f16_bits_of(omax / 63.0f);
    const float d = f16_value(d_bits);  // re-read after the binary16 round trip
    const float dmin = f16_value(dmin_bits);
    put_u16(p.plane[2], d_bits);
    put_u16(p.plane[2], dmin_bits);
    int sc[8], mm[8];
    for (int s = 0; s < 8; ++s) {
      sc[s] = 0;
      mm[s] = 0;
      if (d != 0.0f) {
        st = rne_clamp(steps[s] / d, 0, 63, &sc[s]);
        if (!st.ok()) return st;
      }
      if (dmin != 0.0f) {
        st = rne_clamp(offs[s] / dmin, 0, 63, &mm[s]);
        if (!st.ok()) return st;
      }
      p.plane[1].push_back(static_cast<uint8_t>(sc[s]));
      p.plane[3].push_back(static_cast<uint8_t>(mm[s]));
    }
    for (int s = 0; s < 8; ++s) {
      const float S = d * static_cast<float>(sc[s]);
      const float Z = dmin * static_cast<float>(mm[s]);
      for (int i = 0; i < 32; ++i) {
        int q = 0;
        if (S != 0.0f) {
          st = rne_clamp((blk[32 * s + i] + Z) / S, 0, 15, &q);
          if (!st.ok()) return st;
        }
        put_nibble(p.plane[0], 256 * sb + 32 * s + i, static_cast<uint32_t>(q));
      }
    }
  }
  *out = std::move(p);
  return Status::Ok();
}

Status encode_nvf4(const float* v, uint64_t n, Rounding er, EncodedPlanes* out) {
  Status st = need_multiple(n, 16, "NVF4");
  if (!st.ok()) return st;
  EncodedPlanes p;
  p.plane[0].assign((n + 1) / 2, 0);
  float amax = 0.0f;
  for (uint64_t i = 0; i < n; ++i)
    if (std::isfinite(v[i]) && std::fabs(v[i]) > amax) amax = std::fabs(v[i]);
  float sT;
  if (amax == 0.0f) {
    sT = 1.0f;
  } else {
    sT = (amax / kE2M1Max) / kE4M3Max;
    if (sT == 0.0f) sT = std::ldexp(1.0f, -149);  // smallest positive binary32
  }
  const uint32_t sT_bits = f32_bits(sT);
  sT = f32_from_bits(sT_bits);
  for (uint64_t b = 0; b < n / 16; ++b) {
    const float* blk = v + 16 * b;
    if (!all_finite(blk, 16)) {
      p.plane[1].push_back(0x7F);  // e4m3 NaN poisons the block
      continue;
    }
    float bamax = 0.0f;
    for (int i = 0; i < 16; ++i) bamax = std::fmax(bamax, std::fabs(blk[i]));
    const uint32_t bs = bamax == 0.0f ? enc(kE4M3, 1.0f) : enc(kE4M3, (bamax / kE2M1Max) / sT);
    p.plane[1].push_back(static_cast<uint8_t>(bs));
    const float S = sT * fmt_decode(kE4M3, bs);
    for (int i = 0; i < 16; ++i) {
      // S == 0 is NVFP4's honest range limit: the block decodes to +-0.
      const float x = S == 0.0f ? std::copysign(0.0f, blk[i]) : blk[i] / S;
      put_nibble(p.plane[0], 16 * b + i, enc(kE2M1, x, er));
    }
  }
  for (int k = 0; k < 4; ++k) p.plane[2].push_back(static_cast<uint8_t>(sT_bits >> (8 * k)));
  *out = std::move(p);
  return Status::Ok();
}

Status encode_i8s24(const float* v, uint64_t n, EncodedPlanes* out) {
  Status st = need_multiple(n, 32, "I8S24");
  if (!st.ok()) return st;
  EncodedPlanes p;
  p.plane[3].assign((n / 4 * 2 * 2 + 7) / 8, 0);
  std::vector<uint8_t> kept(n, 0);
  for (uint64_t q = 0; q < n / 4; ++q) {
    // Rank by magnitude, NaN largest, ties to the lower index; keep two.
    double key[4];
    for (int j = 0; j < 4; ++j) {
      const float x = v[4 * q + j];
      key[j] = std::isnan(x) ? INFINITY : std::fabs(static_cast<double>(x));
    }
    int a = 0;
    for (int j = 1; j < 4; ++j)
      if (key[j] > key[a]) a = j;
    int b = -1;
    for (int j = 0; j < 4; ++j)
      if (j != a && (b < 0 || key[j] > key[b])) b = j;
    const int lo = a < b ? a : b, hi = a < b ? b : a;
    kept[4 * q + lo] = kept[4 * q + hi] = 1;
    write_bits_lsb(p.plane[3].data(), (q * 2 + 0) * 2, 2, static_cast<uint32_t>(lo));
    write_bits_lsb(p.plane[3].data(), (q * 2 + 1) * 2, 2, static_cast<uint32_t>(hi));
  }
  for (uint64_t g = 0; g < n / 32; ++g) {
    bool finite = true;
    float amax = 0.0f;
    for (uint64_t i = 32 * g; i < 32 * g + 32; ++i) {
      if (!kept[i]) continue;
      if (!std::isfinite(v[i])) finite = false;
      else if (std::fabs(v[i]) > amax) amax = std::fabs(v[i]);
    }
    if (!finite) {
      put_u16(p.plane[1], 0x7E00);
      for (uint64_t i = 32 * g; i < 32 * g + 32; ++i)
        if (kept[i]) p.plane[0].push_back(0);
      continue;
    }
    uint16_t sb = amax == 0.0f ? f16_bits_of(1.0f) : f16_bits_of(amax / kS8Max);
    if (f16_value(sb) == 0.0f) sb = 0x0001;  // a zero scale is never emitted
    put_u16(p.plane[1], sb);
    const float S = f16_value(sb);
    for (uint64_t i = 32 * g; i < 32 * g + 32; ++i)
      if (kept[i]) p.plane[0].push_back(static_cast<uint8_t>(enc(kS8, v[i] / S)));
  }
  *out = std::move(p);
  return Status::Ok();
}

// Dense s8 with one binary16 scale per k0 values (ggml's Q8_0 grade at
// k0 = 32): ratiomaxabs as I8S24 applies it, over every value of the group.
Status encode_s8_dense(const float* v, uint64_t n, uint64_t k0, EncodedPlanes* out) {
  Status st = need_multiple(n, k0, "s8 with binary16 scales");
  if (!st.ok()) return st;
  EncodedPlanes p;
  p.plane[0].reserve(n);
  for (uint64_t g = 0; g < n / k0; ++g) {
    const float* blk = v + k0 * g;
    if (!all_finite(blk, k0)) {
      put_u16(p.plane[1], 0x7E00);  // a NaN scale poisons the group
      for (uint64_t i = 0; i < k0; ++i) p.plane[0].push_back(0);
      continue;
    }
    float amax = 0.0f;
    for (uint64_t i = 0; i < k0; ++i) amax = std::fmax(amax, std::fabs(blk[i]));
    uint16_t sb = amax == 0.0f ? f16_bits_of(1.0f) : f16_bits_of(amax / kS8Max);
    if (f16_value(sb) == 0.0f) sb = 0x0001;  // a zero scale is never emitted
    put_u16(p.plane[1], sb);
    const float S = f16_value(sb);
    for (uint64_t i = 0; i < k0; ++i) p.plane[0].push_back(static_cast<uint8_t>(enc(kS8, blk[i] / S)));
  }
  *out = std::move(p);
  return Status::Ok();
}

Status choose_encoder(const Grade& g, EncoderChoice* out) {
  auto same_decode = [&](const char* ref) {
    const ReferenceGrade* r = reference_grade(ref);
    return r && decode_projection(*r->grade) == decode_projection(g);
  };
  auto pick = [&](EncoderFamily f, ScaleRule rule, Rounding er) {
    out->family = f;
    out->rule = rule;
    out->elem_rounding = er;
    return Status::Ok();
  };
  // Every encoder saturates to the largest finite value and keeps subnormals.
  if (g.field[kKeyEs] != "satfinite")
    return Status::Fail(Error::kInexpressible, "es=" + g.field[kKeyEs] +
                                                   ": the encoders saturate to the largest finite value (es=satfinite)");
  if (g.field[kKeyEsn] == "ftz")
    return Status::Fail(Error::kInexpressible, "esn=ftz: the encoders keep subnormal results (esn=preserve or any)");
  const std::string& esr = g.esr();
  // er is part of the contract: the MXFP4, Q4KS and I8S24 encoders round
  // their elements to nearest even, so any other er is refused below.
  const bool er_rne = g.er() == "rne";
  constexpr Rounding rne = Rounding::kRne;
  if (same_decode("MXFP4") && er_rne) {
    if (esr == "exp2floormaxabs") return pick(EncoderFamily::kMxfp4, ScaleRule::kExp2Floor, rne);
    if (esr == "exp2ceilmaxabs") return pick(EncoderFamily::kMxfp4, ScaleRule::kExp2Ceil, rne);
    if (esr == "exp2rnemaxabs") return pick(EncoderFamily::kMxfp4, ScaleRule::kExp2Rne, rne);
  }
  if (same_decode("Q4KS") && esr == "affineminmax" && er_rne)
    return pick(EncoderFamily::kQ4ks, ScaleRule::kExp2Floor, rne);
  if (same_decode("NVF4") && esr == "ratiomaxabs") {
    if (g.er() == "rne") return pick(EncoderFamily::kNvf4, ScaleRule::kExp2Floor, rne);
    if (g.er() == "rtz") return pick(EncoderFamily::kNvf4, ScaleRule::kExp2Floor, Rounding::kRtz);
  }
  if (same_decode("I8S24") && esr == "ratiomaxabs" && er_rne)
    return pick(EncoderFamily::kI8s24, ScaleRule::kExp2Floor, rne);
  if (esr == "ratiomaxabs" && er_rne) {
    // Dense s8, one binary16 scale per 32 values: ggml's Q8_0 grade.
    Grade dense;
    if (grade_parse("grit1(e=s8,k0=32,s0=binary16,esr=ratiomaxabs)", &dense).ok() &&
        decode_projection(dense) == decode_projection(g))
      return pick(EncoderFamily::kS8Dense, ScaleRule::kExp2Floor, rne);
  }
  const Status general = general_encoder_fits(g);
  if (!general.ok()) return general;
  return pick(EncoderFamily::kGeneral, ScaleRule::kExp2Floor, rne);
}

Status encode(const Grade& g, const float* v, uint64_t n, EncodedPlanes* out) {
  EncoderChoice c;
  const Status st = choose_encoder(g, &c);
  if (!st.ok()) return st;
  switch (c.family) {
    case EncoderFamily::kMxfp4: return encode_mxfp4(v, n, c.rule, out);
    case EncoderFamily::kQ4ks: return encode_q4ks(v, n, out);
    case EncoderFamily::kNvf4: return encode_nvf4(v, n, c.elem_rounding, out);
    case EncoderFamily::kI8s24: return encode_i8s24(v, n, out);
    case EncoderFamily::kS8Dense: return encode_s8_dense(v, n, g.k0, out);
    case EncoderFamily::kGeneral: return encode_general(g, v, n, out);
  }
  return Status::Fail(Error::kInexpressible, "unknown encoder family");
}

}  // namespace grit
