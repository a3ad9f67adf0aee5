"""grit::quantize on CUDA (csrc/kernels/cuda/quantize.cu, int4g_quantize.cu): the planes are the
CPU op's bytes (which test_quantize_op_cpu.py holds equal to the core's
encoder) for every grade family and INT4G, dtype, NaN/Inf/zero/huge rows and an empty
weight; a Q4KS tensor the core refuses raises the core's message; opcheck.
Skipped only when no CUDA device is visible."""

import pytest
import torch

from test_quantize_op_cpu import GRADES, weight

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device visible")


def _bytes(planes):
    return [p.cpu().numpy().tobytes() for p in planes]


@pytest.mark.parametrize("grade", GRADES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_planes_are_the_cpu_ops_bytes(grade, dtype):
    for rows, cols, seed in ((96, 1024, 1), (8, 256, 2), (300, 512, 3)):
        w = weight(rows, cols, seed, dtype)
        got = torch.ops.grit.quantize(w.cuda(), grade)
        assert all(p.device.type == "cuda" and p.dtype == torch.uint8 for p in got)
        assert _bytes(got) == _bytes(torch.ops.grit.quantize(w, grade)), (grade, dtype, rows, cols)


def test_empty_weight_and_random_bits():
    assert _bytes(torch.ops.grit.quantize(torch.empty(0, 64, device="cuda"), "NVF4")) == _bytes(
        torch.ops.grit.quantize(torch.empty(0, 64), "NVF4"))
    bits = torch.randint(-2**31, 2**31 - 1, (64, 512), generator=torch.Generator().manual_seed(5), dtype=torch.int64)
    w = bits.to(torch.int32).view(torch.float32)
    for grade in GRADES:
        assert _bytes(torch.ops.grit.quantize(w.cuda(), grade)) == _bytes(torch.ops.grit.quantize(w, grade)), grade


def test_a_q4ks_tensor_the_core_refuses_raises_its_message():
    w = torch.full((2, 256), 3.0e38)
    w[1, 0] = -3.0e38
    with pytest.raises(ValueError) as cpu:
        torch.ops.grit.quantize(w, "Q4KS")
    with pytest.raises(ValueError) as gpu:
        torch.ops.grit.quantize(w.cuda(), "Q4KS")
    assert str(gpu.value) == str(cpu.value)


def test_bad_arguments_raise_before_any_launch():
    with pytest.raises(ValueError, match="multiple of 32"):
        torch.ops.grit.quantize(torch.randn(4, 48, device="cuda"), "MXFP4")
    with pytest.raises(TypeError):
        torch.ops.grit.quantize(torch.randn(4, 64, device="cuda").to(torch.int32), "MXFP4")


def test_opcheck():
    torch.library.opcheck(torch.ops.grit.quantize.default, (torch.randn(16, 256, device="cuda"), "Q4KS"))


@pytest.mark.parametrize("shape,group", [((301, 257), 32), ((64, 1000), 7), ((33, 9), 4), ((1, 1), 1)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_int4g_planes_are_the_cpu_ops_bytes(shape, group, dtype):
    w = torch.randn(shape, generator=torch.Generator().manual_seed(shape[0])).to(dtype)
    w[0, 0] = 0.0
    grade = "INT4G%d" % group
    got = torch.ops.grit.quantize(w.cuda(), grade)
    assert all(p.device.type == "cuda" for p in got)
    assert _bytes(got) == _bytes(torch.ops.grit.quantize(w, grade))


def test_int4g_refusal_is_the_cpu_message():
    w = torch.randn(400, 33)
    w[250, 30] = float("inf")
    with pytest.raises(ValueError) as cpu:
        torch.ops.grit.quantize(w, "INT4G8")
    with pytest.raises(ValueError) as gpu:
        torch.ops.grit.quantize(w.cuda(), "INT4G8")
    assert str(gpu.value) == str(cpu.value)
