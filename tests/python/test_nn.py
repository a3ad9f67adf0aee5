"""GritLinear: a drop-in nn.Linear with a frozen packed weight."""

import copy
import io

import pytest
import torch
from torch import nn

import torch_grit
from torch_grit import Descriptor, Grade, GritTensor
from torch_grit.nn import GritLinear

from grit_cases import REF_NAMES


def sqnr_db(x, y):
    return (20 * torch.log10(x.norm() / (x - y).norm())).item()


def linear(inp=256, out=32, bias=True, seed=0):
    torch.manual_seed(seed)
    return nn.Linear(inp, out, bias=bias)


@pytest.mark.parametrize("name", REF_NAMES)
def test_from_linear_is_close_to_the_float_layer(name):
    lin = linear()
    layer = GritLinear.from_linear(lin, name)
    x = torch.randn(16, 256)
    y = layer(x)
    exact = x @ layer.weight.dequantize().t() + lin.bias
    assert torch.allclose(y, exact, atol=1e-5, rtol=1e-5)
    # 4-bit groups reach 13-25 dB on a random layer; 2:4 sparsity drops half the weights.
    assert sqnr_db(lin(x), y) > (5 if name == "I8S24" else 12)
    assert layer.in_features == 256 and layer.out_features == 32
    assert isinstance(layer.weight, GritTensor) and isinstance(layer.weight, nn.Parameter)
    assert layer.weight.requires_grad is False and layer.bias.requires_grad is True
    assert torch.equal(layer.bias, lin.bias) and layer.bias.data_ptr() != lin.bias.data_ptr()


def test_extra_repr_names_the_grade():
    assert "grade=GRADE_MXFP4" in repr(GritLinear.from_linear(linear(), "MXFP4"))
    # A grade with no reference name (and no encoder): wrap planes of the right lengths.
    custom = Grade.parse("grit1(e=s4,k0=64,s0=binary16,esr=ratiomaxabs)")
    planes = [torch.zeros(n, dtype=torch.uint8) for n in Descriptor(custom, (4, 128))
              .expected_plane_bytes()]
    layer = GritLinear.from_packed(GritTensor.from_planes(planes, custom, (4, 128)))
    assert "grade=%s" % custom.canonical in repr(layer) and "bias=False" in repr(layer)


def test_no_bias_and_bad_arguments():
    layer = GritLinear.from_linear(linear(bias=False), "NVF4")
    assert layer.bias is None and layer(torch.randn(2, 256)).shape == (2, 32)
    with pytest.raises(TypeError, match="nn.Linear"):
        GritLinear.from_linear(nn.Conv1d(2, 2, 1), "NVF4")
    with pytest.raises(TypeError, match="bias"):
        GritLinear(256, 4, bias=None, grade="MXFP4")
    with pytest.raises(TypeError, match="grade"):
        GritLinear(256, 4)  # no silent default grade
    with pytest.raises(ValueError, match="group size"):
        GritLinear(100, 4, grade="MXFP4")


def test_weight_is_a_frozen_parameter_in_parameters_and_state_dict():
    layer = GritLinear.from_linear(linear(), "MXFP4")
    params = dict(layer.named_parameters())
    assert set(params) == {"weight", "bias"}
    assert [n for n, p in params.items() if p.requires_grad] == ["bias"]
    assert isinstance(layer.state_dict()["weight"], GritTensor)


def test_state_dict_round_trip_into_a_fresh_layer():
    src = GritLinear.from_linear(linear(), "Q4KS")
    fresh = GritLinear(256, 32, grade="Q4KS")
    x = torch.randn(4, 256)
    assert not torch.equal(fresh(x), src(x))
    assert fresh.load_state_dict(src.state_dict()) is not None
    assert torch.equal(fresh(x), src(x))
    other = GritLinear(256, 32, grade="MXFP4")
    with pytest.raises(RuntimeError, match="equal grade"):  # load_state_dict re-raises as this
        other.load_state_dict(src.state_dict())


