// GRIT_HD marks a function that compiles for the host and, under nvcc, for
// the device too (the core's exact law, the kernels' block encoders).
#pragma once

#if defined(__CUDACC__)
#define GRIT_HD __host__ __device__ __forceinline__
#else
#define GRIT_HD inline
#endif
