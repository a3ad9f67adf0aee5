"""The general encoder (csrc/grit/encode_general.cpp): for grades outside the
reference families, torch_grit.quantize's bytes are those of an independent
Python reading of the rules (general_encoder_ref.py, on grit-datatype's format
layer), its dequantize is the decode law on them, on random and adversarial
groups (ties, zeros, one repeated value, subnormals, huge ranges, NaN, Inf),
for every thread count; grades no rule covers are refused naming why."""

import math

import numpy as np
import pytest
import torch

import torch_grit
from torch_grit.contract.codec import encode_planes
from torch_grit.contract.errors import GradeError

from general_encoder_ref import Spec, encode as ref_encode

SPECS = [
    # one-level affine with an integer zero point (GPTQ / AWQ / compressed-tensors asymmetric)
    Spec("u4", 128, "binary16", "affineminmax", zp="u4"),
    Spec("u4", 32, "binary16", "affineminmax", zp="u4", minus1=True),
    Spec("u4", 64, "binary32", "affineminmax", zp="u8"),
    Spec("u8", 32, "binary16", "affineminmax", zp="u8"),
    Spec("u2", 32, "binary16", "affineminmax", zp="u2", pad8=True),
    Spec("u6", 32, "binary16", "affineminmax", zp="u6"),
    Spec("s4", 32, "binary16", "affineminmax", zp="s4"),
    Spec("s8", 32, "binary32", "affineminmax", zp="s8", er="rtz"),
    Spec("u4", 32, "binary16", "affineminmax", zp="u4", er="rna", msb=True),
    Spec("u4", 32, "e4m3", "affineminmax", zp="u4"),
    # ratiomaxabs with a zero point: GPTQ's symmetric rule (z the middle of the grid)
    Spec("u4", 128, "binary16", "ratiomaxabs", zp="u4"),
    Spec("u4", 32, "binary16", "ratiomaxabs", zp="u4", minus1=True),
    Spec("u8", 64, "binary16", "ratiomaxabs", zp="u8"),
    Spec("u2", 32, "binary32", "ratiomaxabs", zp="u2"),
    Spec("s4", 32, "binary16", "ratiomaxabs", zp="s4"),
    # ratiomaxabs, symmetric
    Spec("s4", 64, "binary16", "ratiomaxabs"),
    Spec("s4", 128, "binary32", "ratiomaxabs", msb=True),
    Spec("s8", 128, "binary16", "ratiomaxabs"),
    Spec("s8", 32, "binary32", "ratiomaxabs", er="rtn"),
    Spec("e2m1", 32, "e4m3", "ratiomaxabs"),
    Spec("e2m1", 16, "binary16", "ratiomaxabs", er="rtz"),
    Spec("e4m3", 32, "binary16", "ratiomaxabs"),
    Spec("e4m3", 32, "e8m0", "ratiomaxabs"),
    Spec("u4", 32, "binary16", "ratiomaxabs", er="rtp"),
    Spec("s4", 32, "u8", "ratiomaxabs"),
    # exp2 rules beyond MXFP4's formats
    Spec("e4m3", 32, "e8m0", "exp2floormaxabs"),
    Spec("e2m1", 32, "e8m0", "exp2floormaxabs", er="rtz"),
    Spec("s8", 32, "e8m0", "exp2rnemaxabs"),
    Spec("s4", 32, "binary16", "exp2ceilmaxabs", pad8=True),
    Spec("e2m1", 64, "binary32", "exp2rnemaxabs"),
    Spec("u4", 32, "u8", "exp2floormaxabs"),
]


