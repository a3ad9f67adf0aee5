// csrc/kernels/cuda/grad_input.cu under the CPU emulator (emu.h).
#include "kernels/cuda/grad_input.cu"
