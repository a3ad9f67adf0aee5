"""Where torch is a CUDA build, torch_grit is built with its CUDA kernels
(setup.py) and registers them under the CUDA key, GPU or not: an import that
resolved every symbol of the .cu files and the ATen wrappers. `make
test-cuda-build` runs this against a CUDA build of torch on a machine without
a GPU; test_kernels_cuda.py and its siblings run the kernels where one is."""

import os

import pytest
import torch

import torch_grit  # noqa: F401  (loads torch_grit._C, which registers the ops)

# The ops with a device kernel; the CPU tile layout's ops are CPU-only.
CUDA_OPS = ("check", "dequantize", "pack_activations", "packed_linear", "packed_linear_exact",
            "packed_linear_grad_input", "quantize")
CPU_ONLY_OPS = ("dequantize_tiled", "packed_linear_tiled", "packed_linear_grad_input_tiled", "tile_nibbles",
                "untile_nibbles")

pytestmark = [
    pytest.mark.skipif(torch.version.cuda is None,
                       reason="torch %s is a CPU build: torch_grit builds no CUDA kernels against it"
                       % torch.__version__),
    pytest.mark.skipif(os.environ.get("GRIT_NO_CUDA") == "1", reason="GRIT_NO_CUDA=1: built without CUDA kernels"),
]


def test_every_device_op_has_a_cuda_kernel():
    missing = [op for op in CUDA_OPS if not torch._C._dispatch_has_kernel_for_dispatch_key("grit::" + op, "CUDA")]
    assert not missing, "no CUDA kernel registered for grit::%s" % ", grit::".join(missing)


def test_the_tile_layout_ops_stay_cpu_only():
    for op in CPU_ONLY_OPS:
        assert torch._C._dispatch_has_kernel_for_dispatch_key("grit::" + op, "CPU"), op
        assert not torch._C._dispatch_has_kernel_for_dispatch_key("grit::" + op, "CUDA"), op
