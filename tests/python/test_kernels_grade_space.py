"""The SIMD variants against the scalar reference over the grades their fast
decoders claim, not only the six reference grades.

A grade reaches a fast decoder by its form (csrc/kernels/cpu/packed_linear_
dispatch.cpp, fast_kind_of): 4-bit elements with one byte-wide scale code per
16 or 32 values and at most a per-tensor level-1 scale (kNibble); the same
with byte-wide zero points and a binary16 level-1 pair (kNibbleAffine); int8
2:4 (kInt8Sparse24). Inside each, make_plan picks a code map (E8M0, an integer
mask, a table), whether the law factors, the E4M3 and FMA shortcuts; every
combination must give the reference's bits. Drawn here: element, scale and
zero-point formats, group sizes, dense int8 (kInt8Dense), shared zero points (kNibbleZp), level-1 scales (exactly 1, powers of two,
random bytes), plane bytes (uniform, or in a narrow band with NaN, zero and
largest codes planted), ragged shapes, batch 1 and more, planes and the CPU
tile layout. The case that started this file, an E8M0 map without factoring
(a level-1 scale of exactly 1) that once took the factored decoder, has its own
test in test_kernels_cpu.py.
"""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import torch_grit
from torch_grit import _C, ops

VARIANTS = tuple(i for i in _C.cpu_isas_supported() if i != "scalar")
ELEMS = ("e2m1", "u4", "s4")
CODES = ("e2m1", "e4m3", "e8m0", "u2", "u4", "u6", "u8", "s4", "s8")  # byte-wide scale / zero-point formats
LEVEL1 = ("binary32", "binary16", "e8m0", "e4m3", "u8", "s8")
ESR = ("ratiomaxabs", "exp2floormaxabs", "affineminmax")

pytestmark = pytest.mark.skipif(not VARIANTS, reason="this CPU has no SIMD variant (only the scalar reference)")


@st.composite
def grades(draw):
    kind = draw(st.sampled_from(("nibble", "nibble", "affine", "sparse", "dense8", "zp", "f16")))
    esr = draw(st.sampled_from(ESR))
    if kind == "dense8":  # ggml Q8_0's form: dense s8, binary16 per 32, 64 or 128 (any esr decodes alike)
        k0 = draw(st.sampled_from((32, 64, 128)))
        s0 = draw(st.sampled_from(("binary16", "binary32")))
        return "grit1(e=s8,k0=%d,s0=%s,esr=%s)" % (k0, s0, esr), k0, 0
    if kind == "sparse":
        order = draw(st.sampled_from(("asclsb", "unord")))
        return "grit1(e=s8,k0=32,s0=binary16,sp=2:4:u2:%s,esr=%s)" % (order, esr), 32, 0
    e = draw(st.sampled_from(ELEMS))
    if kind == "f16":  # compressed-tensors int4's form: 4-bit codes, a float scale per group
        k0 = draw(st.sampled_from((32, 64, 128)))
        s0 = draw(st.sampled_from(("binary16", "binary32")))
        return "grit1(e=%s,k0=%d,s0=%s,esr=%s)" % (e, k0, s0, esr), k0, 0
    if kind == "zp":  # GPTQ / AWQ's form: binary16 scale, byte-wide zero point, zps=shared
        k0 = draw(st.sampled_from((32, 64, 128)))
        zp = draw(st.sampled_from(CODES))
        zpc = draw(st.sampled_from(("", ",zpc=minus1")))
        return "grit1(e=%s,k0=%d,s0=binary16,zp=%s%s,esr=%s)" % (e, k0, zp, zpc, esr), k0, 0
    s0 = draw(st.sampled_from(CODES))
    if kind == "nibble":
        k0 = draw(st.sampled_from((16, 32)))
        l1 = draw(st.sampled_from(("",) + LEVEL1))
        return "grit1(e=%s,k0=%d,s0=%s%s,esr=%s)" % (e, k0, s0, ",k1=0,s1=" + l1 if l1 else "", esr), k0, 0
    zp = draw(st.sampled_from(CODES))
    k1 = draw(st.integers(1, 12))
    zpc = draw(st.sampled_from(("", ",zpc=minus1")))
    return "grit1(e=%s,k0=32,s0=%s,k1=%d,s1=binary16,zp=%s,zps=l1%s,esr=%s)" % (e, s0, k1, zp, zpc, esr), 32, k1


