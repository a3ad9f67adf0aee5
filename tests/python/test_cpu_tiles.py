"""The CPU tile layout held by a GritTensor and a GritLinear (``tile()``, ``tile_``).

A tiled weight is the same GRIT bytes in the layout the CPU kernels read in
place: every product gives the bits of the untiled weight, and every view
of the contract (planes, descriptor, dequantize, state_dict, saves) sees
GRIT's planes.
"""

import io
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torch_grit
from torch_grit import GritTensor, ops
from torch_grit.nn import GritLinear

TILED_GRADES = ("MXFP4", "NVF4", "Q4KS", "I8S24", "Q8_0", "U4Z_G128", "S4_G128")
NOT_TILED = ("MXFP8", "U8Z_G128")  # grades without a fast decoder: no tile layout


def weight(grade="MXFP4", shape=(40, 96), seed=0, dtype=torch.float32):
    """GRIT's row-major planes in memory (tile=False): the reference every tiled product equals."""
    g = torch.Generator().manual_seed(seed)
    return torch_grit.quantize(torch.randn(*shape, generator=g).to(dtype), grade, tile=False)


_AS_INT = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}


def same_bits(a, b):
    """Equal dtype, shape and bits (NaN payloads included)."""
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
        a.contiguous().view(_AS_INT[a.dtype]), b.contiguous().view(_AS_INT[b.dtype]))


@pytest.mark.parametrize("grade", TILED_GRADES)
def test_tile_keeps_the_contract_and_changes_only_the_held_bytes(grade):
    w = weight(grade, shape=(40, 256) if grade in ("Q4KS", "U4Z_G128", "S4_G128") else (40, 96))
    t = w.tile()
    assert t.tiled and not w.tiled and t.can_tile
    assert t.tile() is t and w.untile() is w
    assert tuple(t.shape) == tuple(w.shape) and t.dtype == w.dtype
    assert t.descriptor.to_bytes() == w.descriptor.to_bytes()
    # What is held: ops.tile_nibbles' bytes; what GRIT sees: the planes, untiled.
    held = ops.tile_nibbles(w.planes, w.grade_canonical, w.logical_shape)
    for a, b in zip(t.stored_planes, held):
        assert torch.equal(a, b)
    assert not torch.equal(t.stored_planes[0][: w.planes[0].numel()], w.planes[0])
    for a, b in zip(t.planes, w.planes):
        assert torch.equal(a, b)
    assert t.nbytes_packed == w.nbytes_packed
    assert sum(p.numel() for p in t.stored_planes) >= t.nbytes_packed
    assert torch.equal(t.dequantize(), w.dequantize())
    torch_grit.check(t.descriptor, t.planes, level=2)
    back = t.untile()
    assert not back.tiled
    for a, b in zip(back.stored_planes, w.stored_planes):
        assert torch.equal(a, b)
    assert "CPU tile layout" in repr(t) and "CPU tile layout" not in repr(w)


