"""The s8 activation law: grit::packed_linear_s8 (the law is csrc/grit/s8_linear.h).

Proven here on CPU: bit equality with an independent Python re-implementation
(numpy for the packing and the integer block sums, exact Fractions for each
FMA's single rounding) on every grade family the law takes (e2m1 with e8m0
and e4m3 x binary32 scales, u4 with Q4KS's two-level offsets, s8 2:4 sparse,
u4/u8 with integer zero points, s4/s8 groups, a per-channel group wider than
the activation block), ragged shapes, random plane bytes (NaN and infinite
scales included), every CPU kernel variant, 1 vs 2 threads, a row alone vs
inside a batch; the AMX kernel forced on against the same reading and
against the VNNI kernel, beside torch's own AMX GEMM, and its environment
switch; the terms it reads equal the reference decode; opcheck;
closeness to the float product of the packed activations; the
straight-through gradient; the refusals named.
"""

import os
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from torch_grit import Grade, _C, ops
from torch_grit.contract.codec import decode_planes, decode_terms, s8_law
from test_exact_linear import _pack_ref

GRADES = {  # name -> k0 (k is a few groups of it)
    "MXFP4": 32, "NVF4": 16, "Q4KS": 32, "I8S24": 32, "U4Z_G128": 128, "U8Z_G32": 32,
    "Q8_0": 32, "S4_G64": 64, "S8_G128": 128,
}
CHANNEL = "grit1(e=s8,k0=384,s0=binary16,esr=ratiomaxabs)"  # one group per row, blocks of 128


def _canon(name):
    return Grade(name).canonical if not name.startswith("grit1(") else name


def _shape(name):
    if name == CHANNEL:
        return (17, 384)
    if name == "Q4KS":
        return (17, 256)  # whole super-blocks of 8 groups
    k0 = GRADES[name]
    return (17, k0 * max(2, 96 // k0))


def _planes(name, shape, seed=0):
    w = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
    return ops.quantize(w, _canon(name))


def _random_planes(name, shape, seed=0):
    """Every byte at random (NaN and infinite scales occur); I8S24's metadata kept regular."""
    g = torch.Generator().manual_seed(seed)
    grade = Grade.parse(_canon(name))
    planes = [torch.randint(0, 256, (b,), dtype=torch.uint8, generator=g)
              for b in grade.plane_bytes(shape[0] * shape[1])]
    if name == "I8S24":
        planes[3] = _planes(name, shape, seed)[3]
    return planes


def _bits(t):
    return t.contiguous().view(torch.int32)


# ---------------------------------------------------------------------------
# The re-implementation


def _f32(v):
    """The binary32 nearest a Fraction, ties to even, subnormals and overflow included."""
    if v == 0:
        return np.float32(0.0)
    sign, a = (-1 if v < 0 else 1), abs(v)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    ulp = Fraction(2) ** (max(e, -126) - 23)
    q, r = divmod(a, ulp)
    if r * 2 > ulp or (r * 2 == ulp and q % 2 == 1):
        q += 1
    out = q * ulp
    if out >= Fraction(2) ** 128:
        return np.float32(sign * np.inf)
    return np.float32(sign * float(out))  # exact: out has at most 24 significant bits


def _fma(a, b, c):
    a, b, c = np.float32(a), np.float32(b), np.float32(c)
    if not (np.isfinite(a) and np.isfinite(b) and np.isfinite(c)):
        with np.errstate(all="ignore"):
            return np.float32(np.float64(a) * np.float64(b) + np.float64(c))
    return _f32(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c)))


