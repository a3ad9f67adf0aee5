"""Bad input at the user-facing entry points (quantize_, GritLinear, its
forward, its TorchScript twin): wrong dtype, wrong device, rows the grade's
groups do not tile, NaN/Inf weights, grade strings that do not parse. Each is
a clear error that names what is wrong, and leaves the model as it was; NaN
and Inf are legal weights that poison their group, as the contract says.

The op-level and GritTensor-level cases live in test_ops.py, test_tensor.py
and test_quantize.py; this file covers what those leave open."""

import copy

import pytest
import torch
from torch import nn

import torch_grit
from torch_grit import GradeError, GritTensor
from torch_grit.nn import GritLinear
from torch_grit.tensor import group_size

from grit_cases import REF_NAMES


def model(dtype=torch.float32, inp=256):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(inp, 64), nn.ReLU(), nn.Linear(64, 8)).to(dtype)


def state(m):
    """Every tensor's bytes (GritTensor: its planes) and every module's type."""
    out = {k: [p.clone() for p in (v.planes if isinstance(v, GritTensor) else [v])]
           for k, v in m.state_dict().items()}
    return out, [type(c) for c in m.modules()]


def same_state(m, before):
    now = state(m)
    return now[1] == before[1] and now[0].keys() == before[0].keys() and all(
        len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))
        for a, b in ((now[0][k], before[0][k]) for k in before[0]))


# -- wrong dtype ------------------------------------------------------------------------

def test_float64_layers_are_left_exact_by_default_and_refused_when_selected():
    m = model(torch.float64)
    before = state(m)
    reports = torch_grit.quantize_(copy.deepcopy(m), "MXFP4")
    assert not any(r.quantized for r in reports)
    assert all("torch.float64" in r.skipped for r in reports)
    with pytest.raises(TypeError, match=r"0\.weight: .*found torch\.float64"):
        torch_grit.quantize_(m, "MXFP4", filter_fn=lambda module, fqn: True)
    assert same_state(m, before)


@pytest.mark.parametrize("dtype", [torch.float64, torch.int64])
def test_forward_refuses_a_non_float_input_naming_it(dtype):
    layer = GritLinear.from_linear(model()[0], "NVF4")
    with pytest.raises(TypeError, match=r"grit::packed_linear(_tiled)?: argument 'x' must be float32, "
                                        r"bfloat16 or float16, found (Double|Long)"):
        layer(torch.ones(2, 256, dtype=dtype))


@pytest.mark.skipif(torch.__version__ < "2.13", reason="torch %s's TorchScript interpreter "
                    "crashed (SIGSEGV) instead of raising a grit op's error from Python (seen on "
                    "2.11.0; see test_libtorch.py)" % torch.__version__)
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_scripted_forward_refuses_a_non_float_input_naming_it():
    twin = torch.jit.script(GritLinear.from_linear(model()[0], "NVF4"))
    with pytest.raises(Exception, match=r"argument 'x' must be float32, bfloat16 or float16"):
        twin(torch.ones(2, 256, dtype=torch.float64))


# -- wrong device -----------------------------------------------------------------------
# This machine has one real device; the meta device stands in for "another device".
# Before the fakes checked devices, a meta plane next to a CPU input dispatched to the
# fake kernel (Meta outranks CPU) and returned an uninitialised CPU tensor.

def test_forward_refuses_an_input_on_another_device():
    layer = GritLinear.from_linear(model()[0], "MXFP4")
    with pytest.raises(ValueError, match=r"plane 'data' is on cpu but argument 'x' is on meta"):
        layer(torch.randn(2, 256, device="meta"))


