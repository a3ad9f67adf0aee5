"""GritTensor: construction, the contract's properties, moves, copies, saves, refusals."""

import copy
import importlib
import io
import pickle

import pytest
import torch
import torch.nn.functional as F

import torch_grit
from torch_grit import Descriptor, Grade, GritCheckError, GritTensor, decode_planes, encode_planes
from torch_grit.contract.errors import GroupAxisError, UnsupportedOpError

from grit_cases import REF_NAMES

CUDA = torch.cuda.is_available()


def weight(out=8, inp=256, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(out, inp, generator=g) * 0.05).to(dtype)


def same_values(a, b):
    """Bitwise equal, NaN positions included."""
    return a.shape == b.shape and torch.equal(torch.isnan(a), torch.isnan(b)) and \
        torch.equal(torch.nan_to_num(a, nan=0.0), torch.nan_to_num(b, nan=0.0))


def reference(w, grade):
    values = decode_planes(grade, encode_planes(grade, w), w.numel())
    return torch.from_numpy(values).reshape(w.shape)


@pytest.mark.parametrize("name", REF_NAMES)
def test_quantize_matches_reference_decode(name):
    w = weight()
    W = torch_grit.quantize(w, name)
    grade = Grade.parse(name)
    assert isinstance(W, GritTensor)
    assert W.shape == w.shape and W.dtype == torch.float32 and W.device == w.device
    assert W.grade == grade and W.grade_canonical == grade.canonical
    assert [p.dtype for p in W.planes] == [torch.uint8] * 4
    assert [p.numel() for p in W.planes] == list(Descriptor(grade, w.shape).expected_plane_bytes())
    assert same_values(W.dequantize(), reference(w, grade))


@pytest.mark.parametrize("name", REF_NAMES)
def test_nan_and_inf_poison_their_group_as_the_contract_says(name):
    w = weight()
    w[1, 3] = float("nan")
    w[2, 40] = float("inf")
    W = torch_grit.quantize(w, name)
    d = W.dequantize()
    assert same_values(d, reference(w, name))
    assert torch.isnan(d[1]).any() and torch.isnan(d[2]).any()
    assert not torch.isnan(d[0]).any() and not torch.isnan(d[3]).any()


def test_grade_spellings_give_the_same_bytes():
    w = weight()
    planes = [torch_grit.quantize(w, g).planes
              for g in (Grade.MXFP4, Grade.MXFP4.canonical, "MXFP4", "GRADE_MXFP4")]
    for other in planes[1:]:
        assert all(torch.equal(a, b) for a, b in zip(planes[0], other))


def test_properties_speak_the_contract():
    W = torch_grit.quantize(weight(), "Q4KS")
    desc = W.descriptor
    assert isinstance(desc, Descriptor)
    assert desc.shape == (8, 256) and desc.group_axis == 1 and desc.grade == Grade.Q4KS
    assert W.placement == desc.placement == Descriptor(Grade.Q4KS, (8, 256)).placement
    torch_grit.check(desc, W.planes)
    assert torch.ops.grit.check(*W.planes, W.grade_canonical, [8, 256])
    assert W.nbytes_packed == sum(p.numel() for p in W.planes)


def test_repr_names_grade_and_gid():
    W = torch_grit.quantize(weight(), "NVF4")
    text = repr(W)
    assert Grade.NVF4.canonical in text and W.descriptor.gid in text and "GRADE_NVF4" in text
    assert "transposed" in repr(W.t()) and "transposed" not in text


# --- refusals at construction --------------------------------------------------------

@pytest.mark.parametrize("shape", [(256,), (2, 4, 64), ()])
def test_quantize_refuses_non_2d(shape):
    with pytest.raises(ValueError, match="2-D"):
        torch_grit.quantize(torch.zeros(shape), "MXFP4")


@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.float64, torch.uint8])
def test_quantize_refuses_other_dtypes(dtype):
    with pytest.raises(TypeError, match=str(dtype)):
        torch_grit.quantize(torch.zeros(4, 64, dtype=dtype), "MXFP4")


@pytest.mark.parametrize("name, inp, group", [("MXFP4", 48, 32), ("NVF4", 40, 16),
                                              ("Q4KS", 96, 256), ("Q4KS", 288, 256),
                                              ("I8S24", 100, 32)])