def adversarial(k0, groups, seed):
    """groups * k0 float32 values: random groups beside the hard ones."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((groups, k0)).astype(np.float32)
    x[0] = 0.0                                    # all zero
    x[1] = np.float32(0.3)                        # one repeated value
    x[2] = -np.float32(1.75)                      # one repeated negative value
    x[3] = (rng.integers(-16, 17, k0) * 0.125).astype(np.float32)  # exact ties
    x[4] *= np.float32(1e-41)                     # binary32 subnormals
    x[5, ::2] = np.float32(3e38)                  # a range past binary32
    x[5, 1::2] = np.float32(-3e38)
    x[6, 3] = np.nan
    x[7, 1] = np.inf
    x[8, 0] = -np.inf
    x[9] = np.abs(x[9])                           # positive only
    x[10] = -np.abs(x[10])                        # negative only
    x[11, 0] = -0.0
    x[11, 1:] = 0.0
    x[12] *= np.float32(1e6)
    x[13] *= np.float32(1e-30)
    return x.reshape(-1)


def same_values(a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return np.array_equal(a.view(np.uint32), b.view(np.uint32)) or np.array_equal(a, b, equal_nan=True) \
        and np.array_equal(np.signbit(a), np.signbit(b))


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.grade)
def test_bytes_and_values_follow_the_rule(spec):
    groups = 16
    v = adversarial(spec.k0, groups, seed=spec.k0 + len(spec.grade))
    if spec.s0 == "u8":  # no NaN code to poison a group: those groups are refused (tested below)
        v[~np.isfinite(v)] = 1.0
    want_planes, want_values = ref_encode(spec, v)
    got = encode_planes(spec.grade, v)
    for i in range(4):
        assert bytes(got[i]) == want_planes[i], "plane %d of %s" % (i, spec.grade)
    # The op (rows of k0 * 2 values) gives the same bytes and dequantizes to the rule's values.
    w = torch.from_numpy(v.copy()).reshape(groups // 2, 2 * spec.k0)
    t = torch_grit.quantize(w, spec.grade)
    for i, p in enumerate(t.planes):
        assert bytes(p.numpy().tobytes()) == want_planes[i], "op plane %d of %s" % (i, spec.grade)
    got_values = t.dequantize().reshape(-1).numpy()
    want = np.array(want_values, np.float32)
    assert np.array_equal(np.isnan(got_values), np.isnan(want))
    fin = ~np.isnan(want)
    assert np.array_equal(got_values[fin].view(np.uint32), want[fin].view(np.uint32)), spec.grade


def test_zero_is_exact_and_the_range_is_covered_under_affineminmax():
    spec = Spec("u4", 32, "binary16", "affineminmax", zp="u4")
    rng = np.random.default_rng(1)
    v = rng.uniform(-0.2, 3.0, 32 * 64).astype(np.float32)
    v[::7] = 0.0
    t = torch_grit.quantize(torch.from_numpy(v).reshape(64, 32), spec.grade)
    d = t.dequantize().reshape(-1).numpy()
    assert np.all(d[::7] == 0.0)  # the zero point lands on an integer code
    step = (np.maximum(v.reshape(64, 32).max(1), 0) - np.minimum(v.reshape(64, 32).min(1), 0)) / 15
    assert np.all(np.abs(d - v).reshape(64, 32) <= step[:, None] * 0.5 * 1.01 + 1e-7)


@pytest.mark.parametrize("grade", ["grit1(e=u4,k0=128,s0=binary16,zp=u4,esr=affineminmax)",
                                   "grit1(e=s4,k0=64,s0=binary16,esr=ratiomaxabs)"])
def test_bytes_do_not_depend_on_threads_or_row_split(grade):
    g = torch.Generator().manual_seed(5)
    w = torch.randn(67, 512, generator=g)  # not a multiple of the 8-row chunks
    w[9, 3] = float("nan")
    want = [bytes(p) for p in encode_planes(grade, w.numpy())]
    before = torch.get_num_threads()
    try:
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            got = [bytes(p.numpy().tobytes()) for p in torch.ops.grit.quantize(w, grade)]
            assert got == want, (grade, n)
    finally:
        torch.set_num_threads(before)


def test_the_op_passes_opcheck_on_a_general_grade():
    w = torch.randn(8, 128)
    torch.library.opcheck(torch.ops.grit.quantize.default,
                          (w, "grit1(e=u4,k0=32,s0=binary16,zp=u4,esr=affineminmax)"))


@pytest.mark.parametrize("grade, reason", [
    ("grit1(e=u4,k0=32,s0=binary16,zp=u4,esr=exp2floormaxabs)", "esr=exp2floormaxabs with a zero point"),
    ("grit1(e=u4,k0=32,s0=binary16,zp=u2,esr=ratiomaxabs)", "cannot hold the middle zero point 8"),
    ("grit1(e=s4,k0=32,s0=binary16,esr=affineminmax)", "esr=affineminmax needs a zero point"),
    ("grit1(e=e2m1,k0=32,s0=binary16,zp=u4,esr=affineminmax)", "need integer elements"),
    ("grit1(e=u4,k0=32,s0=binary16,zp=binary16,esr=affineminmax)", "need an integer zero point"),
    ("grit1(e=binary16,k0=32,s0=binary16,esr=ratiomaxabs)", "at most 8 bits"),
    ("grit1(e=s4,k0=32,s0=binary16,esr=custom:mine)", "names no rule GRIT v1 states"),
    ("grit1(e=s4,k0=32,s0=binary16,es=ovfinf,esr=ratiomaxabs)", "es=ovfinf"),
    ("grit1(e=e2m1,k0=32,s0=e8m0,es=satmax,esr=exp2floormaxabs)", "es=satmax"),
    ("grit1(e=s4,k0=32,s0=binary16,esn=ftz,esr=ratiomaxabs)", "esn=ftz"),
    ("grit1(e=u4,k0=32,s0=binary16,k1=8,s1=binary16,esr=ratiomaxabs)", "two-level"),
    ("grit1(e=s4,k0=32,s0=binary16,sp=2:4:u2:asclsb,esr=ratiomaxabs)", "sparse grades"),
    ("grit1(e=s4,k0=32,s0=s8,esr=ratiomaxabs)", "signed integer scale"),
])
def test_grades_without_a_rule_are_refused_naming_it(grade, reason):
    w = torch.randn(4, 256)
    with pytest.raises(ValueError, match="cannot quantize to") as exc:
        torch_grit.quantize(w, grade)
    assert reason in str(exc.value)
    with pytest.raises(GradeError) as exc:
        encode_planes(grade, np.zeros(256, np.float32))
    assert exc.value.code == "inexpressible" and reason in str(exc.value)


def test_a_poisoned_group_without_a_nan_scale_is_refused_with_its_position():
    w = torch.randn(2, 64)
    w[1, 40] = float("inf")
    with pytest.raises(ValueError, match=r"group 3 \(values 96\.\.127\) holds NaN or Inf, and s0=u8"):
        torch_grit.quantize(w, "grit1(e=s4,k0=32,s0=u8,esr=ratiomaxabs)")
