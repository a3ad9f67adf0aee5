// The s8 tile kernel on AMX-INT8 (s8_tile.h): per 16 weight rows the codes
// are decoded a chunk of 1024 columns at a time into AMX's B layout (the
// VNNI kernel's register transposes, stored), then every 16 batch rows take
// one tdpbssd / tdpbsud per activation block (64 columns at most a
// multiply: a block of 128 or 256 runs two or four into the same sums). The
// int32 sums are the law's exact D_b (integer sums do not depend on their
// order), stored to a 1 KiB buffer and taken through Batch::finish, the VNNI
// kernel's float steps in the law's order: the same bits as grit::s8::dot.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <numeric>

#include "kernels/cpu/s8_tile.h"

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <immintrin.h>

#include "kernels/cpu/amx_tiles.h"

namespace grit {
namespace cpu {
namespace {

// GRIT_S8_AMX=0 keeps the kernel off, =1 takes it at every batch; unset or
// anything else: from kS8AmxMinRows rows.
int initial_mode() {
  const char* env = std::getenv("GRIT_S8_AMX");
  if (env != nullptr && std::strcmp(env, "0") == 0) return 0;
  if (env != nullptr && std::strcmp(env, "1") == 0) return 1;
  return -1;
}

std::atomic<int> g_mode{initial_mode()};
std::atomic<uint64_t> g_calls{0};

// AMX-TILE and AMX-INT8 in CPUID leaf 7, and the kernel's permission for
// this process to use the tile state (Linux asks for it once:
// ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA).
bool amx_ready() {
  static const bool ok = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    if (!(d & (1u << 24)) || !(d & (1u << 25))) return false;
    return request_tile_state();
  }();
  return ok;
}

}  // namespace

bool s8_amx_ready() { return amx_ready(); }
int set_s8_amx(int mode) { return g_mode.exchange(mode < 0 ? -1 : (mode > 0 ? 1 : 0)); }
uint64_t s8_amx_calls() { return g_calls.load(); }

bool s8_amx_plan(const s8::Law& L, const S8Fused& f, int64_t m, S8Amx* p) {
  const int mode = g_mode.load();
  if (mode == 0 || (mode < 0 && m < kS8AmxMinRows) || !amx_ready()) return false;
  // columns per multiply: the whole block up to 64 (whole activation words),
  // else 64 at a time
  if (L.kb % 4 != 0 || (L.kb > 64 && L.kb % 64 != 0)) return false;
  S8Amx out;
  out.kstep = L.kb < 64 ? L.kb : 64;
  if (f.sparse) {
    out.kind = 2;  // int8 codes as stored
  } else if (f.nibbles) {
    const S8CodeShape c = s8_code_shape(L);
    out.kind = 0;
    out.b_signed = c.lo >= -128 && c.hi <= 127;
    if (!out.b_signed && c.lo < 0) return false;  // neither int8 nor uint8
    for (int i = 0; i < 16; ++i) out.lut[i] = static_cast<uint8_t>(L.code[i]);
  } else {
    out.kind = 1;
    out.b_signed = f.flip;  // the bytes are the codes as int8 (flip) or as uint8
  }
  *p = out;
  return true;
}

}  // namespace cpu
}  // namespace grit

#pragma GCC push_options
#pragma GCC diagnostic push
// GCC 12's own intrinsic headers start some vectors from _mm*_undefined_*()
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx512vbmi2,avx2,fma,amx-tile,amx-int8")
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx512vbmi2,avx2,fma,amx-tile,amx-int8"))), apply_to = function)
#endif

#include "kernels/cpu/s8_avx512.h"

namespace grit {
namespace cpu {
namespace {

using s8rows::Batch;
using s8rows::load_unit;
using s8rows::Rows;
using s8rows::SparseRows;

// The tile configuration (palette 1): tiles 0, 1, 6 and 7 the int32 sums of
// 16 batch rows x 16 weight rows; 2 and 4 activations (16 rows x kstep
// bytes); 3 and 5 codes (kstep / 4 rows x 64 bytes).
TileConfig config(int kstep) {
  TileConfig c;
  for (int t : {0, 1, 6, 7}) c.rows[t] = 16, c.colsb[t] = 64;
  for (int t : {2, 4}) c.rows[t] = 16, c.colsb[t] = static_cast<uint16_t>(kstep);
  for (int t : {3, 5}) c.rows[t] = static_cast<uint8_t>(kstep / 4), c.colsb[t] = 64;
  return c;
}

// Columns c0 .. c0 + cols of the tile's codes into wbuf: row q (64 bytes)
// lane r = the 4 codes of activation word q (counted from c0) of weight row r.
template <bool kAffine>
void decode_dense(const S8Amx& p, const Rows<kAffine>& rows, int64_t c0, int64_t cols, uint8_t* wbuf) {
  if (p.kind == 0) {
    const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p.lut)));
    const __m512i nib = _mm512_set1_epi8(0x0F);
    for (int64_t u = 0; u < cols / 32; ++u) {
      __m512i w[4];
      load_unit(rows, c0 / 2 + u * 16, w);
      for (int j = 0; j < 4; ++j) {
        const int64_t s = u * 4 + j;  // 8 columns: words 2s (low nibbles) and 2s + 1 (high)
        _mm512_store_si512(wbuf + 128 * s, _mm512_shuffle_epi8(lut, _mm512_and_si512(w[j], nib)));
        _mm512_store_si512(wbuf + 128 * s + 64,
                           _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(w[j], 4), nib)));
      }
    }
    return;
  }
  for (int64_t u = 0; u < cols / 16; ++u) {
    __m512i w[4];
    load_unit(rows, c0 + u * 16, w);
    for (int j = 0; j < 4; ++j) _mm512_store_si512(wbuf + 64 * (u * 4 + j), w[j]);
  }
}