def test_quantize_refuses_ragged_rows_naming_shape_grade_and_group(name, inp, group):
    w = weight(inp=inp)
    before = w.clone()
    with pytest.raises(ValueError) as err:
        torch_grit.quantize(w, name)
    msg = str(err.value)
    assert str((8, inp)) in msg and Grade.parse(name).canonical in msg
    assert "group size %d" % group in msg
    assert torch.equal(w, before)


def test_quantize_refuses_a_grit_tensor_and_bad_grades():
    W = torch_grit.quantize(weight(), "MXFP4")
    with pytest.raises(ValueError, match="already a GritTensor"):
        torch_grit.quantize(W, "MXFP4")
    with pytest.raises(torch_grit.GradeError):
        torch_grit.quantize(weight(), "NF4")


def test_from_planes_checks_lengths_and_placement():
    W = torch_grit.quantize(weight(), "MXFP4")
    planes = W.planes
    with pytest.raises(GritCheckError):
        GritTensor.from_planes([planes[0][:-1]] + planes[1:], "MXFP4", (8, 256))
    with pytest.raises(ValueError, match="placement"):
        GritTensor.from_planes(planes, "MXFP4", (8, 256), placement=(0, 0, 0))
    with pytest.raises(TypeError, match="uint8"):
        GritTensor.from_planes([p.to(torch.int8) for p in planes], "MXFP4", (8, 256))
    again = GritTensor.from_planes(planes, "MXFP4", (8, 256), placement=W.placement)
    assert torch.equal(again.dequantize(), W.dequantize())


# --- moves and copies ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_to_dtype_changes_logical_dtype_only(dtype):
    W = torch_grit.quantize(weight(), "MXFP4")
    V = W.to(dtype)
    assert isinstance(V, GritTensor) and V.dtype == dtype and V.logical_dtype == dtype
    assert all(torch.equal(a, b) for a, b in zip(W.planes, V.planes))
    assert V.dequantize().dtype == dtype
    assert torch.equal(V.dequantize(), W.dequantize().to(dtype))


@pytest.mark.parametrize("dtype", [torch.int8, torch.float64])
def test_to_non_logical_dtype_is_refused(dtype):
    W = torch_grit.quantize(weight(), "MXFP4")
    with pytest.raises(TypeError, match="dequantize"):
        W.to(dtype)


def test_cpu_detach_clone_deepcopy():
    W = torch_grit.quantize(weight(), "NVF4")
    assert W.cpu() is W and W.to("cpu") is W
    D = W.detach()
    assert isinstance(D, GritTensor) and D is not W
    assert all(a.data_ptr() == b.data_ptr() for a, b in zip(D.stored_planes, W.stored_planes) if a.numel())
    for C in (W.clone(), copy.deepcopy(W)):
        assert isinstance(C, GritTensor) and C.grade == W.grade and C.tiled == W.tiled
        assert all(a.data_ptr() != b.data_ptr() for a, b in zip(C.stored_planes, W.stored_planes) if a.numel())
        assert all(torch.equal(a, b) for a, b in zip(C.planes, W.planes))


@pytest.mark.skipif(not CUDA, reason="no CUDA device")
def test_cuda_round_trip_moves_the_planes():
    W = torch_grit.quantize(weight(), "MXFP4")
    G = W.cuda()
    assert G.device.type == "cuda" and all(p.device.type == "cuda" for p in G.planes)
    back = G.cpu()
    assert all(torch.equal(a, b) for a, b in zip(back.planes, W.planes))


def test_copy_between_equal_grades_only():
    a = torch_grit.quantize(weight(seed=1), "MXFP4")
    b = torch_grit.quantize(weight(seed=2), "MXFP4")
    a.copy_(b)
    assert all(torch.equal(x, y) for x, y in zip(a.planes, b.planes))
    with pytest.raises(ValueError, match="equal grade"):
        a.copy_(torch_grit.quantize(weight(), "MXFP4_RNE"))
    with pytest.raises(TypeError, match="quantization"):
        a.copy_(torch.zeros(8, 256))


