"""quantize_: in-place, all-or-nothing replacement of a model's layers."""

import copy

import pytest
import torch
from torch import nn

import torch_grit
from torch_grit import Grade, GritTensor
from torch_grit.nn import GritLinear
from torch_grit.quantization.quantize_model import _HANDLERS, LayerReport, register_handler


class Block(nn.Module):
    """A tiny transformer-style MLP block with a norm, an integer buffer and a ragged head."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(64)
        self.up = nn.Linear(64, 128)
        self.down = nn.Linear(128, 64, bias=False)
        self.head = nn.Linear(64, 10)          # fits MXFP4 (in=64) but not Q4KS (in % 256)
        self.odd = nn.Linear(48, 8)            # in=48 fits no reference grade but NVF4
        self.register_buffer("steps", torch.arange(4, dtype=torch.int64))

    def forward(self, x):
        h = self.down(torch.relu(self.up(self.norm(x))))
        return self.head(x + h)


def block(seed=0):
    torch.manual_seed(seed)
    return Block()


def _values(t):
    # GritTensor refuses torch.equal (equal values need not be equal bytes): compare bytes.
    return t.planes if isinstance(t, GritTensor) else [t]


def snapshot(model):
    return {k: (type(v), [p.clone() for p in _values(v)]) for k, v in model.state_dict().items()}


def unchanged(model, snap):
    now = model.state_dict()
    return now.keys() == snap.keys() and all(
        type(now[k]) is t and all(torch.equal(a, b) for a, b in zip(_values(now[k]), v))
        for k, (t, v) in snap.items())


def test_replaces_what_fits_and_leaves_the_rest_exact():
    model = block()
    before = snapshot(model)
    x = torch.randn(3, 64)
    y_float = model(x)
    reports = torch_grit.quantize_(model, "MXFP4")
    assert isinstance(model.up, GritLinear) and isinstance(model.down, GritLinear)
    assert isinstance(model.head, GritLinear) and type(model.odd) is nn.Linear
    # rank<2 and integer tensors, and the skipped layer, are the very same values
    for name in ("norm.weight", "norm.bias", "steps", "odd.weight", "odd.bias", "up.bias",
                 "head.bias"):
        assert torch.equal(model.state_dict()[name], before[name][1][0])
    assert model.steps.dtype == torch.int64
    y = model(x)
    assert y.shape == y_float.shape and (y - y_float).norm() < 0.2 * y_float.norm()

    by_fqn = {r.fqn: r for r in reports}
    assert [r.fqn for r in reports] == ["up", "down", "head", "odd"]
    assert all(isinstance(r, LayerReport) for r in reports)
    up = by_fqn["up"]
    assert up.quantized and up.grade == Grade.MXFP4.canonical and up.shape == (128, 64)
    assert up.bytes_before == 128 * 64 * 4 and up.bytes_after == model.up.weight.nbytes_packed
    assert up.bytes_after == 128 * 64 // 2 + 128 * 64 // 32
    odd = by_fqn["odd"]
    assert not odd.quantized and odd.grade is None and "group size 32" in odd.skipped
    assert odd.bytes_before == odd.bytes_after == 48 * 8 * 4


@pytest.mark.parametrize("grade", [Grade.NVF4, Grade.NVF4.canonical, "NVF4", "grade_nvf4"])
def test_accepts_every_grade_spelling(grade):
    model = block()
    torch_grit.quantize_(model, grade)
    assert model.odd.weight.grade == Grade.NVF4  # in=48 is a multiple of 16


def test_grade_with_super_blocks_skips_short_rows():
    model = block()
    reports = torch_grit.quantize_(model, "Q4KS")
    assert [r.fqn for r in reports if r.quantized] == []
    model = nn.Sequential(nn.Linear(256, 8), nn.Linear(8, 8))
    reports = torch_grit.quantize_(model, "Q4KS")
    assert [r.quantized for r in reports] == [True, False]
    assert "group size 256" in reports[1].skipped


def test_refuses_double_quantization_and_changes_nothing():
    model = block()
    torch_grit.quantize_(model, "MXFP4")
    snap = snapshot(model)
    with pytest.raises(ValueError, match="already a GritLinear"):
        torch_grit.quantize_(model, "NVF4")
    assert unchanged(model, snap)
    holder = nn.Module()
    holder.w = nn.Parameter(torch_grit.quantize(torch.randn(4, 64), "MXFP4"), requires_grad=False)
    with pytest.raises(ValueError, match="already a GritTensor"):
        torch_grit.quantize_(holder, "MXFP4")


def test_a_selected_layer_that_cannot_be_packed_leaves_the_model_unchanged():
    model = block()
    snap = snapshot(model)
    modules = dict(model.named_children())
    with pytest.raises(ValueError) as err:
        torch_grit.quantize_(model, "MXFP4", filter_fn=lambda m, fqn: True)
    assert "odd.weight" in str(err.value) and "(8, 48)" in str(err.value)
    assert dict(model.named_children()) == modules and unchanged(model, snap)


def test_integer_weights_are_skipped_by_default_and_refused_when_selected():
    model = nn.Sequential(nn.Linear(64, 8), nn.Linear(64, 8))
    model[1].weight = nn.Parameter(torch.zeros(8, 64, dtype=torch.int8), requires_grad=False)
    reports = torch_grit.quantize_(copy.deepcopy(model), "MXFP4")
    assert [r.quantized for r in reports] == [True, False] and "int8" in reports[1].skipped
    snap = snapshot(model)
    with pytest.raises(TypeError, match="int8"):
        torch_grit.quantize_(model, "MXFP4", filter_fn=lambda m, fqn: True)
    assert unchanged(model, snap) and type(model[0]) is nn.Linear


def test_filter_fn_chooses_and_is_told_the_fqn():
    model = block()
    seen = []

    def only_up(module, fqn):
        seen.append(fqn)
        return fqn == "up"

    reports = torch_grit.quantize_(model, "MXFP4", filter_fn=only_up)
    assert seen == ["up", "down", "head", "odd"]
    assert isinstance(model.up, GritLinear) and type(model.down) is nn.Linear
    assert {r.fqn: r.skipped for r in reports}["down"] == "filter_fn returned False"


def test_bad_grades_and_arguments_raise_before_anything_changes():
    model = block()
    snap = snapshot(model)
    with pytest.raises(torch_grit.GradeError):
        torch_grit.quantize_(model, "NF4")
    with pytest.raises(torch_grit.GradeError):
        torch_grit.quantize_(model, "auto", candidates=("MXFP4", "NF4"))
    with pytest.raises(TypeError, match="nn.Module"):
        torch_grit.quantize_(torch.zeros(3), "MXFP4")
    with pytest.raises(ValueError, match="GritLinear.from_linear"):
        torch_grit.quantize_(nn.Linear(64, 8), "MXFP4")
    assert unchanged(model, snap)


def test_shared_modules_and_tied_weights_stay_shared():
    shared = nn.Linear(64, 64)
    model = nn.Sequential(shared, nn.ReLU(), shared)
    twin = nn.Linear(64, 64)
    twin.weight = model[0].weight
    model.append(twin)
    torch_grit.quantize_(model, "MXFP4")
    assert model[0] is model[2] and isinstance(model[0], GritLinear)
    assert model[3].weight is model[0].weight and model[3] is not model[0]
    assert model(torch.randn(2, 64)).shape == (2, 64)


def test_multihead_attention_out_proj_is_left_to_its_owner():
    torch.manual_seed(0)
    model = nn.Module()
    model.attn = nn.MultiheadAttention(64, 4, batch_first=True)
    model.proj = nn.Linear(64, 64)
    reports = torch_grit.quantize_(model, "MXFP4")
    assert {r.fqn: r.quantized for r in reports} == {"attn.out_proj": False, "proj": True}
    x = torch.randn(2, 5, 64)
    assert model.attn(x, x, x)[0].shape == (2, 5, 64)


def test_a_new_module_kind_is_a_registered_handler():
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.Linear(64, 8)

    class ScaledHandler:
        def skip_reason(self, module, grade, fqn):
            return None

        def convert(self, module, grade, fqn):
            new = nn.Module()
            new.inner = GritLinear.from_linear(module.inner, grade)
            return new

        def shape(self, module):
            return tuple(module.inner.weight.shape)

        def bytes_before(self, module):
            return module.inner.weight.numel() * 4

        def bytes_after(self, new):
            return new.inner.weight.nbytes_packed

    register_handler(Scaled)(ScaledHandler)
    try:
        model = nn.Sequential(Scaled())
        reports = torch_grit.quantize_(model, "MXFP4")
    finally:
        del _HANDLERS[Scaled]
    assert isinstance(model[0].inner, GritLinear)
    assert [(r.fqn, r.kind) for r in reports] == [("0", "Scaled")]


def test_train_eval_and_compile_after_quantize():
    model = block()
    torch_grit.quantize_(model, "NVF4")
    ptrs = [p.data_ptr() for p in model.up.weight.stored_planes]
    x = torch.randn(4, 64)
    model.train()
    y_train = model(x)
    model.eval()
    assert torch.equal(model(x), y_train) and torch.equal(model(x), model(x))
    assert [p.data_ptr() for p in model.up.weight.stored_planes] == ptrs
    assert isinstance(model.up.weight, GritTensor)
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    assert torch.equal(compiled(x), y_train)
