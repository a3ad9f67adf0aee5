// packed_linear for AVX-512 (F, BW, VL, DQ): one zmm per 16-row column,
// 4-bit codes through a 16-entry vpermps table, scale codes through
// vgatherdps or arithmetic, binary16 through vcvtph2ps. The algorithm is
// packed_linear_simd.inc; simd_avx512.inc supplies the vocabulary. Compiled
// for its target by that file's pragma (no per-file compiler flags needed), and
// reached only through avx512_kernels() when the CPU has AVX-512, or
// through avx512_bf16_kernels() (the same code plus the pair path, whose
// vdpbf16ps runs only there) when it also has AVX512_BF16.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/packed_linear_cpu.h"

#if defined(__x86_64__) || defined(__i386__)

#include "kernels/cpu/simd_avx512.inc"

#include "kernels/cpu/packed_linear_simd.inc"
#include "kernels/cpu/packed_linear_int4g_simd.inc"
#include "kernels/cpu/grad_input_simd.inc"

// bfloat16 bits of a random value for the pair check: x-like (exponent
// -60..60, 8 significant bits) or e-like (an FP4 value or an int8).
uint16_t pair_check_bf16(uint32_t r, bool e_like) {
  if (!e_like)
    return static_cast<uint16_t>(((r & 1u) << 15) | (((r >> 1) % 121u + 67u) << 7) | ((r >> 9) & 0x7Fu));
  static const float fp4[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  float v = (r & 2u) ? static_cast<float>(static_cast<int>((r >> 8) % 255u) - 127) : fp4[(r >> 8) & 7u];
  if (r & 1u) v = -v;
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return static_cast<uint16_t>(u >> 16);
}

float pair_check_f32(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint64_t pair_mismatches(uint64_t lanes, uint64_t seed) {
  uint64_t s = seed, bad = 0;
  auto next = [&s] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(s >> 32);
  };
  for (uint64_t done = 0; done < lanes; done += 16) {
    alignas(64) uint16_t e[32], x[32];
    alignas(64) float c[16], r[16];
    for (int i = 0; i < 32; ++i) {
      e[i] = pair_check_bf16(next(), true);
      x[i] = pair_check_bf16(next(), false);
    }
    for (int i = 0; i < 16; ++i) {
      const uint32_t q = next();
      c[i] = (q & 7u) == 0 ? 0.0f : std::ldexp(static_cast<float>((q >> 8) | 1u), static_cast<int>(q % 141u) - 94);
    }
    const __m512 acc = _mm512_dpbf16_ps(_mm512_load_ps(c), (__m512bh)_mm512_load_si512(e),
                                        (__m512bh)_mm512_load_si512(x));
    _mm512_store_ps(r, acc);
    for (int i = 0; i < 16; ++i) {
      float t = std::fma(pair_check_f32(e[2 * i + 1]), pair_check_f32(x[2 * i + 1]), c[i]);
      t = std::fma(pair_check_f32(e[2 * i]), pair_check_f32(x[2 * i]), t);
      uint32_t a, b;
      std::memcpy(&a, &t, 4);
      std::memcpy(&b, &r[i], 4);
      bad += a != b;
    }
  }
  return bad;
}

#include "kernels/cpu/simd_end.inc"

namespace grit {
namespace cpu {
namespace {

constexpr KernelTable make_table(bool bf16) {
  KernelTable t{Isa::kAvx512,         &simd_linear_entry,        &simd_decode_entry,
                &simd_int4g_entry,     true,                      &simd_grad_input_rows,
                nullptr,               &simd_decode_strips_entry, &simd_grad_input_strips,
                kGradStrip,            &simd_decode_columns_entry,
                &simd_grad_input_fused_entry};
  if (bf16) {
    t.isa = Isa::kAvx512Bf16;
    t.linear_tiles = &simd_linear_pairs_entry;
    t.grad_input_pairs = &simd_grad_input_pairs;
    t.bf16_pack_tile = &simd_bf16_pack_tile_entry;
    t.bf16_pack_cols_tile = &simd_bf16_pack_cols_tile_entry;
  }
  t.int4g_grad_input = &GRIT_SIMD_NS::int4g_batch_grad_input;
  t.int4g_decode_rows = &GRIT_SIMD_NS::int4g_batch_rows;
  return t;
}

constexpr KernelTable kTable = make_table(false);
constexpr KernelTable kBf16Table = make_table(true);

}  // namespace

const KernelTable& avx512_kernels() { return kTable; }
const KernelTable& avx512_bf16_kernels() { return kBf16Table; }

uint64_t avx512_bf16_pair_mismatches(uint64_t lanes, uint64_t seed) { return pair_mismatches(lanes, seed); }

}  // namespace cpu
}  // namespace grit

#else  // not x86: the variant is never supported, and never called.

namespace grit {
namespace cpu {
const KernelTable& avx512_kernels() { return scalar_kernels(); }
const KernelTable& avx512_bf16_kernels() { return scalar_kernels(); }
uint64_t avx512_bf16_pair_mismatches(uint64_t, uint64_t) { return 0; }
}  // namespace cpu
}  // namespace grit

#endif
