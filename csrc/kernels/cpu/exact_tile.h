// The exact integer mode's dot products for 16 weight rows at once, on
// AVX-512 (F, BW, DQ, CD, VNNI): the same bits as exact_dot_row (and so as
// the core's grit::exact::exact_dot) for every output. The tile holds the
// rows' codes as int16 pairs with lane = row (column pair p of row r at
// dword p * 16 + r), so one vpdpwssd adds two columns of all 16 rows and a
// block sum D_b is a run of them, no horizontal sum; the block scales are
// held the same way, and the rescale onto the grid (exact_linear.h, step 3)
// runs in int64 lanes, eight rows per instruction. Torch-free;
// tests/cpp/kernels/test_exact_tile.cpp holds it equal to the core.
#pragma once

#include <cstdint>
#include <vector>

#include "grit/exact_linear.h"
#include "kernels/cpu/exact_dot.h"

namespace grit {
namespace cpu {

constexpr int kExactTileRows = 16;

// A 2:4 quad's kept positions from its metadata nibble (bits 0-1 and 2-3
// name them; one position where they agree).
constexpr uint32_t kept(uint32_t nib) { return (1u << (nib & 3u)) | (1u << ((nib >> 2) & 3u)); }
// The same for the two quads of a metadata byte: 8 positions.
struct KeptByte {
  uint8_t m[256];
  constexpr KeptByte() : m() {
    for (uint32_t b = 0; b < 256; ++b) m[b] = static_cast<uint8_t>(kept(b & 15u) | kept(b >> 4) << 4);
  }
};
inline constexpr KeptByte kKept;

// Up to 16 weight rows laid out for exact_dot_tile.
struct ExactTile {
  int rows = 0;                // valid rows; the others are zero codes with scale 0
  uint32_t nan_rows = 0;       // bit r: some block scale of row r is NaN or infinite
  std::vector<int32_t> pairs;  // k / 2 * 16 dwords: two int16 codes of row r at p * 16 + r
  std::vector<int32_t> mw, xw; // B * 16: block b's scale of row r = mw * 2^xw at b * 16 + r
};

// Whether this CPU runs the tile path and law L allows it (an even k0 and
// block sums that fit int32: bd <= 31).
bool exact_tile_supported(const exact::Law& L);

// Lay out `rows` (1..16) weight rows: codes row-major (row r at w + r * k),
// block scales row-major (row r at ws + r * (k / k0)). Only where
// exact_tile_supported(L).
void exact_tile_pack(const exact::Law& L, const int16_t* w, const exact::WScale* ws, int rows, int64_t k,
                     ExactTile* t);

// The same tile straight from the planes for weight rows r0 .. r0 + rows - 1
// (codes as exact_weight_row decodes them, block scales as block_scale;
// cursor[r]: the data-plane index of row r0 + r's first stored code, read
// for sparse grades only): dense 4-bit codes (a byte's two codes are one
// column pair), and 8-bit codes that read as int8, dense or 2-of-4 sparse
// with 2-bit positions (with AVX512_VBMI2). False, the tile untouched, for
// any other layout.
bool exact_tile_from_planes(const exact::Law& L, const uint8_t* data, const uint8_t* s0, const uint8_t* meta,
                            const uint64_t* cursor, int64_t r0, int rows, int64_t k, ExactTile* t);

// The code pairs alone, in ExactTile::pairs' layout (k / 2 * 16 dwords at
// `pairs`), for the code layout of L (elem_bits, msb, code, sp_*): the
// layouts exact_tile_from_planes takes. False (nothing written) for others.
bool exact_tile_codes(const exact::Law& L, const uint8_t* data, const uint8_t* meta, const uint64_t* cursor,
                      int64_t r0, int rows, int64_t k, int32_t* pairs);

// y[r] = exact_dot_row(L, a, row r, ...) for r < t.rows; bias is null or
// one value per row.
void exact_dot_tile(const exact::Law& L, const ExactActivation& a, const ExactTile& t, int64_t k,
                    const float* bias, float* y);

}  // namespace cpu
}  // namespace grit
