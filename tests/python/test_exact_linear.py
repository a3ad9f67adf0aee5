"""The exact integer mode: grit::pack_activations and grit::packed_linear_exact
(the law is in csrc/grit/exact_linear.h).

Proven here on CPU: opcheck on both ops; the same bits for 1, 2 and 3
threads and across runs, and for every CPU kernel variant; bit equality with an independent pure-Python
re-implementation (Python integers and Fractions, numpy float32/float64 for
the packing); closeness to the float packed_linear within the activation
quantisation bound; the overflow bound and the grades without an integer law
refused with the reason; bad arguments named. CPU == CUDA is in
test_kernels_cuda.py.
"""

import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from torch_grit import Grade, ops
from test_kernels_cpu import _plant_specials, _random_planes

EXACT_GRADES = ("I8S24", "MXFP4", "MXFP4_RNE")
SHAPES = ((9, 96), (17, 160))  # ragged out-features, 3 and 5 blocks of 32
# Signed int4 codes with one binary16 scale per 32: the int4-weights-with-int8-activations case. No
# reference encoder exists for it, so the tests pack its planes by hand and the core checks them.
S4_GRADE = "grit1(e=s4,k0=32,s0=binary16,esr=ratiomaxabs)"


def _planes(grade, shape, seed=0):
    w = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
    return ops.quantize(w, grade)


def _zero_planes(grade, shape):
    """Planes of the right lengths for a grade without a reference encoder."""
    return [torch.zeros(b, dtype=torch.uint8) for b in Grade.parse(grade).plane_bytes(shape[0] * shape[1])]


