"""A corrupted checkpoint fails the whole load, naming what disagrees; nothing is loaded or changed.

Each case starts from a good checkpoint and changes one thing by hand
(checkpoint_cases.write_raw keeps the container itself well-formed unless the
case is about the container). For every case: the error type and its fields,
the model passed to load() untouched, and the file unchanged by the attempt.
"""

import copy
import json

import pytest
import torch
from safetensors.torch import load_file

import torch_grit
from torch_grit import CheckpointError, GritCheckError
from checkpoint_cases import (
    float_model, grit_meta, packed_model, read_raw, set_grit_meta, sha256, write_raw,
)

from grit_cases import REF_NAMES

PLANES = ("data", "scale0", "scale1", "aux")


def saved(tmp_path, grade="MXFP4"):
    path = str(tmp_path / "m.safetensors")
    torch_grit.save(packed_model(grade), path)
    return path


def assert_refused(path, exc_type, **fields):
    """load() raises ``exc_type`` with ``fields``, leaves a model and the file as they were."""
    digest = sha256(path)
    model = float_model()
    before = copy.deepcopy(model.state_dict())
    kinds = [type(m) for m in model.modules()]
    for target in (None, model):
        with pytest.raises(exc_type) as err:
            torch_grit.load(path, model=target, verify="digest")
        for k, v in fields.items():
            assert getattr(err.value, k) == v, (k, getattr(err.value, k), str(err.value))
    assert [type(m) for m in model.modules()] == kinds
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert sha256(path) == digest
    return err.value


def plane_cases():
    for grade in REF_NAMES:
        sizes = torch_grit.Descriptor(grade, (256, 256)).expected_plane_bytes()
        for i, n in enumerate(sizes):
            if n:
                yield grade, i


@pytest.mark.parametrize("grade,plane", list(plane_cases()))
def test_each_plane_one_byte_short(tmp_path, grade, plane):
    path = saved(tmp_path, grade)
    meta, entries = read_raw(path)
    name = "fc1.weight.grit." + PLANES[plane]
    n = len(entries[name]["bytes"])
    entries[name] = {"dtype": "U8", "shape": [n - 1], "bytes": entries[name]["bytes"][:-1]}
    write_raw(path, meta, entries)
    load_file(path)  # still a valid safetensors file: only the GRIT check can see it
    err = assert_refused(path, GritCheckError, tensor="fc1.weight", status="SizeMismatch",
                         field="plane_bytes", plane=plane, expected=n, found=n - 1)
    assert "fc1.weight" in str(err) and "expected %d bytes, found %d" % (n, n - 1) in str(err)


