// The s8 activation law (grit/s8_linear.h) for 16 weight rows at once, on
// AVX-512 with VNNI: the same bits as grit::s8::dot for every output. The
// tile holds the rows' integer codes as int16 pairs with lane = row (the
// exact mode's layout, exact_tile.h: one vpdpwssd adds two columns of all
// 16 rows), and the group terms S, O, zi the same way (group g of row r at
// g * 16 + r). Per block: D_b in int32 lanes, the zero point's zi * A_b
// subtracted, one multiply and one FMA per row as the law orders them.
// Torch-free; tests/python/test_s8_linear.py holds it equal to the core.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "grit/decode.h"
#include "grit/s8_linear.h"

namespace grit {
namespace cpu {

constexpr int kS8TileRows = 16;

// One batch row of packed activations, taken apart once: codes as int16
// pairs (column pair p at dword p), block sums A_b, block scales.
struct S8Activation {
  std::vector<int32_t> pairs;  // k / 2 (k even)
  std::vector<int32_t> sums;   // k / kb
  const float* scales = nullptr;
};

struct S8Tile {
  int rows = 0;
  std::vector<int32_t> pairs;  // k / 2 * 16
  std::vector<float> S, O;     // G * 16 (rows past `rows`: 0)
  std::vector<int32_t> zi;     // G * 16
};

// Values of one scale or zero-point plane read the way the decode reads
// them: a table for 8-bit stored values, binary16 through a table of all
// 65536 codes, binary32 as its bits. ok == false: another width (the tile
// builders then take the core's terms).
struct S8ValueReader {
  const uint8_t* p = nullptr;
  int bytes = 0;
  bool ok = false;
  float table[256] = {};
  const float* wide = nullptr;  // binary16: 65536 values
  float at(uint64_t i) const {
    if (bytes == 1) return table[p[i]];
    if (bytes == 2) return wide[static_cast<uint32_t>(p[2 * i]) | static_cast<uint32_t>(p[2 * i + 1]) << 8];
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
  }
};

// The readers of a weight's scale and zero-point planes, built once per call.
struct S8Terms {
  S8ValueReader s0, s1, zp;
  bool ok = false;  // every plane the grade has has a reader
};
void s8_terms_plan(const Grade& g, const Plane planes[4], S8Terms* out);

// One block of the s8 law's activation packing (exact::pack_block's codes
// and scale, the same bits) on AVX-512; false (nothing written) where the
// CPU lacks it or len is not a multiple of 8 (s8_pack_avx512.cpp).
bool s8_pack_block(const float* x, int64_t len, int8_t* q, float* scale);

// Whether this CPU runs the tile path and law L allows it (even blocks, k even).
bool s8_tile_supported(const s8::Law& L, int64_t k);

void s8_activation(const s8::Law& L, const int8_t* codes, const float* scales, int64_t k, S8Activation* out);

// The tile of weight rows r0 .. r0 + rows - 1 (1..16) straight from the
// planes (cursor[r]: the data-plane index of row r0 + r's first stored code).
// Codes through the exact tile's fast readers where the layout allows,
// else the core's weight_row_terms; group terms from the scale planes with
// the decode's arithmetic (tables for 8-bit formats, binary16, binary32),
// else from weight_row_terms. Fails only where the core does.
Status s8_tile_from_planes(const S8Terms& terms, const Grade& g, const s8::Law& L, const Plane planes[4],
                           uint64_t numel, const uint64_t* cursor, int64_t r0, int rows, int64_t k, S8Tile* t);

// y[i * ldy + r] for up to 4 activation rows a[0..na) and r < t.rows;
// bias null or one value per tile row.
void s8_dot_tile(const s8::Law& L, const S8Activation* const* a, int na, const S8Tile& t, int64_t k,
                 const float* bias, float* y, int64_t ldy);

// Only the group terms (S, O, zi) of a tile, for the fused kernel below,
// which reads the codes from the data plane itself.
Status s8_tile_terms(const S8Terms& terms, const Grade& g, const s8::Law& L, const Plane planes[4],
                     uint64_t numel, const uint64_t* cursor, int64_t r0, int rows, int64_t k, S8Tile* t);

// The same terms with AVX-512 gathers, 16 rows at a time (lane = row), the
// same operations on the same values; false (nothing written) where it does
// not apply: a partial tile, or planes it does not read (then
// s8_tile_terms). Without a zero point O and zi are left as they were (no
// kernel reads them then). Only where s8_fused_plan said yes.
bool s8_tile_terms_vector(const S8Terms& terms, const Grade& g, const s8::Law& L, int64_t r0, int rows, int64_t k,
                          S8Tile* t);

// The fused kernel (s8_fused_avx512.cpp): dense 4-bit or 8-bit codes read
// straight from the row-major data plane, 16 rows' bytes transposed in
// registers, each code mapped to an offset-binary byte u = c + off >= 0 and
// multiplied with vpdpbusd (four columns of all 16 rows per instruction);
// D_b = sum u a - off * A_b is the law's exact integer, so every float step
// after it is s8_dot_tile's. No per-tile code buffer.
struct S8Fused {
  int nibbles = 0;     // 1: 4-bit codes (32 columns per 16 row bytes); 0: bytes
  int sparse = 0;      // 1: int8 codes 2:4 sparse with 2-bit positions (I8S24's layout), expanded in registers
  int off = 0;         // u = c + off
  int flip = 0;        // bytes: u = byte ^ 0x80 (codes are the byte as int8); else u = byte
  uint8_t lut[16] = {};  // nibbles: u for each stored nibble
};

// What the fused kernels' plans ask of a law's integer codes: their range
// over the 16 4-bit codes, and whether 8-bit codes are the byte read as
// int8 or as uint8.
struct S8CodeShape {
  int lo = 0, hi = 0;  // 4-bit codes: smallest and largest integer code (and 0)
  bool as_int8 = false, as_uint8 = false;
};
inline S8CodeShape s8_code_shape(const s8::Law& L) {
  S8CodeShape c;
  if (L.elem_bits == 4) {
    for (int i = 0; i < 16; ++i) {
      c.lo = L.code[i] < c.lo ? L.code[i] : c.lo;
      c.hi = L.code[i] > c.hi ? L.code[i] : c.hi;
    }
  } else if (L.elem_bits == 8) {
    c.as_int8 = c.as_uint8 = true;
    for (int i = 0; i < 256; ++i) {
      c.as_int8 = c.as_int8 && L.code[i] == static_cast<int8_t>(static_cast<uint8_t>(i));
      c.as_uint8 = c.as_uint8 && L.code[i] == i;
    }
  }
  return c;
}

// I8S24's code layout: int8 codes, 2 of every 4 kept with 2-bit positions, no zero point.
inline bool s8_i8s24_layout(const s8::Law& L, const S8CodeShape& c) {
  return L.sp_m == 4 && L.sp_n == 2 && L.sp_meta_bits == 2 && c.as_int8 && L.zero == s8::kZpNone;
}

// Whether the fused kernel takes law L at k columns (AVX-512 VNNI CPU, dense
// 4-bit or 8-bit codes, whole 16-byte column units, blocks of whole slices;
// or I8S24's 2:4 int8 codes at k a multiple of 64 on a CPU with VBMI2).
bool s8_fused_plan(const s8::Law& L, int64_t k, S8Fused* f);

// One batch row's activation dwords in the order the fused kernel reads them
// (4-bit: per 8 columns the dword of the columns the low nibbles hold, then
// the high nibbles'; bytes: 4 columns a dword).
void s8_fused_activation(const s8::Law& L, const S8Fused& f, const int8_t* codes, int64_t k,
                         std::vector<int32_t>* quads);

// y[i * ldy + r] for na = 1 to 8 activation rows (5-7 run as 4 and the rest) (quads[i], a[i] for sums and
// scales) and r < t.rows: weight rows r0 .. r0 + t.rows - 1 of `data`
// (row-major, k codes a row, n rows), t holding their group terms. With
// `ahead`, the next tile's bytes are prefetched into L2 along the way.
// Sparse codes: `meta` is the aux plane, cursor[r] the data-plane index of
// row r0 + r's first stored code.
void s8_fused_tile(const s8::Law& L, const S8Fused& f, const int32_t* const* quads, const S8Activation* const* a,
                   int na, const S8Tile& t, const uint8_t* data, const uint8_t* meta, const uint64_t* cursor,
                   int64_t r0, int64_t k, int64_t n, bool ahead, const float* bias, float* y, int64_t ldy);

// The AMX kernel (s8_amx.cpp): a 16-row tile's weight codes, decoded a chunk
// of columns at a time into a buffer in AMX's B layout (row q: the 4 codes
// of activation word q for each of the 16 weight rows; the fused kernel's
// word order), multiplied by 16 batch rows at a time with tdpbssd / tdpbsud
// (int8 activations times signed or unsigned codes, int32 sums, one tile
// per activation block); each block's sums are the law's exact D_b, stored
// and taken through s8_dot_tile's float steps (Batch::finish). The codes
// enter as their integers c (no offset), so D_b needs no correction.
struct S8Amx {
  int kind = 0;        // 0: 4-bit codes, 1: bytes, 2: I8S24's 2:4 int8 codes
  int b_signed = 1;    // codes are int8 (tdpbssd) or uint8 (tdpbsud)
  int kstep = 0;       // columns per tile multiply: the block, or 64 for blocks of 128 and 256
  uint8_t lut[16] = {};  // 4-bit codes: the byte each stored nibble becomes
};

// Whether the AMX kernel takes law L (whose fused plan is f) for a batch of
// m rows: the CPU has AMX-INT8 and the kernel granted this process the tile
// state, the codes fit a byte as they are, and the mode (set_s8_amx) allows
// it at this batch.
bool s8_amx_plan(const s8::Law& L, const S8Fused& f, int64_t m, S8Amx* p);

// Tests and benchmarks: 1 takes the AMX kernel at every batch where the
// plan allows it, 0 never, -1 from kS8AmxMinRows batch rows up (the default,
// or what the environment's GRIT_S8_AMX=0|1 says at start-up); returns the
// previous mode. s8_amx_calls counts the tiles it ran.
constexpr int64_t kS8AmxMinRows = 16;
int set_s8_amx(int mode);
uint64_t s8_amx_calls();
bool s8_amx_ready();  // the CPU and the OS allow the kernel (whatever the mode)

// The batch rows' activations as the AMX kernel reads them, batch group q
// (rows 16q .. 16q + 15) and block b at a time (B = k / kb): the group's kb
// code bytes a row (quads[i], the fused kernel's word order) at codes[((q *
// B + b) * 16 + r) * kb], their block scales and sums at scales / sums[(q *
// B + b) * 16 + r]; rows past m zero.
struct S8AmxActivations {
  std::vector<int8_t> codes;
  std::vector<float> scales;
  std::vector<int32_t> sums;
  std::vector<float> sumsf;  // the sums as floats (exact), for zps=l1's second FMA
};
void s8_amx_activations(const s8::Law& L, const std::vector<int32_t>* quads, const S8Activation* act, int64_t m,
                        int64_t k, S8AmxActivations* aq);

// A thread's scratch for the AMX kernel: a chunk of decoded codes and the
// parked accumulators of every batch group.
struct S8AmxScratch {
  std::vector<uint8_t> codes;
  std::vector<float> acc;
};

// y[i * ldy + r] for every batch row i < m (act[i]: its block sums and
// scales; aq from s8_amx_activations) and r < t.rows, weight rows r0 .. r0 +
// t.rows - 1 of `data` (as s8_fused_tile reads them; for I8S24 `meta` and
// `cursor`).
void s8_amx_tile(const s8::Law& L, const S8Amx& p, const S8AmxActivations& aq, const S8Activation* const* act,
                 int64_t m, const S8Tile& t, const uint8_t* data, const uint8_t* meta, const uint64_t* cursor,
                 int64_t r0, int64_t k, int64_t n, const float* bias, float* y, int64_t ldy, S8AmxScratch* scratch);

// The same fused kernel for AVX2 without VNNI (s8_fused_avx2.cpp): 16-row
// tiles as two halves of 8 lanes, vpmaddubsw + vpmaddwd for each 4-column
// step (no int16 sum can saturate: 4-bit codes need hi - lo <= 63, 8-bit
// codes go in as |c'| with the sign on the activation). Up to 4 batch rows.
// S8Fused here: off is subtracted as in the AVX-512 kernel (for uint8 codes
// off = -128 and flip: c' = byte ^ 0x80).
// With AVX2 the plan also takes I8S24's 2:4 int8 codes (f.sparse): each
// tile's rows are expanded into dense int8 codes in `scratch` (a vpshufb
// per 8 columns from the metadata's kept positions), then the 8-bit kernel;
// `fresh` false: scratch already holds this tile's rows (a later batch pass).
bool s8_fused_plan_avx2(const s8::Law& L, int64_t k, S8Fused* f);
void s8_sparse_tile_avx2(const s8::Law& L, const S8Fused& f, const int32_t* const* quads,
                         const S8Activation* const* a, int na, const S8Tile& t, const uint8_t* data,
                         const uint8_t* meta, const uint64_t* cursor, int64_t r0, int64_t k, bool fresh,
                         const float* bias, float* y, int64_t ldy, std::vector<uint8_t>* scratch);
void s8_fused_tile_avx2(const s8::Law& L, const S8Fused& f, const int32_t* const* quads,
                        const S8Activation* const* a, int na, const S8Tile& t, const uint8_t* data, int64_t r0,
                        int64_t k, const float* bias, float* y, int64_t ldy);

}  // namespace cpu
}  // namespace grit
