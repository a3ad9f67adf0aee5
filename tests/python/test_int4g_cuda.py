"""INT4G's CUDA kernels (csrc/kernels/cuda/int4g_linear_cuda.h), on the GPU. Skipped only
when no CUDA device is visible.

dequantize on CUDA returns the core's binary64 values bit for bit; packed_linear and
grad_input on CUDA form the same binary64 products but add them in their own fixed orders
(packed_linear: 32 slices of 8-column units and the adjacent-pairs tree, on the GEMV and the
GEMM path alike; grad_input: warp lanes over rows, then a butterfly), modelled here in numpy
bit for bit, within the summation bound of F.linear in float64 on the decoded weight and
bit-for-bit repeatable; bad planes are refused with the reader's own message.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from torch_grit import ops
from test_int4g_kernels_cpu import _bad_planes
from test_kernels_cuda import _slice_order

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device visible")

DEV = "cuda"
DTYPES = (torch.bfloat16, torch.float16, torch.float32)
# Odd row lengths (rows start mid-byte), groups that do not divide the row, partial warps.
CASES = ((40, 264, 32), (17, 131, 7), (33, 1000, 128), (5, 2, 1), (64, 4096, 32))
PRODUCT_ROUNDOFF = 2.0 ** -24 + 2.0 ** -53
OUT_ROUNDOFF = {torch.float32: 0.0, torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}
EMPTY = torch.empty(0, dtype=torch.uint8)


def _planes(rows, cols, group, seed=0):
    return ops.quantize(torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed)), "INT4G%d" % group)


def _cuda(planes):
    return [p.to(DEV) for p in planes]


@pytest.mark.parametrize("rows, cols, group", CASES)
def test_dequantize_is_the_cores_decode_bit_for_bit(rows, cols, group):
    grade, planes = "INT4G%d" % group, _planes(rows, cols, group)
    want = torch.ops.grit.dequantize(*planes, grade, [rows, cols], torch.float64)
    got = torch.ops.grit.dequantize(*_cuda(planes), grade, [rows, cols], torch.float64).cpu()
    assert torch.equal(got.view(torch.int64), want.view(torch.int64))
    got32 = torch.ops.grit.dequantize(*_cuda(planes), grade, [rows, cols], torch.float32).cpu()
    assert torch.equal(got32, want.float())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows, cols, group", CASES)
def test_packed_linear_is_within_the_summation_bound(dtype, rows, cols, group):
    grade, planes = "INT4G%d" % group, _planes(rows, cols, group)
    w64 = torch.ops.grit.dequantize(*planes, grade, [rows, cols], torch.float64)
    dplanes = _cuda(planes)
    for b, batch in enumerate(((1,), (2,), (3, 3), (8,), (17,))):
        x = torch.randn(*batch, cols, generator=torch.Generator().manual_seed(b)).to(dtype)
        bias = torch.randn(rows).to(dtype) if b % 2 else None
        y = torch.ops.grit.packed_linear(x.to(DEV), *dplanes, grade, [rows, cols],
                                         None if bias is None else bias.to(DEV))
        assert y.device.type == "cuda" and y.dtype == dtype and y.shape == (*batch, rows)
        ref = F.linear(x.double(), w64, None if bias is None else bias.double())
        mag = F.linear(x.double().abs(), w64.abs(), None if bias is None else bias.double().abs())
        n = cols + 1
        gamma = n * PRODUCT_ROUNDOFF / (1 - n * PRODUCT_ROUNDOFF)
        u = OUT_ROUNDOFF[dtype]
        assert ((y.cpu().double() - ref).abs() <= gamma * mag * (1 + u) + u * ref.abs()).all()
        again = torch.ops.grit.packed_linear(x.to(DEV), *dplanes, grade, [rows, cols],
                                             None if bias is None else bias.to(DEV))
        assert torch.equal(again, y)


def _linear_order(x, w64, bias):
    """packed_linear's CUDA order over 8-column units, products formed in binary64."""
    x, wt = x.float().double().numpy(), w64.numpy().T
    return _slice_order(x.shape[1], 8, lambda c: (x[:, c:c + 1] * wt[None, c, :]).astype(np.float32), bias)


def _grad_order(gy, w64):
    """grad_input's CUDA order: lane l sums rows l, l+32, ... ascending, then the butterfly."""
    gy, w = gy.float().double().numpy(), w64.numpy()
    lanes = np.zeros((32, gy.shape[0], w.shape[1]), np.float32)
    for j in range(w.shape[0]):
        lanes[j % 32] = (lanes[j % 32] + (gy[:, j:j + 1] * w[None, j, :]).astype(np.float32)).astype(np.float32)
    for off in (16, 8, 4, 2, 1):
        lanes = (lanes + lanes[np.arange(32) ^ off]).astype(np.float32)
    return torch.from_numpy(lanes[0])


def _same(a, b):
    nan = b.isnan()
    bits = torch.int32 if a.dtype == torch.float32 else torch.int16
    return bool((a.isnan() == nan).all()) and torch.equal(a[~nan].view(bits), b[~nan].view(bits))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows, cols, group", CASES)