// I8S24: the next `cols` columns (SparseRows reads in order).
void decode_sparse(SparseRows& sp, int64_t c0, int64_t cols, uint8_t* wbuf) {
  for (int64_t c = 0; c < cols; c += 64) {
    __m512i v[16];
    sp.unit(c0 + c, v);
    for (int j = 0; j < 16; ++j) _mm512_store_si512(wbuf + 64 * (c / 4 + j), v[j]);
  }
}

// Block b's sums into accumulator tile T with activation tile A and code
// tile W: kb / kstep multiplies (ab: the block's 16 x kb activation bytes;
// wb: its codes). A macro, not a template: GCC's tile intrinsics paste
// their tile numbers into the instruction text.
#define GRIT_S8_AMX_BLOCK(T, A, W, ab, wb)            \
  do {                                                \
    _tile_zero(T);                                    \
    for (int s = 0; s < kb; s += kstep) {             \
      _tile_loadd(A, (ab) + s, kb);                   \
      _tile_loadd(W, (wb) + 16 * s, 64);              \
      if (kSigned)                                    \
        _tile_dpbssd(T, A, W);                        \
      else                                            \
        _tile_dpbsud(T, A, W);                        \
    }                                                 \
  } while (0)

// One batch group over a run of blocks of the tile: its activations from the
// run's first block (S8AmxActivations' layout), its 16 rows (rows past m
// repeat the last and are not stored), its parked accumulators, and bytes
// to bring into L2 along the way.
struct GroupRun {
  const int8_t* codes;   // 16 x kb bytes a block
  const float* scales;   // 16 a block
  const int32_t* sums;   // 16 a block
  const float* sumsf;    // the same as floats
  const S8Activation* const* act;
  int rows;
  int64_t b0, nb;        // blocks b0 .. b0 + nb - 1 of the row
  float* acc;
  const uint8_t* pf;
  int64_t pf_bytes;
};

// R (4, 8 or 16) batch rows over the run (its codes at wbuf), the
// accumulators resumed and parked. Blocks go four at a time through
// accumulator tiles 0, 1, 6 and 7, each stored to its slot of a ring; the
// float steps of a chunk of four run kLag chunks after its multiplies were
// issued (on the Xeon measured the two added up whatever the lag: the tile
// instructions and the vector work did not overlap).
template <int R, int kZero, bool kSigned>
void run_blocks(const s8::Law& L, const S8Amx& p, const S8Tile& t, const uint8_t* wbuf, const GroupRun& g) {
  constexpr int kLag = 1, kRing = kLag + 1;
  Batch<R, kZero> bt(L, nullptr, g.act);
  bt.seek(g.b0);
  if (g.b0 > 0) bt.resume(g.acc);
  alignas(64) int32_t d[kRing][4][256];
  const int kb = L.kb, kstep = p.kstep;
  const int64_t nb = g.nb, chunks = (nb + 3) / 4;
  const int8_t* ab = g.codes;
  for (int64_t c = 0; c < chunks + kLag; ++c) {
    if (c < chunks) {
      int32_t(*dd)[256] = d[c % kRing];
      const int64_t b = 4 * c;
      // Each store one multiply behind its own: a store straight after its
      // multiply waited out the multiply's latency.
      GRIT_S8_AMX_BLOCK(0, 2, 3, ab + 16 * kb * b, wbuf + 16 * kb * b);
      if (b + 1 < nb) GRIT_S8_AMX_BLOCK(1, 4, 5, ab + 16 * kb * (b + 1), wbuf + 16 * kb * (b + 1));
      _tile_stored(0, dd[0], 64);
      if (b + 2 < nb) GRIT_S8_AMX_BLOCK(6, 2, 3, ab + 16 * kb * (b + 2), wbuf + 16 * kb * (b + 2));
      if (b + 1 < nb) _tile_stored(1, dd[1], 64);
      if (b + 3 < nb) GRIT_S8_AMX_BLOCK(7, 4, 5, ab + 16 * kb * (b + 3), wbuf + 16 * kb * (b + 3));
      if (b + 2 < nb) _tile_stored(6, dd[2], 64);
      if (b + 3 < nb) _tile_stored(7, dd[3], 64);
    }
    if (c < kLag) continue;
    const int64_t done = c - kLag;  // this chunk's sums are in memory
    for (int j = 0; j < 4 && 4 * done + j < nb; ++j) {
      const int64_t blk = 4 * done + j, at = 16 * blk;
      for (int64_t pa = blk * g.pf_bytes / nb; pa < (blk + 1) * g.pf_bytes / nb; pa += 64)
        _mm_prefetch(reinterpret_cast<const char*>(g.pf + pa), _MM_HINT_T1);
      const int32_t* dj = d[done % kRing][j];
      if (L.qe != 0)
        bt.template finish<true, true>(t, 0, dj, g.scales + at, g.sums + at, g.sumsf + at);
      else
        bt.template finish<false, true>(t, 0, dj, g.scales + at, g.sums + at, g.sumsf + at);
    }
  }
  bt.park(g.acc);
}
#undef GRIT_S8_AMX_BLOCK