def _reference(name, x, planes, shape, bias=None):
    grade = _canon(name)
    law = s8_law(grade)
    n, k = shape
    kb, k0, qe = law["kb"], law["k0"], law["qe"]
    codes, sa = _pack_ref(x.float(), kb)
    e, S, z, Z = decode_terms(grade, planes, n * k)
    c = np.ldexp(e.astype(np.float64), -qe).astype(np.int64).reshape(n, k)
    S, z, Z = S.reshape(n, -1), z.reshape(n, -1), Z.reshape(n, -1)
    zi = np.ldexp(z.astype(np.float64), -qe).astype(np.int64)
    a = codes.astype(np.int64)
    m, B, per = a.shape[0], k // kb, k0 // kb
    y = np.zeros((m, n), dtype=np.float32)
    with np.errstate(all="ignore"):
        for i in range(m):
            for j in range(n):
                acc = np.float32(0.0)
                for b in range(B):
                    g = b // per
                    ab = a[i, b * kb:(b + 1) * kb]
                    A = int(ab.sum())
                    D = int(ab @ c[j, b * kb:(b + 1) * kb])
                    if law["zero"] == "shared":
                        D -= int(zi[j, g]) * A
                    w = np.float32(sa[i, b]) * S[j, g]
                    acc = _fma(w, np.float32(D) * np.float32(2.0 ** qe), acc)
                    if law["zero"] == "offset":
                        acc = _fma(np.float32(sa[i, b]) * np.float32(-Z[j, g]), np.float32(A), acc)
                if bias is not None:
                    acc = np.float32(acc + np.float32(bias[j].item()))
                y[i, j] = np.float32(np.nan) if np.isnan(acc) else acc
    return torch.from_numpy(y)


def _over_isas(fn):
    previous = _C.cpu_isa()
    try:
        for isa in _C.cpu_isas_supported():
            _C._set_cpu_isa(isa)
            fn(isa)
    finally:
        _C._set_cpu_isa(previous)


ALL = list(GRADES) + [CHANNEL]


# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_terms_are_the_decode(name):
    """f32(S*e), f32(S*f32(e-z)) or f32(f32(S*e) - Z) is the reference decode, bit for bit."""
    shape = _shape(name)
    grade = _canon(name)
    planes = _planes(name, shape)
    e, S, z, Z = decode_terms(grade, planes, shape[0] * shape[1])
    k0 = Grade.parse(grade)._native.k0
    Sx, zx, Zx = (np.repeat(v, k0) for v in (S, z, Z))
    law = s8_law(grade)
    with np.errstate(all="ignore"):
        if law["zero"] == "shared":
            want = Sx * (e - zx).astype(np.float32)
        elif law["zero"] == "offset":
            want = (Sx * e).astype(np.float32) - Zx
        else:
            want = Sx * e
    got = decode_planes(grade, planes, shape[0] * shape[1])
    assert np.array_equal(want.astype(np.float32).view(np.int32), got.view(np.int32))


