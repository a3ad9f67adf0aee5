"""torch.load and pickle rebuild a GritTensor through GritTensor.__setstate__,
which runs from_planes' checks: a file whose planes, attributes or wrapper
disagree fails the whole load, naming what disagrees; a faithful file loads
bit for bit (planes, tiles, transposed views, INT4G, every logical dtype)."""
import copy
import io
import pickle

import pytest
import torch

import torch_grit
from torch_grit import GritCheckError, GritTensor


def _saved_and_loaded(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    with torch.serialization.safe_globals(torch_grit.safe_globals()):
        return torch.load(buf, weights_only=True)


def _weights():
    g = torch.Generator().manual_seed(7)
    mx = torch_grit.quantize(torch.randn(24, 64, generator=g), "MXFP4", tile=False)
    return {
        "mxfp4": mx,
        "tiled": mx.tile(),
        "transposed": mx.t(),
        "int4g": torch_grit.quantize(torch.randn(8, 64, generator=g), "INT4G32"),
        "q4ks_bf16": torch_grit.quantize(torch.randn(8, 256, generator=g).bfloat16(), "Q4KS"),
        "i8s24_f16": torch_grit.quantize(torch.randn(8, 64, generator=g).half(), "I8S24"),
    }


@pytest.mark.parametrize("how", ["torch.load", "pickle", "deepcopy"])
def test_faithful_copies_rebuild_bit_for_bit(how):
    weights = _weights()
    if how == "torch.load":
        copies = _saved_and_loaded(weights)
    elif how == "pickle":
        copies = pickle.loads(pickle.dumps(weights))
    else:
        copies = copy.deepcopy(weights)
    for name, w in weights.items():
        c = copies[name]
        assert type(c) is GritTensor, name
        for attr in GritTensor.ATTRIBUTE_NAMES:
            assert getattr(c, attr) == getattr(w, attr), (name, attr)
        assert (tuple(c.shape), c.dtype) == (tuple(w.shape), w.dtype), name
        for a, b in zip(c.stored_planes, w.stored_planes):
            assert torch.equal(a, b), name
        assert torch.equal(c.dequantize(), w.dequantize()), name


def _rebuild(w, args=None, **state):
    """What torch.load does with a file that holds ``w`` with ``state`` changed."""
    rebuild, (func, cls, wrapper_args, st) = w.__reduce_ex__(2)
    st = dict(st, **state)
    return rebuild(func, cls, args if args is not None else wrapper_args, st)


def test_the_rebuild_is_torch_loads():
    w = _weights()["mxfp4"]
    assert torch.equal(_rebuild(w).dequantize(), w.dequantize())


@pytest.mark.parametrize("change, error, words", [
    (lambda w: {"data_plane": w.data_plane[:-3].clone()}, GritCheckError,
     ["plane 0 (data)", "expected 768 bytes, found 765"]),
    (lambda w: {"grade_canonical": "NVF4"}, GritCheckError, ["plane 1 (scale0)", "expected 96 bytes"]),
    (lambda w: {"grade_canonical": "grit1(e=e2m1"}, torch_grit.GradeError, ["grit1(e=e2m1"]),
    (lambda w: {"grade_canonical": 3}, TypeError, ["found int"]),
    (lambda w: {"placement_words": ()}, ValueError, ["placement ()", "canonical"]),
    (lambda w: {"placement_words": (0, 0, 0)}, ValueError, ["placement Placement(data=PLACEMENT_UNSPECIFIED", "canonical"]),
    (lambda w: {"logical_shape": (24, 32)}, GritCheckError, ["expected 384 bytes, found 768"]),
    (lambda w: {"logical_shape": [24, 64]}, TypeError, ["logical_shape", "list"]),
    (lambda w: {"logical_dtype": torch.float64}, TypeError, ["logical dtype", "torch.float64"]),
    (lambda w: {"transposed": 1}, TypeError, ["transposed must be a bool", "int"]),
    (lambda w: {"tiled": True}, ValueError, ["tiled planes do not untile"]),
    (lambda w: {"scale1_plane": torch.zeros(3)}, TypeError, ["plane 2", "float32"]),
])
def test_a_file_that_disagrees_fails_the_load(change, error, words):
    w = _weights()["mxfp4"]
    with pytest.raises(error) as e:
        _rebuild(w, **change(w))
    for word in words + ["GritTensor (unpickled)"]:
        assert word in str(e.value), str(e.value)


def test_torchs_own_attributes_are_kept():
    w = _weights()["mxfp4"]
    assert _rebuild(w, _is_param=True)._is_param is True


def test_missing_attributes_fail_the_load():
    w = _weights()["mxfp4"]
    rebuild, (func, cls, args, st) = w.__reduce_ex__(2)
    st = {k: v for k, v in st.items() if k != "aux_plane"}
    with pytest.raises(ValueError, match="expected the attributes"):
        rebuild(func, cls, args, st)


@pytest.mark.parametrize("index, value, words", [
    (1, torch.bfloat16, ["torch.bfloat16", "torch.float32"]),  # the wrapper's dtype
    (2, (64, 24), ["(64, 24)", "(24, 64)"]),  # the wrapper's size
])
def test_a_wrapper_that_disagrees_with_its_planes_fails_the_load(index, value, words):
    w = _weights()["mxfp4"]
    args = list(w.__reduce_ex__(2)[1][2])
    args[index] = value
    if index == 2:
        args[3] = (24, 1)
    with pytest.raises(ValueError, match="the wrapper is") as e:
        _rebuild(w, args=tuple(args))
    for word in words:
        assert word in str(e.value)


def test_a_corrupt_tensor_fails_torch_load_whole():
    good = _weights()["mxfp4"]
    bad = torch_grit.quantize(torch.ones(24, 64), "MXFP4", tile=False)
    bad.scale0_plane = bad.scale0_plane[:5].clone()
    with pytest.raises(GritCheckError, match="plane 1 .scale0.: expected 48 bytes, found 5"):
        _saved_and_loaded({"a": good, "b": bad})
