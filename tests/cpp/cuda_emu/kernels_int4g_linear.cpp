// csrc/kernels/cuda/int4g_linear.cu under the CPU emulator (emu.h).
#include "kernels/cuda/int4g_linear.cu"