@pytest.mark.parametrize("name", ALL)
def test_matches_reference_on_every_variant(name):
    shape = _shape(name)
    planes = _planes(name, shape)
    x = torch.randn(3, shape[1], generator=torch.Generator().manual_seed(1))
    x[1, :shape[1] // 2] = 0.0  # whole zero blocks
    bias = torch.randn(shape[0], generator=torch.Generator().manual_seed(2))
    want = _reference(name, x, planes, shape, bias)

    def check(isa):
        got = ops.packed_linear_s8(x, planes, _canon(name), shape, bias)
        assert torch.equal(_bits(got), _bits(want)), (name, isa)
    _over_isas(check)


@pytest.mark.parametrize("name", ("MXFP4", "NVF4", "Q4KS", "U4Z_G128", "Q8_0"))
def test_random_bytes_nan_and_inf(name):
    shape = _shape(name)
    planes = _random_planes(name, shape, seed=3)
    x = torch.randn(2, shape[1], generator=torch.Generator().manual_seed(4)) * 100
    want = _reference(name, x, planes, shape)
    assert torch.isfinite(want).any()

    def check(isa):
        got = ops.packed_linear_s8(x, planes, _canon(name), shape)
        assert torch.equal(_bits(got), _bits(want)), (name, isa)
    _over_isas(check)


def _threads_and_rows(name, n, k, m, rows, seed):
    """packed_linear_s8 on m rows with 1 and 2 threads (the same bits), then each of `rows` alone (the same
    bits as inside the batch); returns the AMX kernel's tile counts (batch runs, single rows)."""
    planes = _planes(name, (n, k), seed=seed)
    x = torch.randn(m, k, generator=torch.Generator().manual_seed(seed + 1))
    grade = _canon(name)
    before = torch.get_num_threads()
    try:
        outs = []
        with _Amx(-1) as batch:
            for t in (1, 2):
                torch.set_num_threads(t)
                outs.append(ops.packed_linear_s8(x, planes, grade, (n, k)))
        assert torch.equal(_bits(outs[0]), _bits(outs[1]))
        with _Amx(-1) as alone_runs:
            for i in rows:
                alone = ops.packed_linear_s8(x[i:i + 1], planes, grade, (n, k))
                assert torch.equal(_bits(alone[0]), _bits(outs[0][i])), (name, i)
    finally:
        torch.set_num_threads(before)
    return batch.ran, alone_runs.ran


@pytest.mark.parametrize("name", ("MXFP4", "Q4KS", "I8S24", "U4Z_G128"))
def test_threads_and_batch_composition(name):
    _threads_and_rows(name, 40, 4 * GRADES[name] if GRADES[name] >= 64 else 256, 9, (0, 4, 8), seed=5)


@pytest.mark.parametrize("name", ("MXFP4", "NVF4", "Q8_0", "S4_G64", "U4Z_G128"))
def test_close_to_the_float_product_of_the_packed_activations(name):
    """y is F.linear(x_hat, W) (x_hat the packed activations decoded) to float32 summation accuracy."""
    n, k = 33, 512
    grade = _canon(name)
    planes = _planes(name, (n, k), seed=7)
    x = torch.randn(4, k, generator=torch.Generator().manual_seed(8))
    kb = ops.s8_block(grade)
    codes, scales = ops.pack_activations(x, kb)
    x_hat = (codes.double().view(4, -1, kb) * scales.double()[..., None]).view(4, k)
    W = torch.from_numpy(decode_planes(grade, planes, n * k)).double().view(n, k)
    want = x_hat @ W.T
    got = ops.packed_linear_s8(x, planes, grade, (n, k)).double()
    bound = (k // kb + 2) * 2.0 ** -23 * (x_hat.abs() @ W.abs().T)
    assert ((got - want).abs() <= bound).all()


def test_dtypes_and_shapes():
    grade = _canon("MXFP4")
    planes = _planes("MXFP4", (16, 64))
    x = torch.randn(2, 3, 64)
    y = ops.packed_linear_s8(x, planes, grade, (16, 64))
    assert y.shape == (2, 3, 16) and y.dtype == torch.float32
    yb = ops.packed_linear_s8(x.bfloat16(), planes, grade, (16, 64))
    assert yb.dtype == torch.bfloat16
    assert torch.equal(yb, ops.packed_linear_s8(x.bfloat16().float(), planes, grade, (16, 64)).bfloat16())
    assert ops.packed_linear_s8(torch.empty(0, 64), planes, grade, (16, 64)).shape == (0, 16)


def test_opcheck():
    grade = _canon("Q4KS")
    planes = _planes("Q4KS", (16, 256))
    x = torch.randn(3, 256, requires_grad=True)
    bias = torch.randn(16, requires_grad=True)
    torch.library.opcheck(torch.ops.grit.packed_linear_s8.default,
                          (x, *planes, grade, [16, 256], bias),
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))


def test_straight_through_gradient():
    grade = _canon("MXFP4")
    planes = _planes("MXFP4", (24, 64))
    x = torch.randn(5, 64, requires_grad=True)
    bias = torch.zeros(24, requires_grad=True)
    y = ops.packed_linear_s8(x, planes, grade, (24, 64), bias)
    gy = torch.randn_like(y)
    y.backward(gy)
    want = torch.ops.grit.packed_linear_grad_input(gy, *planes, grade, [24, 64])
    assert torch.equal(x.grad, want)
    assert torch.allclose(bias.grad, gy.sum(0))


def test_refusals_name_the_reason():
    mxfp8 = Grade("MXFP8").canonical
    with pytest.raises(ValueError, match="no s8 activation law.*e=e4m3"):
        s8_law(mxfp8)
    planes = _planes("MXFP8", (8, 64))
    with pytest.raises(ValueError, match="no s8 activation law"):
        ops.packed_linear_s8(torch.randn(1, 64), planes, mxfp8, (8, 64))
    grade = _canon("MXFP4")
    planes = _planes("MXFP4", (8, 64))
    x = torch.randn(2, 64)
    x[1, 5] = float("inf")
    with pytest.raises(ValueError, match="row 1, column 5"):
        ops.packed_linear_s8(x, planes, grade, (8, 64))
    with pytest.raises(ValueError, match="in-features"):
        ops.packed_linear_s8(torch.randn(2, 32), planes, grade, (8, 64))
    with pytest.raises(ValueError, match="no s8 activation law"):
        ops.packed_linear_s8(torch.randn(1, 64), [torch.zeros(0, dtype=torch.uint8)] * 4, "INT4G64", (8, 64))


def test_activation_block():
    assert ops.s8_block(_canon("NVF4")) == 16
    assert ops.s8_block(CHANNEL) == 128
    assert ops.s8_block("grit1(e=s8,k0=4096,s0=binary16,esr=ratiomaxabs)") == 256
    assert ops.s8_block("grit1(e=s8,k0=385,s0=binary16,esr=ratiomaxabs)") == 1


# Rows wide enough for the AVX-512 kernels' vector paths: whole 16-row tiles
# whose group terms are gathered 16 (1-byte scales) or 8 (binary16) groups at
# a time, codes read straight from the data plane (the fused kernel), beside
# a partial tile that takes the scalar terms.
WIDE = {"MXFP4": 512, "NVF4": 256, "Q4KS": 512, "U4Z_G32": 512, "U8Z_G32": 512, "Q8_0": 256,
        "S4_G64": 512, "S8_G128": 1024, "I8S24": 512}


@pytest.mark.parametrize("name", sorted(WIDE))
@pytest.mark.parametrize("planes_from", ("quantize", "random"))
def test_wide_rows_match_reference_on_every_variant(name, planes_from):
    shape = (35, WIDE[name])  # two whole tiles and three rows
    planes = (_planes(name, shape, seed=11) if planes_from == "quantize"
              else _random_planes(name, shape, seed=12))
    if planes_from == "random" and name == "NVF4":
        planes[2] = _planes(name, shape, seed=11)[2]  # a finite tensor scale, or every output is NaN
    x = torch.randn(11, shape[1], generator=torch.Generator().manual_seed(13)) * 3  # 8 rows a pass, then 3
    x[2, : shape[1] // 3] = 0.0
    bias = torch.randn(shape[0], generator=torch.Generator().manual_seed(14))
    want = _reference(name, x, planes, shape, bias)
    assert torch.isfinite(want).float().mean() > 0.5  # the bits compared are mostly numbers

    def check(isa):
        got = ops.packed_linear_s8(x, planes, _canon(name), shape, bias)
        assert torch.equal(_bits(got), _bits(want)), (name, planes_from, isa)
        alone = ops.packed_linear_s8(x[4:5], planes, _canon(name), shape, bias)
        assert torch.equal(_bits(alone[0]), _bits(want[4])), (name, planes_from, isa)
    _over_isas(check)


@pytest.mark.parametrize("name", ("MXFP4", "NVF4", "Q8_0"))
def test_activation_packing_ties_and_tiny_blocks(name):
    """Quotients x / s of exactly k + 1/2 round half to even, and blocks whose scale underflows take
    2^-149, in the vector packing as in the reference (every variant)."""
    n, k = 17, 256
    planes = _planes(name, (n, k), seed=21)
    kb = s8_law(_canon(name))["kb"]
    row = torch.zeros(k)
    for b in range(k // kb):  # max|x| = 127 gives s = 1: each x is its own quotient
        block = torch.tensor([127.0] + [(t % 9) - 4.5 for t in range(kb - 1)])
        row[b * kb:(b + 1) * kb] = block * (1 if b % 2 else -1)
    tiny = torch.full((k,), 2.0 ** -140) * torch.linspace(-1, 1, k)  # scales in binary32's subnormals
    x = torch.stack([row, tiny, row * 0.5])
    want = _reference(name, x, planes, (n, k))

    def check(isa):
        got = ops.packed_linear_s8(x, planes, _canon(name), (n, k))
        assert torch.equal(_bits(got), _bits(want)), (name, isa)
    _over_isas(check)


# 4-bit codes packed high nibble first (po=msb): the kernels' nibble order swapped, on random planes
MSB = ("grit1(e=e2m1,k0=32,s0=e8m0,po=msb,esr=exp2floormaxabs)",
       "grit1(e=u4,k0=32,s0=binary16,zp=u4,po=msb,esr=affineminmax)")


@pytest.mark.parametrize("grade", MSB)
@pytest.mark.parametrize("k", (96, 512))
def test_msb_first_nibbles(grade, k):
    shape = (35, k)
    planes = _random_planes(grade, shape, seed=31)
    x = torch.randn(6, k, generator=torch.Generator().manual_seed(32))
    want = _reference(grade, x, planes, shape)
    assert torch.isfinite(want).float().mean() > 0.3  # random binary16 scales: some rows meet a NaN

    def check(isa):
        got = ops.packed_linear_s8(x, planes, grade, shape)
        assert torch.equal(_bits(got), _bits(want)), (grade, k, isa)
    _over_isas(check)


# ---------------------------------------------------------------------------
# The AMX kernel (kernels/cpu/s8_amx.cpp): tile multiplies of 16 batch rows,
# from 16 rows up by default. Forced on here at every batch, it must give the
# reference's bits on every grade it takes, and the bits of the VNNI kernel
# on shapes too wide for the reference: several column chunks, partial
# weight tiles, partial batch groups of 4, 8 and 16 rows.

needs_amx = pytest.mark.skipif(
    not _C._cpu_s8_amx_ready(),
    reason="this CPU has no AMX-INT8 (or the OS did not grant this process the tile state): "
           "packed_linear_s8's AMX kernel cannot run here")


class _Amx:
    """Runs the block with the AMX kernel forced on (1) or off (0); counts its tiles."""

    def __init__(self, mode):
        self.mode = mode

    def __enter__(self):
        self.before = _C._cpu_set_s8_amx(self.mode)
        self.calls = _C._cpu_s8_amx_calls()
        return self

    def __exit__(self, *exc):
        _C._cpu_set_s8_amx(self.before)
        self.ran = _C._cpu_s8_amx_calls() - self.calls


@needs_amx
@pytest.mark.parametrize("name", ALL)
def test_amx_kernel_matches_reference(name):
    shape = (17, 128) if name == "I8S24" else _shape(name)  # I8S24's fused kernels read 64 columns at a time
    planes = _planes(name, shape, seed=41)
    x = torch.randn(21, shape[1], generator=torch.Generator().manual_seed(42)) * 2  # a group of 16, then 5
    x[3, : shape[1] // 2] = 0.0
    bias = torch.randn(shape[0], generator=torch.Generator().manual_seed(43))
    want = _reference(name, x, planes, shape, bias)
    with _Amx(1) as amx:
        got = ops.packed_linear_s8(x, planes, _canon(name), shape, bias)
    assert amx.ran > 0, name
    assert torch.equal(_bits(got), _bits(want)), name


@needs_amx
@pytest.mark.parametrize("name", ("MXFP4", "NVF4", "Q4KS", "U4Z_G128"))
def test_amx_kernel_random_bytes_nan_and_inf(name):
    shape = _shape(name)
    planes = _random_planes(name, shape, seed=44)
    x = torch.randn(5, shape[1], generator=torch.Generator().manual_seed(45)) * 100
    want = _reference(name, x, planes, shape)
    assert torch.isfinite(want).any()
    with _Amx(1) as amx:
        got = ops.packed_linear_s8(x, planes, _canon(name), shape)
    assert amx.ran > 0
    assert torch.equal(_bits(got), _bits(want)), name


# k past one column chunk (1024), and more than one 16-row batch group
WIDE_AMX = {"MXFP4": 2560, "NVF4": 1280, "Q4KS": 2304, "I8S24": 2560, "U4Z_G128": 2560, "U8Z_G32": 1152,
            "Q8_0": 1088, "S4_G64": 1280, "S8_G128": 2304,
            # blocks of 48 (chunks of 960 columns), 8 and 256 columns, high nibbles first
            "grit1(e=s4,k0=48,s0=binary16,esr=ratiomaxabs)": 1536,
            "grit1(e=s8,k0=8,s0=binary16,esr=ratiomaxabs)": 1040,
            "grit1(e=s4,k0=256,s0=binary16,esr=ratiomaxabs)": 1536,
            MSB[0]: 1088}


@needs_amx
@pytest.mark.parametrize("name", sorted(WIDE_AMX))
@pytest.mark.parametrize("m", (3, 8, 37))
def test_amx_kernel_matches_vnni_kernel_on_wide_rows(name, m):
    shape = (35, WIDE_AMX[name])
    planes = _planes(name, shape, seed=46)
    x = torch.randn(m, shape[1], generator=torch.Generator().manual_seed(47)) * 3
    x[m // 2, 100:900] = 0.0
    bias = torch.randn(shape[0], generator=torch.Generator().manual_seed(48))
    with _Amx(0) as vnni:
        want = ops.packed_linear_s8(x, planes, _canon(name), shape, bias)
    with _Amx(1) as amx:
        got = ops.packed_linear_s8(x, planes, _canon(name), shape, bias)
    assert vnni.ran == 0 and amx.ran > 0
    assert torch.isfinite(want).all()
    assert torch.equal(_bits(got), _bits(want)), (name, m)


@needs_amx
@pytest.mark.parametrize("name", ("MXFP4", "I8S24", "Q4KS"))
def test_amx_kernel_threads_and_batch_composition(name):
    """By default batches of 16 rows and more take the AMX kernel and a row alone the VNNI kernel:
    the same bits either way, for 1 and 2 threads."""
    batch_tiles, alone_tiles = _threads_and_rows(name, 40, 2048, 24, (0, 15, 16, 23), seed=49)
    assert batch_tiles > 0 and alone_tiles == 0


@needs_amx
def test_amx_kernel_beside_torch_bfloat16_gemm():
    """torch's bfloat16 GEMM (oneDNN) may run on AMX tiles in the same threads: each kernel loads its own
    tile configuration, so interleaved calls keep both results."""
    grade = _canon("MXFP4")
    planes = _planes("MXFP4", (256, 512), seed=51)
    x = torch.randn(32, 512, generator=torch.Generator().manual_seed(52))
    xb = torch.randn(64, 512, generator=torch.Generator().manual_seed(53)).bfloat16()
    wb = torch.randn(384, 512, generator=torch.Generator().manual_seed(54)).bfloat16()
    want_s8 = ops.packed_linear_s8(x, planes, grade, (256, 512))
    want_bf16 = F.linear(xb, wb)
    with _Amx(-1) as amx:
        for _ in range(20):
            assert torch.equal(F.linear(xb, wb), want_bf16)
            assert torch.equal(_bits(ops.packed_linear_s8(x, planes, grade, (256, 512))), _bits(want_s8))
    assert amx.ran > 0


@needs_amx
@pytest.mark.parametrize("env, runs", (("0", False), ("1", True), ("", True)))
def test_amx_kernel_environment_switch(env, runs):
    """GRIT_S8_AMX=0 keeps the AMX kernel off at start-up, =1 (or unset, at 32 rows) lets it run."""
    script = ("import torch\nfrom torch_grit import _C, ops\n"
              "p = ops.quantize(torch.randn(64, 256), 'MXFP4')\n"
              "ops.packed_linear_s8(torch.randn(32, 256), p, 'MXFP4', (64, 256))\n"
              "print(_C._cpu_s8_amx_calls())\n")
    environ = {k: v for k, v in os.environ.items() if k != "GRIT_S8_AMX"}
    if env:
        environ["GRIT_S8_AMX"] = env
    out = subprocess.run([sys.executable, "-c", script], env=environ, capture_output=True, text=True,
                         timeout=120, check=True)
    assert (int(out.stdout.split()[-1]) > 0) == runs, out.stdout