template <int kZero, bool kSigned>
void run_group(const s8::Law& L, const S8Amx& p, const S8Tile& t, const uint8_t* wbuf, const GroupRun& g) {
  if (g.rows > 8) return run_blocks<16, kZero, kSigned>(L, p, t, wbuf, g);
  if (g.rows > 4) return run_blocks<8, kZero, kSigned>(L, p, t, wbuf, g);
  run_blocks<4, kZero, kSigned>(L, p, t, wbuf, g);
}

// The tile's columns in chunks of about kChunkCols: each chunk's codes are
// decoded into wbuf (L1-sized) and every batch group runs over them, so the
// codes and a group's activations are read from L1.
constexpr int64_t kChunkCols = 1024;

template <int kZero, bool kSigned>
void run_tile(const s8::Law& L, const S8Amx& p, const S8AmxActivations& aq, const S8Activation* const* act,
              int64_t m, const S8Tile& t, const uint8_t* data, const uint8_t* meta, const uint64_t* cursor, int64_t r0,
              int64_t k, int64_t n, const float* bias, float* y, int64_t ldy, uint8_t* wbuf, float* acc_mem) {
  const int64_t kb = L.kb, B = k / kb, groups = (m + 15) / 16;
  const int64_t unit = std::lcm<int64_t>(kb, 64);
  const int64_t chunk = std::max<int64_t>(unit, kChunkCols / unit * unit);
  const int64_t row_bytes = p.kind == 0 ? k / 2 : k;
  Rows<true> affine{data + r0 * row_bytes, row_bytes};
  Rows<false> listed;
  for (int r = 0; r < 16; ++r) listed.row[r] = data + (r0 + (r < t.rows ? r : t.rows - 1)) * row_bytes;
  SparseRows sp(t.rows, data, p.kind == 2 ? meta : data, cursor, r0, k / 4);
  // the next tile's bytes (dense codes: contiguous rows), brought into L2 by
  // the first batch group a share per chunk, a few lines per block
  const int64_t after = r0 + 16 < n ? n - r0 - 16 : 0;
  const uint8_t* next = p.kind != 2 && after > 0 ? data + (r0 + 16) * row_bytes : nullptr;
  const int64_t next_bytes = next != nullptr ? (after < 16 ? after : 16) * row_bytes : 0;
  for (int64_t c0 = 0; c0 < k; c0 += chunk) {
    const int64_t cols = std::min(chunk, k - c0);
    if (p.kind == 2)
      decode_sparse(sp, c0, cols, wbuf);
    else if (t.rows == 16)
      decode_dense(p, affine, c0, cols, wbuf);
    else
      decode_dense(p, listed, c0, cols, wbuf);
    const int64_t b0 = c0 / kb, nb = cols / kb;
    for (int64_t q = 0; q < groups; ++q) {
      const int rows = m - 16 * q < 16 ? static_cast<int>(m - 16 * q) : 16;
      const S8Activation* a[16];
      for (int r = 0; r < 16; ++r) a[r] = act[16 * q + (r < rows ? r : rows - 1)];
      const int64_t at = (q * B + b0) * 16;  // the group's first block of this chunk
      const int64_t pf_from = next_bytes * c0 / k, pf_to = next_bytes * (c0 + cols) / k;  // this chunk's share
      const GroupRun g{aq.codes.data() + at * kb, aq.scales.data() + at, aq.sums.data() + at, aq.sumsf.data() + at,
                       a, rows, b0, nb, acc_mem + 256 * q, q == 0 ? next + pf_from : nullptr,
                       q == 0 ? pf_to - pf_from : 0};
      run_group<kZero, kSigned>(L, p, t, wbuf, g);
    }
  }
  // the outputs: the law's last steps from the parked accumulators
  for (int64_t q = 0; q < groups; ++q) {
    const int rows = m - 16 * q < 16 ? static_cast<int>(m - 16 * q) : 16;
    const S8Activation* a[16];
    for (int r = 0; r < 16; ++r) a[r] = act[16 * q + (r < rows ? r : rows - 1)];
    Batch<16, kZero> bt(L, nullptr, a);
    bt.resume(acc_mem + 256 * q);
    bt.store(t, bias, y + 16 * q * ldy, ldy, rows);
  }
}

