// csrc/kernels/cuda/exact_linear.cu under the CPU emulator (emu.h).
#include "kernels/cuda/exact_linear.cu"
