"""packed_linear_grad_input on CUDA (csrc/kernels/cuda/grad_input.cu): the bits of
its documented order, checked by a numpy model of that order (lane l of a warp adds
the float32 products of rows l, l+32, ... in ascending n from +0.0, then the
butterfly xor 16, 8, 4, 2, 1), for every grade with a device decoder, every
activation dtype, ragged shapes and batches, NaN and infinite scales. Planes the
kernel cannot take (I8S24 quads naming one position twice) and grades without a
device decoder give the CPU kernel's bits. Skipped only when no CUDA device is
visible."""

import numpy as np
import pytest
import torch

from torch_grit import ops
from test_kernels_cpu import SHAPES, X_BATCHES, _plant_specials, _random_planes

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device visible")

GRADES = ("MXFP4", "NVF4", "Q4KS", "I8S24", "MXFP4_RNE", "NVF4_RTZ")
DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _warp_order(gy, w):
    """The CUDA order: 32 lane sums over rows n = l mod 32, ascending, then the butterfly."""
    gy, w = gy.float().numpy(), w.numpy()
    m, n = gy.shape
    lanes = np.zeros((32, m, w.shape[1]), np.float32)
    for j in range(n):
        p = (gy[:, j:j + 1] * w[j:j + 1, :]).astype(np.float32)
        lanes[j % 32] = (lanes[j % 32] + p).astype(np.float32)
    for off in (16, 8, 4, 2, 1):
        lanes = (lanes + lanes[np.arange(32) ^ off]).astype(np.float32)
    return torch.from_numpy(lanes[0])


def _same(a, b):
    nan = a.isnan()
    bits = torch.int32 if a.dtype == torch.float32 else torch.int16
    return bool((nan == b.isnan()).all()) and torch.equal(a[~nan].view(bits), b[~nan].view(bits))


def _grad(gy, planes, grade, shape):
    return torch.ops.grit.packed_linear_grad_input(gy, *planes, grade, list(shape))


@pytest.mark.parametrize("grade", GRADES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_bits_are_the_documented_warp_order(grade, dtype):
    for i, shape in enumerate(SHAPES[grade]):
        if i == 0:
            planes = ops.quantize(torch.randn(shape, generator=torch.Generator().manual_seed(i)), grade)
        else:
            planes = _random_planes(grade, shape, seed=i)
            if i == 1:
                planes = _plant_specials(grade, planes)
        w = ops.dequantize(planes, grade, shape)
        dplanes = [p.cuda() for p in planes]
        for b, batch in enumerate(X_BATCHES):
            gy = torch.randn(*batch, shape[0], generator=torch.Generator().manual_seed(30 + b)).to(dtype)
            got = _grad(gy.cuda(), dplanes, grade, shape)
            assert got.device.type == "cuda" and got.dtype == dtype and got.shape == (*batch, shape[1])
            want = _warp_order(gy.reshape(-1, shape[0]), w).to(dtype).reshape(*batch, shape[1])
            assert _same(got.cpu(), want), (grade, dtype, shape, batch)


def test_tall_weight_and_batch_row_independence():
    shape = (1000, 512)
    planes = [p.cuda() for p in ops.quantize(torch.randn(shape), "MXFP4")]
    gy = torch.randn(9, shape[0], device="cuda")
    a = _grad(gy, planes, "MXFP4", shape)
    b = _grad(gy[4:5], planes, "MXFP4", shape)
    assert torch.equal(a[4:5].view(torch.int32), b.view(torch.int32))
    w = ops.dequantize([p.cpu() for p in planes], "MXFP4", shape)
    assert _same(a.cpu(), _warp_order(gy.cpu(), w))


def test_irregular_sparse_planes_and_grades_without_a_device_decoder_give_the_cpu_bits():
    shape = (40, 160)
    planes = _random_planes("I8S24", shape, regular=False)
    gy = torch.randn(3, shape[0])
    want = _grad(gy, planes, "I8S24", shape)
    got = _grad(gy.cuda(), [p.cuda() for p in planes], "I8S24", shape)
    assert _same(got.cpu(), want)
    grade = "grit1(e=e4m3,k0=32,s0=e8m0,esr=exp2floormaxabs)"
    shape = (24, 64)
    planes = _random_planes(grade, shape, seed=3)
    want = _grad(gy[:, :24].contiguous(), planes, grade, shape)
    got = _grad(gy[:, :24].contiguous().cuda(), [p.cuda() for p in planes], grade, shape)
    assert _same(got.cpu(), want)


def test_backward_through_packed_linear_on_cuda():
    shape = (64, 256)
    planes = [p.cuda() for p in ops.quantize(torch.randn(shape), "Q4KS")]
    x = torch.randn(5, 256, device="cuda", requires_grad=True)
    ops.packed_linear(x, planes, "Q4KS", shape).sum().backward()
    want = _grad(torch.ones(5, 64, device="cuda"), planes, "Q4KS", shape)
    assert torch.equal(x.grad.view(torch.int32), want.view(torch.int32))


def test_opcheck_and_bad_arguments():
    shape = (64, 256)
    planes = [p.cuda() for p in ops.quantize(torch.randn(shape), "MXFP4")]
    gy = torch.randn(3, 64, device="cuda", dtype=torch.bfloat16)
    torch.library.opcheck(torch.ops.grit.packed_linear_grad_input.default, (gy, *planes, "MXFP4", list(shape)))
    with pytest.raises(ValueError, match="grad_y"):
        _grad(torch.randn(3, 63, device="cuda"), planes, "MXFP4", shape)
