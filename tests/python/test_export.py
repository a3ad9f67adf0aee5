"""torch.export of a model quantized with quantize_: the exported program runs
the packed op on the planes and gives eager's outputs bit for bit, with a
dynamic batch, after torch.export.save/load and after run_decompositions."""

import io

import pytest
import torch
from torch import nn

import torch_grit
from torch_grit import GritTensor

from grit_cases import REF_NAMES


def mlp(seed=0):
    # in_features 256 everywhere: a multiple of every reference grade's group (Q4KS: 256).
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(256, 256), nn.GELU(), nn.LayerNorm(256), nn.Linear(256, 64))


def quantized_mlp(grade):
    model = mlp().eval()
    reports = torch_grit.quantize_(model, grade)
    assert [r.fqn for r in reports if r.quantized] == ["0", "3"]
    return model


def grit_calls(ep):
    return sorted(str(n.target) for n in ep.graph.nodes
                  if n.op == "call_function" and str(n.target).startswith("grit."))


BATCH = torch.export.Dim("batch", min=1, max=4096)


@pytest.mark.parametrize("grade", REF_NAMES)
def test_exported_program_equals_eager(grade):
    model = quantized_mlp(grade)
    x = torch.randn(3, 256)
    ep = torch.export.export(model, (x,), dynamic_shapes=({0: BATCH},))
    # The weights stay packed: two packed_linear calls, no decode to float (MXFP4 and NVF4 in
    # the CPU tile layout quantize gives them by default: its op reads the tiles).
    op = "grit.packed_linear_tiled.default" if model[0].weight.tiled else "grit.packed_linear.default"
    assert grit_calls(ep) == [op] * 2
    assert isinstance(ep.state_dict["0.weight"], GritTensor)
    exported = ep.module()
    with torch.no_grad():
        for batch in (3, 1, 17):
            x = torch.randn(batch, 256)
            assert torch.equal(exported(x), model(x))


# torch.export.load itself (torch 2.13) trips this deprecation in its own pytree code.
@pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")
def test_exported_program_survives_save_load_and_decompositions():
    model = quantized_mlp("Q4KS")
    x = torch.randn(5, 256)
    ep = torch.export.export(model, (x,), dynamic_shapes=({0: BATCH},))
    with torch.no_grad():
        want = model(x)
    buf = io.BytesIO()
    torch.export.save(ep, buf)
    buf.seek(0)
    loaded = torch.export.load(buf)
    weight = loaded.state_dict["0.weight"]
    assert isinstance(weight, GritTensor)
    assert weight.grade_canonical == model[0].weight.grade_canonical
    assert all(torch.equal(a, b) for a, b in zip(weight.planes, model[0].weight.planes))
    decomposed = ep.run_decompositions()
    op = "grit.packed_linear_tiled.default" if model[0].weight.tiled else "grit.packed_linear.default"
    assert grit_calls(decomposed) == [op] * 2
    with torch.no_grad():
        assert torch.equal(loaded.module()(x), want)
        assert torch.equal(decomposed.module()(x), want)


def test_strict_export_and_bfloat16_activations():
    model = quantized_mlp("NVF4").to(torch.bfloat16)
    assert model[0].weight.dtype == torch.bfloat16
    x = torch.randn(2, 7, 256, dtype=torch.bfloat16)  # leading dimensions pass through
    ep = torch.export.export(model, (x,), strict=True)
    with torch.no_grad():
        y = ep.module()(x)
        assert y.dtype == torch.bfloat16 and y.shape == (2, 7, 64)
        assert torch.equal(y, model(x))


def test_export_checks_the_input_like_eager():
    ep = torch.export.export(quantized_mlp("MXFP4"), (torch.randn(2, 256),),
                             dynamic_shapes=({0: BATCH},))
    with pytest.raises(Exception, match="256"):  # the exported guard names the expected size
        ep.module()(torch.randn(2, 100))
