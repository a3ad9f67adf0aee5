// Reference encoders (GRIT SPEC 9, 10): binary32 values -> planes, for the
// reference grades and their esr/er siblings. Deterministic, scalar, the
// truth the fast quantize kernels are tested against.
#pragma once

#include <cstdint>
#include <vector>

#include "format.h"
#include "grade.h"
#include "status.h"

namespace grit {

struct EncodedPlanes {
  std::vector<uint8_t> plane[4];  // data, scale0, scale1, aux
};

enum class ScaleRule { kExp2Floor, kExp2Ceil, kExp2Rne };

// Rounded log2(amax) for a finite amax > 0, exactly (SPEC 9.1/9.2):
// floor = e_floor; ceil = e_floor + (f > 1); rne = e_floor + (f*f > 2),
// with f = amax / 2^e_floor in [1, 2), f*f exact in binary64.
int shared_exp2_exponent(float amax, ScaleRule rule);

// MXFP4 family: e2m1 elements, blocks of 32, e8m0 shared scale.
Status encode_mxfp4(const float* v, uint64_t n, ScaleRule rule, EncodedPlanes* out);
// Q4_K-style: u4 elements, u6 sub-block scale and min over 8 sub-blocks of
// 32, binary16 super-block d and dmin (esr=affineminmax).
Status encode_q4ks(const float* v, uint64_t n, EncodedPlanes* out);
// NVFP4: e2m1 elements, blocks of 16, e4m3 block scale, binary32 tensor
// scale (esr=ratiomaxabs). `elem_rounding` is the grade's er (rne or rtz).
Status encode_nvf4(const float* v, uint64_t n, Rounding elem_rounding, EncodedPlanes* out);
// int8 2:4: keep the two largest magnitudes per quad (NaN counts as the
// largest, ties to the lower index), binary16 scale per 32 logical values.
Status encode_i8s24(const float* v, uint64_t n, EncodedPlanes* out);
// Dense s8, one binary16 scale per k0 values, esr=ratiomaxabs: S = binary16(amax / 127)
// (1.0 for an all-zero group, never 0), codes s8(x / S) rne satfinite; a group holding
// NaN or Inf gets the NaN scale 0x7E00 and zero codes.
Status encode_s8_dense(const float* v, uint64_t n, uint64_t k0, EncodedPlanes* out);

// Every other dense one-level grade: exp2*maxabs and ratiomaxabs without a
// zero point, affineminmax with an integer one (zps=shared), integer or
// minifloat elements of at most 8 bits, any er, es=satfinite. The reading of
// the esr rules for general formats is torch_grit's (docs/numerics.md,
// "Encoders for any grade"); on the reference grades' formats it gives the
// family encoders' bytes. general_encoder_fits says why a grade is refused.
Status general_encoder_fits(const Grade& g);
Status encode_general(const Grade& g, const float* v, uint64_t n, EncodedPlanes* out);

// Which encoder above a grade takes: any grade whose decode projection and
// esr/er match one of them. Others are refused with the reason.
enum class EncoderFamily { kMxfp4, kQ4ks, kNvf4, kI8s24, kS8Dense, kGeneral };
struct EncoderChoice {
  EncoderFamily family = EncoderFamily::kMxfp4;
  ScaleRule rule = ScaleRule::kExp2Floor;  // kMxfp4
  Rounding elem_rounding = Rounding::kRne;  // kNvf4 (rne or rtz); the others round rne
};
Status choose_encoder(const Grade& g, EncoderChoice* out);

// The encoder choose_encoder names, on n values.
Status encode(const Grade& g, const float* v, uint64_t n, EncodedPlanes* out);

}  // namespace grit
