// Arguments of the grit:: ops for seed 001's int4 row groups ("INT4G<g>",
// csrc/grit/int4_groups.h). Such a grade is not a GRIT grade, so the ops
// route it before grade_arg: planes are [data, scale0, scale1, aux] with
// data the packed code bytes (ceil(R*C/2), row-major, low nibble first),
// scale0 the R*ceil(C/g) binary64 scales as raw bytes (8 each, host order:
// little-endian on every platform torch_grit builds for), scale1 and aux
// empty; the shape is the 2-D [rows, cols] of the matrix.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/string_view.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/packed_linear_int4g.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "INT4G scale planes hold little-endian binary64; this platform is big-endian"
#endif

namespace grit_ops {

// The group size when `grade` names INT4G ("INT4G32", any case), else 0.
// Raises for an INT4G name whose group size is out of range.
uint64_t int4g_group_arg(const char* op, c10::string_view grade);

// Raises (naming the op and what runs INT4G) if `grade` names INT4G: for
// the ops and backends that have no INT4G kernel.
void refuse_int4g(const char* op, c10::string_view grade);

// "INT4G32"
std::string int4g_name(uint64_t group);

// Plane bytes for an R x C matrix: code bytes ceil(R*C/2), scale bytes 8*R*ceil(C/g).
void int4g_plane_bytes(int64_t rows, int64_t cols, uint64_t group, int64_t* code_bytes,
                       int64_t* scale_bytes);

// A 2-D [rows, cols] shape with rows, cols >= 1.
void check_int4g_shape(const char* op, uint64_t group, c10::IntArrayRef shape);

// grit::quantize's weight for INT4G: float32, bfloat16, float16 or float64,
// 2-D, a valid shape; the planes' byte counts.
struct Int4gQuantizeArgs {
  int64_t rows, cols, code_bytes, scale_bytes;
};
Int4gQuantizeArgs int4g_quantize_args(const char* op, const at::Tensor& w, uint64_t group);

// How much of the core reader int4g_weight runs: all of it; the checks that
// read no code or scale but the padding byte (for a CPU kernel that checks
// them as it reads, KernelTable::int4g_tiles); or those that read no byte
// (for device planes, whose kernels also check the padding). The caller of
// the last two owes int4g_require_valid when its kernel asks. kLengths
// planes must have an 8-byte aligned scale plane (it is not read here).
enum class Int4gCheck { kWhole, kLayout, kLengths };

// The planes of an INT4G matrix, checked: uint8, 1-D, contiguous, on
// `device`, scale1 and aux empty, scale0 a whole number of binary64
// values; then the core reader (every refusal names its plane). The scales
// are read in place, or copied to `scales` where scale0's bytes are not
// 8-byte aligned.
grit::cpu::Int4gWeight int4g_weight(const char* op, const at::Tensor& data,
                                    const at::Tensor& scale0, const at::Tensor& scale1,
                                    const at::Tensor& aux, uint64_t group, c10::IntArrayRef shape,
                                    c10::Device device, std::vector<double>* scales,
                                    Int4gCheck check = Int4gCheck::kWhole);

// The core reader's whole validation; raises as int4g_weight does.
void int4g_require_valid(const char* op, const grit::cpu::Int4gWeight& w);

}  // namespace grit_ops
