"""torch_grit.save / torch_grit.load: round trips, stock readers, determinism, atomicity, shards."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file
from torch import nn

import torch_grit
from torch_grit import CheckpointError, GritCheckError, GritTensor
from torch_grit.nn import GritLinear
from checkpoint_cases import TwoLayer, float_model, packed_model, read_raw, sha256, write_raw

from grit_cases import REF_NAMES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
        a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


@pytest.mark.parametrize("grade", REF_NAMES)
def test_round_trip_every_reference_grade(tmp_path, grade):
    torch.manual_seed(0)
    w = torch.randn(32, 512)
    w[3, 7] = float("nan")  # poisons its group, as the contract says; must survive the trip
    sd = {"w": torch_grit.quantize(w, grade), "b": torch.randn(32),
          "half": torch.randn(3, 5).to(torch.bfloat16), "ids": torch.arange(7),
          "mask": torch.tensor([True, False]), "empty": torch.zeros(0, 4)}
    path = tmp_path / "ck.safetensors"
    assert torch_grit.save(sd, path) == [str(path)]
    for verify in ("structure", "digest"):
        out = torch_grit.load(path, verify=verify)
        assert list(out) == sorted(sd)
        q = out["w"]
        assert isinstance(q, GritTensor) and q.grade == sd["w"].grade
        assert q.logical_shape == (32, 512) and q.dtype == torch.float32
        assert q.descriptor == sd["w"].descriptor
        assert all(torch.equal(a, b) for a, b in zip(q.planes, sd["w"].planes))
        assert same_bits(q.dequantize(), sd["w"].dequantize())
        for k in ("b", "half", "ids", "mask", "empty"):
            assert same_bits(out[k], sd[k]), k


def test_stock_safetensors_opens_it(tmp_path):
    model = packed_model("NVF4")
    path = str(tmp_path / "m.safetensors")
    torch_grit.save(model, path)
    plain = load_file(path)
    sd = model.state_dict()
    for name in ("fc1", "fc2"):
        w = sd[name + ".weight"]
        names = [name + ".weight.grit." + p for p in ("data", "scale0", "scale1", "aux")]
        for plane, entry in zip(w.planes, names):
            if plane.numel():
                assert plain[entry].dtype == torch.uint8 and torch.equal(plain[entry], plane)
            else:
                assert entry not in plain  # a zero-length plane is not written
        assert torch.equal(plain[name + ".bias"], sd[name + ".bias"])
    assert torch.equal(plain["emb.weight"], sd["emb.weight"])
    with safe_open(path, "pt") as f:
        meta = f.metadata()
    assert meta["format"] == "pt" and set(meta) == {"format", "__grit__", "torch_grit"}
    records = json.loads(meta["torch_grit"])
    assert records["version"] == 1
    assert records["tensors"]["fc1.weight"] == {
        "grade": sd["fc1.weight"].grade.canonical, "shape": [256, 256], "dtype": "float32",
        "digest": torch_grit.digest(sd["fc1.weight"].planes).hex()}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps (Linux)")
def test_loading_is_memory_mapped(tmp_path):
    path = str(tmp_path / "m.safetensors")
    torch_grit.save(packed_model(), path)
    w = torch_grit.load(path)["fc1.weight"]
    ptr = w.data_plane.data_ptr()
    with open("/proc/self/maps") as f:
        regions = [l for l in f if int(l.split("-")[0], 16) <= ptr < int(l.split()[0].split("-")[1], 16)]
    assert len(regions) == 1 and regions[0].rstrip().endswith(path), regions


@pytest.mark.parametrize("grade", ["MXFP4", "Q4KS", "I8S24"])
def test_model_round_trip_is_bit_exact(tmp_path, grade):
    model = packed_model(grade)
    x = torch.randn(8, 256)
    path = tmp_path / "m.safetensors"
    torch_grit.save(model, path)
    fresh = float_model()
    assert torch_grit.load(path, model=fresh, verify="digest") is fresh
    assert isinstance(fresh.fc1, GritLinear) and isinstance(fresh.fc2, GritLinear)
    assert isinstance(fresh.emb, nn.Embedding) and fresh.fc1.bias.requires_grad
    assert same_bits(fresh(x), model(x))
    # Loading into a model that is already packed (same grade) works too.
    again = packed_model(grade, seed=5)
    torch_grit.load(path, model=again)
    assert same_bits(again(x), model(x))


def test_load_into_model_refuses_a_mismatch_and_changes_nothing(tmp_path):
    path = tmp_path / "m.safetensors"
    torch_grit.save(packed_model(), path)

    class Wider(TwoLayer):
        def __init__(self):
            super().__init__()
            self.extra = nn.Linear(4, 4)

    class EmbeddingInstead(TwoLayer):
        def __init__(self):
            super().__init__()
            self.fc2 = nn.Embedding(32, 256)

    class OtherShape(TwoLayer):
        def __init__(self):
            super().__init__(hidden=128)

    for cls, what in ((Wider, "missing from the file ['extra.bias', 'extra.weight']"),
                      (EmbeddingInstead, "no nn.Linear"), (OtherShape, "does not fit")):
        torch.manual_seed(3)
        model = cls()
        before = {k: v.clone() for k, v in model.state_dict().items()}
        kinds = [type(m) for m in model.modules()]
        with pytest.raises(CheckpointError, match=__import__("re").escape(what)):
            torch_grit.load(path, model=model)
        assert [type(m) for m in model.modules()] == kinds
        assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    # strict=False loads what matches.
    torch.manual_seed(3)
    wider = Wider()
    torch_grit.load(path, model=wider, strict=False)
    assert isinstance(wider.fc1, GritLinear) and isinstance(wider.extra, nn.Linear)


def test_saving_twice_gives_identical_bytes_across_processes(tmp_path):
    script = textwrap.dedent("""
        import sys, torch, torch_grit
        sys.path.insert(0, %r)
        from checkpoint_cases import packed_model
        torch_grit.save(packed_model("Q4KS"), sys.argv[1])
        torch_grit.save(packed_model("Q4KS"), sys.argv[2], max_shard_size=20_000)
    """ % os.path.dirname(os.path.abspath(__file__)))
    for run in ("a", "b"):
        (tmp_path / run).mkdir()
        subprocess.run([sys.executable, "-c", script, str(tmp_path / run / "one.safetensors"),
                        str(tmp_path / run / "sh.safetensors")], check=True, timeout=120)
    names = sorted(os.listdir(tmp_path / "a"))
    assert names == sorted(os.listdir(tmp_path / "b")) and len(names) > 3
    for n in names:
        assert sha256(tmp_path / "a" / n) == sha256(tmp_path / "b" / n), n
    # Quantizing the same weights twice gives the same planes.
    w = torch.randn(64, 256)
    a, b = torch_grit.quantize(w, "MXFP4"), torch_grit.quantize(w.clone(), "MXFP4")
    assert all(torch.equal(p, q) for p, q in zip(a.planes, b.planes))


def test_header_layout_is_fixed(tmp_path):
    path = tmp_path / "m.safetensors"
    torch_grit.save({"z": torch.zeros(3, dtype=torch.float64), "a": torch.zeros(2, dtype=torch.uint8),
                     "m": torch.zeros(4, dtype=torch.float16), "b": torch.zeros(1)}, path)
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        text = f.read(n).decode()
    assert (8 + n) % 8 == 0 and text.endswith("}" + " " * (len(text) - len(text.rstrip())))
    header = json.loads(text)
    # Metadata first (keys sorted), then the entries widest alignment first, then by name.
    assert list(header) == ["__metadata__", "z", "b", "m", "a"]
    assert list(header["__metadata__"]) == sorted(header["__metadata__"])
    offsets = [header[k]["data_offsets"][0] for k in ("z", "b", "m", "a")]
    assert offsets == [0, 24, 28, 36]


def test_atomic_write_order(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(("fsync", os.path.realpath(
        "/proc/self/fd/%d" % fd))), real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append(("replace", a, b)),
                                                     real_replace(a, b))[1])
    path = str(tmp_path / "m.safetensors")
    torch_grit.save(packed_model(), path)
    tmp = events[1][1]
    assert os.path.dirname(tmp) == str(tmp_path) and os.path.basename(tmp).startswith(".m.safetensors.tmp-")
    assert events == [("fsync", tmp), ("replace", tmp, path), ("fsync", str(tmp_path))]
    assert os.listdir(tmp_path) == ["m.safetensors"]


def test_a_failed_save_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "m.safetensors"
    torch_grit.save(packed_model(seed=0), path)
    old = sha256(path)
    import torch_grit.checkpoint.format as ck
    real = ck.pwrite_all
    calls = []

    def failing(fd, data, offset):
        calls.append(offset)
        if len(calls) >= 3:
            raise OSError(28, "No space left on device")
        real(fd, data, offset)

    monkeypatch.setattr(ck, "pwrite_all", failing)
    with pytest.raises(OSError, match="No space"):
        torch_grit.save(packed_model(seed=1), path)
    assert sha256(path) == old and os.listdir(tmp_path) == ["m.safetensors"]
    with pytest.raises(OSError):
        torch_grit.save(packed_model(seed=1), tmp_path / "new.safetensors", max_shard_size=20_000)
    assert os.listdir(tmp_path) == ["m.safetensors"]


def test_a_killed_save_leaves_the_old_file_or_nothing(tmp_path):
    """A process killed mid-write (os._exit: no cleanup runs) never leaves a truncated target."""
    script = textwrap.dedent("""
        import os, sys, torch, torch_grit
        import torch_grit.checkpoint.format as ck
        sys.path.insert(0, %r)
        from checkpoint_cases import packed_model
        real, calls = ck.pwrite_all, []
        def dying(fd, data, offset):
            calls.append(offset)
            if len(calls) == 4:
                real(fd, bytes(data)[:len(data) // 2], offset)
                os._exit(9)
            real(fd, data, offset)
        ck.pwrite_all = dying
        torch_grit.save(packed_model(seed=1), sys.argv[1])
    """ % os.path.dirname(os.path.abspath(__file__)))
    old_path, new_path = tmp_path / "old.safetensors", tmp_path / "new.safetensors"
    torch_grit.save(packed_model(seed=0), old_path)
    old = sha256(old_path)
    for target in (old_path, new_path):
        done = subprocess.run([sys.executable, "-c", script, str(target)], timeout=120)
        assert done.returncode == 9
    assert sha256(old_path) == old and not new_path.exists()
    x = torch.randn(2, 256)
    assert same_bits(torch_grit.load(old_path, model=float_model())(x), packed_model(seed=0)(x))
    leftovers = sorted(p for p in os.listdir(tmp_path) if p.startswith("."))
    assert len(leftovers) == 2 and all(".tmp-" in p for p in leftovers)  # what a kill leaves


def test_shards_and_index(tmp_path):
    model = packed_model("Q4KS")
    sd = model.state_dict()
    path = tmp_path / "model.safetensors"
    files = torch_grit.save(model, path, max_shard_size="20KB")
    shards, index = files[:-1], files[-1]
    assert index == str(path) + ".index.json" and not path.exists()
    assert [os.path.basename(f) for f in shards] == [
        "model-%05d-of-%05d.safetensors" % (i + 1, len(shards)) for i in range(len(shards))]
    weight_map = json.load(open(index))["weight_map"]
    seen = {}
    for f in shards:
        assert os.path.getsize(f) < 20_000 + 4096 or len(load_file(f)) <= 4  # one unit alone
        for name in load_file(f):  # each shard is a stock safetensors file
            seen[name] = os.path.basename(f)
    assert seen == weight_map
    # A packed tensor's planes never straddle two shards.
    assert len({weight_map[k] for k in weight_map if k.startswith("fc1.weight.grit.")}) == 1
    x = torch.randn(3, 256)
    for where in (index, tmp_path):
        out = torch_grit.load(where)
        assert set(out) == set(sd)
        assert same_bits(torch_grit.load(where, model=float_model())(x), model(x))


def test_shards_with_a_stale_or_wrong_index_are_refused(tmp_path):
    path = tmp_path / "model.safetensors"
    files = torch_grit.save(packed_model(), path, max_shard_size="20KB")
    index = files[-1]
    doc = json.load(open(index))
    moved = dict(doc)
    name = sorted(doc["weight_map"])[0]
    moved["weight_map"] = dict(doc["weight_map"], **{name: os.path.basename(files[-2])})
    if moved["weight_map"][name] == doc["weight_map"][name]:
        moved["weight_map"][name] = os.path.basename(files[0])
    json.dump(moved, open(index, "w"))
    with pytest.raises(CheckpointError, match="the index maps"):
        torch_grit.load(index)
    json.dump(dict(doc, weight_map=dict(doc["weight_map"], ghost=os.path.basename(files[0]))),
              open(index, "w"))
    with pytest.raises(CheckpointError, match="no shard holds it"):
        torch_grit.load(index)
    json.dump(dict(doc, weight_map=dict(doc["weight_map"], **{name: "../evil.safetensors"})),
              open(index, "w"))
    with pytest.raises(CheckpointError, match="not a plain file name"):
        torch_grit.load(index)


def test_save_refuses_what_it_cannot_write_faithfully(tmp_path):
    w = torch_grit.quantize(torch.randn(8, 64), "MXFP4", tile=False)
    path = tmp_path / "x.safetensors"
    with pytest.raises(ValueError, match="reserved|planes of packed"):
        torch_grit.save({"a.grit.data": torch.zeros(3)}, path)
    with pytest.raises(ValueError, match="transposed view"):
        torch_grit.save({"w": w.t()}, path)
    with pytest.raises(TypeError, match="takes tensors"):
        torch_grit.save({"w": 3}, path)
    with pytest.raises(ValueError, match="meta device"):
        torch_grit.save({"w": torch.empty(2, device="meta")}, path)
    bad = w._derive(lambda p: p[:-1] if p.numel() else p)  # a plane one byte short, in memory
    with pytest.raises(GritCheckError, match="plane 0"):
        torch_grit.save({"w": bad}, path)
    assert not path.exists() and os.listdir(tmp_path) == []


def test_save_refuses_sparsity_metadata_out_of_its_declared_order(tmp_path):
    """I8S24 declares ascending positions in each quad (sp=2:4:u2:asclsb). Planes with a
    descending quad pass the length check, but a digest-verified load would refuse the
    file; save refuses them first, naming the tensor and the plane, and writes nothing."""
    w = torch_grit.quantize(torch.randn(8, 64, generator=torch.Generator().manual_seed(1)), "I8S24")
    planes = [p.clone() for p in w.planes]
    lo, hi = planes[3][0] & 3, (planes[3][0] >> 2) & 3
    planes[3][0] = (planes[3][0] & 0xF0) | hi | (lo << 2)  # quad 0: its two positions swapped
    bad = GritTensor.from_planes(planes, "I8S24", (8, 64))
    path = tmp_path / "x.safetensors"
    with pytest.raises(GritCheckError, match=r"sparse\.weight: .*plane 3 \(aux\): sparsity metadata"):
        torch_grit.save({"sparse.weight": bad}, path)
    assert os.listdir(tmp_path) == []
    torch_grit.save({"sparse.weight": w}, path)  # the quantizer's own planes are ordered
    assert torch_grit.load(path, verify="digest")["sparse.weight"].descriptor == w.descriptor


def test_a_plain_safetensors_file_loads_as_floats(tmp_path):
    path = str(tmp_path / "plain.safetensors")
    from safetensors.torch import save_file
    save_file({"a": torch.randn(3, 4), "b": torch.arange(5)}, path)
    out = torch_grit.load(path)
    assert set(out) == {"a", "b"} and not any(isinstance(v, GritTensor) for v in out.values())


def test_verify_digest_catches_a_flipped_byte(tmp_path):
    path = str(tmp_path / "m.safetensors")
    torch_grit.save(packed_model(), path)
    meta, entries = read_raw(path)
    data = bytearray(entries["fc1.weight.grit.data"]["bytes"])
    data[100] ^= 0x10  # same length: level 1 cannot see it
    entries["fc1.weight.grit.data"]["bytes"] = bytes(data)
    write_raw(path, meta, entries)
    assert isinstance(torch_grit.load(path)["fc1.weight"], GritTensor)
    with pytest.raises(GritCheckError, match="DigestMismatch") as err:
        torch_grit.load(path, verify="digest")
    assert err.value.tensor == "fc1.weight" and err.value.status == "DigestMismatch"
    with pytest.raises(ValueError, match="verify is one of"):
        torch_grit.load(path, verify="bytes")


def _permuted_model(seed=0):
    """packed_model with fc1's inputs permuted (GritLinear.input_perm, as the GPTQ act-order import sets it)."""
    model = packed_model(seed=seed)
    model.fc1.set_input_perm_(torch.randperm(256, generator=torch.Generator().manual_seed(seed)))
    return model


def test_an_input_permutation_round_trips(tmp_path):
    path = str(tmp_path / "m.safetensors")
    model = _permuted_model()
    torch_grit.save(model, path)
    raw = load_file(path)   # stock safetensors: a plain int64 entry beside the planes
    assert raw["fc1.input_perm"].dtype == torch.int64 and torch.equal(raw["fc1.input_perm"], model.fc1.input_perm)
    assert "fc2.input_perm" not in raw
    state = torch_grit.load(path)
    assert torch.equal(state["fc1.input_perm"], model.fc1.input_perm)
    x = torch.randn(4, 256)
    for target in (float_model(), packed_model(seed=5)):   # nn.Linear, or a GritLinear without one
        torch_grit.load(path, model=target)
        assert torch.equal(target.fc1.input_perm, model.fc1.input_perm) and target.fc2.input_perm is None
        assert torch.equal(target(x), model(x))
    assert "input_perm=[256]" in repr(model.fc1)
    # A model whose layer has a permutation, loaded from a file without one: strict names it.
    plain = str(tmp_path / "plain.safetensors")
    torch_grit.save(packed_model(), plain)
    with pytest.raises(CheckpointError, match=r"missing from the file \['fc1.input_perm'\]"):
        torch_grit.load(plain, model=_permuted_model())
    # The un-permuted weight is the stored one with its columns scattered back.
    w = model.fc1.unpermuted_weight()
    assert torch.equal(w[:, model.fc1.input_perm], model.fc1.weight.dequantize())
    # x[..., p] @ W'^T = x @ W^T (float32 sums in another order)
    with torch.no_grad():
        y = model.fc1(x)
        assert torch.allclose(y, torch.nn.functional.linear(x, w, model.fc1.bias), atol=1e-5, rtol=1e-5)
        assert torch.allclose(y, torch.nn.functional.linear(x[:, model.fc1.input_perm], model.fc1.weight.dequantize(),
                                                            model.fc1.bias), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("edit,match", [
    (lambda p: torch.cat([p[:1], p[:-1]]), r"not a permutation: input \d+ appears 2 times"),
    (lambda p: p[:-1].clone(), r"has shape \[255\]; the layer has 256 inputs"),
    (lambda p: p.to(torch.int32), "is torch.int32; an input permutation is int64|is int32; an input"),
    (lambda p: torch.where(p == 0, torch.tensor(256), p), r"= 256 is not an input index"),
])
def test_a_bad_input_permutation_is_refused_naming_it_and_nothing_changes(tmp_path, edit, match):
    path = str(tmp_path / "m.safetensors")
    torch_grit.save(_permuted_model(), path)
    meta, entries = read_raw(path)
    bad = edit(load_file(path)["fc1.input_perm"]).contiguous()
    entries["fc1.input_perm"] = {"dtype": {torch.int64: "I64", torch.int32: "I32"}[bad.dtype],
                                 "shape": list(bad.shape), "bytes": bad.numpy().tobytes()}
    write_raw(path, meta, entries)
    with pytest.raises(CheckpointError, match="fc1.input_perm") as err:
        torch_grit.load(path)
    assert err.value.tensor == "fc1.input_perm" and err.value.field == "input_perm"
    assert __import__("re").search(match, str(err.value))
    model = float_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(CheckpointError, match="fc1.input_perm"):
        torch_grit.load(path, model=model)
    assert type(model.fc1) is nn.Linear and all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    # The layer refuses it the same way, and save() will not write one.
    with pytest.raises(ValueError, match="fc1.input_perm"):
        packed_model().fc1.set_input_perm_(bad, name="fc1")
    with pytest.raises(ValueError, match="fc1.input_perm"):
        torch_grit.save({"fc1.weight": packed_model().fc1.weight, "fc1.input_perm": bad}, tmp_path / "x.safetensors")


def test_a_sharded_load_refuses_a_layer_with_an_input_permutation(tmp_path):
    from torch_grit.checkpoint.read import open_layout
    from torch_grit.parallel.load import _check_no_input_perm

    path = str(tmp_path / "m.safetensors")
    torch_grit.save(_permuted_model(), path)
    with pytest.raises(ValueError, match=r"fc1.input_perm: .*tensor parallelism does not take such layers"):
        _check_no_input_perm(open_layout(path))
    torch_grit.save(packed_model(), path)
    _check_no_input_perm(open_layout(path))
