// A CPU emulator for the CUDA kernels of csrc/kernels/cuda, so that `make
// test` runs them on machines without a GPU. Each kernel file compiles as
// C++ with GRIT_CUDA_EMU set and the stand-in CUDA headers of include/ on
// the path; GRIT_LAUNCH (launch.cuh) calls grit_emu::launch, which runs the
// grid one block at a time and the block's threads as cooperative fibers:
// __syncthreads() waits for every thread of the block that has not exited,
// __shfl_xor_sync for every thread of the warp. The arithmetic intrinsics are
// the plain IEEE operations (this code builds with -ffp-contract=off), which
// is what the device computes under -fmad=false.
//
// What it proves: indexing, the order of operations (so the bits), flags,
// barriers that every thread reaches. What it cannot: timing, memory
// coalescing, races between blocks (blocks run one after another), or
// anything about a real GPU's scheduling.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint2 {
  unsigned x, y;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

namespace grit_emu {

inline dim3 blockIdx, blockDim, gridDim;

const dim3& thread_index();
void sync_block();
uint64_t exchange(uint64_t mine, int lane_xor);  // the warp's values: mine out, lane ^ lane_xor's in
void run_grid(dim3 grid, dim3 block, const std::function<void()>& body);
int take_last_error();  // and reset it

template <class T>
T shfl_xor(T v, int lane_xor) {
  static_assert(sizeof(T) <= 8, "shuffle of a value wider than 8 bytes");
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  const uint64_t r = exchange(b, lane_xor);
  T out;
  std::memcpy(&out, &r, sizeof(T));
  return out;
}

template <class K>
struct Launcher {
  dim3 grid, block;
  K* kernel;
  template <class... A>
  void operator()(A... args) const {
    K* k = kernel;
    run_grid(grid, block, [&]() { k(args...); });
  }
};

template <class K>
Launcher<K> launch(dim3 grid, dim3 block, K* kernel) {
  return Launcher<K>{grid, block, kernel};
}
template <class K>
Launcher<K> launch(dim3 grid, dim3 block, K& kernel) {
  return Launcher<K>{grid, block, &kernel};
}

}  // namespace grit_emu

#define threadIdx (::grit_emu::thread_index())
#define blockIdx (::grit_emu::blockIdx)
#define blockDim (::grit_emu::blockDim)
#define gridDim (::grit_emu::gridDim)
#define __syncthreads() ::grit_emu::sync_block()
#define __shfl_xor_sync(mask, v, lane_xor) ::grit_emu::shfl_xor(v, lane_xor)

inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float __double2float_rn(double a) { return static_cast<float>(a); }
inline float __int_as_float(int b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
inline int atomicOr(int* p, int v) {
  const int old = *p;
  *p = old | v;
  return old;
}
inline unsigned atomicMax(unsigned* p, unsigned v) {
  const unsigned old = *p;
  if (v > old) *p = v;
  return old;
}
template <class T>
inline T min(T a, T b) {
  return b < a ? b : a;
}
template <class T>
inline T max(T a, T b) {
  return a < b ? b : a;
}
