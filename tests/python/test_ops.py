"""The torch.ops.grit operators on CPU: opcheck on every op, numerics against
plain PyTorch and the reference decode, thread-count invariance, autograd,
error messages, and the memory bound of packed_linear."""

import functools
import itertools
import os
from fractions import Fraction

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import torch_grit
from torch_grit import ops
from fma_oracle import fma32
from torch_grit.ops import _plane_bytes_affine
from torch_grit.util.peak_memory import peak_growth

GRADES = ("MXFP4", "NVF4", "Q4KS", "I8S24")
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
SHAPE = (64, 256)           # the opcheck weight [out, in]
RAGGED = (40, 96)           # out is not a multiple of the 16-row tile; Q4KS still has whole super-blocks
X_SHAPES = ((3, 5, 256), (1, 256), (0, 256))

# Unit roundoff of the output dtype: y is computed in float32 and rounded once to x's dtype.
OUT_ROUNDOFF = {torch.float32: 0.0, torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}
F32_ROUNDOFF = 2.0 ** -24


@functools.lru_cache(maxsize=None)
def _planes(grade, shape=SHAPE, seed=0):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(shape, generator=g)
    return tuple(ops.quantize(w, grade))


def _weight(grade, planes, shape):
    return torch.ops.grit.dequantize(*planes, grade, list(shape), torch.float32)