def test_meta_init_then_to_empty_then_load():
    src = GritLinear.from_linear(linear(), "MXFP4")
    layer = GritLinear(256, 32, grade="MXFP4", device="meta")
    assert layer.weight.device.type == "meta" and all(p.is_meta for p in layer.weight.planes)
    layer.to_empty(device="cpu")
    assert isinstance(layer.weight, GritTensor) and layer.weight.requires_grad is False
    layer.load_state_dict(src.state_dict())
    x = torch.randn(2, 256)
    assert torch.equal(layer(x), src(x))


def test_load_state_dict_assign_keeps_a_frozen_parameter():
    src = GritLinear.from_linear(linear(), "NVF4")
    dst = GritLinear(256, 32, grade="NVF4")
    dst.load_state_dict(src.state_dict(), assign=True)
    assert isinstance(dst.weight, nn.Parameter) and dst.weight.requires_grad is False
    x = torch.randn(2, 256)
    assert torch.equal(dst(x), src(x))


def test_torch_save_load_state_dict_weights_only():
    src = nn.Sequential(GritLinear.from_linear(linear(), "NVF4"), nn.ReLU())
    buf = io.BytesIO()
    torch.save(src.state_dict(), buf)
    buf.seek(0)
    with torch.serialization.safe_globals(torch_grit.safe_globals()):
        state = torch.load(buf, weights_only=True)
    dst = nn.Sequential(GritLinear(256, 32, grade="NVF4"), nn.ReLU())
    dst.load_state_dict(state)
    x = torch.randn(3, 256)
    assert torch.equal(dst(x), src(x))


def test_module_moves_copies_and_dtype_changes():
    layer = GritLinear.from_linear(linear(), "MXFP4")
    x = torch.randn(3, 256)
    y = layer(x)
    assert torch.equal(copy.deepcopy(layer)(x), y)
    assert torch.equal(layer.cpu()(x), y) and isinstance(layer.weight, GritTensor)
    half = copy.deepcopy(layer).to(torch.bfloat16)
    assert half.weight.dtype == torch.bfloat16 and isinstance(half.weight, GritTensor)
    assert half.weight.requires_grad is False
    assert all(torch.equal(a, b) for a, b in zip(half.weight.planes, layer.weight.planes))
    yh = half(x.bfloat16())
    assert yh.dtype == torch.bfloat16 and sqnr_db(y, yh.float()) > 30


def test_train_eval_switch_without_requantizing_and_deterministic():
    layer = GritLinear.from_linear(linear(), "I8S24")
    planes = [p.clone() for p in layer.weight.planes]
    ptrs = [p.data_ptr() for p in layer.weight.stored_planes]
    x = torch.randn(64, 256)
    y_eval = layer.eval()(x)
    y_train = layer.train()(x)
    layer.eval()
    assert torch.equal(y_eval, y_train)
    assert [p.data_ptr() for p in layer.weight.stored_planes] == ptrs
    assert all(torch.equal(a, b) for a, b in zip(planes, layer.weight.planes))
    threads = torch.get_num_threads()
    try:
        runs = []
        for n in (1, max(2, threads)):
            torch.set_num_threads(n)
            runs.append(layer(x))
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(runs[0], runs[1]) and torch.equal(runs[0], layer(x))


def test_gradients_reach_input_and_bias_not_weight():
    layer = GritLinear.from_linear(linear(), "MXFP4")
    x = torch.randn(5, 256, requires_grad=True)
    layer(x).pow(2).sum().backward()
    y = layer(x.detach())
    w = layer.weight.dequantize()
    x_ref = x.detach().clone().requires_grad_()
    b_ref = layer.bias.detach().clone().requires_grad_()
    (x_ref @ w.t() + b_ref).pow(2).sum().backward()
    assert torch.allclose(x.grad, x_ref.grad, atol=1e-4, rtol=1e-4)
    assert torch.allclose(layer.bias.grad, b_ref.grad, atol=1e-4, rtol=1e-4)
    assert layer.weight.grad is None and y.shape == (5, 32)


class LoRA(nn.Module):
    """A low-rank adapter around a frozen layer: y = base(x) + (x A^T) B^T * scale."""

    def __init__(self, base, rank=4, alpha=8.0):
        super().__init__()
        self.base = base
        self.a = nn.Parameter(torch.randn(rank, base.in_features) * 0.01)
        self.b = nn.Parameter(torch.zeros(base.out_features, rank))
        self.scale = alpha / rank

    def forward(self, x):
        return self.base(x) + (x @ self.a.t()) @ self.b.t() * self.scale