// run_tile for a zero-point kind and the codes' signedness.
template <bool kSigned>
decltype(&run_tile<s8::kZpNone, kSigned>) pick(int zero) {
  if (zero == s8::kZpShared) return &run_tile<s8::kZpShared, kSigned>;
  if (zero == s8::kZpOffset) return &run_tile<s8::kZpOffset, kSigned>;
  return &run_tile<s8::kZpNone, kSigned>;
}

}  // namespace

void s8_amx_activations(const s8::Law& L, const std::vector<int32_t>* quads, const S8Activation* act, int64_t m,
                        int64_t k, S8AmxActivations* aq) {
  const int64_t kb = L.kb, B = k / kb, rows = (m + 15) / 16 * 16;
  aq->codes.assign(static_cast<size_t>(rows * k), 0);
  aq->scales.assign(static_cast<size_t>(rows * B), 0.0f);
  aq->sums.assign(static_cast<size_t>(rows * B), 0);
  aq->sumsf.assign(static_cast<size_t>(rows * B), 0.0f);
  for (int64_t i = 0; i < m; ++i) {
    const int8_t* src = reinterpret_cast<const int8_t*>(quads[i].data());
    for (int64_t b = 0; b < B; ++b) {
      const int64_t at = (i / 16 * B + b) * 16 + i % 16;
      std::memcpy(aq->codes.data() + at * kb, src + b * kb, static_cast<size_t>(kb));
      aq->scales[at] = act[i].scales[b];
      aq->sums[at] = act[i].sums[b];
      aq->sumsf[at] = static_cast<float>(act[i].sums[b]);  // exact: |A_b| <= 256 * 127
    }
  }
}

void s8_amx_tile(const s8::Law& L, const S8Amx& p, const S8AmxActivations& aq, const S8Activation* const* act,
                 int64_t m, const S8Tile& t, const uint8_t* data, const uint8_t* meta, const uint64_t* cursor,
                 int64_t r0, int64_t k, int64_t n, const float* bias, float* y, int64_t ldy, S8AmxScratch* scratch) {
  const int64_t chunk = std::max<int64_t>(std::lcm<int64_t>(L.kb, 64), kChunkCols);
  scratch->codes.resize(static_cast<size_t>(16 * chunk + 64));
  scratch->acc.resize(static_cast<size_t>((m + 15) / 16 * 256 + 16));
  // 64-byte aligned views of the scratch
  uint8_t* wbuf = scratch->codes.data() + (-reinterpret_cast<uintptr_t>(scratch->codes.data()) & 63);
  float* acc = scratch->acc.data() + ((-reinterpret_cast<uintptr_t>(scratch->acc.data()) & 63) / 4);
  const TileConfig cfg = config(p.kstep);
  _tile_loadconfig(&cfg);
  const auto run = p.b_signed ? pick<true>(L.zero) : pick<false>(L.zero);
  run(L, p, aq, act, m, t, data, meta, cursor, r0, k, n, bias, y, ldy, wbuf, acc);
  _tile_release();
  g_calls.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace cpu
}  // namespace grit

#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC diagnostic pop
#pragma GCC pop_options

#else  // not x86-64 Linux: no AMX plan, so the kernel is never called.

namespace grit {
namespace cpu {
bool s8_amx_ready() { return false; }
int set_s8_amx(int) { return -1; }
uint64_t s8_amx_calls() { return 0; }
bool s8_amx_plan(const s8::Law&, const S8Fused&, int64_t, S8Amx*) { return false; }
void s8_amx_activations(const s8::Law&, const std::vector<int32_t>*, const S8Activation*, int64_t, int64_t,
                        S8AmxActivations*) {}
void s8_amx_tile(const s8::Law&, const S8Amx&, const S8AmxActivations&, const S8Activation* const*, int64_t,
                 const S8Tile&, const uint8_t*, const uint8_t*, const uint64_t*, int64_t, int64_t, int64_t,
                 const float*, float*, int64_t, S8AmxScratch*) {}
}  // namespace cpu
}  // namespace grit

#endif