def test_ops_refuse_planes_and_bias_on_another_device():
    W = torch_grit.quantize(torch.randn(64, 256), "Q4KS")
    planes, shape, x = W.planes, list(W.logical_shape), torch.randn(2, 256)
    moved = [planes[0], planes[1].to("meta")] + planes[2:]
    with pytest.raises(ValueError, match=r"packed_linear: plane 'scale0' is on meta but "
                                         r"argument 'x' is on cpu"):
        torch.ops.grit.packed_linear(x, *moved, W.grade_canonical, shape, None)
    with pytest.raises(ValueError, match=r"argument 'bias' is on meta"):
        torch.ops.grit.packed_linear(x, *planes, W.grade_canonical, shape,
                                     torch.zeros(64, device="meta"))
    with pytest.raises(ValueError, match=r"packed_linear_grad_input: plane 'scale0' is on meta"):
        torch.ops.grit.packed_linear_grad_input(torch.randn(2, 64), *moved, W.grade_canonical,
                                                shape)
    with pytest.raises(ValueError, match=r"dequantize: plane 'scale0' is on meta"):
        torch.ops.grit.dequantize(*moved, W.grade_canonical, shape, torch.float32)


def test_a_layer_and_its_input_on_meta_still_trace_shapes():
    layer = GritLinear(256, 64, grade="MXFP4", device="meta")
    y = layer(torch.empty(3, 256, device="meta"))
    assert y.device.type == "meta" and y.shape == (3, 64)


# -- rows the groups do not tile ---------------------------------------------------------

@pytest.mark.parametrize("name", REF_NAMES)
def test_ragged_layers_are_named_and_nothing_changes(name):
    size = group_size(name)
    inp = size + size // 2  # one group and a half per row
    m = model(inp=inp)
    before = state(m)
    with pytest.raises(ValueError) as err:
        torch_grit.quantize_(m, name, filter_fn=lambda module, fqn: True)
    msg = str(err.value)
    assert "0.weight" in msg and "in_features=%d" % inp in msg and "group size %d" % size in msg
    assert same_state(m, before)
    with pytest.raises(ValueError, match="group size %d" % size):
        GritLinear.from_linear(m[0], name)
    with pytest.raises(ValueError, match="group size %d" % size):
        GritLinear(inp, 8, grade=name)


# -- grades that do not parse ------------------------------------------------------------

@pytest.mark.parametrize("text, code", [
    ("MXFP5", "malformed"),                                       # no such reference name
    ("grit1(e=e2m1)", "missing_key"),                             # k0 has no default
    ("grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs,colour=blue)", "unknown_key"),
    ("grit1(e=nf4,k0=64,s0=binary16)", "inexpressible"),          # a codebook
])
def test_unparsable_grades_raise_grade_error_everywhere_and_change_nothing(text, code):
    m = model()
    before = state(m)
    with pytest.raises(GradeError) as err:
        torch_grit.quantize_(m, text)
    assert err.value.code == code and repr(text) in str(err.value)
    assert same_state(m, before)
    with pytest.raises(GradeError):
        GritLinear.from_linear(m[0], text)
    with pytest.raises(GradeError):
        GritLinear(256, 8, grade=text)
    with pytest.raises(TypeError, match="grade"):
        torch_grit.quantize_(m, None)
    assert same_state(m, before)


# -- NaN and Inf weights: the grade's law, end to end ----------------------------------------

@pytest.mark.parametrize("name", REF_NAMES)
def test_nan_and_inf_weights_poison_their_group_through_quantize_(name):
    m = model()
    with torch.no_grad():
        m[0].weight[3, 5] = float("nan")
        m[0].weight[6, 200] = float("inf")
        m[0].weight[9, 100] = -float("inf")
    reports = torch_grit.quantize_(m, name)
    assert reports[0].fqn == "0" and reports[0].quantized
    size = group_size(name)
    poisoned = torch.zeros(64, 256, dtype=torch.bool)
    for row, col in ((3, 5), (6, 200), (9, 100)):
        start = col // size * size
        poisoned[row, start:start + size] = True
    nan = m[0].weight.dequantize().isnan()
    # NaN only inside the groups that held a NaN or an Inf; 2:4 sparsity keeps its zeros.
    assert not (nan & ~poisoned).any()
    for row in (3, 6, 9):
        assert nan[row].any()
    if name != "I8S24":
        assert torch.equal(nan, poisoned)
    x = torch.randn(4, 256)
    with torch.no_grad():
        y = m[0](x)
    assert torch.equal(y.isnan().any(0).nonzero().flatten(), torch.tensor([3, 6, 9]))
