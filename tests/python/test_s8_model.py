"""activations="s8" for whole models: GritLinear, quantize_, save/load, inspect, report.

A layer in the mode runs grit::packed_linear_s8 (its bits are test_s8_linear.py's);
here: every entry point sets it, repr and inspect show it, a checkpoint records it
and a reload runs the same bits, a grade without an s8 law is refused before
anything is modified, TorchScript keeps the mode, the report measures what the
activation packing adds, and gradients reach the input (straight through) and a bias.
"""

import copy
import json
import os
import subprocess
import sys

import pytest
import torch
from torch import nn

import torch_grit
from torch_grit import ops
from torch_grit.nn import GritLinear


def _mlp(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, 96), nn.ReLU(), nn.Linear(96, 32))


def _x(rows=3, k=64):
    return torch.randn(rows, k, generator=torch.Generator().manual_seed(1))


def test_quantize_sets_the_mode_and_runs_the_s8_op():
    m = _mlp()
    torch_grit.quantize_(m, "MXFP4", activations="s8")
    assert [l.activations for l in (m[0], m[2])] == ["s8", "s8"]
    assert "activations=s8" in repr(m)
    x = _x()
    w = m[0].weight
    want = ops.packed_linear_s8(x, w.stored_planes, w.grade_canonical, list(w.logical_shape), m[0].bias)
    assert torch.equal(m[0](x), want)
    float_path = torch.nn.functional.linear(x, w, m[0].bias)
    assert not torch.equal(want, float_path)
    assert torch.allclose(want, float_path, rtol=0.05, atol=0.05)


@pytest.mark.parametrize("grade", ("Q4KS", "U4Z_G32", "I8S24", "NVF4"))
def test_every_grade_family_through_the_layer(grade):
    torch.manual_seed(0)
    lin = nn.Linear(256, 40)
    layer = GritLinear.from_linear(lin, grade, activations="s8")
    x = _x(2, 256)
    y = layer(x)
    ref = torch.nn.functional.linear(x, layer.weight, layer.bias)  # the same weight, float x
    assert ((y - ref).norm() / ref.norm()) < 0.02
    assert torch.equal(layer(x[1:]), y[1:])  # a row alone: the same bits


def test_refused_before_anything_changes():
    m = _mlp()
    before = copy.deepcopy(m.state_dict())
    with pytest.raises(ValueError, match="0: activations='s8' is not available.*e4m3"):
        torch_grit.quantize_(m, "MXFP8", activations="s8")
    assert isinstance(m[0], nn.Linear) and not isinstance(m[0], GritLinear)
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())
    with pytest.raises(ValueError, match="activations is None"):
        torch_grit.quantize_(_mlp(), "MXFP4", activations="int8")


def test_set_activations_untiles_and_tile_refuses():
    layer = GritLinear.from_linear(nn.Linear(64, 32), "MXFP4").tile_()
    assert layer.weight.tiled
    x = _x()
    y_float = layer(x)
    layer.set_activations_("s8")
    assert not layer.weight.tiled
    with pytest.raises(ValueError, match="row-major"):
        layer.tile_()
    layer.set_activations_(None)
    assert torch.equal(layer(x), y_float)


def test_save_records_and_load_restores(tmp_path):
    m = _mlp()
    torch_grit.quantize_(m, "MXFP4", activations="s8")
    m[2].set_activations_(None)  # modes are per layer
    x = _x()
    y = m(x)
    path = os.path.join(tmp_path, "m.safetensors")
    torch_grit.save(m, path)
    back = torch_grit.load(path, model=_mlp(1))
    assert (back[0].activations, back[2].activations) == ("s8", None)
    assert torch.equal(back(x), y)
    plain = torch_grit.load(path, model=_mlp(1), activations=None)
    assert plain[0].activations is None
    every = torch_grit.load(path, model=_mlp(1), activations="s8")
    assert every[2].activations == "s8"
    out = subprocess.run([sys.executable, "-m", "torch_grit", "inspect", path, "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["activations"] == {"0": "s8"}
    text = subprocess.run([sys.executable, "-m", "torch_grit", "inspect", path],
                          capture_output=True, text=True, timeout=120).stdout
    assert "activations: s8 for 1 layer(s): 0" in text


def test_load_refuses_a_mode_the_grade_cannot_run(tmp_path):
    m = _mlp()
    torch_grit.quantize_(m, "MXFP8")
    path = os.path.join(tmp_path, "m8.safetensors")
    torch_grit.save(m, path)
    fresh = _mlp(2)
    before = copy.deepcopy(fresh.state_dict())
    with pytest.raises(ValueError, match="0: activations='s8' is not available"):
        torch_grit.load(path, model=fresh, activations="s8")
    assert isinstance(fresh[0], nn.Linear) and not isinstance(fresh[0], GritLinear)
    assert all(torch.equal(before[k], v) for k, v in fresh.state_dict().items())


def test_torchscript_keeps_the_mode():
    m = _mlp()
    torch_grit.quantize_(m, "MXFP4", activations="s8")
    x = _x()
    y = m(x)
    scripted = torch.jit.script(m)
    assert torch.equal(scripted(x), y)


def test_gradients_reach_input_and_bias():
    layer = GritLinear.from_linear(nn.Linear(64, 32), "MXFP4", activations="s8")
    x = _x().requires_grad_(True)
    y = layer(x)
    gy = torch.randn_like(y)
    y.backward(gy)
    w = layer.weight
    want = torch.ops.grit.packed_linear_grad_input(gy, *w.stored_planes, w.grade_canonical,
                                                   list(w.logical_shape))
    assert torch.equal(x.grad, want)
    assert torch.allclose(layer.bias.grad, gy.sum(0))


def test_report_shows_the_activation_error():
    src = _mlp()
    q = copy.deepcopy(src)
    torch_grit.quantize_(q, "MXFP4", activations="s8")
    rep = torch_grit.report(src, q)
    for layer in rep.layers:
        assert layer.activations == "s8"
        assert 35 < layer.activation_sqnr_db < 60  # int8 blocks of 32: about 6 dB a bit
        assert 0 < layer.activation_output_mse < layer.output_mse
    assert "activation SQNR dB" in rep.table()
    assert json.loads(rep.to_json())["layers"][0]["activations"] == "s8"
