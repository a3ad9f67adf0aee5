// packed_linear for AVX2 (+FMA, F16C): a 16-row column is
// two ymm halves (rows 0-7, 8-15); the 16-entry code table is two vpermps
// lookups and a blend on the code's bit 3. The algorithm is
// packed_linear_simd.inc; simd_avx2.inc supplies the vocabulary. Compiled for
// its target by that file's pragma, reached only through avx2_kernels() when
// the CPU has AVX2.
#include <cstdint>

#include "kernels/cpu/packed_linear_cpu.h"

#if defined(__x86_64__) || defined(__i386__)

#include "kernels/cpu/simd_avx2.inc"

#include "kernels/cpu/packed_linear_simd.inc"
#include "kernels/cpu/packed_linear_int4g_simd.inc"
#include "kernels/cpu/grad_input_simd.inc"

#include "kernels/cpu/simd_end.inc"

namespace grit {
namespace cpu {
namespace {

constexpr KernelTable make_table() {
  KernelTable t{Isa::kAvx2,           &simd_linear_entry,      &simd_decode_entry,
                &simd_int4g_entry,     true,                    &simd_grad_input_rows,
                nullptr,               &simd_decode_strips_entry, &simd_grad_input_strips,
                kGradStrip,            &simd_decode_columns_entry,
                &simd_grad_input_fused_entry};
  t.int4g_grad_input = &GRIT_SIMD_NS::int4g_batch_grad_input;
  t.int4g_decode_rows = &GRIT_SIMD_NS::int4g_batch_rows;
  return t;
}

constexpr KernelTable kTable = make_table();

}  // namespace

const KernelTable& avx2_kernels() { return kTable; }

}  // namespace cpu
}  // namespace grit

#else  // not x86: the variant is never supported, and never called.

namespace grit {
namespace cpu {
const KernelTable& avx2_kernels() { return scalar_kernels(); }
}  // namespace cpu
}  // namespace grit

#endif