def _rand(shape, dtype=torch.float32, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


def _assert_within_f32_bound(got, a, b_t, bias, out_dtype):
    """|got - a @ b_t.T - bias| within the float32 recursive-summation bound.

    For a sum of n rounded products added in a fixed order the error is at most
    gamma_n * sum|a_k b_k| (+ |bias|), gamma_n = n*u / (1 - n*u); a bf16/f16
    result adds one rounding to its own dtype.
    """
    n = a.shape[-1]
    gamma = n * F32_ROUNDOFF / (1 - n * F32_ROUNDOFF) + F32_ROUNDOFF
    ref = F.linear(a.double(), b_t.double(), None if bias is None else bias.double())
    mag = F.linear(a.double().abs(), b_t.double().abs(), None if bias is None else bias.double().abs())
    u_out = OUT_ROUNDOFF[out_dtype]
    bound = gamma * mag * (1 + u_out) + u_out * ref.abs()
    err = (got.double() - ref).abs()
    worst = (err - bound).max().item() if err.numel() else -1.0
    assert worst <= 0, "error exceeds the float32 summation bound by %g (max err %g)" % (worst, err.max().item())


# --------------------------------------------------------------------------- opcheck

@pytest.mark.parametrize("grade", GRADES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_opcheck_quantize(grade, dtype):
    w = _rand(SHAPE, dtype).requires_grad_(dtype == torch.float32)
    torch.library.opcheck(torch.ops.grit.quantize.default, (w, grade))


@pytest.mark.parametrize("grade,dtype", list(zip(GRADES, (torch.float32, torch.bfloat16, torch.float16, torch.float32))))
def test_opcheck_dequantize_and_check(grade, dtype):
    planes = _planes(grade)
    torch.library.opcheck(torch.ops.grit.dequantize.default, (*planes, grade, list(SHAPE), dtype))
    torch.library.opcheck(torch.ops.grit.check.default, (*planes, grade, list(SHAPE)))


# Every grade meets every dtype, every x shape and both bias settings.
PL_CASES = [
    (grade, X_SHAPES[(gi + di) % 3], dtype, (gi + di) % 2 == 0)
    for (gi, grade), (di, dtype) in itertools.product(enumerate(GRADES), enumerate(DTYPES))
]


@pytest.mark.parametrize("grade,x_shape,dtype,with_bias", PL_CASES)
def test_opcheck_packed_linear(grade, x_shape, dtype, with_bias):
    planes = _planes(grade)
    x = _rand(x_shape, dtype).requires_grad_()
    bias = _rand((SHAPE[0],), dtype, seed=2).requires_grad_() if with_bias else None
    torch.library.opcheck(torch.ops.grit.packed_linear.default, (x, *planes, grade, list(SHAPE), bias))


@pytest.mark.parametrize("grade,x_shape,dtype,with_bias", PL_CASES)
def test_opcheck_packed_linear_continue(grade, x_shape, dtype, with_bias):
    planes = _planes(grade)
    x = _rand(x_shape, dtype)
    acc = _rand((*x_shape[:-1], SHAPE[0]), seed=3)
    bias = _rand((SHAPE[0],), dtype, seed=2) if with_bias else None
    op = torch.ops.grit.packed_linear_continue.default
    torch.library.opcheck(op, (x, *planes, grade, list(SHAPE), acc, bias, True))
    torch.library.opcheck(op, (x, *planes, grade, list(SHAPE), acc, None, False))
    # From zeros and finished, the continuation is packed_linear itself.
    want = ops.packed_linear(x, planes, grade, SHAPE, bias)
    got = ops.packed_linear_continue(x, planes, grade, SHAPE, torch.zeros_like(acc), bias, finish=True)
    assert got.dtype == dtype and torch.equal(got, want)


@pytest.mark.parametrize("grade,dtype", list(zip(GRADES, (torch.bfloat16, torch.float32, torch.float16, torch.float32))))
def test_opcheck_packed_linear_grad_input(grade, dtype):
    planes = _planes(grade)
    gy = _rand((2, 3, SHAPE[0]), dtype).requires_grad_()
    torch.library.opcheck(torch.ops.grit.packed_linear_grad_input.default, (gy, *planes, grade, list(SHAPE)))


@pytest.mark.parametrize("grade", GRADES)
def test_fake_plane_bytes_formula(grade):
    # The fake quantize kernel's symbolic-size formula equals the size equations.
    g = torch_grit.Grade.parse(grade)
    k = g._native.k0 * max(1, g._native.k1)
    for rows in (0, 1, 2, 3, 7, 8, 64, 1000):
        assert _plane_bytes_affine(g, rows * k) == g.plane_bytes(rows * k)


# --------------------------------------------------------------------------- numerics

@pytest.mark.parametrize("grade", GRADES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_packed_linear_matches_f_linear(grade, dtype):
    planes = _planes(grade, RAGGED)
    w = _weight(grade, planes, RAGGED)
    for x_shape, with_bias in (((3, 5, RAGGED[1]), True), ((1, RAGGED[1]), False), ((0, RAGGED[1]), True)):
        x = _rand(x_shape, dtype)
        bias = _rand((RAGGED[0],), dtype, seed=3) if with_bias else None
        y = ops.packed_linear(x, planes, grade, RAGGED, bias)
        assert y.dtype == dtype and y.shape == (*x_shape[:-1], RAGGED[0])
        _assert_within_f32_bound(y, x, w, bias, dtype)


def _f32_round(fr):
    """A nonzero exact Fraction rounded to the nearest float32, ties to even."""
    c = np.float32(float(fr))
    cands = (np.nextafter(c, np.float32(-np.inf)), c, np.nextafter(c, np.float32(np.inf)))
    def key(v):
        even = int(np.array([v], dtype=np.float32).view(np.uint32)[0]) & 1
        return (abs(Fraction(float(v)) - fr), even)
    return min(cands, key=key)


def _fma32(a, b, c):
    """fma(a, b, c) in float32 with one rounding, computed exactly."""
    a, b, c = np.float32(a), np.float32(b), np.float32(c)
    if not (np.isfinite(a) and np.isfinite(b) and np.isfinite(c)):
        return np.float32(np.float64(a) * np.float64(b) + np.float64(c))
    if a == 0 or b == 0:  # c + (+-0): the sum of zeros is -0 only if both are
        if c != 0:
            return c
        neg = (np.signbit(a) != np.signbit(b)) and np.signbit(c)
        return np.float32(-0.0) if neg else np.float32(0.0)
    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    return np.float32(0.0) if exact == 0 else _f32_round(exact)


def _law_oracle(grade, planes, shape, x, bias):
    """csrc/grit/linear_law.h written again in Python, on the core's factors."""
    n, k = shape
    g = torch_grit.Grade.parse(grade)
    k0 = int(g._native.k0)
    e, S = torch_grit.contract.codec.decode_factors(grade, planes, n * k)
    e, S = e.reshape(n, k), S.reshape(n, k // k0)
    # The factors are the decode: float32(S*e) is the decoded weight.
    w = torch.ops.grit.dequantize(*planes, grade, list(shape), torch.float32).numpy()
    assert np.array_equal((S.repeat(k0, axis=1) * e).astype(np.float32), w)
    y = np.zeros((x.shape[0], n), dtype=np.float32)
    for i in range(x.shape[0]):
        for j in range(n):
            acc = np.float32(0.0)
            for gi in range(k // k0):
                P = np.float32(0.0)
                for col in range(gi * k0, (gi + 1) * k0):
                    P = _fma32(e[j, col], x[i, col], P)
                acc = _fma32(S[j, gi], P, acc)
            y[i, j] = acc if bias is None else np.float32(acc + bias[j])
    return y


@pytest.mark.parametrize("grade", GRADES)
@pytest.mark.parametrize("dtype", (torch.float32, torch.float16))
def test_packed_linear_follows_the_law_bit_for_bit(grade, dtype):
    # The law the kernels must match bit for bit (csrc/grit/linear_law.h),
    # recomputed here with exact FMAs: per k0-group one FMA chain over e in
    # ascending columns (element values where the group factors, else
    # decoded weights), the group's S applied once, bias last.
    # grad_x keeps its own law: fused multiply-adds into +0.0 in ascending n.
    shape = RAGGED
    planes = _planes(grade, shape)
    w = _weight(grade, planes, shape).numpy()
    x = _rand((3, shape[1]), dtype)
    bias = _rand((shape[0],), dtype, seed=10)
    want = torch.from_numpy(_law_oracle(grade, planes, shape, x.float().numpy(),
                                        bias.float().numpy())).to(dtype)
    got = ops.packed_linear(x, planes, grade, shape, bias)
    view = torch.int16 if dtype != torch.float32 else torch.int32
    assert torch.equal(got.view(view), want.view(view))

    gy = _rand((3, shape[0]), dtype, seed=11)
    gyf = gy.float().numpy()
    acc = np.zeros((3, shape[1]), dtype=np.float32)
    for n in range(shape[0]):
        acc = fma32(gyf[:, n:n + 1], w[None, n, :].astype(np.float32), acc)
    got = torch.ops.grit.packed_linear_grad_input(gy, *planes, grade, list(shape))
    assert torch.equal(got, torch.from_numpy(acc).to(dtype))


@pytest.mark.parametrize("grade", GRADES)
def test_results_do_not_depend_on_thread_count(grade):
    planes = _planes(grade, SHAPE)
    x = _rand((33, SHAPE[1]))
    bias = _rand((SHAPE[0],), seed=4)
    gy = _rand((33, SHAPE[0]), seed=5)
    before = torch.get_num_threads()
    results = []
    try:
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            results.append((ops.packed_linear(x, planes, grade, SHAPE, bias),
                            torch.ops.grit.packed_linear_grad_input(gy, *planes, grade, list(SHAPE)),
                            ops.dequantize(planes, grade, SHAPE)))
    finally:
        torch.set_num_threads(before)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert torch.equal(a.view(torch.int32), b.view(torch.int32))


def _bits(t):
    return t.contiguous().view(torch.int32).numpy()


@pytest.mark.parametrize("grade", GRADES)
def test_dequantize_is_the_reference_decode(grade):
    planes = _planes(grade, RAGGED)
    numel = RAGGED[0] * RAGGED[1]
    ref = torch_grit.decode_planes(grade, [p.numpy() for p in planes], numel).view(np.int32)
    got = ops.dequantize(planes, grade, RAGGED)
    assert got.shape == RAGGED and got.dtype == torch.float32
    np.testing.assert_array_equal(_bits(got).reshape(-1), ref)
    # Other dtypes are the float32 values cast once.
    assert torch.equal(ops.dequantize(planes, grade, RAGGED, torch.bfloat16), got.to(torch.bfloat16))


def test_dequantize_takes_any_rank():
    planes = _planes("I8S24")
    flat = ops.dequantize(planes, "I8S24", SHAPE)
    assert torch.equal(ops.dequantize(planes, "I8S24", (4, 16, SHAPE[1])), flat.reshape(4, 16, SHAPE[1]))


@pytest.mark.parametrize("grade", ("NVF4", "I8S24"))
@pytest.mark.parametrize("shape", ((0, 256), (64, 0)))
def test_empty_weights(grade, shape):
    # NVF4 keeps its per-tensor scale even with no elements.
    planes = ops.quantize(torch.zeros(shape), grade)
    assert [p.numel() for p in planes] == torch_grit.Grade.parse(grade).plane_bytes(0)
    x = _rand((3, shape[1]))
    bias = _rand((shape[0],), seed=12)
    assert torch.equal(ops.packed_linear(x, planes, grade, shape, bias), bias.expand(3, shape[0]))
    gx = torch.ops.grit.packed_linear_grad_input(_rand((3, shape[0])), *planes, grade, list(shape))
    assert torch.equal(gx, torch.zeros(3, shape[1]))


def test_nan_scale_decodes_to_nan_and_propagates():
    grade = "MXFP4"
    data, scale0, scale1, aux = (p.clone() for p in _planes(grade, SHAPE))
    scale0[3] = 0xFF            # e8m0 NaN: group 3 is row 0, values 96..127
    scale0[8 * 5 + 1] = 0xFF    # row 5, values 32..63
    planes = (data, scale0, scale1, aux)
    numel = SHAPE[0] * SHAPE[1]
    ref = torch_grit.decode_planes(grade, [p.numpy() for p in planes], numel).view(np.int32)
    got = ops.dequantize(planes, grade, SHAPE)
    np.testing.assert_array_equal(_bits(got).reshape(-1), ref)
    assert got[0, 96:128].isnan().all() and got[5, 32:64].isnan().all()
    assert got.isnan().sum() == 64
    assert (_bits(got[got.isnan()]) == 0x7FC00000).all()  # the canonical NaN

    x = _rand((4, SHAPE[1]))
    y = ops.packed_linear(x, planes, grade, SHAPE)
    assert y[:, 0].isnan().all() and y[:, 5].isnan().all()
    finite = [j for j in range(SHAPE[0]) if j not in (0, 5)]
    assert torch.isfinite(y[:, finite]).all()
    w = got.clone()
    w[[0, 5]] = 0
    _assert_within_f32_bound(y[:, finite], x, w[finite], None, torch.float32)


# --------------------------------------------------------------------------- autograd

@pytest.mark.parametrize("grade", GRADES)
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
def test_gradients_match_f_linear(grade, dtype):
    planes = _planes(grade, RAGGED)
    w = _weight(grade, planes, RAGGED)
    x = _rand((2, 3, RAGGED[1]), dtype).requires_grad_()
    bias = _rand((RAGGED[0],), dtype, seed=6).requires_grad_()
    gy = _rand((2, 3, RAGGED[0]), dtype, seed=7)
    ops.packed_linear(x, planes, grade, RAGGED, bias).backward(gy)
    assert x.grad.dtype == dtype and bias.grad.dtype == dtype
    # grad_x = gy @ W, reduced over out-features in float32.
    _assert_within_f32_bound(x.grad.reshape(-1, RAGGED[1]), gy.reshape(-1, RAGGED[0]), w.t(), None, dtype)
    # Against autograd of F.linear with the dequantized weight (float32 math).
    x2 = x.detach().float().requires_grad_()
    b2 = bias.detach().float().requires_grad_()
    F.linear(x2, w, b2).backward(gy.float())
    tol = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2)}[dtype]
    torch.testing.assert_close(x.grad.float(), x2.grad, **tol)
    torch.testing.assert_close(bias.grad.float(), b2.grad, **tol)


def test_planes_get_no_gradient_and_double_backward_works():
    grade = "NVF4"
    planes = _planes(grade, RAGGED)
    w = _weight(grade, planes, RAGGED)
    x = _rand((4, RAGGED[1])).requires_grad_()
    gy = _rand((4, RAGGED[0]), seed=8).requires_grad_()
    y = ops.packed_linear(x, planes, grade, RAGGED)
    (gx,) = torch.autograd.grad(y, x, gy, create_graph=True)
    v = _rand((4, RAGGED[1]), seed=9)
    (ggy,) = torch.autograd.grad(gx, gy, v)   # d(gy @ W)/d gy applied to v = v @ W.T
    _assert_within_f32_bound(ggy, v, w, None, torch.float32)


def test_gradient_to_bias_alone_and_no_graph_without_one():
    grade = "MXFP4"
    planes = _planes(grade, RAGGED)
    x = _rand((3, RAGGED[1]))
    bias = _rand((RAGGED[0],), torch.bfloat16, seed=3).requires_grad_()
    gy = _rand((3, RAGGED[0]), seed=4)
    y = ops.packed_linear(x, planes, grade, RAGGED, bias)
    assert y.grad_fn is not None
    y.backward(gy)
    assert bias.grad.dtype == torch.bfloat16
    torch.testing.assert_close(bias.grad, gy.sum(0, dtype=torch.float32).to(torch.bfloat16))
    # Nothing wants a gradient: the backend's own result, no graph node, same bits.
    with torch.no_grad():
        y_ng = ops.packed_linear(x, planes, grade, RAGGED, bias)
    y_frozen = ops.packed_linear(x, planes, grade, RAGGED, bias.detach())
    assert y_ng.grad_fn is None and not y_ng.requires_grad and y_frozen.grad_fn is None
    assert torch.equal(y_ng, y.detach()) and torch.equal(y_frozen, y.detach())


# --------------------------------------------------------------------------- errors
# Bad arguments raise TypeError (a dtype) or ValueError (anything else),
# naming the op, the argument, what was expected and what was found.

def test_error_wrong_x_dtype():
    planes = _planes("MXFP4")
    with pytest.raises(TypeError, match=r"argument 'x' must be float32, bfloat16 or float16, found Double"):
        ops.packed_linear(torch.zeros(2, 256, dtype=torch.float64), planes, "MXFP4", SHAPE)


def test_error_wrong_in_features():
    planes = _planes("MXFP4")
    with pytest.raises(ValueError, match=r"'x' has 128 features .* shape \[64, 256\] has 256 in-features"):
        ops.packed_linear(torch.zeros(2, 128), planes, "MXFP4", SHAPE)


def test_error_grade_does_not_parse():
    planes = _planes("MXFP4")
    bad = "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs,color=blue)"
    with pytest.raises(ValueError, match=r"argument 'grade' \(.*color=blue.*\) is not a grade: .*color"):
        ops.packed_linear(torch.zeros(2, 256), planes, bad, SHAPE)
    with pytest.raises(ValueError, match="is not a grade"):
        ops.check(planes, "NOT_A_GRADE", SHAPE)


@pytest.mark.parametrize("grade", GRADES)
def test_error_plane_one_byte_short(grade):
    planes = list(_planes(grade))
    i = 1  # scale0: present in every reference grade
    planes[i] = planes[i][:-1]
    want = len(_planes(grade)[i])
    msg = r"SizeMismatch: plane 1 \(scale0\): expected %d bytes, found %d" % (want, want - 1)
    with pytest.raises(ValueError, match=msg):
        ops.check(planes, grade, SHAPE)
    with pytest.raises(ValueError, match="grit::packed_linear: planes do not match .*" + msg):
        ops.packed_linear(torch.zeros(1, 256), planes, grade, SHAPE)
    with pytest.raises(ValueError, match="grit::dequantize: .*" + msg):
        ops.dequantize(planes, grade, SHAPE)


def test_error_other_arguments():
    planes = list(_planes("MXFP4"))
    with pytest.raises(TypeError, match=r"plane 'data' must be a uint8 tensor of bytes, found Int"):
        ops.check([planes[0].view(torch.int32)] + planes[1:], "MXFP4", SHAPE)
    with pytest.raises(ValueError, match=r"plane 'data' must be 1-D, found 2 dimensions"):
        ops.check([planes[0].view(64, -1)] + planes[1:], "MXFP4", SHAPE)
    with pytest.raises(ValueError, match=r"shape\[1\] must be a multiple of 32"):
        ops.quantize(torch.zeros(4, 100), "MXFP4")
    with pytest.raises(ValueError, match=r"'w' must be a 2-D weight \[out, in\], found 3 dimensions"):
        ops.quantize(torch.zeros(2, 4, 32), "MXFP4")
    with pytest.raises(ValueError, match=r"'bias' must have shape \[64\] .*found \[63\]"):
        ops.packed_linear(torch.zeros(1, 256), planes, "MXFP4", SHAPE, torch.zeros(63))
    with pytest.raises(TypeError, match=r"'dtype' must be a floating dtype, found Int"):
        ops.dequantize(planes, "MXFP4", SHAPE, torch.int32)


def test_reference_names_and_canonical_strings_agree():
    planes = _planes("NVF4")
    canonical = torch_grit.Grade.NVF4.canonical
    x = _rand((2, 256))
    a = ops.packed_linear(x, planes, "GRADE_NVF4", SHAPE)
    b = ops.packed_linear(x, planes, canonical, SHAPE)
    c = ops.packed_linear(x, planes, torch_grit.Grade.NVF4, SHAPE)
    assert torch.equal(a, b) and torch.equal(a, c)


# --------------------------------------------------------------------------- memory

@pytest.mark.skipif(not os.access("/proc/self/clear_refs", os.W_OK), reason="needs Linux /proc/self/clear_refs")
def test_packed_linear_does_not_materialise_the_weight():
    n = k = 4096
    full = n * k * 4  # the dequantized float32 weight: 64 MiB
    g = torch.Generator().manual_seed(0)
    data = torch.randint(0, 256, (n * k // 2,), dtype=torch.uint8, generator=g)
    scale0 = torch.randint(120, 130, (n * k // 32,), dtype=torch.uint8, generator=g)
    empty = torch.empty(0, dtype=torch.uint8)
    planes = (data, scale0, empty, empty)
    x = _rand((4, k))
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        ops.packed_linear(x[:1], planes, "MXFP4", (n, k))  # warm up allocator and threads
        linear = peak_growth(lambda: ops.packed_linear(x, planes, "MXFP4", (n, k)))[1]
        # The measurement sees a full decode when there is one.
        decoded = peak_growth(lambda: ops.dequantize(planes, "MXFP4", (n, k)))[1]
    finally:
        torch.set_num_threads(before)
    assert decoded >= 0.9 * full, decoded
    assert linear < full / 16, "packed_linear grew peak RSS by %d bytes" % linear