@pytest.mark.parametrize("grade", TILED_GRADES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("batch", [1, 5, 64, 257])
def test_every_product_gives_the_untiled_bits(grade, dtype, batch):
    k = {"Q4KS": 512, "U4Z_G128": 384, "S4_G128": 384}.get(grade, 160)  # rows hold whole groups
    w = weight(grade, shape=(37, k), seed=1)
    t = w.tile()
    x = torch.randn(batch, k).to(dtype)
    bias = torch.randn(37).to(dtype)
    assert same_bits(F.linear(x, t, bias), F.linear(x, w, bias))
    assert same_bits(x @ t.t(), x @ w.t())
    assert same_bits(t @ x.t(), w @ x.t())
    assert same_bits(torch.addmm(bias, x, t.t()), torch.addmm(bias, x, w.t()))
    assert same_bits(F.linear(x[0], t), F.linear(x[0], w))


def test_nan_scale_and_infinite_input_match_the_untiled_weight():
    w = weight("MXFP4", shape=(33, 64), seed=2)
    planes = [p.clone() for p in w.planes]
    planes[1][5] = 255  # row 2 (two scale codes a row), second group: E8M0 NaN
    planes[1][40] = 0   # row 20: 2^-127, a group that does not factor
    w = GritTensor.from_planes(planes, "MXFP4", (33, 64))
    t = w.tile()
    x = torch.randn(1, 64).to(torch.bfloat16)
    x[0, 7] = float("inf")
    got, want = F.linear(x, t), F.linear(x, w)
    assert torch.isnan(want).any() and same_bits(got, want)


def test_gradients_equal_the_untiled_layers():
    torch.manual_seed(3)
    base = nn.Linear(96, 48)
    plain = GritLinear.from_linear(base, "MXFP4")
    tiled = GritLinear.from_linear(base, "MXFP4").tile_()
    x1 = torch.randn(4, 96, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_()
    plain(x1).square().sum().backward()
    tiled(x2).square().sum().backward()
    assert torch.equal(x1.grad, x2.grad)
    assert torch.equal(plain.bias.grad, tiled.bias.grad)
    assert tiled.weight.grad is None


def test_other_grades_devices_and_int4g_are_refused_with_the_reason():
    for grade in NOT_TILED:
        w = weight(grade, shape=(16, 256))
        assert not w.can_tile
        with pytest.raises(ValueError, match="tile layout.*" + re.escape(w.grade_canonical)):
            w.tile()
    g = torch_grit.quantize(torch.randn(8, 20), "INT4G4")
    assert not g.can_tile
    with pytest.raises(ValueError, match="int4 groups"):
        g.tile()
    meta = weight().to("meta")
    assert not meta.can_tile
    with pytest.raises(ValueError, match="CPU kernel layout.*meta"):
        meta.tile()


def test_moving_off_the_cpu_untiles():
    w = weight()
    m = w.tile().to("meta")
    assert not m.tiled and m.device.type == "meta"
    assert [p.numel() for p in m.stored_planes] == [p.numel() for p in w.planes]
    moved = w.tile().to(torch.bfloat16)  # a dtype change on the CPU keeps the tiles
    assert moved.tiled and moved.dtype == torch.bfloat16


def test_clone_detach_and_copy_between_layouts():
    w, other = weight(seed=4), weight(seed=5)
    t = w.tile()
    c = t.clone()
    assert c.tiled and all(torch.equal(a, b) for a, b in zip(c.stored_planes, t.stored_planes))
    assert c.stored_planes[0].data_ptr() != t.stored_planes[0].data_ptr()
    assert t.detach().tiled
    dst = other.tile()
    dst.copy_(w)  # planes into tiles: tiled on the way
    assert dst.tiled and all(torch.equal(a, b) for a, b in zip(dst.planes, w.planes))
    dst2 = other.clone()
    dst2.copy_(t)  # tiles into planes
    assert not dst2.tiled and all(torch.equal(a, b) for a, b in zip(dst2.stored_planes, w.planes))


def _model(tiled=False):
    """MXFP4, Q4KS and NVF4 layers; by default with the tile layout undone (untile_)."""
    torch.manual_seed(6)
    model = nn.Sequential(GritLinear.from_linear(nn.Linear(64, 256), "MXFP4"), nn.GELU(),
                          GritLinear.from_linear(nn.Linear(256, 32), "MXFP8"), nn.GELU(),
                          GritLinear.from_linear(nn.Linear(32, 16), "NVF4"))
    if not tiled:
        torch_grit.untile_(model)
    return model


def test_the_tile_layout_is_the_cpu_default(tmp_path):
    g = torch.Generator().manual_seed(3)
    w = torch.randn(40, 96, generator=g)
    for grade, tiles in (("MXFP4", True), ("NVF4", True), ("Q4KS", True), ("I8S24", True), ("Q8_0", True),
                         ("MXFP8", False)):
        q = torch_grit.quantize(w if grade != "Q4KS" else torch.randn(8, 256, generator=g), grade)
        assert q.tiled is tiles, grade
    assert not torch_grit.quantize(w, "MXFP4", tile=False).tiled
    with pytest.raises(ValueError, match="tile"):
        torch_grit.quantize(torch.randn(8, 256), "MXFP8", tile=True)
    assert GritLinear(96, 40, grade="NVF4").weight.tiled
    assert GritLinear.from_packed(weight("MXFP4")).weight.tiled
    s8 = GritLinear.from_linear(nn.Linear(96, 40), "MXFP4", activations="s8")
    assert not s8.weight.tiled   # the s8 kernels read the planes
    # quantize_ tiles what the layout takes, with the planes' bits
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 32), nn.GELU(), nn.Linear(32, 16))
    float_copy = nn.Sequential(*[type(m)(m.in_features, m.out_features) if isinstance(m, nn.Linear) else m
                                 for m in model])
    float_copy.load_state_dict(model.state_dict())
    torch_grit.quantize_(model, "MXFP4")
    assert all(m.weight.tiled for m in model if isinstance(m, GritLinear))
    x = torch.randn(300, 64)
    torch_grit.quantize_(float_copy, "MXFP4")
    assert torch_grit.untile_(float_copy) == ["0", "2", "4"]
    assert same_bits(model(x), float_copy(x))
    # load(model=) gives the default layout to a float model, and keeps an untiled model untiled
    path = tmp_path / "m.safetensors"
    torch_grit.save(_model(), path)
    into_float = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 32), nn.GELU(), nn.Linear(32, 16))
    torch_grit.load(path, model=into_float)
    assert into_float[0].weight.tiled and into_float[4].weight.tiled and not into_float[2].weight.tiled
    kept = _model()
    torch_grit.load(path, model=kept)
    assert not any(m.weight.tiled for m in kept if isinstance(m, GritLinear))
    assert same_bits(into_float(x[:7]), kept(x[:7]))


