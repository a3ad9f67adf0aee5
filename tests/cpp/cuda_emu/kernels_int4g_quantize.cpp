// csrc/kernels/cuda/int4g_quantize.cu under the CPU emulator (emu.h).
#include "kernels/cuda/int4g_quantize.cu"