def test_lora_adapters_train_over_packed_layers():
    torch.manual_seed(0)
    model = nn.Sequential(LoRA(GritLinear.from_linear(nn.Linear(64, 64), "NVF4")), nn.GELU(),
                          LoRA(GritLinear.from_linear(nn.Linear(64, 32), "NVF4")))
    target = nn.Linear(64, 32)
    x = torch.randn(128, 64)
    with torch.no_grad():
        y = target(x)
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert all(not isinstance(p, GritTensor) for p in trainable)
    opt = torch.optim.Adam(trainable, lr=1e-2)
    losses = []
    for _ in range(60):
        loss = (model(x) - y).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    assert model[0].a.grad is not None and model[2].b.grad is not None


def _model():
    torch.manual_seed(0)
    return nn.Sequential(GritLinear.from_linear(nn.Linear(64, 64), "MXFP4"), nn.GELU(),
                         nn.LayerNorm(64), GritLinear.from_linear(nn.Linear(64, 32), "NVF4"))


def test_compile_aot_eager_fullgraph_equals_eager_forward_and_backward():
    model = _model()
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    for batch in (3, 5):
        x = torch.randn(2, batch, 64, requires_grad=True)
        x_eager = x.detach().clone().requires_grad_()
        y, y_eager = compiled(x), model(x_eager)
        assert torch.equal(y, y_eager)
        y.sum().backward()
        y_eager.sum().backward()
        assert torch.equal(x.grad, x_eager.grad)


def test_compile_inductor_fullgraph_matches_eager():
    model = _model().eval()
    x = torch.randn(4, 64)
    with torch.no_grad():  # about 12 s of compile on the 2-core development machine
        y = torch.compile(model, fullgraph=True)(x)
    # Inductor may fuse the float LayerNorm/GELU differently; the packed ops are the same calls.
    assert torch.allclose(y, model(x), atol=1e-5, rtol=1e-5)


def test_an_input_permutation_runs_in_every_route():
    """input_perm p: the layer computes F.linear(x[..., p], W') on every route (float, tiled, s8,
    TorchScript), the same bits as the layer without one given x[..., p]."""
    lin = linear()
    plain = GritLinear.from_linear(lin, "MXFP4")
    assert plain.input_perm is None and "input_perm" not in plain.state_dict()
    perm = torch.randperm(256, generator=torch.Generator().manual_seed(1))
    layer = GritLinear.from_packed(plain.weight, lin.bias, input_perm=perm)
    assert torch.equal(layer.state_dict()["input_perm"], perm)
    assert "input_perm=[256]" in repr(layer)
    x = torch.randn(3, 5, 256)
    with torch.no_grad():
        assert torch.equal(layer(x), plain(x[..., perm]))
        assert torch.equal(torch.jit.script(copy.deepcopy(layer))(x), plain(x[..., perm]))
        tiled, plain_tiled = copy.deepcopy(layer).tile_(), copy.deepcopy(plain).tile_()
        assert torch.equal(tiled(x), plain_tiled(x[..., perm]))
        s8, plain_s8 = copy.deepcopy(layer).set_activations_("s8"), copy.deepcopy(plain).set_activations_("s8")
        assert torch.equal(s8(x), plain_s8(x[..., perm]))
        # The un-permuted weight W: x @ W^T is the layer's product.
        w = layer.unpermuted_weight()
        assert torch.equal(w[:, perm], layer.weight.dequantize())
        assert torch.allclose(layer(x), torch.nn.functional.linear(x, w, lin.bias), atol=1e-5, rtol=1e-5)
    assert plain.unpermuted_weight().equal(plain.weight.dequantize())
    fresh = GritLinear(256, 32, grade="MXFP4")
    assert fresh.input_perm is None
    with pytest.raises(ValueError, match="input 3 appears 2 times"):
        fresh.set_input_perm_(torch.cat([perm[perm != 4], torch.tensor([3])]))
    assert fresh.input_perm is None
    assert layer.set_input_perm_(None).input_perm is None and torch.equal(layer(x), plain(x))