def test_flatten_unflatten_round_trip():
    W = torch_grit.quantize(weight(), "I8S24").to(torch.bfloat16)
    names, ctx = W.__tensor_flatten__()
    V = GritTensor.__tensor_unflatten__({n: getattr(W, n) for n in names}, ctx, W.shape, W.stride())
    assert V.shape == W.shape and V.dtype == W.dtype and V.grade == W.grade
    assert torch.equal(V.dequantize(), W.dequantize())


def test_torch_save_load_weights_only_with_safe_globals():
    W = torch_grit.quantize(weight(), "Q4KS").to(torch.float16)
    buf = io.BytesIO()
    torch.save({"w": W, "wt": W.t()}, buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="GritTensor"):
        torch.load(buf, weights_only=True)
    buf.seek(0)
    assert torch_grit.safe_globals() == [GritTensor]
    with torch.serialization.safe_globals(torch_grit.safe_globals()):
        got = torch.load(buf, weights_only=True)
    assert isinstance(got["w"], GritTensor) and got["w"].dtype == torch.float16
    assert torch.equal(got["w"].dequantize(), W.dequantize())
    assert got["wt"].transposed and got["wt"].shape == (256, 8)
    assert repr(got["w"]) == repr(W)


# --- the matmul family ----------------------------------------------------------------

def test_every_linear_spelling_runs_the_packed_op():
    W = torch_grit.quantize(weight(), "MXFP4")
    x = torch.randn(3, 256)
    b = torch.randn(8)
    y = F.linear(x, W)
    assert torch.allclose(y, x @ W.dequantize().t(), atol=1e-5)
    assert torch.equal(x @ W.t(), y)
    assert torch.equal(torch.mm(x, W.t()), y)
    assert torch.equal(torch.matmul(x, W.t()), y)
    assert torch.equal(x.matmul(W.t()), y)
    assert torch.equal((W @ x.t()).t(), y)
    assert torch.equal(F.linear(x, W, b), torch.addmm(b, x, W.t()))
    assert torch.equal(W @ x[0], y[0]) and torch.equal(x[0] @ W.t(), y[0])
    assert torch.allclose(torch.addmm(b, x, W.t(), beta=0.5, alpha=2.0), 0.5 * b + 2 * y)
    x3 = torch.randn(2, 3, 256)
    assert torch.equal(x3 @ W.t(), F.linear(x3, W))
    assert torch.equal(W.t().dequantize(), W.dequantize().t())


def test_products_over_out_features_are_requantization():
    W = torch_grit.quantize(weight(), "MXFP4")
    cases = [lambda: torch.randn(3, 8) @ W, lambda: torch.mm(torch.randn(3, 8), W),
             lambda: W.t() @ torch.randn(8, 2), lambda: F.linear(torch.randn(3, 8), W.t()),
             lambda: W.t().contiguous()]
    for case in cases:
        with pytest.raises(GroupAxisError, match="requantization"):
            case()
    assert W.t().t().transposed is False
    assert (torch.randn(3, 8) @ W.dequantize()).shape == (3, 256)  # the explicit way out


@pytest.mark.parametrize("op, call", [
    ("aten.add", lambda W: W + 1), ("aten.sum", lambda W: W.sum()),
    ("aten.relu", lambda W: torch.relu(W)), ("aten.select", lambda W: W[0]),
    ("aten.view", lambda W: W.view(-1)), ("aten.mul", lambda W: 2 * W),
])
def test_unclaimed_ops_are_refused_by_name(op, call):
    W = torch_grit.quantize(weight(), "MXFP4")
    with pytest.raises(UnsupportedOpError, match=op + ";.*dequantize"):
        call(W)


def test_a_trainable_packed_weight_is_refused():
    W = torch_grit.quantize(weight(), "MXFP4")
    W.requires_grad_(True)
    with pytest.raises(UnsupportedOpError, match="frozen"):
        F.linear(torch.randn(2, 256), W)
    with torch.no_grad():
        assert F.linear(torch.randn(2, 256), W).shape == (2, 8)


def test_quantize_name_is_the_function_after_importing_the_module():
    module = importlib.import_module("torch_grit.quantization.quantize_model")
    assert module.quantize_ is torch_grit.quantize_
    assert callable(torch_grit.quantize) and torch_grit.quantize is torch_grit.tensor.quantize
