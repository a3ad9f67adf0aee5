// csrc/kernels/cuda/packed_linear.cu under the CPU emulator (emu.h).
#include "kernels/cuda/packed_linear.cu"
