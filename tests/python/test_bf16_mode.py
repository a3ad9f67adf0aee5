"""The bf16 activation law (csrc/grit/bf16_linear.h) through its ops and the layer mode
activations="bf16": the ops against a NumPy evaluation of the law written from its statement,
the fast kernels (AMX tiles, or vdpbf16ps without AMX) against the scalar copy bit for bit (ragged
shapes, every x dtype, NaN and Inf, 1 and 2 threads, a row alone and inside a batch), opcheck,
autograd, and the mode in
GritLinear, quantize_, save/load, inspect, TorchScript and report."""

import copy
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torch_grit
from torch_grit import _C, ops
from torch_grit.nn import GritLinear

GRADES = ("MXFP4", "NVF4", "Q4KS", "I8S24", "Q8_0", "U4Z_G128", "S4_G64", "MXFP8")
AMX = _C._cpu_bf16_amx_ready()
DP = _C._cpu_bf16_dp_ready()  # vdpbf16ps following the law: the route where there is no AMX
# The kernel's fast routes on this CPU, as _cpu_set_bf16_amx modes: 1 takes the tiles where AMX is
# ready, else vdpbf16ps; 2 takes vdpbf16ps even where AMX is ready.
FAST_MODES = ((1,) if AMX or DP else ()) + ((2,) if AMX and DP else ())


def _weight(grade, shape, seed=0):
    w = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
    q = torch_grit.quantize(w, grade)
    return q.untile() if q.tiled else q


def _args(q):
    return q.stored_planes, q.grade_canonical, list(q.logical_shape)


def _bits(t):
    return t.float().contiguous().view(torch.int32)


def _fast_calls():
    return _C._cpu_bf16_amx_calls() + _C._cpu_bf16_dp_calls()


class _Mode:
    """The bf16 kernel's fast routes on (1: tiles, else vdpbf16ps; 2: vdpbf16ps) or off (0, the
    scalar copy) inside the block; `ran` counts the multiplies the fast routes ran."""

    def __init__(self, mode):
        self.mode = mode

    def __enter__(self):
        self.before = _C._cpu_set_bf16_amx(self.mode)
        self.calls = _fast_calls()
        return self

    def __exit__(self, *exc):
        _C._cpu_set_bf16_amx(self.before)
        self.ran = _fast_calls() - self.calls


# --------------------------------------------------------------------------- the law in NumPy

def _to_bf16(v):
    """The law's from_float on float32 values, returned as float32 values (subnormals and
    zeros to zero of their sign, NaN quiet, else round to nearest even)."""
    u = np.ascontiguousarray(v, dtype=np.float32).view(np.uint32).astype(np.uint64)
    tiny = (u & 0x7F800000) == 0
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
    r = np.where(tiny, (u >> 16) & 0x8000, np.where(nan, (u >> 16) | 0x40, r))
    return (r.astype(np.uint32) << 16).view(np.float32)


def _flush(v):
    v = np.asarray(v, dtype=np.float32)
    return np.where(np.abs(v) < np.float32(2.0 ** -126), np.copysign(np.float32(0), v), v).astype(np.float32)


def _law(a, b):
    """acc[i, j] of step 2 for operand rows a [m, L] and b [n, L] (bfloat16 values as float32):
    chunks of 32 (zero padded), even and odd chains from the first product, every sum formed in
    float64 (exact for these magnitudes), rounded to float32 and flushed."""
    m, L = a.shape
    pad = (-L) % 32
    a = np.pad(a, ((0, 0), (0, pad))).astype(np.float64)
    b = np.pad(b, ((0, 0), (0, pad))).astype(np.float64)
    acc = np.zeros((m, b.shape[0]), dtype=np.float32)
    for c in range(0, a.shape[1], 32):
        p = a[:, None, c:c + 32] * b[None, :, c:c + 32]
        E, O = _flush(p[..., 0]), _flush(p[..., 1])
        for t in range(2, 32, 2):
            E = _flush(E.astype(np.float64) + p[..., t])
            O = _flush(O.astype(np.float64) + p[..., t + 1])
        acc = _flush(acc.astype(np.float64) + _flush(E.astype(np.float64) + O.astype(np.float64)))
    return acc