def test_packed_linear_and_grad_input_bits_are_the_documented_orders(dtype, rows, cols, group):
    grade, planes = "INT4G%d" % group, _planes(rows, cols, group, seed=3)
    w64 = torch.ops.grit.dequantize(*planes, grade, [rows, cols], torch.float64)
    dplanes = _cuda(planes)
    for b, batch in enumerate(((1,), (3, 3), (8,), (17,), (70,))):  # GEMV <= 8 rows, GEMM above
        x = torch.randn(*batch, cols, generator=torch.Generator().manual_seed(60 + b)).to(dtype)
        bias = torch.randn(rows) if b % 2 else None  # the op takes a float32 bias for INT4G
        y = torch.ops.grit.packed_linear(x.to(DEV), *dplanes, grade, [rows, cols],
                                         None if bias is None else bias.to(DEV)).cpu()
        want = _linear_order(x.reshape(-1, cols), w64, bias).to(dtype).reshape(y.shape)
        assert _same(y, want), ("packed_linear", dtype, rows, cols, group, batch)
        gy = torch.randn(*batch, rows, generator=torch.Generator().manual_seed(70 + b)).to(dtype)
        gx = torch.ops.grit.packed_linear_grad_input(gy.to(DEV), *dplanes, grade, [rows, cols]).cpu()
        assert gx.dtype == dtype and gx.shape == (*batch, cols)
        want = _grad_order(gy.reshape(-1, rows), w64).to(dtype).reshape(gx.shape)
        assert _same(gx, want), ("grad_input", dtype, rows, cols, group, batch)


def test_nan_and_infinite_activations_give_the_canonical_nan():
    planes = _cuda(_planes(16, 64, 16))
    x = torch.randn(2, 64)
    x[0, 3] = float("nan")
    x[1, 5], x[1, 6] = float("inf"), -float("inf")
    y = torch.ops.grit.packed_linear(x.to(DEV), *planes, "INT4G16", [16, 64], None).cpu()
    want = torch.ops.grit.packed_linear(x, *[p.cpu() for p in planes], "INT4G16", [16, 64], None)
    assert torch.equal(torch.isnan(y), torch.isnan(want))
    assert (y[torch.isnan(y)].view(torch.int32) == 0x7FC00000).all()


def _first_line(exc):
    return str(exc.value).split("\n")[0]


def test_refusals_carry_the_readers_message():
    x = torch.randn(2, 64, device=DEV)
    for name, codes, scales in _bad_planes():
        with pytest.raises(ValueError) as want:
            torch.ops.grit.check(codes, scales, EMPTY, EMPTY, "INT4G16", [20, 64])
        dev = (codes.to(DEV), scales.to(DEV), EMPTY.to(DEV), EMPTY.to(DEV))
        with pytest.raises(ValueError) as got:
            torch.ops.grit.packed_linear(x, *dev, "INT4G16", [20, 64], None)
        assert _first_line(got) == _first_line(want).replace("grit::check", "grit::packed_linear"), name
        with pytest.raises(ValueError) as got:
            torch.ops.grit.dequantize(*dev, "INT4G16", [20, 64], torch.float32)
        assert _first_line(got) == _first_line(want).replace("grit::check", "grit::dequantize"), name
        with pytest.raises(ValueError) as got:
            torch.ops.grit.check(*dev, "INT4G16", [20, 64])
        assert _first_line(got) == _first_line(want), name
        with pytest.raises(ValueError) as got:
            torch.ops.grit.packed_linear_grad_input(torch.randn(2, 20, device=DEV), *dev, "INT4G16", [20, 64])
        assert _first_line(got) == _first_line(want).replace("grit::check", "grit::packed_linear_grad_input"), name
    # the padding nibble of an odd element count, and an empty batch still checks
    padded = (torch.tensor([0xC9, 0x40, 0x17], dtype=torch.uint8, device=DEV),
              torch.tensor([1.0, 1.0], dtype=torch.float64).view(torch.uint8).to(DEV), EMPTY.to(DEV), EMPTY.to(DEV))
    for xs in ((1, 5), (0, 5)):
        with pytest.raises(ValueError, match="padding and must be 0"):
            torch.ops.grit.packed_linear(torch.ones(*xs, device=DEV), *padded, "INT4G4", [1, 5], None)


def test_a_huge_scale_that_stays_finite_is_valid():
    codes, scales, s1, aux = _planes(20, 64, 16, seed=2)
    codes[5 * 32: 5 * 32 + 8] = 0x1F
    s = scales.view(torch.float64).clone()
    s[5 * 4] = 1e308
    planes = (codes, s.view(torch.uint8), s1, aux)
    x = torch.randn(3, 64)
    y = torch.ops.grit.packed_linear(x.to(DEV), *_cuda(planes), "INT4G16", [20, 64], None).cpu()
    assert not torch.isfinite(y[:, 5]).any() and torch.isfinite(y[:, :5]).all()


def test_misaligned_scale_plane_and_opcheck():
    planes = _planes(17, 40, 8)
    buf = torch.empty(planes[1].numel() + 1, dtype=torch.uint8, device=DEV)
    buf[1:] = planes[1].to(DEV)
    dev = _cuda(planes)
    x = torch.randn(2, 40, device=DEV)
    want = torch.ops.grit.packed_linear(x, *dev, "INT4G8", [17, 40], None)
    got = torch.ops.grit.packed_linear(x, dev[0], buf[1:], dev[2], dev[3], "INT4G8", [17, 40], None)
    assert torch.equal(got, want)
    torch.library.opcheck(torch.ops.grit.packed_linear.default, (x, *dev, "INT4G8", [17, 40], None))
    torch.library.opcheck(torch.ops.grit.dequantize.default, (*dev, "INT4G8", [17, 40], torch.float32))
