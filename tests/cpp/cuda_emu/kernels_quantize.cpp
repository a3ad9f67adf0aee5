// csrc/kernels/cuda/quantize.cu under the CPU emulator (emu.h).
#include "kernels/cuda/quantize.cu"
