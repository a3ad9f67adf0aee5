"""The packed_linear CPU kernel variants (csrc/kernels/cpu): every variant this
CPU can run (scalar = the reference kernel, avx2, avx512, avx512_bf16), forced in turn.

Each variant's decoder is compared with the reference decode bit for bit on
random plane bytes (so NaN and infinite scales occur, plus planted ones);
each variant's packed_linear is compared with F.linear in float64 on the
reference-decoded weight, and with the scalar variant bit for bit (all
variants follow the law of csrc/grit/linear_law.h). Results must not
depend on the thread count, and GRIT_CPU_ISA must select the variant.
"""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import torch_grit
from torch_grit import _C, ops

ISAS = tuple(_C.cpu_isas_supported())
# ggml Q8_0's grade (not a reference grade: no short name), imported from GGUF files.
Q8 = "grit1(e=s8,k0=32,s0=binary16,esr=ratiomaxabs)"
# A GPTQ / AWQ grade (u4, binary16 scale and u4 zero point per 128 inputs, zps=shared).
GPTQ = "grit1(e=u4,k0=128,s0=binary16,zp=u4,esr=affineminmax)"
# Dense s8 with a binary16 scale per 64 and per 128 (S8_G64, S8_G128): the int8_dense decoder's wider groups.
S8_64 = "grit1(e=s8,k0=64,s0=binary16,esr=ratiomaxabs)"
S8_128 = "grit1(e=s8,k0=128,s0=binary16,esr=ratiomaxabs)"
# 4-bit codes with a float scale per group (nibble_fs): compressed-tensors' int4 grade with binary16
# scales at 128 and 32 (the law factors it) and binary32 at 128 (unfactored), e2m1 elements per 64
# (unfactored); int8 with binary32 scales per 32 (int8_dense, unfactored).
S4_128 = "grit1(e=s4,k0=128,s0=binary16,esr=ratiomaxabs)"
S4_32 = "grit1(e=s4,k0=32,s0=binary16,esr=ratiomaxabs)"
FP4_F16 = "grit1(e=e2m1,k0=64,s0=binary16,esr=ratiomaxabs)"
S4_F32 = "grit1(e=s4,k0=128,s0=binary32,esr=ratiomaxabs)"
S8_F32 = "grit1(e=s8,k0=32,s0=binary32,esr=ratiomaxabs)"
# One group per row (the per-channel grades S8_CHANNEL / S4_CHANNEL at in_features 160 and 512): the
# fast decoders take k0 = in > 128; batches of 2 and more run the GEMV row by row (the same law).
S8_CH = "grit1(e=s8,k0=160,s0=binary32,esr=ratiomaxabs)"
S4_CH = "grit1(e=s4,k0=512,s0=binary16,esr=ratiomaxabs)"
GRADES = ("MXFP4", "NVF4", "Q4KS", "I8S24", "MXFP4_RNE", "NVF4_RTZ", Q8, GPTQ, S8_64, S8_128, S4_128, S4_32,
          FP4_F16, S4_F32, S8_F32, S8_CH, S4_CH)
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
FAST_KIND = {S8_CH: "int8_dense", S4_CH: "nibble_fs", S4_F32: "nibble_fs", S8_F32: "int8_dense", S4_128: "nibble_fs", S4_32: "nibble_fs", FP4_F16: "nibble_fs", Q8: "int8_dense", S8_64: "int8_dense", S8_128: "int8_dense", GPTQ: "nibble_zp", "MXFP4": "nibble", "MXFP4_RNE": "nibble", "NVF4": "nibble", "NVF4_RTZ": "nibble",
             "Q4KS": "nibble_affine", "I8S24": "int8_sparse24"}