@pytest.mark.parametrize("grade,plane", list(plane_cases()))
def test_each_plane_with_a_wrong_dtype(tmp_path, grade, plane):
    path = saved(tmp_path, grade)
    meta, entries = read_raw(path)
    name = "fc1.weight.grit." + PLANES[plane]
    n = len(entries[name]["bytes"])
    entries[name] = dict(entries[name], dtype="I8")  # same bytes, another dtype
    write_raw(path, meta, entries)
    err = assert_refused(path, GritCheckError, tensor="fc1.weight", field="plane_dtype",
                         plane=plane, expected="U8 [n]", found="I8 [%d]" % n)
    assert name in str(err)
    if n % 2 == 0:  # the same bytes as F16 [n/2]: right byte length, wrong dtype and shape
        entries[name] = dict(entries[name], dtype="F16", shape=[n // 2])
        write_raw(path, meta, entries)
        assert_refused(path, GritCheckError, field="plane_dtype", found="F16 [%d]" % (n // 2))


@pytest.mark.parametrize("grade,plane", list(plane_cases()))
def test_each_plane_missing(tmp_path, grade, plane):
    path = saved(tmp_path, grade)
    meta, entries = read_raw(path)
    name = "fc1.weight.grit." + PLANES[plane]
    n = len(entries.pop(name)["bytes"])
    write_raw(path, meta, entries)
    err = assert_refused(path, GritCheckError, tensor="fc1.weight", field="plane_bytes",
                         plane=plane, expected=n, found=None)
    assert "%r is missing" % name in str(err)


@pytest.mark.parametrize("grade", ["MXFP4", "NVF4", "Q4KS"])
def test_a_wrong_group_size_in_the_descriptor(tmp_path, grade):
    path = saved(tmp_path, grade)
    meta, entries = read_raw(path)
    descriptors, records = grit_meta(meta)
    good = torch_grit.Descriptor.from_bytes(bytes.fromhex(descriptors["fc1.weight"]), (256, 256))
    k0 = good.k0
    descriptors["fc1.weight"] = good.replace(k0=2 * k0).to_bytes().hex()
    write_raw(path, set_grit_meta(meta, descriptors, records), entries)
    err = assert_refused(path, GritCheckError, tensor="fc1.weight", status="GradeUnknown",
                         field="k0", expected=k0, found=2 * k0)
    assert "k0" in str(err)


def test_a_swapped_zero_point_convention(tmp_path):
    # Q4KS stores its zero points as is (zpc=asis). GPTQ's convention is zpc=minus1
    # (flag ZP_MINUS1 = 0x02): the same bytes read one quantisation step off.
    path = saved(tmp_path, "Q4KS")
    meta, entries = read_raw(path)
    descriptors, records = grit_meta(meta)
    good = torch_grit.Descriptor.from_bytes(bytes.fromhex(descriptors["fc1.weight"]), (256, 256))
    flipped = dict(descriptors, **{"fc1.weight": good.replace(flags=good.flags ^ 0x02).to_bytes().hex()})
    write_raw(path, set_grit_meta(meta, flipped, records), entries)
    assert_refused(path, GritCheckError, tensor="fc1.weight", status="GradeUnknown", field="flags",
                   expected=good.flags, found=good.flags ^ 0x02)
    # The grade string claims minus1 while the descriptor says asis: the grade ids disagree.
    minus1 = torch_grit.Grade.parse(torch_grit.Grade.Q4KS.canonical.replace("zps=l1", "zpc=minus1,zps=l1"))
    swapped = copy.deepcopy(records)
    swapped["tensors"]["fc1.weight"]["grade"] = minus1.canonical
    write_raw(path, set_grit_meta(meta, descriptors, swapped), entries)
    assert_refused(path, GritCheckError, tensor="fc1.weight", status="GradeUnknown",
                   field="grade_id", expected=minus1.id, found=torch_grit.Grade.Q4KS.id)


def test_a_descriptor_for_another_grade_or_shape(tmp_path):
    path = saved(tmp_path)
    meta, entries = read_raw(path)
    descriptors, records = grit_meta(meta)
    nvf4 = torch_grit.Descriptor("NVF4", (256, 256)).to_bytes().hex()
    write_raw(path, set_grit_meta(meta, dict(descriptors, **{"fc1.weight": nvf4}), records), entries)
    assert_refused(path, GritCheckError, tensor="fc1.weight", status="GradeUnknown")
    other = copy.deepcopy(records)
    other["tensors"]["fc1.weight"]["shape"] = [128, 256]  # the planes hold 256 rows
    write_raw(path, set_grit_meta(meta, descriptors, other), entries)
    assert_refused(path, GritCheckError, tensor="fc1.weight", status="SizeMismatch", plane=0)


def test_a_descriptor_for_a_tensor_that_is_missing(tmp_path):
    path = saved(tmp_path)
    meta, entries = read_raw(path)
    for p in PLANES:
        entries.pop("fc2.weight.grit." + p, None)
    write_raw(path, meta, entries)
    err = assert_refused(path, GritCheckError, tensor="fc2.weight", field="plane_bytes")
    assert "names a tensor that is missing" in str(err)


def test_two_descriptors_for_one_tensor(tmp_path):
    path = saved(tmp_path)
    meta, entries = read_raw(path)
    text = meta["__grit__"]
    one = json.loads(text)["fc1.weight"]
    meta2 = dict(meta, __grit__=text[:-1] + ',"fc1.weight":"%s"}' % one)  # a duplicate JSON key
    write_raw(path, meta2, entries)
    err = assert_refused(path, CheckpointError, field="duplicate_key", found="fc1.weight")
    assert "twice" in str(err)
    # ... and one tensor described in two shards.
    files = torch_grit.save(packed_model(), tmp_path / "sh.safetensors", max_shard_size="20KB")
    shards = files[:-1]
    holder = [f for f in shards if "fc1.weight.grit.data" in load_file(f)][0]
    other = [f for f in shards if f != holder][0]
    meta_h, _ = read_raw(holder)
    meta_o, entries_o = read_raw(other)
    d_h, r_h = grit_meta(meta_h)
    d_o, r_o = grit_meta(meta_o) if "__grit__" in meta_o else ({}, {"version": 1, "tensors": {}})
    d_o["fc1.weight"] = d_h["fc1.weight"]
    r_o["tensors"]["fc1.weight"] = r_h["tensors"]["fc1.weight"]
    write_raw(other, set_grit_meta(meta_o, d_o, r_o), entries_o)
    with pytest.raises(GritCheckError, match="two descriptors for one tensor") as err:
        torch_grit.load(files[-1])
    assert err.value.tensor == "fc1.weight" and err.value.field == "descriptor"


def test_an_unknown_grade(tmp_path):
    path = saved(tmp_path)
    meta, entries = read_raw(path)
    descriptors, records = grit_meta(meta)
    records["tensors"]["fc1.weight"]["grade"] = "grit1(e=e9m9,k0=32,s0=e8m0,esr=exp2floormaxabs)"
    write_raw(path, set_grit_meta(meta, descriptors, records), entries)
    err = assert_refused(path, GritCheckError, tensor="fc1.weight", status="GradeUnknown",
                         field="grade", found="grit1(e=e9m9,k0=32,s0=e8m0,esr=exp2floormaxabs)")
    assert "e9m9" in str(err)


def test_descriptor_and_record_must_pair_up(tmp_path):
    path = saved(tmp_path)
    meta, entries = read_raw(path)
    descriptors, records = grit_meta(meta)
    lonely = dict(descriptors)
    del lonely["fc2.weight"]
    write_raw(path, set_grit_meta(meta, lonely, records), entries)
    assert_refused(path, GritCheckError, tensor="fc2.weight", field="descriptor")
    bare = copy.deepcopy(records)
    del bare["tensors"]["fc2.weight"]
    write_raw(path, set_grit_meta(meta, descriptors, bare), entries)
    assert_refused(path, GritCheckError, tensor="fc2.weight", field="torch_grit")
    write_raw(path, set_grit_meta(meta, dict(descriptors, **{"fc2.weight": "zz" * 64}), records),
              entries)
    assert_refused(path, GritCheckError, tensor="fc2.weight", field="descriptor")


def test_a_plane_without_a_descriptor(tmp_path):
    path = saved(tmp_path)
    meta, entries = read_raw(path)
    entries["ghost.weight.grit.data"] = {"dtype": "U8", "shape": [4], "bytes": b"\0" * 4}
    write_raw(path, meta, entries)
    assert_refused(path, GritCheckError, tensor="ghost.weight.grit.data", field="descriptor")


def test_a_truncated_file(tmp_path):
    path = saved(tmp_path)
    with open(path, "rb") as f:
        blob = f.read()
    for cut in (1, len(blob) // 2, len(blob) - 3, 5):
        with open(path, "wb") as f:
            f.write(blob[:cut])
        with pytest.raises(Exception):
            load_file(path)  # stock safetensors refuses it too
        assert_refused(path, CheckpointError)
    with open(path, "wb") as f:
        f.write(blob[:-1])
    err = assert_refused(path, CheckpointError, field="data_length", found=len(blob) - 1 - 8 -
                         int.from_bytes(blob[:8], "little"))
    assert "truncated" in str(err)


@pytest.mark.parametrize("lie,field", [
    ({"fc1.bias": [0, 1 << 40]}, "data_offsets"),        # runs far past the end
    ({"fc1.bias": [8, 8 + 1024]}, "data_offsets"),       # overlaps the entry before it
    ({"fc1.bias": [-4, 1020]}, "data_offsets"),          # negative
    ({"fc1.bias": [0, 1023]}, "data_offsets"),           # one byte short of its shape
])
def test_a_header_that_lies_about_offsets(tmp_path, lie, field):
    path = saved(tmp_path)
    meta, entries = read_raw(path)
    write_raw(path, meta, entries, offsets=lie)
    with pytest.raises(Exception):
        load_file(path)
    err = assert_refused(path, CheckpointError, field=field, tensor=next(iter(lie)))
    assert "fc1.bias" in str(err)


def test_a_header_that_is_not_a_header(tmp_path):
    path = str(tmp_path / "x.safetensors")
    for blob, field in ((b"\xff" * 8 + b"{}", "header_length"), (b"\x02" + b"\0" * 7 + b"[]", "header"),
                        (b"\x04" + b"\0" * 7 + b'{"a"', "json"),
                        (b"\x1e" + b"\0" * 7 + b'{"__metadata__":{"k":1}}      ', "__metadata__")):
        with open(path, "wb") as f:
            f.write(blob)
        assert_refused(path, CheckpointError, field=field)