@pytest.mark.parametrize("grade", GRADES)
def test_forward_and_grad_input_follow_the_stated_law(grade):
    q = _weight(grade, (40, 256), seed=1)
    x = torch.randn(5, 256, generator=torch.Generator().manual_seed(2))
    gy = torch.randn(5, 40, generator=torch.Generator().manual_seed(3))
    bias = torch.randn(40, generator=torch.Generator().manual_seed(4))
    wd = _to_bf16(q.dequantize().numpy())
    y = ops.packed_linear_bf16(x, *_args(q), bias)
    want = (_law(_to_bf16(x.numpy()), wd).astype(np.float64) + bias.numpy()).astype(np.float32)
    assert np.array_equal(y.numpy().view(np.int32), want.view(np.int32)), grade
    gx = ops.packed_linear_bf16_grad_input(gy, *_args(q))
    gwant = _law(_to_bf16(gy.numpy()), np.ascontiguousarray(wd.T))
    assert np.array_equal(gx.numpy().view(np.int32), gwant.view(np.int32)), grade


@pytest.mark.parametrize("grade", GRADES)
def test_small_batches_follow_the_law_through_every_flush(grade):
    """The law's bits for small batches whose products, chains and sums pass through the subnormal
    range (the law flushes each), with zeros of both signs and float32 subnormals, and the same
    bits for those rows inside a larger batch."""
    q = _weight(grade, (40, 256), seed=40)
    g = torch.Generator().manual_seed(41)
    x = torch.randn(4, 256, generator=g)
    x[1] = torch.randn(256, generator=g) * 2.0 ** -120  # products near and under 2^-126
    x[2, ::3] = -0.0
    x[2, 1::3] = 1e-40  # a float32 subnormal: zero under the law
    x[3] = torch.randn(256, generator=g) * 2.0 ** -110
    wd = _to_bf16(q.dequantize().numpy())
    want = _law(_to_bf16(x.numpy()), wd)
    for rows in ((0, 4), (1, 2), (1, 4), (3, 4)):
        y = ops.packed_linear_bf16(x[rows[0]:rows[1]], *_args(q))
        assert np.array_equal(y.numpy().view(np.int32), want[rows[0]:rows[1]].view(np.int32)), (grade, rows)
    big = torch.cat([x, torch.randn(33, 256, generator=g)])
    assert torch.equal(_bits(ops.packed_linear_bf16(big, *_args(q))[:4]), _bits(ops.packed_linear_bf16(x, *_args(q))))


@pytest.mark.parametrize("isa", tuple(_C.cpu_isas_supported()))
def test_every_variant_builds_the_weight_operand_by_the_law(isa):
    """The weight operands come from the variant's decoder (straight from its registers on
    avx512_bf16, through its columns elsewhere, the reference on scalar): the law's bits on every
    variant for the forward and grad_input, a last chunk of 16 positions (NVF4 at 80 in-features),
    a pair of 32 rows half used, partial tiles."""
    for grade, shape in (("NVF4", (33, 80)), ("MXFP4", (17, 96)), ("Q4KS", (20, 256)), ("I8S24", (48, 160))):
        q = _weight(grade, shape, seed=12)
        x = torch.randn(3, shape[1], generator=torch.Generator().manual_seed(13))
        gy = torch.randn(3, shape[0], generator=torch.Generator().manual_seed(14))
        wd = _to_bf16(q.dequantize().numpy())
        want = _law(_to_bf16(x.numpy()), wd)
        gwant = _law(_to_bf16(gy.numpy()), np.ascontiguousarray(wd.T))
        previous = _C._set_cpu_isa(isa)
        try:
            y = ops.packed_linear_bf16(x, *_args(q))
            gx = ops.packed_linear_bf16_grad_input(gy, *_args(q))
        finally:
            _C._set_cpu_isa(previous)
        assert np.array_equal(y.numpy().view(np.int32), want.view(np.int32)), (isa, grade, shape)
        assert np.array_equal(gx.numpy().view(np.int32), gwant.view(np.int32)), (isa, grade, shape)