# [out, in]: out not a multiple of the 16-row tile, in not a multiple of the
# 256-column super-block; level-1 groups straddle rows for Q4KS at in=160.
SHAPES = {
    "MXFP4": ((17, 96), (40, 160), (33, 512)),
    "NVF4": ((17, 48), (40, 160), (33, 512)),
    "Q4KS": ((24, 160), (40, 96), (33, 512)),
    "I8S24": ((17, 96), (40, 160), (33, 512)),
}
SHAPES["MXFP4_RNE"] = SHAPES["MXFP4"]
SHAPES[Q8] = SHAPES["I8S24"]
SHAPES[GPTQ] = ((17, 128), (40, 384), (33, 512))
SHAPES[S8_64] = ((17, 64), (40, 192), (33, 512))
SHAPES[S8_128] = SHAPES[GPTQ]
SHAPES[S4_128] = SHAPES[GPTQ]
SHAPES[S4_32] = SHAPES["MXFP4"]
SHAPES[FP4_F16] = SHAPES[S8_64]
SHAPES[S4_F32] = SHAPES[GPTQ]
SHAPES[S8_F32] = SHAPES["I8S24"]
SHAPES[S8_CH] = ((17, 160), (40, 160), (33, 160))
SHAPES[S4_CH] = ((17, 512), (40, 512), (33, 512))
SHAPES["NVF4_RTZ"] = SHAPES["NVF4"]

# Batch shapes: GEMV (1 row, in registers) and GEMM (more) paths.
X_BATCHES = ((1,), (3, 5), (8,), (9,), (33,))

# Tolerance per grade, against F.linear in float64 on the decoded weight.
# The law uses the decoded weights' exact values (S*e = w where a group
# factors) and each product is exact inside its FMA, so what remains is the
# float32 summation: the recursive-summation bound gamma_k * sum|x||w|, the
# same for every grade, plus one rounding to a bf16/f16 output.
F32_U = 2.0 ** -24
OUT_U = {torch.float32: 0.0, torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}
TOLERANCE = {g: "float32 summation bound (the decoded weights' exact values)" for g in GRADES}


@pytest.fixture(params=ISAS)
def isa(request):
    previous = _C._set_cpu_isa(request.param)
    yield request.param
    _C._set_cpu_isa(previous)


def _native(grade):
    return torch_grit.Grade.parse(grade)._native


def _random_planes(grade, shape, seed=0, regular=True):
    """Uniformly random plane bytes: every byte pattern is a valid plane, so
    NaN and infinite scale codes occur. I8S24's metadata names two distinct
    positions per quad unless regular=False."""
    n, k = shape
    g = torch.Generator().manual_seed(seed)
    planes = [torch.randint(0, 256, (b,), dtype=torch.uint8, generator=g)
              for b in _native(grade).plane_bytes(n * k)]
    if grade in (S4_F32, S8_F32, S8_CH):
        # Random binary32 bits reach 1e38: finite weights whose float32 sums overflow where the
        # float64 comparisons below do not. Scales of either sign up to 2^20 here; _plant_specials
        # puts in the NaN and infinite ones.
        v = (torch.rand(planes[1].numel() // 4, generator=g) - 0.5) * 2.0 ** 21
        planes[1] = v.to(torch.float32).view(torch.uint8).clone()
    if grade == "I8S24" and regular:
        q = n * k // 4
        a = torch.randint(0, 4, (q,), generator=g)
        b = torch.randint(0, 3, (q,), generator=g)
        b = b + (b >= a).long()
        # Either order: the lower position takes the first stored code.
        lo_first = torch.randint(0, 2, (q,), generator=g).bool()
        i0, i1 = torch.where(lo_first, a, b), torch.where(lo_first, b, a)
        nib = (i0 | (i1 << 2)).view(-1, 2)
        planes[3] = (nib[:, 0] | (nib[:, 1] << 4)).to(torch.uint8)
    return planes


def _packed(grade, w, seed=0):
    """Planes of ``w``'s shape, by the grade's encoder."""
    return ops.quantize(w, grade)


def _plant_specials(grade, planes):
    """Put NaN and infinite scales where the fast decoders must take their
    non-finite route."""
    planes = [p.clone() for p in planes]
    f16 = lambda v: np.array([v], dtype=np.float16).view(np.uint8)
    if grade.startswith("MXFP4"):
        planes[1][0] = 255                                 # e8m0 NaN
        planes[1][-1] = 0                                  # 2^-127, subnormal
        planes[1][1] = 254                                 # 2^127: products overflow to inf
    elif grade.startswith("NVF4"):
        planes[1][0], planes[1][3] = 0x7F, 0xFF            # e4m3 NaN
        planes[2][:] = torch.from_numpy(np.array([3e38], dtype=np.float32).view(np.uint8))
    elif grade == "Q4KS":
        planes[2][0:2] = torch.from_numpy(f16(np.inf))     # d = inf (S*0 is NaN)
        planes[2][6:8] = torch.from_numpy(f16(np.nan))     # dmin = NaN
    elif grade == GPTQ:
        planes[1][0:2] = torch.from_numpy(f16(np.inf))
        planes[1][4:6] = torch.from_numpy(f16(np.nan))
    elif grade in (S4_F32, S8_F32, S8_CH):
        planes[1][0:4] = torch.from_numpy(np.array([np.inf], np.float32).view(np.uint8))
        planes[1][8:12] = torch.from_numpy(np.array([np.nan], np.float32).view(np.uint8))
    elif grade in ("I8S24", Q8, S8_64, S8_128, S4_128, S4_32, FP4_F16, S4_CH):
        planes[1][0:2] = torch.from_numpy(f16(np.inf))
        planes[1][4:6] = torch.from_numpy(f16(np.nan))
    return planes


def _reference_weight(grade, planes, shape):
    """The core's reference decode (csrc/grit), not the fast decoders ops.dequantize runs."""
    values = torch_grit.decode_planes(grade, [p.numpy() for p in planes], shape[0] * shape[1])
    return torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32)).reshape(shape)