def _level1_bytes(fmt, how, g):
    """A per-tensor level-1 scale: exactly 1, a power of two, or random bytes."""
    width = {"binary32": 4, "binary16": 2}.get(fmt, 1)
    if how == "random" or fmt not in ("binary32", "binary16", "e8m0"):
        return torch.randint(0, 256, (width,), dtype=torch.uint8, generator=g)
    v = 1.0 if how == "one" else 2.0 ** int(torch.randint(-6, 7, (1,), generator=g))
    if fmt == "e8m0":
        return torch.tensor([127 + int(np.log2(v))], dtype=torch.uint8)
    dt = np.float32 if fmt == "binary32" else np.float16
    return torch.from_numpy(np.array([v], dtype=dt).view(np.uint8).copy())


def _planes(grade, kind, n, k, g, band, level1):
    native = torch_grit.Grade.parse(grade)._native
    planes = [torch.randint(0, 256, (b,), dtype=torch.uint8, generator=g) for b in native.plane_bytes(n * k)]
    if kind == "int8_sparse24":  # two distinct positions per quad (the fallback has its own tests)
        q = n * k // 4
        a = torch.randint(0, 4, (q,), generator=g)
        b = torch.randint(0, 3, (q,), generator=g)
        b = b + (b >= a).long()
        nib = (a | (b << 2)).view(-1, 2)
        planes[3] = (nib[:, 0] | (nib[:, 1] << 4)).to(torch.uint8)
        return planes
    if band and planes[1].numel() >= 3:
        # Scale codes in a narrow band (a real tensor's), then NaN / zero / largest planted.
        planes[1] = torch.randint(100, 140, planes[1].shape, dtype=torch.uint8, generator=g)
        planes[1][0], planes[1][-1], planes[1][planes[1].numel() // 2] = 255, 0, 254
    if kind == "nibble" and planes[2].numel():
        planes[2] = _level1_bytes(grade.split("s1=")[1].split(",")[0].rstrip(")"), level1, g)
    return planes


def _same_bits(a, b):
    ai, bi = a.contiguous().view(torch.int32), b.contiguous().view(torch.int32)
    return bool(((ai == bi) | (a.isnan() & b.isnan())).all())


@settings(max_examples=400, derandomize=True, database=None, deadline=None)
@given(case=grades(), rows=st.integers(1, 40), groups=st.integers(1, 12), batch=st.sampled_from((1, 3, 9)),
       band=st.booleans(), level1=st.sampled_from(("one", "pow2", "random")), seed=st.integers(0, 2**31 - 1))
def test_every_variant_gives_the_reference_bits_on_any_fast_grade(case, rows, groups, batch, band, level1, seed):
    grade, k0, k1 = case
    if k1:  # level-1 groups of k1 level-0 groups (they may straddle rows): n*k/32 a multiple of k1
        step = k1 // math.gcd(groups, k1)
        rows = -(-rows // step) * step
    native = torch_grit.Grade.parse(grade)._native
    kind = _C.cpu_fast_kind(native)
    assert kind != "none", grade  # the strategy draws only grades a fast decoder claims
    k = groups * k0
    g = torch.Generator().manual_seed(seed)
    planes = _planes(grade, kind, rows, k, g, band, level1)
    x = torch.randn(batch, k, generator=g)
    x[0, k // 2] = float("inf") if seed % 7 == 0 else x[0, k // 2]
    want_w, err = _C.decode(native, [p.numpy() for p in planes], rows * k)
    assert err is None
    prev = _C._set_cpu_isa("scalar")
    try:
        want_y = ops.packed_linear(x, planes, grade, (rows, k))
        tiled = ops.tile_nibbles(planes, grade, (rows, k)) if kind == "nibble" else None
        for isa in VARIANTS:
            _C._set_cpu_isa(isa)
            got_w, fell_back = _C._cpu_decode(isa, native, [p.numpy() for p in planes], rows, k)
            assert not fell_back, (grade, isa)
            assert np.array_equal(np.frombuffer(got_w, np.uint32), np.frombuffer(want_w, np.uint32)), \
                ("decode", grade, isa, rows, k)
            assert _same_bits(ops.packed_linear(x, planes, grade, (rows, k)), want_y), \
                ("packed_linear", grade, isa, rows, k, batch)
            if tiled is not None:
                assert _same_bits(ops.packed_linear_tiled(x, tiled, grade, (rows, k)), want_y), \
                    ("packed_linear_tiled", grade, isa, rows, k, batch)
    finally:
        _C._set_cpu_isa(prev)
