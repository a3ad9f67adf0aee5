"""The CUDA kernels of packed_linear and dequantize (csrc/kernels/cuda), on
the GPU. Skipped only when no CUDA device is visible (that the kernels are
registered is test_cuda_registered.py's, GPU or not).

dequantize on CUDA returns the reference decode's bits (NaN and infinite
scales included); packed_linear on CUDA stays within the float32 summation
bound of F.linear in float64 on the decoded weight, returns the bits of its
documented order (csrc/kernels/cuda/packed_linear_cuda.h: 32 slices of units,
the adjacent-pairs tree; not the CPU's order) on the GEMV and the GEMM path
alike, modelled here in numpy, and is bit-for-bit repeatable, on any stream.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from torch_grit import ops
from test_kernels_cpu import (SHAPES, X_BATCHES, _assert_within_bound, _plant_specials, _random_planes,
                              _reference_weight)

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device visible")

GRADES = ("MXFP4", "NVF4", "Q4KS", "I8S24", "MXFP4_RNE", "NVF4_RTZ")
DTYPES = (torch.bfloat16, torch.float16, torch.float32)
DEV = "cuda"


def _cuda(planes):
    return [p.to(DEV) for p in planes]


@pytest.mark.parametrize("grade", GRADES)
def test_dequantize_is_the_reference_decode_bit_for_bit(grade):
    for i, shape in enumerate(SHAPES[grade]):
        planes = _random_planes(grade, shape, seed=i)
        if i == 1:
            planes = _plant_specials(grade, planes)
        want = ops.dequantize(planes, grade, shape)
        got = ops.dequantize(_cuda(planes), grade, shape).cpu()
        bad = (got.view(torch.int32) != want.view(torch.int32)).nonzero()
        assert bad.numel() == 0, "%s %s: first differing value at %s" % (grade, shape, bad[0].tolist())


@pytest.mark.parametrize("grade", ("MXFP4", "NVF4", "Q4KS", "I8S24"))
@pytest.mark.parametrize("dtype", DTYPES)
def test_packed_linear_is_within_the_float32_bound(grade, dtype):
    for i, shape in enumerate(SHAPES[grade]):
        planes = ops.quantize(torch.randn(shape, generator=torch.Generator().manual_seed(i)), grade)
        w = _reference_weight(grade, planes, shape)
        dplanes = _cuda(planes)
        for b, batch in enumerate(X_BATCHES):
            x = torch.randn(*batch, shape[1], generator=torch.Generator().manual_seed(10 + b)).to(dtype)
            bias = torch.randn(shape[0]).to(dtype) if b % 2 else None
            y = ops.packed_linear(x.to(DEV), dplanes, grade, shape, None if bias is None else bias.to(DEV))
            assert y.device.type == "cuda" and y.dtype == dtype and y.shape == (*batch, shape[0])
            _assert_within_bound(y.cpu(), x.float(), w, None if bias is None else bias.float(), dtype)


def _slice_order(k, unit, product, bias):
    """The CUDA packed_linear order in numpy: the columns' `unit`-wide units cut into 32
    slices, each slice summing product(c) (a float32 [m, n] array) in ascending c from +0.0;
    the 32 slice sums meet in the adjacent-pairs tree; the bias last."""
    units = (k + unit - 1) // unit
    leaves = []
    for l in range(32):
        s = np.float32(0.0)
        for c in range(unit * (units * l // 32), min(k, unit * (units * (l + 1) // 32))):
            s = (s + product(c)).astype(np.float32)
        leaves.append(s)
    while len(leaves) > 1:
        leaves = [(leaves[i] + leaves[i + 1]).astype(np.float32) for i in range(0, len(leaves), 2)]
    out = leaves[0]
    if bias is not None:
        out = (out + bias.float().numpy()[None, :]).astype(np.float32)
    return torch.from_numpy(out)


def _cuda_order(x, w, bias):
    x, w = x.float().numpy(), w.numpy()
    return _slice_order(x.shape[1], 32, lambda c: (x[:, c:c + 1] * w[None, :, c]).astype(np.float32), bias)


# Rows long enough that every slice holds units (U >= 32), with a ragged last slice.
LONG = {"MXFP4": (20, 1056), "NVF4": (20, 1040), "Q4KS": (12, 2304), "I8S24": (20, 1056)}


@pytest.mark.parametrize("grade", ("MXFP4", "NVF4", "Q4KS", "I8S24"))
@pytest.mark.parametrize("dtype", DTYPES)
def test_packed_linear_bits_are_the_documented_order(grade, dtype):
    for i, shape in enumerate(SHAPES[grade] + (LONG[grade],)):
        planes = _random_planes(grade, shape, seed=40 + i)
        if i == 1:
            planes = _plant_specials(grade, planes)
        w = _reference_weight(grade, planes, shape)
        dplanes = _cuda(planes)
        for b, batch in enumerate(X_BATCHES + ((70,),)):  # GEMV (<= 8 rows) and GEMM (more, ragged tiles)
            x = torch.randn(*batch, shape[1], generator=torch.Generator().manual_seed(50 + b)).to(dtype)
            bias = torch.randn(shape[0]).to(dtype) if b % 2 else None
            got = ops.packed_linear(x.to(DEV), dplanes, grade, shape, None if bias is None else bias.to(DEV)).cpu()
            want = _cuda_order(x.reshape(-1, shape[1]), w, bias).to(dtype).reshape(got.shape)
            nan = want.isnan()
            bits = torch.int32 if dtype == torch.float32 else torch.int16
            assert bool((got.isnan() == nan).all()), (grade, dtype, shape, batch)
            assert torch.equal(got[~nan].view(bits), want[~nan].view(bits)), (grade, dtype, shape, batch)


@pytest.mark.parametrize("grade", ("MXFP4", "NVF4", "Q4KS", "I8S24"))
def test_non_finite_weights_give_nan_where_the_reference_does(grade):
    shape = SHAPES[grade][1]
    planes = _plant_specials(grade, _random_planes(grade, shape, seed=5))
    # Small activations: no finite sum comes near the float32 range, so which
    # outputs are NaN or infinite does not depend on the summation order.
    # The CUDA kernel sums decoded weights, so its reference is F.linear on
    # them (the CPU law applies each group's scale once, and an infinite
    # scale there gives inf where a decoded weight S*0 is NaN).
    x = torch.rand(9, shape[1]) * 2e-3 - 1e-3
    want = F.linear(x.double(), _reference_weight(grade, planes, shape).double())
    got = ops.packed_linear(x.to(DEV), _cuda(planes), grade, shape).cpu()
    assert bool((got.isnan() == want.isnan()).all())
    assert bool((got.isinf() == want.isinf()).all())


@pytest.mark.parametrize("grade", ("MXFP4", "Q4KS", "I8S24"))
def test_results_are_repeatable_on_any_stream(grade):
    shape = (1000, 2048)
    planes = _cuda(ops.quantize(torch.randn(shape), grade))
    x = torch.randn(33, shape[1], device=DEV, dtype=torch.bfloat16)
    a = ops.packed_linear(x, planes, grade, shape)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        b = ops.packed_linear(x, planes, grade, shape)
    s.synchronize()
    assert torch.equal(a.view(torch.int16), b.view(torch.int16))
    # The order depends on k only: one batch row alone gives the same bits.
    c = ops.packed_linear(x[5:6], planes, grade, shape)
    assert torch.equal(a[5:6].view(torch.int16), c.view(torch.int16))


def test_sparse_quads_naming_one_position_twice_take_the_exact_path():
    shape = (40, 160)
    planes = _random_planes("I8S24", shape, regular=False)
    w = _reference_weight("I8S24", planes, shape)
    got = ops.dequantize(_cuda(planes), "I8S24", shape).cpu()
    assert torch.equal(got.view(torch.int32), w.view(torch.int32))
    x = torch.randn(3, shape[1])
    y = ops.packed_linear(x.to(DEV), _cuda(planes), "I8S24", shape).cpu()
    _assert_within_bound(y, x, w, None, torch.float32)


def test_opcheck_on_cuda():
    shape = (64, 256)
    planes = _cuda(ops.quantize(torch.randn(shape), "MXFP4"))
    x = torch.randn(3, 256, device=DEV, dtype=torch.bfloat16)
    torch.library.opcheck(torch.ops.grit.packed_linear.default, (x, *planes, "MXFP4", list(shape), None))
    torch.library.opcheck(torch.ops.grit.dequantize.default, (*planes, "MXFP4", list(shape), torch.float32))


# The exact integer mode (csrc/grit/exact_linear.h): the CUDA kernels run the
# same integer and IEEE steps as the CPU op, so the bits are equal.


@pytest.mark.parametrize("grade", ("I8S24", "MXFP4", "MXFP4_RNE"))
def test_exact_mode_cpu_equals_cuda_bit_for_bit(grade):
    for i, shape in enumerate(SHAPES[grade]):
        # Random planes (NaN, infinite, subnormal and huge scales; irregular
        # sparse quads for i == 2) and quantized ones; ragged batches.
        if i == 0:
            planes = ops.quantize(torch.randn(shape, generator=torch.Generator().manual_seed(i)), grade)
        else:
            planes = _plant_specials(grade, _random_planes(grade, shape, seed=i, regular=i != 2))
        for b, batch in enumerate(X_BATCHES):
            x = torch.randn(*batch, shape[1], generator=torch.Generator().manual_seed(20 + b))
            x[..., :32] *= 1e-40  # subnormal activations and scales
            bias = torch.randn(shape[0]) if b % 2 else None
            codes, scales = ops.pack_activations(x, 32)
            dcodes, dscales = ops.pack_activations(x.to(DEV), 32)
            assert torch.equal(codes, dcodes.cpu())
            assert torch.equal(scales.view(torch.int32), dscales.cpu().view(torch.int32))
            want = ops.packed_linear_exact(codes, scales, planes, grade, shape, bias)
            got = ops.packed_linear_exact(dcodes, dscales, _cuda(planes), grade, shape,
                                          None if bias is None else bias.to(DEV))
            assert got.device.type == "cuda" and got.dtype == torch.float32
            bad = (got.cpu().view(torch.int32) != want.view(torch.int32)).nonzero()
            assert bad.numel() == 0, "%s %s batch %s: first differing output at %s" % (
                grade, shape, batch, bad[0].tolist())
            y = ops.packed_linear(x.to(DEV), _cuda(planes), grade, shape,
                                  None if bias is None else bias.to(DEV), exact=True)
            assert torch.equal(y.cpu().view(torch.int32), want.view(torch.int32))


def test_exact_mode_opcheck_and_refusals_on_cuda():
    shape = (40, 160)
    planes = _cuda(ops.quantize(torch.randn(shape), "I8S24"))
    x = torch.randn(3, 160, device=DEV)
    torch.library.opcheck(torch.ops.grit.pack_activations.default, (x, 32))
    codes, scales = ops.pack_activations(x, 32)
    torch.library.opcheck(torch.ops.grit.packed_linear_exact.default,
                          (codes, scales, *planes, "I8S24", list(shape), None))
    x[1, 7] = float("nan")
    with pytest.raises(ValueError, match="non-finite value"):
        ops.pack_activations(x, 32)
    q = _cuda(ops.quantize(torch.randn(shape), "Q4KS"))
    with pytest.raises(ValueError, match="no exact integer law"):
        ops.packed_linear_exact(codes, scales, q, "Q4KS", shape)