def _bits(t):
    return t.contiguous().view(torch.int32 if t.dtype == torch.float32 else torch.int16)


def _same_bits(a, b):
    both_nan = a.isnan() & b.isnan()
    return bool(((_bits(a) == _bits(b)) | both_nan).all())


# --------------------------------------------------------------------------- dispatch


def test_every_reference_grade_has_a_fast_decoder():
    for grade, kind in FAST_KIND.items():
        assert _C.cpu_fast_kind(_native(grade)) == kind, grade
    # A grade no fast decoder covers runs the reference kernel.
    other = "grit1(e=e4m3,k0=32,s0=e8m0,esr=exp2floormaxabs)"
    assert _C.cpu_fast_kind(_native(other)) == "reference"


def test_the_best_variant_is_chosen_by_default():
    assert ISAS[0] == "scalar"
    env = {k: v for k, v in os.environ.items() if k != "GRIT_CPU_ISA"}
    out = subprocess.run([sys.executable, "-c", "from torch_grit import _C; print(_C.cpu_isa())"],
                         env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ISAS[-1]


@pytest.mark.parametrize("name", ISAS)
def test_grit_cpu_isa_selects_the_variant(name):
    code = ("import torch; from torch_grit import _C, ops\n"
            "w = ops.quantize(torch.randn(20, 64), 'MXFP4')\n"
            "y = ops.packed_linear(torch.ones(2, 64), w, 'MXFP4', (20, 64))\n"
            "print(_C.cpu_isa(), tuple(y.shape))")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "GRIT_CPU_ISA": name},
                         capture_output=True, text=True, check=True)
    assert out.stdout.split() == [name, "(2,", "20)"]


def test_grit_cpu_isa_refuses_an_unknown_variant():
    code = ("import torch; from torch_grit import ops\n"
            "w = ops.quantize(torch.randn(20, 64), 'MXFP4')\n"
            "try:\n"
            "    ops.packed_linear(torch.ones(2, 64), w, 'MXFP4', (20, 64))\n"
            "except ValueError as e:\n"
            "    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "GRIT_CPU_ISA": "sse9"},
                         capture_output=True, text=True, check=True)
    assert "GRIT_CPU_ISA='sse9' names no kernel variant; expected scalar, avx2, avx512 or avx512_bf16" in out.stdout


def test_set_cpu_isa_refuses_unknown_names():
    with pytest.raises(ValueError, match="unknown CPU kernel variant 'neon'"):
        _C._set_cpu_isa("neon")


# --------------------------------------------------------------------------- decoders


# E8M0 scales under a per-tensor level-1 scale: with s1 exactly 1 the scale
# table is E8M0's own (the decoders' E8M0 map), but the law never factors a
# grade with a level-1 scale. The dispatch once sent such a plan to the
# factored decoder (a macro of two statements under one `if`): codes 0 and 255
# came out wrong, and the tile layout was read as planes.
E8M0_L1 = ("grit1(e=e2m1,k0=32,s0=e8m0,k1=0,s1=binary32,esr=exp2floormaxabs)",
           "grit1(e=e2m1,k0=16,s0=e8m0,k1=0,s1=binary32,esr=exp2floormaxabs)")