# --------------------------------------------------------------------------- the tile kernel's bits

needs_fast = pytest.mark.skipif(
    not FAST_MODES, reason="this CPU has neither AMX-BF16 nor AVX512_BF16 whose instructions follow the law's "
                           "order: packed_linear_bf16 runs its scalar copy here")


@needs_fast
@pytest.mark.parametrize("grade", GRADES)
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16, torch.float16))
def test_fast_routes_give_the_scalar_law_bits(grade, dtype):
    shape = (130, 512)
    q = _weight(grade, shape, seed=5)
    g = torch.Generator().manual_seed(6)
    for m in (1, 33, 70):
        x = (torch.randn(m, shape[1], generator=g) * 3).to(dtype)
        gy = torch.randn(m, shape[0], generator=g).to(dtype)
        bias = torch.randn(shape[0], generator=g).to(dtype)
        with _Mode(0) as off:
            y0 = ops.packed_linear_bf16(x, *_args(q), bias)
            g0 = ops.packed_linear_bf16_grad_input(gy, *_args(q))
        assert off.ran == 0
        for mode in FAST_MODES:
            with _Mode(mode) as on:
                y1 = ops.packed_linear_bf16(x, *_args(q), bias)
                g1 = ops.packed_linear_bf16_grad_input(gy, *_args(q))
            assert on.ran > 0
            assert y1.dtype == dtype and g1.dtype == dtype
            assert torch.equal(_bits(y1), _bits(y0)), (grade, m, mode)
            assert torch.equal(_bits(g1), _bits(g0)), (grade, m, mode)


@needs_fast
def test_ragged_shapes_and_long_reductions():
    # out-features off the 32-column pair and the 128-row task, in-features off the 32-column
    # chunk (S8 per channel: k0 = in_features), grad_input over several blocks of rows (2048 rows
    # a block, 1024 past 8192 in-features)
    cases = (("MXFP4", (17, 64), 37), ("S4_G64", (1, 192), 37), ("MXFP4", (2100, 96), 37), ("Q8_0", (33, 1120), 37),
             ("NVF4", (1056, 8224), 3))
    for grade, shape, m in cases:
        q = _weight(grade, shape, seed=7)
        x = torch.randn(m, shape[1], generator=torch.Generator().manual_seed(8))
        gy = torch.randn(m, shape[0], generator=torch.Generator().manual_seed(9))
        with _Mode(0):
            y0, g0 = ops.packed_linear_bf16(x, *_args(q)), ops.packed_linear_bf16_grad_input(gy, *_args(q))
        for mode in FAST_MODES:
            with _Mode(mode):
                y1, g1 = ops.packed_linear_bf16(x, *_args(q)), ops.packed_linear_bf16_grad_input(gy, *_args(q))
            assert torch.equal(_bits(y1), _bits(y0)) and torch.equal(_bits(g1), _bits(g0)), (grade, shape, mode)


def test_nan_and_infinities():
    q = _weight("MXFP4", (48, 128), seed=10)
    planes, grade, shape = _args(q)
    s0 = planes[1].clone()
    s0[3] = 255  # E8M0 NaN: row 0, columns 96..127 decode to NaN
    planes = [planes[0], s0, planes[2], planes[3]]
    x = torch.randn(20, 128, generator=torch.Generator().manual_seed(11))
    x[2, 5] = float("inf")
    x[4, 7] = float("nan")
    x[6, 9] = 3.4e38  # finite in float32, rounds to a bfloat16 infinity
    x[7, :] = 1e-39  # float32 subnormals: zero under the law
    gy = torch.randn(20, 48, generator=torch.Generator().manual_seed(12))
    gy[1, 3] = float("-inf")
    outs = []
    for mode in FAST_MODES + (0,):
        with _Mode(mode):
            outs.append((ops.packed_linear_bf16(x, planes, grade, shape), ops.packed_linear_bf16_grad_input(gy, planes, grade, shape)))
    y, gx = outs[0]
    for y2, gx2 in outs[1:]:
        assert torch.equal(_bits(y), _bits(y2)) and torch.equal(_bits(gx), _bits(gx2))
    nan = torch.tensor(0x7FC00000, dtype=torch.int32)
    assert bool((_bits(y)[:, 0] == nan).all())  # every row meets row 0's NaN weights
    assert bool((_bits(y)[4] == nan).all())
    assert torch.equal(y[7, 1:], torch.zeros(47))  # (column 0 meets the NaN weights: 0 * NaN)
    assert bool(torch.isinf(y[6, 1:]).any() or torch.isnan(y[6, 1:]).any())
    assert bool((_bits(gx)[:, 96:] == nan).all())  # W[0, 96:] is NaN for every grad row
    assert torch.isfinite(gx[0, :96]).all()


