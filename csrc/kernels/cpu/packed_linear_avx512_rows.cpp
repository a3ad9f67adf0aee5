// packed_linear for AVX-512: the nibble decoders (MXFP4, NVF4 and their
// siblings) on row-major planes, packed_linear_simd.inc's GRIT_SIMD_PART 1.
// A file of its own so that a parallel build compiles it beside
// packed_linear_avx512.cpp, which calls it.
#include "kernels/cpu/packed_linear_cpu.h"

#if defined(__x86_64__) || defined(__i386__)

#define GRIT_SIMD_PART 1
#include "kernels/cpu/simd_avx512.inc"
#include "kernels/cpu/packed_linear_simd.inc"
#include "kernels/cpu/simd_end.inc"

#endif