@pytest.mark.parametrize("grade", E8M0_L1)
@pytest.mark.parametrize("s1", (1.0, 0.5))
def test_unfactored_e8m0_plans_take_the_unfactored_decoder(isa, grade, s1):
    n, k = 40, 160
    g = torch.Generator().manual_seed(11)
    native = _native(grade)
    assert _C.cpu_fast_kind(native) == "nibble"
    planes = [torch.randint(0, 256, (b,), dtype=torch.uint8, generator=g) for b in native.plane_bytes(n * k)]
    planes[1] = torch.randint(100, 150, planes[1].shape, dtype=torch.uint8, generator=g)
    planes[1][0], planes[1][7], planes[1][12] = 255, 0, 254  # NaN, 2^-127, 2^127
    planes[2][:] = torch.from_numpy(np.array([s1], dtype=np.float32).view(np.uint8))
    want, err = _C.decode(native, [p.numpy() for p in planes], n * k)
    assert err is None
    got, fell_back = _C._cpu_decode(isa, native, [p.numpy() for p in planes], n, k)
    assert not fell_back
    assert np.array_equal(np.frombuffer(got, dtype=np.uint32), np.frombuffer(want, dtype=np.uint32)), (isa, s1)
    assert np.isnan(np.frombuffer(want, dtype=np.float32)).any()
    tiled = ops.tile_nibbles(planes, grade, (n, k))
    for m in (1, 3, 9):
        x = torch.randn(m, k, generator=g)
        prev = _C._set_cpu_isa("scalar")
        ref = ops.packed_linear(x, planes, grade, (n, k))
        _C._set_cpu_isa(prev)
        assert _same_bits(ops.packed_linear(x, planes, grade, (n, k)), ref), (isa, s1, m, "planes")
        assert _same_bits(ops.packed_linear_tiled(x, tiled, grade, (n, k)), ref), (isa, s1, m, "tiled")


@pytest.mark.parametrize("grade", GRADES)
def test_decoder_is_the_reference_decode_bit_for_bit(isa, grade):
    for i, shape in enumerate(SHAPES[grade]):
        planes = _random_planes(grade, shape, seed=i)
        if i == 1:
            planes = _plant_specials(grade, planes)
        n, k = shape
        want, err = _C.decode(_native(grade), [p.numpy() for p in planes], n * k)
        assert err is None
        got, fell_back = _C._cpu_decode(isa, _native(grade), [p.numpy() for p in planes], n, k)
        assert not fell_back
        want = np.frombuffer(want, dtype=np.uint32)
        got = np.frombuffer(got, dtype=np.uint32)
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, "%s %s %s: %d values differ, first at %s: %08x, want %08x" % (
            isa, grade, shape, bad.size, np.unravel_index(bad[0], shape), got[bad[0]], want[bad[0]])
        if i == 1:  # the planted specials really are there
            w = want.view(np.float32)
            assert np.isnan(w).any()
            if grade != "I8S24":
                assert np.isinf(w).any() or grade == "Q4KS"


def test_sparse_quads_naming_one_position_twice_fall_back(isa):
    # The fast I8S24 decoder assumes two distinct positions per quad (then
    # row r's codes start at r*k/2); planes that break it run the reference.
    shape = (40, 160)
    planes = _random_planes("I8S24", shape, regular=False)
    got, fell_back = _C._cpu_decode(isa, _native("I8S24"), [p.numpy() for p in planes], *shape)
    assert fell_back == (isa != "scalar")
    x = torch.randn(3, shape[1])
    y = ops.packed_linear(x, planes, "I8S24", shape)
    _C._set_cpu_isa("scalar")
    want = ops.packed_linear(x, planes, "I8S24", shape)
    assert _same_bits(y, want)


# --------------------------------------------------------------------------- packed_linear