def test_a_row_alone_and_thread_counts():
    q = _weight("NVF4", (96, 256), seed=13)
    x = torch.randn(50, 256, generator=torch.Generator().manual_seed(14))
    gy = torch.randn(50, 96, generator=torch.Generator().manual_seed(15))
    y = ops.packed_linear_bf16(x, *_args(q))
    gx = ops.packed_linear_bf16_grad_input(gy, *_args(q))
    for i in (0, 17, 49):
        assert torch.equal(_bits(ops.packed_linear_bf16(x[i:i + 1], *_args(q))), _bits(y[i:i + 1]))
        assert torch.equal(_bits(ops.packed_linear_bf16_grad_input(gy[i:i + 1], *_args(q))), _bits(gx[i:i + 1]))
    assert torch.equal(_bits(ops.packed_linear_bf16(x[10:43], *_args(q))), _bits(y[10:43]))
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        y1 = ops.packed_linear_bf16(x, *_args(q))
        g1 = ops.packed_linear_bf16_grad_input(gy, *_args(q))
    finally:
        torch.set_num_threads(before)
    assert torch.equal(_bits(y1), _bits(y)) and torch.equal(_bits(g1), _bits(gx))


def test_a_batch_past_one_pass_over_the_weight():
    # the forward packs x and sweeps the weight once per 4 MiB of packed rows (512 rows at 4096
    # in-features): rows of the later passes give the bits they give alone
    q = _weight("MXFP4", (40, 4096), seed=30)
    x = torch.randn(1100, 4096, generator=torch.Generator().manual_seed(31)).bfloat16()
    bias = torch.randn(40, generator=torch.Generator().manual_seed(32)).bfloat16()
    y = ops.packed_linear_bf16(x, *_args(q), bias)
    # grad_input takes the batch in passes of 1024 rows
    gy = torch.randn(1100, 40, generator=torch.Generator().manual_seed(33)).bfloat16()
    gx = ops.packed_linear_bf16_grad_input(gy, *_args(q))
    for a, b in ((0, 5), (508, 516), (1020, 1030), (1090, 1100)):
        assert torch.equal(_bits(ops.packed_linear_bf16(x[a:b], *_args(q), bias)), _bits(y[a:b])), (a, b)
        assert torch.equal(_bits(ops.packed_linear_bf16_grad_input(gy[a:b], *_args(q))), _bits(gx[a:b])), (a, b)


def test_close_to_float_and_leading_dims():
    q = _weight("Q4KS", (64, 256), seed=16)
    x = torch.randn(2, 3, 256, generator=torch.Generator().manual_seed(17))
    y = ops.packed_linear_bf16(x, *_args(q))
    assert y.shape == (2, 3, 64)
    ref = F.linear(x, q.dequantize())
    assert float((y - ref).norm() / ref.norm()) < 0.01
    assert ops.packed_linear_bf16(torch.zeros(0, 256), *_args(q)).shape == (0, 64)


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
@pytest.mark.parametrize("with_bias", (False, True))
def test_opcheck(dtype, with_bias):
    q = _weight("MXFP4", (64, 256), seed=18)
    x = torch.randn(3, 5, 256, generator=torch.Generator().manual_seed(19)).to(dtype)
    bias = torch.randn(64, generator=torch.Generator().manual_seed(20)).to(dtype) if with_bias else None
    torch.library.opcheck(torch.ops.grit.packed_linear_bf16.default, (x, *q.stored_planes, q.grade_canonical, [64, 256], bias))
    gy = torch.randn(3, 5, 64, generator=torch.Generator().manual_seed(21)).to(dtype)
    torch.library.opcheck(torch.ops.grit.packed_linear_bf16_grad_input.default,
                          (gy, *q.stored_planes, q.grade_canonical, [64, 256]))


