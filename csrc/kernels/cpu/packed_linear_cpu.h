// Fast CPU kernels of packed_linear: one variant per instruction set, chosen
// once (a dispatch table), every variant bit-identical to the scalar
// reference kernel (packed_linear_ref.h). Torch-free: raw pointers, sizes.
//
// Numerics: the law of grit/linear_law.h (the decoded weights' exact values,
// one FMA chain per k0-group in ascending columns, a factored group's scale
// applied once, bias last). The SIMD variants keep its order by vectorising across 16 output
// rows (one lane per row of W), never across k, so an output element's
// value does not depend on the instruction set, the batch size, the thread
// count or how the rows are split between threads.
//
// Layout of the work: W is cut into tiles of 16 rows (kLinearTileRows). A
// variant decodes a tile 32 columns at a time from the packed planes into
// registers ([k][16]: one vector holds column k of the tile's 16 rows) and
// either feeds the law's chains directly (batch 1: GEMV) or stores a chunk
// of columns and their group scales in L1 buffers that a register-blocked
// micro-kernel reuses for every batch row (larger batches: GEMM). W is
// never decoded as a whole.
//
// The header has no SIMD types: variants live in packed_linear_<isa>.cpp,
// each compiled for its own target, and are reached through KernelTable.
#pragma once

#include <cstdint>

#include "grit/linear_law.h"
#include "kernels/cpu/packed_linear_int4g.h"
#include "kernels/cpu/packed_linear_ref.h"