def _assert_within_bound(got, x, w, bias, out_dtype):
    k = x.shape[-1]
    gamma = k * F32_U / (1 - k * F32_U) + F32_U
    xd, wd = x.double(), w.double()
    bd = None if bias is None else bias.double()
    ref = F.linear(xd, wd, bd)
    mag = F.linear(xd.abs(), wd.abs(), None if bd is None else bd.abs())
    u = OUT_U[out_dtype]
    bound = gamma * mag * (1 + u) + u * ref.abs()
    err = (got.double() - ref).abs()
    finite = torch.isfinite(ref)
    assert bool((err[finite] <= bound[finite]).all()), "max excess %g" % (err - bound)[finite].max()
    assert bool((got.isnan() == ref.isnan()).all())


@pytest.mark.parametrize("grade", ("MXFP4", "NVF4", "Q4KS", "I8S24", Q8, GPTQ, S8_128, S4_128, FP4_F16, S4_F32,
                                   S8_F32))
@pytest.mark.parametrize("dtype", DTYPES)
def test_packed_linear_matches_float64_and_the_reference(isa, grade, dtype):
    for i, shape in enumerate(SHAPES[grade]):
        planes = _packed(grade, torch.randn(shape, generator=torch.Generator().manual_seed(i)), seed=i)
        w = _reference_weight(grade, planes, shape)
        for b, batch in enumerate(X_BATCHES):
            x = torch.randn(*batch, shape[1], generator=torch.Generator().manual_seed(10 + b)).to(dtype)
            bias = torch.randn(shape[0]).to(dtype) if b % 2 else None
            y = ops.packed_linear(x, planes, grade, shape, bias)
            assert y.dtype == dtype and y.shape == (*batch, shape[0])
            _assert_within_bound(y, x.float(), w, None if bias is None else bias.float(), dtype)
            if isa != "scalar":
                prev = _C._set_cpu_isa("scalar")
                want = ops.packed_linear(x, planes, grade, shape, bias)
                _C._set_cpu_isa(prev)
                assert _same_bits(y, want), (isa, grade, shape, batch)


def test_avx512_bf16_is_refused_where_the_cpu_cannot_run_it():
    # Where the CPU has no AVX512_BF16 (or its vdpbf16ps failed the start-up
    # check), the variant is not offered and cannot be forced.
    if "avx512_bf16" in ISAS:  # offered: then it is the last (best) one listed
        assert ISAS[-1] == "avx512_bf16" and "avx512" in ISAS
        return
    with pytest.raises(ValueError, match="cannot run the avx512_bf16 kernels"):
        _C._set_cpu_isa("avx512_bf16")
    assert _C.cpu_isa() != "avx512_bf16"


@pytest.mark.skipif("avx512_bf16" not in ISAS,
                    reason="the pair path exists only on CPUs with AVX512_BF16 (refusal tested above)")
@pytest.mark.parametrize("grade", ("MXFP4", "MXFP4_RNE"))
def test_bf16_pair_path_runs_and_returns_the_reference_bits(grade):
    # bfloat16-exact activations, a factored nibble grade: avx512_bf16 does
    # two of a chain's FMAs per vdpbf16ps, at batch 1 and in the chunked
    # path of larger batches. Planted NaN / 2^-127 / 2^127
    # scales, a wide range of activation magnitudes, inf and NaN in x.
    prev = _C._set_cpu_isa("avx512_bf16")
    prev_gemm = _C._cpu_set_pair_gemm(1)   # batches > 1 too, whatever the CPU's vendor
    try:
        for i, shape in enumerate(SHAPES[grade] + ((64, 4096),)):
            planes = _plant_specials(grade, _random_planes(grade, shape, seed=20 + i))
            g = torch.Generator().manual_seed(i)
            x = (torch.randn(shape[1], generator=g)
                 * torch.exp2(torch.randint(-30, 30, (shape[1],), generator=g).float())).bfloat16()
            x[3], x[11] = float("inf"), float("nan")
            xb = torch.stack([x, x.flip(0), -x, x.roll(5), x * 2, x.roll(-9), x / 4])  # batch 7: chunks
            for xi in (x, x[None], x.float(), xb, xb[:2]):
                before = _C._cpu_pair_path_calls()
                y = ops.packed_linear(xi, planes, grade, shape)
                assert _C._cpu_pair_path_calls() > before, (grade, shape, xi.dtype)
                _C._set_cpu_isa("scalar")
                want = ops.packed_linear(xi, planes, grade, shape)
                _C._set_cpu_isa("avx512_bf16")
                assert _same_bits(y, want), (grade, shape, xi.dtype)
        # x it cannot take (a value below 2^-64; float32 that is not
        # bfloat16-exact) goes the FMA way, with the same bits.
        shape = SHAPES[grade][1]
        planes = ops.quantize(torch.randn(shape), grade)
        tiny = torch.randn(3, shape[1]).bfloat16().float()
        tiny[2, 2] = 2.0 ** -70
        for x in (tiny[:1].clone().index_fill_(1, torch.tensor([2]), 2.0 ** -70), tiny,
                  torch.randn(1, shape[1])):
            before = _C._cpu_pair_path_calls()
            y = ops.packed_linear(x, planes, grade, shape)
            assert _C._cpu_pair_path_calls() == before
            _C._set_cpu_isa("scalar")
            assert _same_bits(y, ops.packed_linear(x, planes, grade, shape))
            _C._set_cpu_isa("avx512_bf16")
    finally:
        _C._set_cpu_isa(prev)
        _C._cpu_set_pair_gemm(prev_gemm)


