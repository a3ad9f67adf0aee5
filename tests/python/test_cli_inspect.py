"""``torch-grit inspect``: a checkpoint's contents from its headers, checked as load checks them.

Every number it prints is compared with what torch_grit.load returns for the
same file (grade, shape, dtype, plane bytes, gid, descriptor, digest); a
checkpoint load refuses is refused with the same first disagreement (exit 1).
"""

import json
import os
import subprocess
import sys

import pytest
import torch
import torch.nn as nn

import torch_grit
from torch_grit import cli
from checkpoint_cases import grit_meta, packed_model, read_raw, set_grit_meta, write_raw


def run_cli(capsys, *argv):
    rc = cli.main(["inspect", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def check_against_load(doc, path):
    state = torch_grit.load(path)
    assert sorted(t["name"] for t in doc["tensors"]) == sorted(state)
    for t in doc["tensors"]:
        v = state[t["name"]]
        assert t["shape"] == list(v.shape)
        assert t["dtype"] == str(v.dtype).replace("torch.", "")
        if t["kind"] == "plain":
            assert type(v) is torch.Tensor and t["bytes"] == v.numel() * v.element_size()
            continue
        assert isinstance(v, torch_grit.GritTensor)
        assert t["grade"] == v.grade.canonical and t["grade_name"] == v.grade.name
        assert t["gid"] == v.descriptor.gid and t["descriptor"] == v.descriptor.to_bytes().hex()
        assert t["digest"] == torch_grit.digest([p.numpy().tobytes() for p in v.planes]).hex()
        assert t["bytes"] == sum(p.numel() for p in v.planes) == sum(q["bytes"] for q in t["planes"])
        assert t["bits_per_weight"] == pytest.approx(8 * t["bytes"] / v.numel())
    tot = doc["totals"]
    assert tot["packed"] + tot["plain"] == len(state)
    assert tot["file_bytes"] == sum(os.path.getsize(f) for f in doc["files"])


def test_a_model_with_a_grade_policy(tmp_path, capsys):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 64), nn.ReLU(), nn.Linear(256, 32), nn.Linear(64, 16))
    torch_grit.quantize_(model, "auto", filter_fn=lambda m, name: name != "3")
    path = str(tmp_path / "m.safetensors")
    torch_grit.save(model, path)
    rc, out, _ = run_cli(capsys, path, "--json")
    assert rc == 0
    doc = json.loads(out)
    assert doc["schema"] == "torch_grit.inspect/1" and doc["index"] is None
    assert doc["grade_policy"] == model.grit_grade_policy
    check_against_load(doc, path)
    rc, text, _ = run_cli(capsys, path)
    assert rc == 0 and "grade policy:" in text
    for t in doc["tensors"]:
        row = next(line for line in text.splitlines() if line.split()[:1] == [t["name"]])
        assert str(t["bytes"]) in row.split()
        if t["kind"] == "packed":
            assert t["gid"] in row and ("%.3f" % t["bits_per_weight"]) in row
        else:
            assert "(plain)" in row


def test_shards_with_an_index(tmp_path, capsys):
    model = packed_model("NVF4")
    folder = str(tmp_path)
    files = torch_grit.save(model, str(tmp_path / "model.safetensors"), max_shard_size=40_000)
    assert len(files) > 2  # shards and the index
    rc, out, _ = run_cli(capsys, folder, "--json")
    assert rc == 0
    doc = json.loads(out)
    assert len(doc["files"]) > 1 and doc["index"].endswith(".index.json")
    weight_map = json.load(open(doc["index"]))["weight_map"]
    for t in doc["tensors"]:
        names = [q["entry"] for q in t.get("planes", [])] or [t["name"]]
        assert {weight_map[n] for n in names} == {t["file"]}
    check_against_load(doc, folder)


def test_one_tensor_in_detail(tmp_path, capsys):
    path = str(tmp_path / "m.safetensors")
    torch_grit.save(packed_model("Q4KS"), path)
    w = torch_grit.load(path)["fc1.weight"]
    rc, text, _ = run_cli(capsys, path, "--tensor", "fc1.weight")
    assert rc == 0
    assert "descriptor %s" % w.descriptor.to_bytes().hex() in text and "grade      %s" % w.grade.canonical in text
    for suffix, p in zip(("data", "scale0", "scale1", "aux"), w.planes):
        if p.numel():
            assert any(line.split()[1:4] == [suffix, "fc1.weight.grit." + suffix, str(p.numel())]
                       for line in text.splitlines()), suffix
    assert [line.split()[0] for line in text.splitlines()[3:] if not line.startswith(" ")] == ["fc1.weight"]


def test_a_checkpoint_load_refuses_is_refused(tmp_path, capsys):
    path = str(tmp_path / "m.safetensors")
    torch_grit.save(packed_model("MXFP4"), path)
    meta, entries = read_raw(path)
    descriptors, records = grit_meta(meta)
    good = torch_grit.Descriptor.from_bytes(bytes.fromhex(descriptors["fc1.weight"]), (256, 256))
    descriptors["fc1.weight"] = good.replace(k0=2 * good.k0).to_bytes().hex()
    write_raw(path, set_grit_meta(meta, descriptors, records), entries)
    with pytest.raises(torch_grit.GritCheckError) as err:
        torch_grit.load(path)
    rc, out, errtext = run_cli(capsys, path)
    assert rc == 1 and out == ""
    assert errtext.strip() == "torch-grit inspect: %s" % err.value


def test_usage_errors(tmp_path, capsys):
    rc, _, err = run_cli(capsys, str(tmp_path / "nothing.safetensors"))
    assert rc == 1 and "no such file" in err
    path = str(tmp_path / "m.safetensors")
    torch_grit.save(packed_model("MXFP4"), path)
    rc, _, err = run_cli(capsys, path, "--tensor", "fc9.weight")
    assert rc == 2 and "no tensor 'fc9.weight'" in err


def test_python_dash_m_is_the_same_command(tmp_path):
    path = str(tmp_path / "m.safetensors")
    torch_grit.save(packed_model("I8S24"), path)
    run = subprocess.run([sys.executable, "-m", "torch_grit", "inspect", path, "--json"], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    check_against_load(json.loads(run.stdout), path)


def test_a_closed_pipe_ends_quietly(tmp_path):
    from safetensors.torch import save_file

    path = str(tmp_path / "many.safetensors")
    save_file({"t%04d" % i: torch.zeros(2) for i in range(2000)}, path)  # --json: about 300 kB, past a pipe's buffer
    run = subprocess.run("set -o pipefail; %s -m torch_grit inspect %s --json | head -c 100 > /dev/null"
                         % (sys.executable, path), shell=True, executable="/bin/bash", capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 141 and run.stderr == "", run.stderr