namespace grit {
namespace cpu {

// kAvx512Bf16 is the AVX-512 variant plus AVX512_BF16's vdpbf16ps for
// batch-1 MXFP4-style layers with bfloat16-exact activations: two of the
// law's FMAs (one chain, ascending columns) in one instruction. Its DAZ/FTZ
// never changes a bit there (see packed_linear_simd.inc, "Pairs").
enum class Isa : int { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kAvx512Bf16 = 3 };
constexpr Isa kAllIsas[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16};

const char* isa_name(Isa isa);
// "scalar", "avx2", "avx512" or "avx512_bf16" (case-sensitive); false for
// anything else.
bool isa_parse(const char* text, Isa* out);
// Whether this CPU (and OS) can run a variant.
bool isa_supported(Isa isa);

// The packed layouts with a fast decoder. Anything else runs the reference
// kernel on every instruction set.
enum class FastKind : int {
  kNone = 0,
  // Dense 4-bit element codes packed low nibble first, 16-entry finite
  // value table; 8-bit scale0 codes every k0 = 16 or 32 columns; optional
  // per-tensor level-1 scale (k1 = 0). MXFP4, NVF4 and their siblings.
  kNibble,
  // Dense 4-bit codes, k0 = 32, 8-bit scale0 and zero-point codes, level-1
  // binary16 pairs (scale, zero-point scale) every k1 groups, zps=l1. Q4KS.
  kNibbleAffine,
  // int8 codes, 2:4 sparsity with 2-bit indices, binary16 scale per k0 = 32
  // logical columns. I8S24. Needs every quad to name two distinct
  // positions (what the encoder writes); otherwise the call falls back.
  kInt8Sparse24,
  // Dense int8 codes, binary16 or binary32 scale per k0 = 32, 64 or 128
  // columns or per row (k0 = k, a multiple of 32: the per-channel grades), no level 1, no zero point: ggml Q8_0's grade
  // grit1(e=s8,k0=32,s0=binary16,...), S8_G64 / S8_G128, compressed-tensors'
  // int8 groups. Rows must hold whole groups (else the reference).
  kInt8Dense,
  // Dense 4-bit codes, binary16 scale0 and an 8-bit zero-point code per
  // k0 = 32, 64 or 128 columns, zps=shared (S * (e - z)), no level 1: the
  // GPTQ / AWQ grades. Rows must hold whole groups (else the reference).
  kNibbleZp,
  // Dense 4-bit codes (finite values), binary16 or binary32 scale0 per
  // k0 = 32, 64 or 128 columns or per row (k0 = k, a multiple of 32), no zero point, no level 1: compressed-tensors'
  // int4 group grade grit1(e=s4,k0=<k>,s0=binary16|binary32,...) (S4_G<k>).
  // Factored where the law factors the grade. Rows must hold whole groups.
  kNibbleFs,
};
const char* fast_kind_name(FastKind kind);

// How an 8-bit scale (or zero-point) code becomes a float: a 256-entry
// table always exists; a variant may use an equivalent shortcut, chosen
// only where it matches the table on all 256 codes.
enum class CodeMap : int { kTable = 0, kE8M0 = 1, kIntMask = 2 };

// A packed weight with what the fast kernels need, built per call.
struct LinearPlan {
  PackedWeight w;
  FastKind kind = FastKind::kNone;
  int k0 = 0;
  uint32_t k1 = 0;           // kNibbleAffine: groups per level-1 pair (0: one pair)
  CodeMap s0_map = CodeMap::kTable, zp_map = CodeMap::kTable;
  int s0_width = 0;          // kInt8Dense, kNibbleFs: 16 (binary16) or 32 (binary32) scales
  uint32_t s0_mask = 0, zp_mask = 0;   // CodeMap::kIntMask: value = float(code & mask)
  // The law's form (grit/linear_law.h): whether the grade's groups may be
  // factored (then group by group, where S * elem_maxabs is finite).
  bool factor = false;
  float elem_maxabs = 0.0f;
  uint32_t s0_factor_from = 256;  // the smallest scale0 code whose group does not factor
  float elem[16] = {};       // kNibble*: the value of each element code
  float s0[256] = {};        // scale0 code -> S (make_plan: times the per-tensor level-1 scale)
  // kNibble, unfactored: s0[c] == s0_e4m3_mul * e4m3(c), finite, for every
  // normal E4M3 code c (magnitude bits 8..126; checked on each against s0
  // itself), so the SIMD decoders may form those scales arithmetically; a
  // super-block holding any other code (zero, subnormal, NaN) takes s0.
  bool s0_e4m3 = false;
  float s0_e4m3_mul = 1.0f;
  // kNibbleAffine: every product S * e is exact in binary32 (S = d * s0
  // with d binary16 and s0 an integer code of at most 24 - 11 - (bits of
  // the largest |e|) bits, e integers), so w = S*e - Z is one FMA.
  bool affine_fma = false;
  float zp[256] = {};        // kNibbleAffine: zero-point code -> z (+1 under zpc=minus1)
  // Continue the law's chains (linear_law.h, law_dot_from; a tensor-parallel
  // row-wise shard): y holds each output's running acc on entry, and the
  // kernel leaves the acc continued over this weight's groups in y, with no
  // bias and no NaN canonicalisation (bias must be null). Set by the caller
  // after make_plan. A plan a variant cannot continue (a group wider than
  // its GEMM chunk) sets *fallback before writing anything; a fallback from
  // the decoder (an irregular sparse quad) may come after some tiles were
  // continued, so the caller keeps the acc it started from.
  bool continued = false;
  // kNibble only: w.planes[0] and [1] hold the CPU tile layout
  // (nibble_tiles.h) instead of row-major planes; only a KernelTable with
  // reads_tiles may be handed such a plan.
  bool tiled = false;
};

// The fast decoder a grade gets (kNone: the reference kernel).
FastKind fast_kind_of(const Grade& g);

// The tables a grade alone defines (kind, k0, k1, elem, s0 = scale0's own
// decode, zp, maps); reads no plane, so device planes may be planned too.
void make_grade_tables(const Grade& g, LinearPlan* plan);

// Classify w's grade and fill the tables (s0 times the per-tensor level-1
// scale read from the planes, if the grade has one). Never fails: a grade without a
// fast decoder gets kind kNone. The planes must already have passed the
// level-1 length check.
void make_plan(const PackedWeight& w, LinearPlan* plan);

// One instruction-set variant. Both functions work on 16-row tiles
// [tile_begin, tile_end) and may run concurrently on disjoint tiles.
struct KernelTable {
  Isa isa;
  // y[i, rows of the tiles] for batch rows i < m; x is [m, k], y is [m, n],
  // float32 row-major, bias may be null. Sets *fallback (and leaves those
  // tiles unfinished) when the planes need the reference kernel (an
  // irregular sparse quad); the caller then recomputes with it. A continued
  // plan (LinearPlan::continued) takes y as the running acc and leaves the
  // continued acc there.
  Status (*linear_tiles)(const LinearPlan& p, const float* x, int64_t m, const float* bias,
                         int64_t tile_begin, int64_t tile_end, float* y, bool* fallback);
  // The tiles' rows of W, row-major into out (rows tile_begin*16 onwards):
  // the variant's own decoder, for the tests that prove it bit-exact.
  Status (*decode_tiles)(const LinearPlan& p, int64_t tile_begin, int64_t tile_end, float* out,
                         bool* fallback);
  // INT4G (packed_linear_int4g.h): y for the tiles' rows, the bits of
  // int4g_linear_tiles. The planes need only have passed int4g_check_layout:
  // a variant checks codes and scales as it reads them and sets *suspect
  // when a tile meets a reserved code or a scale s without 0 < s and finite
  // 7*s (the scalar variant checks nothing and always sets it). The caller
  // must then run int4g_check: on a refusal y is garbage; on a pass it is
  // right (a huge scale whose codes stay finite is valid).
  Status (*int4g_tiles)(const Int4gWeight& w, const float* x, int64_t m, const float* bias,
                        int64_t tile_begin, int64_t tile_end, float* y, bool* suspect);
  // Whether linear_tiles reads a kNibble plan whose `tiled` is set (data
  // and scale0 in the CPU tile layout, nibble_tiles.h) in place. False for
  // the scalar reference, which reads row-major planes only.
  bool reads_tiles = false;
  // grad_x[i, c] = fma(grad_y[i, j], W[j, c], grad_x[i, c]) for j in [row_begin,
  // row_end) ascending, batch rows i < m, columns [col_begin, col_end):
  // grad_input_accumulate's bits (packed_linear_ref.h), whatever the
  // blocking. grad_y is [m, n], grad_x [m, k]; w_rows holds rows
  // [row_begin, row_end) of W, row-major. May run concurrently on disjoint
  // column ranges.
  void (*grad_input_rows)(const float* grad_y, int64_t n, const float* w_rows, int64_t row_begin,
                          int64_t row_end, int64_t m, int64_t k, int64_t col_begin, int64_t col_end,
                          float* grad_x) = nullptr;
  // The same, two rows of W per instruction (AVX512_BF16's vdpbf16ps; null
  // elsewhere), for calls where every value of grad_y and of the decoded W
  // is bfloat16-exact, and every product is exact in binary32 and every
  // sum zero or normal: pairs_allowed() below says when. The same bits.
  void (*grad_input_pairs)(const float* grad_y, int64_t n, const float* w_rows, int64_t row_begin,
                           int64_t row_end, int64_t m, int64_t k, int64_t col_begin, int64_t col_end,
                           float* grad_x) = nullptr;
  // The tiles' rows of W in strips of `width` columns (a multiple of 16):
  // column c of row r (rows counted from tile_begin*16) at
  // out[(c / width) * stride + r * width + c % width], the reference
  // decode's bits; nothing else of out is written. Sets *fallback (out
  // then partly written) where decode_tiles would fall back and for a plan
  // without a fast decoder: the caller takes the reference's rows instead.
  // Null in the scalar variant.
  Status (*decode_strips)(const LinearPlan& p, int64_t tile_begin, int64_t tile_end, float* out, int64_t width,
                          int64_t stride, bool* fallback) = nullptr;
  // grad_input_rows' bits over W's rows [row_begin, row_end) laid out by
  // decode_strips with width grad_strip: strip s (columns s*grad_strip
  // onwards) at w_strips + s * stride, 64-byte aligned, each row's unused
  // tail of a last partial strip initialised (its values are never used).
  // col_begin must be a multiple of grad_strip. Null where grad_strip is 0.
  void (*grad_input_strips)(const float* grad_y, int64_t n, const float* w_strips, int64_t stride,
                            int64_t row_begin, int64_t row_end, int64_t m, int64_t k, int64_t col_begin,
                            int64_t col_end, float* grad_x) = nullptr;
  int64_t grad_strip = 0;
  // The tiles' rows of W column by column, as the decoder makes them: tile
  // t's column c (16 rows, rows past n repeating the last) at
  // out[(t - tile_begin) * 16 * k + c * 16], the reference decode's bits.
  // Sets *fallback where decode_tiles would fall back and for a plan without
  // a fast decoder (out then partly written). Null in the scalar variant.
  Status (*decode_columns)(const LinearPlan& p, int64_t tile_begin, int64_t tile_end, float* out,
                           bool* fallback) = nullptr;
  // grad_input_rows' bits for W's whole 16-row tiles (rows [0, n/16*16)),
  // columns [col_begin, col_end) (col_begin a multiple of
  // kGradFusedColumns), decoded straight from the planes a chunk at a time
  // and added while in L1: no decoded block of W in memory. grad_x holds
  // the running sums (zeros to start). The partial last tile, if any, is
  // left to the caller (grad_input_rows continues from these sums). Sets
  // *fallback where decode_tiles would fall back and for a plan without a
  // fast decoder (grad_x then partly updated). May run concurrently on
  // disjoint column ranges. Null in the scalar variant.
  Status (*grad_input_fused)(const LinearPlan& p, const float* grad_y, int64_t m, int64_t col_begin,
                             int64_t col_end, float* grad_x, bool* fallback) = nullptr;
  // One tile's 16 rows of W as half of a column pair of the bf16 activation
  // law's weight layout (bf16_amx.h, B: `out` is the pair's B plus h * 512
  // words for half h), every chunk of the row: the decoder's columns through
  // from_float, written from registers (the bits of decode_columns followed
  // by bf16_pack_weight_columns). Lanes past n hold what the decoder repeats
  // there; positions past k are zero. Sets *fallback where decode_tiles
  // would fall back and for a plan without a fast decoder. Only where the
  // CPU converts to bfloat16 (the avx512_bf16 variant); null elsewhere.
  Status (*bf16_pack_tile)(const LinearPlan& p, int64_t tile, uint16_t* out, bool* fallback) = nullptr;
  // The same tile as grad_input's weight operand of that law (bf16_amx.h,
  // bf16_pack_weight_cols: its rows are positions first .. first + 15 of a
  // block of block_chunks chunks, first a multiple of 16; every column pair
  // gets its part): the bits of decode_columns followed by
  // bf16_pack_weight_cols_from_columns, positions past n zero. Sets
  // *fallback as bf16_pack_tile does. avx512_bf16 only; null elsewhere.
  Status (*bf16_pack_cols_tile)(const LinearPlan& p, int64_t tile, int64_t first, int64_t block_chunks, uint16_t* B,
                                bool* fallback) = nullptr;
  // INT4G's grad_x (packed_linear_int4g.h): int4g_grad_input_accumulate's
  // bits for every batch row i < m over the binary64 rows [row_begin,
  // row_end) of W in w_rows (k each), columns [col_begin, col_end). May run
  // concurrently on disjoint column ranges. Null in the scalar variant.
  void (*int4g_grad_input)(const float* grad_y, int64_t n, const double* w_rows, int64_t row_begin,
                           int64_t row_end, int64_t m, int64_t k, int64_t col_begin, int64_t col_end,
                           float* grad_x) = nullptr;
  // INT4G's rows [row_begin, row_end) decoded, row-major from row_begin:
  // into out64 the core's binary64 values (int4g_decode_rows), or, where
  // out64 is null, into out32 those values rounded to binary32. Only for an
  // even row length (every row starts on a byte) and planes that passed
  // int4g_check. Null in the scalar variant.
  void (*int4g_decode_rows)(const Int4gWeight& w, int64_t row_begin, int64_t row_end, double* out64,
                            float* out32) = nullptr;
};

// The column granule of KernelTable::grad_input_fused (the decoders' chunk).
constexpr int64_t kGradFusedColumns = 256;

// p rounded up to a multiple of 64 bytes (a cache line): the strip buffers
// of grad_input allocate 64 bytes more than they use and start here.
template <class T>
inline T* align64(T* p) {
  return reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t{63});
}

// Whether a grad_input call may take KernelTable::grad_input_pairs: plan is
// a factored E8M0 grade of 4-bit elements (MXFP4 and its siblings) whose
// every scale0 code (codes[n_codes], GRIT's scale0 plane) gives weights of
// magnitude in [2^-56, 2^63) with a quantum of at least 2^-56 (codes
// 72..187, or 255: NaN), and every value of grad_y ([count]) is zero,
// non-finite, or bfloat16-exact of magnitude in [2^-56, 2^62). Then every
// product is exact, below 2^125, and a multiple of 2^-119, so every partial
// sum is zero or normal.
bool pairs_allowed(const LinearPlan& plan, const uint8_t* codes, uint64_t n_codes, const float* grad_y,
                   int64_t count);

const KernelTable& kernels_for(Isa isa);  // isa must be supported

// The variant packed_linear uses: chosen once, at the first call, from
// GRIT_CPU_ISA (scalar|avx2|avx512|avx512_bf16) if set, else the best this CPU has.
// Fails when GRIT_CPU_ISA names no variant or one this CPU cannot run.
Status active_isa(Isa* out);
// Tests: run another supported variant from now on (returns the previous).
Status set_active_isa(Isa isa, Isa* previous);

// Whether packed_linear takes the pair path for batches of more than one
// row (batch 1 always may): the two routes give the same bits, and which is
// faster depends on the core. Measured (docs/performance.md, 2026-12-05/06):
// the pair GEMM ran 1.7x faster than the FMA route on an AMD EPYC (Zen)
// and 1.3x slower on an Intel Xeon with AMX, whose vdpbf16ps issues at half
// its FMA rate. Chosen once, from the CPU's vendor: AMD yes, others no.
bool pair_gemm_enabled();
// Tests: 1 forces the pair GEMM on, 0 off, -1 back to the vendor's choice;
// returns the previous setting (-1 when it was the vendor's).
int set_pair_gemm(int mode);

// How many times (per thread and call) the pair path of avx512_bf16 ran:
// for the tests that must show it ran, not just that the bits match.
uint64_t pair_path_calls();
void count_pair_path_call();

// Variant entry points (each defined in its own file).
const KernelTable& scalar_kernels();
const KernelTable& avx2_kernels();
const KernelTable& avx512_kernels();
const KernelTable& avx512_bf16_kernels();

// Lanes (of `lanes` random ones) where vdpbf16ps differs from two float32
// FMAs, high words first: the pair path's premise. Only on a CPU with
// AVX512_BF16; isa_supported(kAvx512Bf16) runs it once (4096 lanes) and
// refuses the variant on any mismatch.
uint64_t avx512_bf16_pair_mismatches(uint64_t lanes, uint64_t seed);

}  // namespace cpu
}  // namespace grit