@pytest.mark.skipif("avx512_bf16" not in ISAS,
                    reason="the pair path exists only on CPUs with AVX512_BF16 (refusal tested above)")
def test_pair_gemm_follows_the_cpu_vendor_and_either_route_gives_the_same_bits():
    """Batches > 1 take the pair path on AMD cores (where it measured faster) and the FMA route
    elsewhere; batch 1 takes it everywhere. Both routes give the reference bits."""
    with open("/proc/cpuinfo") as f:
        amd = "AuthenticAMD" in f.read()
    shape = (64, 4096)
    planes = ops.quantize(torch.randn(shape, generator=torch.Generator().manual_seed(3)), "MXFP4")
    xb = torch.randn(5, shape[1], generator=torch.Generator().manual_seed(4)).bfloat16()
    prev = _C._set_cpu_isa("scalar")
    want = ops.packed_linear(xb, planes, "MXFP4", shape)
    _C._set_cpu_isa("avx512_bf16")
    try:
        for mode, takes in ((-1, amd), (1, True), (0, False)):
            _C._cpu_set_pair_gemm(mode)
            before = _C._cpu_pair_path_calls()
            got = ops.packed_linear(xb, planes, "MXFP4", shape)
            assert (_C._cpu_pair_path_calls() > before) == takes, mode
            assert _same_bits(got, want), mode
            before = _C._cpu_pair_path_calls()
            one = ops.packed_linear(xb[:1], planes, "MXFP4", shape)
            assert _C._cpu_pair_path_calls() > before and _same_bits(one, want[:1]), mode
    finally:
        _C._cpu_set_pair_gemm(-1)
        _C._set_cpu_isa(prev)


@pytest.mark.parametrize("grade", ("MXFP4", "NVF4", "Q4KS", "I8S24", Q8, GPTQ, S8_128, S4_128, FP4_F16, S4_F32,
                                   S8_F32, S8_CH, S4_CH))
def test_non_finite_weights_and_activations_match_the_reference(isa, grade):
    shape = SHAPES[grade][1]
    planes = _plant_specials(grade, _random_planes(grade, shape, seed=5))
    w = _reference_weight(grade, planes, shape)
    assert not bool(torch.isfinite(w).all())
    x = torch.randn(9, shape[1])
    x[1, 3] = float("inf")
    x[2, 7] = float("nan")
    prev = _C._set_cpu_isa("scalar")
    want = [ops.packed_linear(x[:m], planes, grade, shape) for m in (1, 4, 9)]
    _C._set_cpu_isa(prev)
    for m, wm in zip((1, 4, 9), want):
        got = ops.packed_linear(x[:m], planes, grade, shape)
        assert _same_bits(got, wm), (isa, grade, m)
    # A NaN activation makes its whole output row NaN (canonical bits).
    y = want[2]
    assert bool(y[2].isnan().all()) and bool((_bits(y[2]) == 0x7FC00000).all())
    # NaN and infinite weights act as in a float32 sum of the decoded weights'
    # products (a group with a non-finite or overflowing scale is summed
    # unfactored): the NaN positions are F.linear's on the decoded weight.
    ref = F.linear(x.double(), w.double())
    assert bool((y.isnan() == ref.isnan()).all())


