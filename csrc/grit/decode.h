// The reference decode (GRIT SPEC 8): what the bytes mean. Scalar, in the
// contract's fixed order, one binary32 rounding per named step, no FMA.
// Kernels elsewhere are fast copies of this and are tested against it.
//
// Element i of the stream (row-major order with the group axis innermost):
//   sparse:   quad q=i/M; a position not named by the quad's metadata is +0.0
//             (this wins over everything below); survivors take the next
//             stored code in ascending position order.
//   scale:    g0 = i/k0; S = scale0[g0]; with two levels, g1 = k1 ? g0/k1 : 0
//             and S = f32(scale1[per*g1] * S), outermost first.
//   poison:   S is NaN -> NaN.
//   zp=none:  x = f32(S * e)
//   zps=shared: x = f32(S * f32(e - z))        (one rounding, not S*e - S*z)
//   zps=l1:   Z = f32(scale1[per*g1+1] * z); Z NaN -> NaN; x = f32(f32(S*e) - Z)
//   with z = zp[g0] (+1 under zpc=minus1, the stored-minus-one convention).
// Every NaN produced is the canonical 0x7FC00000.
//
// Bit packing: sub-byte element codes fill each byte low bits first (po=lsb)
// or high bits first (po=msb); byte-multiple widths are little-endian.
// Scale and zero-point planes are always padded to 8 bits per value when
// narrower (ct is for elements only); level-1 scales pack densely.
#pragma once

#include <cstdint>

#include "descriptor.h"
#include "grade.h"
#include "status.h"

namespace grit {

// The plane lengths the grade requires for `numel` stream elements; fails
// when numel is not a multiple of k0 (or of M, or the group count of k1).
Status grade_plane_bytes(const Grade& g, uint64_t numel, uint64_t bytes[4]);

// Decode `numel` elements into out[0..numel). Checks every plane length
// first (kBadLength naming the plane), so it never reads out of bounds.
Status decode(const Grade& g, const Plane planes[4], uint64_t numel, float* out);

// Decode stream elements [begin, end) into out[0..end-begin), for kernels
// that work tile by tile. For sparse grades `begin` must be a multiple of M
// and `*stored` is the data-plane cursor at `begin` (0 at the start); it is
// advanced to the cursor at `end`. Same checks and values as decode().
Status decode_range(const Grade& g, const Plane planes[4], uint64_t numel, uint64_t begin,
                    uint64_t end, uint64_t* stored, float* out);

// The representable range of every element under its stored scales and
// zero points: lo[i]/hi[i] decode element i with the format's most negative
// and most positive finite code (encode's saturation points). A value that
// lies outside [lo, hi] was clamped by the encoder. Masked (sparse)
// positions give [0, 0]; a NaN scale gives NaN.
Status decode_bounds(const Grade& g, const Plane planes[4], uint64_t numel, float* lo, float* hi);

// The same elements as the packed_linear law takes them (linear_law.h),
// per k0-group: factored (e = the element's value, S = the group's scale,
// S*e exact and equal to the decode) where the grade and the group allow
// it, else e = the decoded weight and S = 1. Either way f32(S*e) is the
// decode's value, bit for bit (a pruned sparse position is e = +0.0).
// [begin, end) must be whole groups (and whole quads); e gets end - begin
// values, S one per group. Same checks and cursor as decode_range().
Status decode_factors_range(const Grade& g, const Plane planes[4], uint64_t numel, uint64_t begin,
                            uint64_t end, uint64_t* stored, float* e, float* S);

// The elements as the s8 activation law takes them (s8_linear.h), per
// k0-group: e = the element's value (a pruned sparse position +0.0), S = the
// group's scale as the decode computes it, z = its zero point under
// zps=shared (0 otherwise) and Z = its level-1 offset under zps=l1 (0
// otherwise), so the decode is f32(S*e), f32(S*f32(e - z)) or
// f32(f32(S*e) - Z). [begin, end) must be whole groups (and whole quads).
// Same checks and cursor as decode_range().
Status decode_terms_range(const Grade& g, const Plane planes[4], uint64_t numel, uint64_t begin,
                          uint64_t end, uint64_t* stored, float* e, float* S, float* z, float* Z);

// The data-plane cursor of a sparse grade at a quad-aligned stream index.
uint64_t sparse_cursor(const Grade& g, const Plane planes[4], uint64_t index);

}  // namespace grit