def _x(m, k, seed=1, dtype=torch.float32):
    return torch.randn(m, k, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _bits(t):
    return t.contiguous().view(torch.int32)


# ---------------------------------------------------------------------------
# The pure-Python re-implementation


def _pack_ref(x, block):
    x = x.numpy().astype(np.float32)
    m, k = x.shape
    xb = x.reshape(m, k // block, block)
    a = np.abs(xb).max(-1)
    s = (a / np.float32(127)).astype(np.float32)
    s[(s == 0) & (a > 0)] = np.array([1], dtype=np.uint32).view(np.float32)[0]  # 2^-149
    s[a == 0] = np.float32(1)
    q = np.rint(xb.astype(np.float64) / s.astype(np.float64)[..., None])  # half to even
    return np.clip(q, -127, 127).astype(np.int8).reshape(m, k), s


def _block_scales(grade, planes, n, k):
    """The stored block scale S per (row, block), as float64 (exact)."""
    raw = planes[1].numpy()
    if grade in ("I8S24", S4_GRADE):
        return raw.view(np.float16).astype(np.float64).reshape(n, k // 32)
    e = raw.astype(np.int64)
    s = np.where(e == 255, np.nan, np.ldexp(1.0, e - 127))
    return s.reshape(n, k // 32)


def _floorlog2(f):
    f = abs(f)
    return (f.numerator.bit_length() - 1) - (f.denominator.bit_length() - 1)


def _to_f32(v):
    """The binary32 nearest to the Fraction v, ties to even."""
    if v == 0:
        return np.float32(0)
    e = _floorlog2(v)
    lsb = max(e - 23, -149)
    mant = round(v / Fraction(2) ** lsb)  # round() of a Fraction: half to even
    val = Fraction(mant) * Fraction(2) ** lsb
    if abs(val) >= 2 ** 128:
        return np.float32(math.copysign(math.inf, v))
    return np.float32(float(val))


def _exact_ref(grade, codes, ascales, planes, shape, bias=None):
    n, k = shape
    qe, cmax = {"I8S24": (0, 128), S4_GRADE: (0, 8)}.get(grade, (-1, 12))
    bd = (32 * 128 * cmax).bit_length()
    w = ops.dequantize(planes, grade, shape).double().numpy()
    S = _block_scales(grade, planes, n, k)
    m, B = codes.shape[0], k // 32
    y = np.empty((m, n), dtype=np.float32)
    for i in range(m):
        for j in range(n):
            terms, poison = [], False
            for b in range(B):
                sa, sw = float(ascales[i, b]), float(S[j, b])
                if not (math.isfinite(sa) and math.isfinite(sw)):
                    poison = True
                    break
                P = Fraction(sa) * Fraction(sw) * Fraction(2) ** qe
                if P == 0:
                    continue
                c = [int(Fraction(float(v)) / P * Fraction(sa)) for v in w[j, 32 * b:32 * b + 32]]
                D = sum(int(a) * cv for a, cv in zip(codes[i, 32 * b:32 * b + 32], c))
                terms.append((D * P, bd + _floorlog2(P) + 1))
            if poison:
                y[i, j] = np.float32(np.nan)
                continue
            if bias is not None and float(bias[j]) != 0:
                fb = Fraction(float(bias[j]))
                terms.append((fb, _floorlog2(fb) + 1))
            if not terms:
                y[i, j] = np.float32(0)
                continue
            G = max(t for _, t in terms) - 62 + (B + 1).bit_length()
            total = sum(round(v / Fraction(2) ** G) for v, _ in terms)
            y[i, j] = _to_f32(Fraction(total) * Fraction(2) ** G)
    return torch.from_numpy(y)


# ---------------------------------------------------------------------------


@pytest.mark.parametrize("grade", EXACT_GRADES)
def test_opcheck(grade):
    shape = (9, 96)
    planes = _planes(grade, shape)
    x = _x(4, 96)
    torch.library.opcheck(torch.ops.grit.pack_activations.default, (x, 32))
    codes, scales = ops.pack_activations(x, 32)
    for bias in (None, torch.randn(9)):
        torch.library.opcheck(torch.ops.grit.packed_linear_exact.default,
                              (codes, scales, *planes, grade, list(shape), bias))


def test_pack_activations_matches_numpy():
    x = _x(7, 96) * torch.tensor([1e-3, 1.0, 1e3]).repeat_interleave(32)
    x[2, :32] = 0                      # an all-zero block: scale 1
    x[3, 32:64] = 2.5 / 127 * 127      # max 2.5: codes 127
    x[4, 64:96] = torch.tensor([2 ** -148] * 32)  # subnormal: max/127 underflows
    codes, scales = ops.pack_activations(x, 32)
    want_c, want_s = _pack_ref(x, 32)
    assert codes.dtype == torch.int8 and scales.dtype == torch.float32
    assert scales.shape == (7, 3)
    assert np.array_equal(codes.numpy(), want_c)
    assert np.array_equal(scales.numpy().view(np.int32), want_s.view(np.int32))
    assert float(scales[2, 0]) == 1.0 and int(codes[2, :32].abs().sum()) == 0
    assert scales[4, 2].view(torch.int32).item() == 1  # 2^-149


@pytest.mark.parametrize("grade", EXACT_GRADES)
@pytest.mark.parametrize("with_bias", (False, True))
def test_equals_the_python_reimplementation_bit_for_bit(grade, with_bias):
    for s, shape in enumerate(SHAPES):
        planes = _planes(grade, shape, seed=s)
        x = _x(5, shape[1], seed=10 + s)
        bias = torch.randn(shape[0], generator=torch.Generator().manual_seed(s)) if with_bias else None
        codes, scales = ops.pack_activations(x, 32)
        got = ops.packed_linear_exact(codes, scales, planes, grade, shape, bias)
        want = _exact_ref(grade, codes.numpy(), scales.numpy(), planes, shape, bias)
        assert got.dtype == torch.float32 and got.shape == (5, shape[0])
        assert torch.equal(_bits(got), _bits(want)), (grade, shape)


def test_random_planes_poison_and_range_match_the_python_reimplementation():
    # Random bytes: NaN and infinite binary16 scales (poison), subnormal
    # scales, and irregular sparse quads (one position named twice).
    for regular in (True, False):
        shape = (7, 96)
        planes = _plant_specials("I8S24", _random_planes("I8S24", shape, seed=3, regular=regular))
        codes, scales = ops.pack_activations(_x(3, 96, seed=4), 32)
        got = ops.packed_linear_exact(codes, scales, planes, "I8S24", shape)
        want = _exact_ref("I8S24", codes.numpy(), scales.numpy(), planes, shape)
        both_nan = got.isnan() & want.isnan()
        assert bool(((_bits(got) == _bits(want)) | both_nan).all())
        assert bool((got.isnan() == want.isnan()).all()) and bool(got.isnan().any())


@pytest.mark.parametrize("grade", ("I8S24", "MXFP4"))
def test_same_bits_for_any_thread_count_and_run(grade):
    shape = (203, 256)
    planes = _planes(grade, shape)
    x = _x(37, 256, seed=2)
    bias = torch.randn(203)
    previous = torch.get_num_threads()
    try:
        results = []
        for threads in (1, 2, 3, 2):
            torch.set_num_threads(threads)
            results.append(ops.packed_linear(x, planes, grade, shape, bias, exact=True))
        packs = []
        for threads in (1, 3):
            torch.set_num_threads(threads)
            packs.append(ops.pack_activations(_x(600, 256, seed=5), 32))
    finally:
        torch.set_num_threads(previous)
    for r in results[1:]:
        assert torch.equal(_bits(r), _bits(results[0]))
    assert torch.equal(packs[0][0], packs[1][0]) and torch.equal(_bits(packs[0][1]), _bits(packs[1][1]))


@pytest.mark.parametrize("grade", EXACT_GRADES)
def test_every_cpu_kernel_variant_gives_the_same_bits(grade):
    """avx512 and avx512_bf16 run 16 weight rows at once (kernels/cpu/exact_tile.h,
    with AVX-512 VNNI), scalar and avx2 one output at a time: the same bits,
    each equal to the Python re-implementation, ragged shapes and specials
    (NaN and infinite block scales, zero activation blocks) included."""
    from torch_grit import _C
    shape = (37, 160)
    if grade == "I8S24":
        planes = _plant_specials(grade, _random_planes(grade, shape, seed=4, regular=True))
    else:  # E8M0 scale codes: 255 is NaN, 0 is 2^-127
        planes = [p.clone() for p in _planes(grade, shape, seed=4)]
        planes[1][0], planes[1][7], planes[1][11] = 255, 0, 255
    x = _x(5, shape[1], seed=6)
    x[1, 32:64] = 0.0
    bias = torch.randn(shape[0], generator=torch.Generator().manual_seed(9))
    codes, scales = ops.pack_activations(x, 32)
    want = _exact_ref(grade, codes.numpy(), scales.numpy(), planes, shape, bias)
    assert torch.isnan(want).any() and torch.isfinite(want).sum() > want.numel() // 2
    previous = _C.cpu_isa()
    try:
        for isa in _C.cpu_isas_supported():
            _C._set_cpu_isa(isa)
            got = ops.packed_linear_exact(codes, scales, planes, grade, shape, bias)
            assert torch.equal(_bits(got), _bits(want)), (grade, isa)
    finally:
        _C._set_cpu_isa(previous)


@pytest.mark.parametrize("grade", ("I8S24", "MXFP4"))
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
def test_close_to_the_float_packed_linear(grade, dtype):
    """|y_exact - y_float| <= sum_t |w_t| * s_b / 2 (activation rounding,
    s_b the block's activation scale) + 2^-20 * sum_t |x_t w_t| (the float
    path's float32 sum and the exact path's final roundings)."""
    shape = (40, 160)
    planes = _planes(grade, shape)
    x = _x(8, 160, seed=7, dtype=dtype)
    y_exact = ops.packed_linear(x, planes, grade, shape, exact=True)
    y_float = ops.packed_linear(x.float(), planes, grade, shape)
    assert y_exact.dtype == torch.float32
    w = ops.dequantize(planes, grade, shape).double()
    _, scales = ops.pack_activations(x, 32)
    s = scales.double().repeat_interleave(32, dim=1)           # [m, k]
    bound = (s / 2) @ w.abs().T + 2.0 ** -20 * (x.double().abs() @ w.abs().T)
    err = (y_exact.double() - y_float.double()).abs()
    assert bool((err <= bound).all()), float((err - bound).max())
    # And the bound is not vacuous: the relative error stays small.
    assert float(err.norm() / y_float.double().norm()) < 0.02


def test_overflow_bound_is_refused_with_the_numbers():
    grade = "grit1(e=s8,k0=32768,s0=binary16,esr=ratiomaxabs)"
    shape = [1, 32768]
    codes = torch.zeros(1, 32768, dtype=torch.int8)
    scales = torch.ones(1, 1)
    planes = _zero_planes(grade, shape)
    with pytest.raises(ValueError, match=r"int64 accumulator bound fails.*"
                       r"k0\*128\*max\|code\| = 32768\*128\*128.*2\^65 > 2\^63.*k0 <= 16383"):
        ops.packed_linear_exact(codes, scales, planes, grade, shape)
    # k0 = 4096 is inside the bound (26 + 24 + 11 = 61 bits).
    ok = "grit1(e=s8,k0=4096,s0=binary16,esr=ratiomaxabs)"
    y = ops.packed_linear(torch.randn(3, 4096), _zero_planes(ok, (2, 4096)), ok, (2, 4096), exact=True)
    assert y.shape == (3, 2) and bool((y == 0).all())


@pytest.mark.parametrize("grade,reason", [
    ("Q4KS", "zero point"),
    ("NVF4", "second scale level"),
    ("NVF4_RTZ", "second scale level"),
    ("grit1(e=s8,k0=32,s0=binary32,esr=ratiomaxabs)", "not binary16 or e8m0"),
])
def test_grades_without_an_integer_law_are_refused(grade, reason):
    shape = (8, 64)
    planes = _zero_planes(grade, shape)
    with pytest.raises(ValueError, match="no exact integer law: .*%s" % reason):
        ops.packed_linear(torch.randn(2, 64), planes, grade, shape, exact=True)


def test_int4g_is_refused_with_the_reason():
    shape = (4, 64)
    planes = ops.quantize(torch.randn(shape), "INT4G32")
    with pytest.raises(ValueError, match="INT4G32 has no exact integer law here: its binary64"):
        ops.packed_linear(torch.randn(2, 64), planes, "INT4G32", shape, exact=True)


def test_bad_arguments_name_the_argument():
    shape = (9, 96)
    planes = _planes("I8S24", shape)
    codes, scales = ops.pack_activations(_x(2, 96), 32)
    with pytest.raises(TypeError, match="argument 'codes' must be int8"):
        ops.packed_linear_exact(codes.float(), scales, planes, "I8S24", shape)
    with pytest.raises(TypeError, match="argument 'scales' must be float32"):
        ops.packed_linear_exact(codes, scales.double(), planes, "I8S24", shape)
    with pytest.raises(ValueError, match=r"argument 'scales' has shape \[2, 2\].*block=32"):
        ops.packed_linear_exact(codes, scales[:, :2], planes, "I8S24", shape)
    with pytest.raises(ValueError, match="argument 'codes' has shape"):
        ops.packed_linear_exact(codes[:, :64], scales[:, :2], planes, "I8S24", shape)
    with pytest.raises(ValueError, match=r"argument 'bias' must have shape \[9\]"):
        ops.packed_linear_exact(codes, scales, planes, "I8S24", shape, torch.zeros(8))
    with pytest.raises(ValueError, match="plane"):
        ops.packed_linear_exact(codes, scales, [planes[0][:-1]] + planes[1:], "I8S24", shape)
    with pytest.raises(ValueError, match="block=5 does not divide"):
        ops.pack_activations(_x(2, 96), 5)
    with pytest.raises(ValueError, match="block' must be >= 1"):
        ops.pack_activations(_x(2, 96), 0)
    with pytest.raises(TypeError, match="argument 'x'"):
        ops.pack_activations(torch.ones(2, 96, dtype=torch.int32), 32)
    x = _x(3, 96)
    x[1, 40] = float("inf")
    with pytest.raises(ValueError, match=r"non-finite value \(inf\) at row 1, column 40"):
        ops.pack_activations(x, 32)


def test_there_is_no_gradient():
    x = _x(2, 96).requires_grad_()
    y = ops.packed_linear(x, _planes("I8S24", (9, 96)), "I8S24", (9, 96), exact=True)
    with pytest.raises(RuntimeError, match="has no gradient: the exact integer mode is for inference"):
        y.sum().backward()


def test_leading_dimensions_and_empty_batches():
    shape = (9, 96)
    planes = _planes("MXFP4", shape)
    x = _x(6, 96).reshape(2, 3, 96)
    y = ops.packed_linear(x, planes, "MXFP4", shape, exact=True)
    assert y.shape == (2, 3, 9)
    assert torch.equal(_bits(y.reshape(6, 9)), _bits(ops.packed_linear(x.reshape(6, 96), planes, "MXFP4",
                                                                       shape, exact=True)))
    assert ops.packed_linear(torch.zeros(0, 96), planes, "MXFP4", shape, exact=True).shape == (0, 9)


def _s4_planes(shape, seed=0):
    n, k = shape
    g = torch.Generator().manual_seed(seed)
    codes = torch.randint(-8, 8, (n, k), generator=g)
    nib = (codes & 0xF).to(torch.uint8).reshape(-1, 2)
    scales = (torch.rand(n * k // 32, generator=g) * 0.1 + 0.01).half()
    empty = torch.empty(0, dtype=torch.uint8)
    planes = [(nib[:, 0] | (nib[:, 1] << 4)).contiguous(), scales.view(torch.uint8).contiguous(), empty, empty]
    assert ops.check(planes, S4_GRADE, shape)
    want = (codes.double().reshape(n, -1, 32) * scales.double().reshape(n, -1, 1)).reshape(n, k)
    assert torch.equal(ops.dequantize(planes, S4_GRADE, shape, torch.float64), want)  # codes x scale, exactly
    return planes


@pytest.mark.parametrize("with_bias", (False, True))
def test_int4_weights_with_int8_activations(with_bias):
    for s, shape in enumerate(SHAPES):
        planes = _s4_planes(shape, seed=s)
        x = _x(5, shape[1], seed=20 + s)
        bias = torch.randn(shape[0], generator=torch.Generator().manual_seed(s)) if with_bias else None
        codes, scales = ops.pack_activations(x, 32)
        got = ops.packed_linear_exact(codes, scales, planes, S4_GRADE, shape, bias)
        want = _exact_ref(S4_GRADE, codes.numpy(), scales.numpy(), planes, shape, bias)
        assert torch.equal(_bits(got), _bits(want)), shape
        flt = ops.packed_linear(x, planes, S4_GRADE, shape, bias)
        assert torch.allclose(got, flt, rtol=0.02, atol=0.02 * float(flt.abs().max()))
    shape = (203, 256)
    planes, x = _s4_planes(shape, seed=7), _x(37, 256, seed=8)
    previous = torch.get_num_threads()
    try:
        results = []
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            results.append(ops.packed_linear(x, planes, S4_GRADE, shape, None, exact=True))
    finally:
        torch.set_num_threads(previous)
    assert all(torch.equal(_bits(r), _bits(results[0])) for r in results[1:])