def test_tile_model_tiles_what_it_can_and_untile_model_undoes_it():
    model = _model()
    x = torch.randn(3, 64)
    want = model(x)
    assert torch_grit.tile_(model) == ["0", "4"]
    assert model[0].weight.tiled and not model[2].weight.tiled and model[4].weight.tiled
    assert not model[0].weight.requires_grad
    assert same_bits(model(x), want)
    assert torch_grit.tile_(model) == ["0", "4"]  # again: nothing changes
    assert torch_grit.untile_(model) == ["0", "4"]
    assert not any(m.weight.tiled for m in model if isinstance(m, GritLinear))
    assert same_bits(model(x), want)
    with pytest.raises(TypeError, match="nn.Module"):
        torch_grit.tile_("model")


def test_state_dict_and_checkpoints_hold_planes_and_load_into_either_layout(tmp_path):
    model = _model()
    torch_grit.tile_(model)
    x = torch.randn(2, 64)
    want = model(x)
    sd = model.state_dict()
    plain = _model()
    for key in ("0.weight", "4.weight"):
        assert sd[key].tiled  # the live tensor; its planes are GRIT's
        assert all(torch.equal(a, b) for a, b in zip(sd[key].planes, plain.state_dict()[key].planes))
    path = tmp_path / "tiled.safetensors"
    torch_grit.save(model, path)
    fresh = _model()
    torch_grit.load(path, model=fresh)  # an untiled model
    assert not fresh[0].weight.tiled and same_bits(fresh(x), want)
    into_tiles = _model()
    torch_grit.tile_(into_tiles)
    torch_grit.load(path, model=into_tiles)  # a tiled model keeps its layout
    assert into_tiles[0].weight.tiled and same_bits(into_tiles(x), want)
    into_tiles.load_state_dict(_model().state_dict())  # planes into tiles
    assert into_tiles[4].weight.tiled and same_bits(into_tiles(x), want)
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    buf.seek(0)
    with torch.serialization.safe_globals(torch_grit.safe_globals()):
        loaded = torch.load(buf, weights_only=True)
    assert loaded["0.weight"].tiled
    assert all(torch.equal(a, b) for a, b in zip(loaded["0.weight"].planes, sd["0.weight"].planes))


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_torchscript_twin_of_a_tiled_layer():
    from torch_grit.nn import ScriptableGritLinear
    model = nn.Sequential(GritLinear.from_linear(nn.Linear(64, 40), "MXFP4").tile_())
    x = torch.randn(3, 64)
    want = model(x)
    planes = model[0].weight.planes
    scripted = torch.jit.script(model)  # swaps the twin into model in place
    twin = model[0]
    assert isinstance(twin, ScriptableGritLinear) and twin.tiled
    assert same_bits(scripted(x), want)
    weight = model.state_dict()["0.weight"]  # GRIT's planes, untiled from the twin's tiles
    assert not weight.tiled and all(torch.equal(a, b) for a, b in zip(weight.planes, planes))
    other = GritLinear.from_linear(nn.Linear(64, 40), "MXFP4")
    model.load_state_dict({"0.weight": other.weight, "0.bias": other.bias})  # tiled on the way
    assert same_bits(scripted(x), other(x))


def test_compile_aot_eager_fullgraph_over_tiled_layers():
    model = _model()
    torch_grit.tile_(model)
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    x = torch.randn(2, 64, requires_grad=True)
    x_eager = x.detach().clone().requires_grad_()
    y, y_eager = compiled(x), model(x_eager)
    assert same_bits(y, y_eager)
    y.sum().backward()
    y_eager.sum().backward()
    assert torch.equal(x.grad, x_eager.grad)


def test_export_of_a_tiled_model_calls_the_tiled_op_and_equals_eager():
    model = _model()
    torch_grit.tile_(model)
    x = torch.randn(3, 64)
    batch = torch.export.Dim("batch", min=1, max=1024)
    ep = torch.export.export(model, (x,), dynamic_shapes=({0: batch},))
    calls = sorted(str(n.target) for n in ep.graph.nodes
                   if n.op == "call_function" and str(n.target).startswith("grit."))
    assert calls == ["grit.packed_linear.default", "grit.packed_linear_tiled.default",
                     "grit.packed_linear_tiled.default"]
    assert ep.state_dict["0.weight"].tiled and not ep.state_dict["2.weight"].tiled
    exported = ep.module()
    with torch.no_grad():
        for b in (3, 1, 17):
            x = torch.randn(b, 64)
            assert same_bits(exported(x), model(x))


@pytest.mark.parametrize("grade", TILED_GRADES)
def test_untiling_in_parallel_gives_the_planes_on_every_thread_count(grade):
    """untile_nibbles splits the rows over threads in whole tiles: a ragged last tile, 1 and 2
    threads, the planes quantize wrote, byte for byte (dequantize of a tiled weight untiles)."""
    w = torch.randn(1000 + 7, 256, generator=torch.Generator().manual_seed(9))
    planes = torch_grit.quantize(w, grade, tile=False).planes
    tiled = torch_grit.quantize(w, grade)
    before = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            assert all(torch.equal(a, b) for a, b in zip(tiled.planes, planes)), threads
            assert same_bits(tiled.dequantize(), torch_grit.quantize(w, grade, tile=False).dequantize())
    finally:
        torch.set_num_threads(before)