@pytest.mark.parametrize("grade", ("MXFP4", "NVF4", "Q4KS", "I8S24", Q8, GPTQ, S8_128, S4_128, FP4_F16, S4_F32,
                                   S8_F32, S4_CH))
def test_results_do_not_depend_on_the_thread_count(isa, grade):
    shape = (200, 512)  # 13 tiles: threads split them unevenly
    planes = _packed(grade, torch.randn(shape))
    before = torch.get_num_threads()
    try:
        results = []
        for threads in (1, 2):
            torch.set_num_threads(threads)
            # bfloat16 too: the avx512_bf16 pair path splits its work the same way.
            results.append([ops.packed_linear(torch.randn(m, shape[1], generator=torch.Generator().manual_seed(m)).to(dt),
                                              planes, grade, shape)
                            for m in (1, 5, 33) for dt in (torch.float32, torch.bfloat16)])
    finally:
        torch.set_num_threads(before)
    for a, b in zip(*results):
        assert torch.equal(_bits(a), _bits(b))


# --------------------------------------------------------------------------- continuation


def _start_acc(m, n, seed):
    acc = torch.randn(m, n, generator=torch.Generator().manual_seed(seed)) * 64
    acc.view(-1)[0] = float("nan")
    acc.view(-1)[-1] = -0.0
    if acc.numel() > 2:
        acc.view(-1)[1], acc.view(-1)[2] = float("inf"), float("-inf")
    return acc


@pytest.mark.parametrize("grade", GRADES)
def test_the_continuation_is_the_reference_continuation_on_every_variant(isa, grade):
    """grit::packed_linear_continue on a variant (its GEMM, at batch 1 too) gives the scalar
    reference's bits from starting accs with NaN, inf and -0, on planes with NaN and infinite
    scales and on encoded ones; finishing adds the bias in x's dtype. The per-channel grades
    (a group wider than the GEMM's chunk) fall back to the reference."""
    shape = SHAPES[grade][1]
    sources = (_plant_specials(grade, _random_planes(grade, shape, seed=7)), _packed(grade, torch.randn(shape)))
    for s, planes in enumerate(sources):
        for m in (1, 4, 9):
            x = torch.randn(m, shape[1], generator=torch.Generator().manual_seed(m))
            x[-1, 5] = float("inf") if s else x[-1, 5]
            acc = _start_acc(m, shape[0], seed=m + s)
            bias = torch.randn(shape[0]).to(torch.bfloat16)
            got = [ops.packed_linear_continue(x, planes, grade, shape, acc),
                   ops.packed_linear_continue(x.bfloat16(), planes, grade, shape, acc, bias, finish=True)]
            prev = _C._set_cpu_isa("scalar")
            want = [ops.packed_linear_continue(x, planes, grade, shape, acc),
                    ops.packed_linear_continue(x.bfloat16(), planes, grade, shape, acc, bias, finish=True)]
            _C._set_cpu_isa(prev)
            for g, w in zip(got, want):
                assert g.dtype == w.dtype and _same_bits(g, w), (isa, grade, s, m)


def test_a_continuation_that_falls_back_midway_starts_again_from_its_acc(isa):
    """Two quads of the last row name one position twice: a fast variant falls back after it
    continued the tiles before, and the reference starts again from the acc it was given (not
    from the half-continued one)."""
    shape = (200, 160)
    planes = _random_planes("I8S24", shape, seed=3)
    planes[3][-1] = 0
    x = torch.randn(3, shape[1])
    acc = _start_acc(3, shape[0], seed=4)
    got = ops.packed_linear_continue(x, planes, "I8S24", shape, acc)
    prev = _C._set_cpu_isa("scalar")
    want = ops.packed_linear_continue(x, planes, "I8S24", shape, acc)
    _C._set_cpu_isa(prev)
    assert _same_bits(got, want)


def test_the_continuation_does_not_depend_on_the_thread_count():
    shape = (200, 512)
    planes = _packed("MXFP4", torch.randn(shape))
    x = torch.randn(5, shape[1])
    acc = _start_acc(5, shape[0], seed=1)
    before = torch.get_num_threads()
    try:
        out = []
        for threads in (1, 2):
            torch.set_num_threads(threads)
            out.append(ops.packed_linear_continue(x, planes, "MXFP4", shape, acc))
    finally:
        torch.set_num_threads(before)
    assert _same_bits(out[0], out[1])


