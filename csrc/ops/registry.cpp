// The grit:: operator schemas, all of them, in one place. Backends register
// their kernels in their own files (TORCH_LIBRARY_IMPL), the autograd rules
// included (autograd.cpp); the fake (meta) kernels live in torch_grit/ops.py,
// which set_python_module names so torch imports it when it needs them.
//
// Planes travel as four 1-D uint8 tensors [data, scale0, scale1, aux] (an
// absent plane is an empty tensor); the grade as its string (canonical or a
// reference name such as "MXFP4"); the logical shape as an int list. Groups
// run along the last dimension, in row-major stream order.
#include <torch/library.h>

TORCH_LIBRARY(grit, m) {
  m.set_python_module("torch_grit.ops");
  m.def("quantize(Tensor w, str grade) -> Tensor[]");
  m.def(
      "dequantize(Tensor data, Tensor scale0, Tensor scale1, Tensor aux, str grade, int[] shape, "
      "ScalarType dtype) -> Tensor");
  m.def(
      "packed_linear(Tensor x, Tensor data, Tensor scale0, Tensor scale1, Tensor aux, str grade, "
      "int[] shape, Tensor? bias) -> Tensor");
  m.def(
      "packed_linear_grad_input(Tensor grad_y, Tensor data, Tensor scale0, Tensor scale1, "
      "Tensor aux, str grade, int[] shape) -> Tensor");
  m.def(
      "check(Tensor data, Tensor scale0, Tensor scale1, Tensor aux, str grade, int[] shape) "
      "-> bool");
  // The CPU tile layout of a 4-bit weight (kernels/cpu/nibble_tiles.h):
  // data and scale0 permuted for the SIMD kernels, scale1 and aux as they
  // are; dequantize_tiled has dequantize's bits, packed_linear_tiled
  // packed_linear's and
  // packed_linear_grad_input_tiled packed_linear_grad_input's.
  m.def(
      "tile_nibbles(Tensor data, Tensor scale0, Tensor scale1, Tensor aux, str grade, int[] shape) "
      "-> (Tensor tiled_data, Tensor tiled_scale0)");
  m.def(
      "untile_nibbles(Tensor tiled_data, Tensor tiled_scale0, str grade, int[] shape) "
      "-> (Tensor data, Tensor scale0)");
  m.def(
      "dequantize_tiled(Tensor tiled_data, Tensor tiled_scale0, Tensor scale1, Tensor aux, str grade, "
      "int[] shape, ScalarType dtype) -> Tensor");
  m.def(
      "packed_linear_tiled(Tensor x, Tensor tiled_data, Tensor tiled_scale0, Tensor scale1, Tensor aux, "
      "str grade, int[] shape, Tensor? bias) -> Tensor");
  m.def(
      "packed_linear_grad_input_tiled(Tensor grad_y, Tensor tiled_data, Tensor tiled_scale0, Tensor scale1, "
      "Tensor aux, str grade, int[] shape) -> Tensor");
  // The exact integer mode (csrc/grit/exact_linear.h): int8 activation codes
  // with one float32 scale per block, a binary32 result.
  m.def("pack_activations(Tensor x, int block) -> (Tensor codes, Tensor scales)");
  m.def(
      "packed_linear_exact(Tensor codes, Tensor scales, Tensor data, Tensor scale0, Tensor scale1, "
      "Tensor aux, str grade, int[] shape, Tensor? bias) -> Tensor");
  // The law's chains continued from acc over a column cut of a weight
  // (csrc/grit/linear_law.h): a tensor-parallel row-wise shard's part of the
  // ordered reduction. finish=False returns the float32 acc; finish=True
  // adds the bias and returns y in x's dtype.
  m.def(
      "packed_linear_continue(Tensor x, Tensor data, Tensor scale0, Tensor scale1, Tensor aux, str grade, "
      "int[] shape, Tensor acc, Tensor? bias, bool finish) -> Tensor");
  // The s8 activation law (csrc/grit/s8_linear.h): x packed to int8 blocks
  // inside the op, integer block sums, y in x's dtype.
  m.def(
      "packed_linear_s8(Tensor x, Tensor data, Tensor scale0, Tensor scale1, Tensor aux, str grade, "
      "int[] shape, Tensor? bias) -> Tensor");
  // The bf16 activation law (csrc/grit/bf16_linear.h): x and the decoded
  // weight rounded to bfloat16, summed in an AMX-BF16 tile multiply's order;
  // y (grad_x) in x's (grad_y's) dtype.
  m.def(
      "packed_linear_bf16(Tensor x, Tensor data, Tensor scale0, Tensor scale1, Tensor aux, str grade, "
      "int[] shape, Tensor? bias) -> Tensor");
  m.def(
      "packed_linear_bf16_grad_input(Tensor grad_y, Tensor data, Tensor scale0, Tensor scale1, Tensor aux, "
      "str grade, int[] shape) -> Tensor");
}