def test_autograd_straight_through_and_double_backward():
    q = _weight("MXFP4", (32, 128), seed=22)
    x = torch.randn(6, 128, generator=torch.Generator().manual_seed(23), requires_grad=True)
    bias = torch.randn(32, generator=torch.Generator().manual_seed(24), requires_grad=True)
    gy = torch.randn(6, 32, generator=torch.Generator().manual_seed(25))
    y = ops.packed_linear_bf16(x, *_args(q), bias)
    gx, gb = torch.autograd.grad(y, (x, bias), gy, create_graph=True)
    assert torch.equal(gx, ops.packed_linear_bf16_grad_input(gy, *_args(q)))
    assert torch.allclose(gb, gy.sum(0))
    # grad_input is linear in grad_y: its own gradient is the forward
    gy2 = gy.clone().requires_grad_(True)
    g = ops.packed_linear_bf16_grad_input(gy2, *_args(q))
    v = torch.randn(6, 128, generator=torch.Generator().manual_seed(26))
    (ggy,) = torch.autograd.grad(g, gy2, v)
    assert torch.equal(ggy, ops.packed_linear_bf16(v, *_args(q)))


def test_int4g_is_refused():
    w = torch.randn(16, 64)
    q = torch_grit.quantize(w, "INT4G32")
    with pytest.raises(ValueError, match="INT4G32 has no bf16 activation law.*S4_G32"):
        torch.ops.grit.packed_linear_bf16(torch.randn(2, 64), *q.stored_planes, q.grade_canonical, [16, 64], None)
    lin = nn.Linear(64, 16)
    layer = GritLinear.from_linear(lin, "INT4G32")
    with pytest.raises(ValueError, match="activations='bf16' is not available for its grade INT4G32"):
        layer.set_activations_("bf16", name="proj")
    assert layer.activations is None


# --------------------------------------------------------------------------- the layer mode

def _mlp(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, 96), nn.ReLU(), nn.Linear(96, 32))


def test_quantize_mode_layer_save_load_inspect_and_script(tmp_path):
    m = _mlp()
    src = copy.deepcopy(m)
    torch_grit.quantize_(m, "MXFP4", activations="bf16")
    assert [l.activations for l in (m[0], m[2])] == ["bf16", "bf16"]
    assert not m[0].weight.tiled  # the law's kernel reads the row-major planes
    assert "activations=bf16" in repr(m)
    with pytest.raises(ValueError, match="activations='bf16'"):
        m[0].tile_()
    x = torch.randn(9, 64, generator=torch.Generator().manual_seed(27), requires_grad=True)
    w = m[0].weight
    assert torch.equal(m[0](x), ops.packed_linear_bf16(x, w.stored_planes, w.grade_canonical,
                                                       list(w.logical_shape), m[0].bias))
    y = m(x)
    y.sum().backward()
    assert x.grad is not None and m[0].bias.grad is not None
    m[2].set_activations_(None)
    y = m(x)
    path = os.path.join(tmp_path, "m.safetensors")
    torch_grit.save(m, path)
    back = torch_grit.load(path, model=_mlp(1))
    assert (back[0].activations, back[2].activations) == ("bf16", None)
    assert torch.equal(back(x), y)
    every = torch_grit.load(path, model=_mlp(1), activations="bf16")
    assert every[2].activations == "bf16"
    out = subprocess.run([sys.executable, "-m", "torch_grit", "inspect", path, "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["activations"] == {"0": "bf16"}
    scripted = torch.jit.script(back)
    assert torch.equal(scripted(x), y)
    rep = torch_grit.report(src, every)
    assert [l.activations for l in rep.layers] == ["bf16", "bf16"]
    assert all(l.activation_sqnr_db > 40 for l in rep.layers)
    assert "| 0 | bf16 |" in rep.table()