def test_a_grade_without_a_fast_decoder_runs_the_reference(isa):
    grade = "grit1(e=e4m3,k0=32,s0=e8m0,esr=exp2floormaxabs)"
    shape = (20, 64)
    planes = _random_planes(grade, shape)
    planes[1] = torch.randint(120, 130, planes[1].shape, dtype=torch.uint8)  # scales 2^-7 .. 2^2
    planes[0][5] = 0x7F  # an e4m3 NaN element
    w = _reference_weight(grade, planes, shape)
    x = torch.randn(3, 64)
    _assert_within_bound(ops.packed_linear(x, planes, grade, shape), x, w, None, torch.float32)


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
def test_large_batches_in_chunks_give_each_row_its_own_bits(dtype):
    """A batch larger than one chunk of x (8 MiB of float32: 64 rows at 32768 in-features) is handed
    to the kernels in chunks, the last one a single row (the batch-1 route); every row equals the
    row computed alone. A tiny activation sends its chunk off the bfloat16 pair route."""
    shape = (16, 32768)
    g = torch.Generator().manual_seed(3)
    planes = ops.quantize(torch.randn(shape, generator=g), "MXFP4")
    x = torch.randn(129, shape[1], generator=g).to(dtype)
    x[70, 5] = 1e-30  # below the pair route's activation bound: that chunk takes the FMA route
    y = torch.ops.grit.packed_linear(x, *planes, "MXFP4", list(shape), None)
    for i in (0, 63, 64, 70, 127, 128):
        alone = torch.ops.grit.packed_linear(x[i:i + 1], *planes, "MXFP4", list(shape), None)
        assert torch.equal(_bits(y[i:i + 1]), _bits(alone)), i


BLOCKED_GRADES = tuple(g for g in GRADES if g not in (S8_CH, S4_CH))  # per-channel: the GEMV, row by row
FAST_ISAS = tuple(i for i in ISAS if i != "scalar")  # the scalar variant is the reference held to


@pytest.fixture(params=FAST_ISAS)
def fast_isa(request):
    previous = _C._set_cpu_isa(request.param)
    yield request.param
    _C._set_cpu_isa(previous)


@pytest.mark.parametrize("grade", BLOCKED_GRADES)
def test_batches_past_l2_take_the_blocked_order_with_the_reference_bits(fast_isa, grade):
    """A batch whose float32 x outgrows L2 (over 1 MiB) runs in passes of 256 batch rows x 16 tiles,
    chunk by chunk over every tile of a pass. The shape makes two row passes (260 rows), two tile
    passes ending in a partial tile (276 outputs) and a partial last chunk (1152 in-features); the
    planes carry NaN and infinite scales and x an infinity. Every output has the scalar reference's
    bits, for 1 and 2 threads, and a row computed alone has the bits it has inside the batch."""
    shape, m = (276, 1152), 260
    assert m * shape[1] * 4 > 1 << 20  # the blocked order's threshold (packed_linear_simd.inc)
    sources = (_packed(grade, torch.randn(shape, generator=torch.Generator().manual_seed(1))),
               _plant_specials(grade, _random_planes(grade, shape, seed=2)))
    x = torch.randn(m, shape[1], generator=torch.Generator().manual_seed(3))
    x[258, 7] = float("inf")
    before = torch.get_num_threads()
    for s, planes in enumerate(sources):
        bias = torch.randn(shape[0]) if s else None
        try:
            got = []
            for threads in (1, 2):
                torch.set_num_threads(threads)
                got.append(ops.packed_linear(x, planes, grade, shape, bias))
        finally:
            torch.set_num_threads(before)
        prev = _C._set_cpu_isa("scalar")
        want = ops.packed_linear(x, planes, grade, shape, bias)
        _C._set_cpu_isa(prev)
        for g in got:
            assert _same_bits(g, want), (fast_isa, grade, s)
        for i in (0, 255, 256, 258, 259):
            alone = ops.packed_linear(x[i:i + 1], planes, grade, shape, bias)
            assert _same_bits(alone, want[i:i + 1]), (fast_isa, grade, s, i)
