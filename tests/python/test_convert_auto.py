"""torch-grit quantize --grade auto: quantize_'s rule per tensor, self-describing mixed checkpoints."""

import copy
import json
import os
import re

import pytest
import torch
from safetensors.torch import save_file

import torch_grit
from torch_grit import Descriptor
from torch_grit.cli import main as cli_main
from torch_grit.checkpoint.format import META_TORCH_GRIT
from torch_grit.quantization.profile import CANDIDATES as PROFILE_CANDIDATES, DEFAULT_BUDGET_DB, short_name
from torch_grit.checkpoint.safetensors_io import read_header
from torch_grit.scan import scan_paths

CHOICE = re.compile(r"^auto (\S+) \[[0-9, ]*\]: (\S+)")


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = torch.nn.Module()
        self.mlp.up = torch.nn.Linear(256, 64)


def crafted_model():
    """Two layers of one role: layer 0 smooth (NVF4's small blocks win at 20 dB), layer 1 with
    outliers (they carry the signal energy, and MXFP4, the smallest, reaches 20 dB); a head
    whose 40 inputs no candidate's groups tile (stays exact)."""
    g = torch.Generator().manual_seed(0)
    m = torch.nn.Module()
    m.layers = torch.nn.ModuleList([Block(), Block()])
    m.head = torch.nn.Linear(40, 8)
    with torch.no_grad():
        m.layers[0].mlp.up.weight.copy_(torch.randn(64, 256, generator=g) * 0.02)
        w = torch.randn(64, 256, generator=g) * 0.02
        w[::4, 5] = 3.0
        m.layers[1].mlp.up.weight.copy_(w)
    return m


def run_cli(*argv):
    return cli_main(["quantize", *map(str, argv)])


def file_grades(path):
    """tensor -> grade, read from the descriptors in the file's own header."""
    meta = read_header(str(path)).metadata
    described = json.loads(meta["__grit__"])
    records = json.loads(meta["torch_grit"])["tensors"]
    out = {}
    for name, hexd in described.items():
        d = Descriptor.from_bytes(bytes.fromhex(hexd), tuple(records[name]["shape"]))
        out[name] = short_name(d.grade)
    return out


@pytest.fixture
def source(tmp_path):
    m = crafted_model()
    path = tmp_path / "src.safetensors"
    save_file(m.state_dict(), str(path))
    return m, path


def test_auto_picks_per_tensor_and_the_file_says_so(tmp_path, source, capsys):
    model, src = source
    dst = tmp_path / "out.safetensors"
    assert run_cli(src, dst, "--grade", "auto") == 0
    out = capsys.readouterr().out.splitlines()
    printed = dict(CHOICE.match(l).groups() for l in out if CHOICE.match(l))
    assert printed == {"layers.0.mlp.up.weight": "NVF4", "layers.1.mlp.up.weight": "MXFP4",
                       "head.weight": "exact,"}
    head = next(l for l in out if l.startswith("auto head.weight "))
    assert "not a multiple of its group size" in head  # no candidate's groups tile 40 inputs
    assert any(l.startswith("auto: 2 tensors packed (NVF4 1, MXFP4 1), 1 kept exact") for l in out)
    # Each tensor's own descriptor carries its grade; the loader agrees; the choices printed are the file's.
    in_file = file_grades(dst)
    assert in_file == {k: v for k, v in printed.items() if v != "exact,"}
    assert len(set(in_file.values())) == 2
    loaded = torch_grit.load(dst, verify="digest")
    for name, grade in in_file.items():
        assert short_name(loaded[name].grade) == grade
    assert torch.equal(loaded["head.weight"], model.head.weight.detach())
    # The same rule as quantize_(model, "auto"): same grades, same packed bytes.
    q = copy.deepcopy(model)
    reports = {r.fqn + ".weight": r for r in torch_grit.quantize_(q, "auto")}
    for name, grade in in_file.items():
        assert reports[name].grade == torch_grit.Grade.parse(grade).canonical
        packed = dict(q.named_parameters())[name]
        assert all(torch.equal(a, b) for a, b in zip(loaded[name].planes, packed.planes)), name
    assert not reports["head.weight"].quantized
    # The checkpoint declares its per-tensor choice: scan is clean (exit 0) ...
    assert cli_main(["scan", str(dst)]) == 0
    capsys.readouterr()
    # torch_grit.save(model) of the auto-quantized model declares it too (quantize_ kept the
    # policy on the model) ...
    assert q.grit_grade_policy == {"grade": "auto", "rule": "torch_grit.auto.choose",
                                   "budget_db": DEFAULT_BUDGET_DB, "candidates": [
                                       torch_grit.Grade.parse(g).canonical for g in PROFILE_CANDIDATES]}
    saved = tmp_path / "saved.safetensors"
    torch_grit.save(q, saved)
    assert scan_paths([str(saved)]).exit_code() == 0
    meta = json.loads(read_header(str(saved)).metadata[META_TORCH_GRIT])
    assert meta["grade_policy"] == q.grit_grade_policy
    # ... while the same mixture saved without that declaration (a bare state dict) is drift.
    plain = tmp_path / "plain.safetensors"
    torch_grit.save(q.state_dict(), plain)
    drift = scan_paths([str(plain)])
    assert {f.data["scope"] for f in drift.by_class("grade_drift")} == {"role", "artifact"}
    assert drift.exit_code() == 2
    with pytest.raises(TypeError, match="grade_policy must be a JSON-able dict"):
        torch_grit.save(q, tmp_path / "bad.safetensors", grade_policy={"budget_db": float("nan")})
    assert not (tmp_path / "bad.safetensors").exists()


def test_budget_and_candidates(tmp_path, source, capsys):
    _, src = source
    dst = tmp_path / "out.safetensors"
    assert run_cli(src, dst, "--grade", "auto", "--json", "--budget-db", "25",
                   "--candidates", "NVF4,grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)") == 0
    lines = [json.loads(l) for l in capsys.readouterr().out.splitlines()]
    tensors = {l["name"]: l for l in lines if l["event"] == "tensor"}
    done = lines[-1]
    assert done["grade"] == "auto" and done["auto"]["budget_db"] == 25.0
    assert done["auto"]["candidates"] == [torch_grit.Grade.NVF4.canonical, torch_grit.Grade.MXFP4.canonical]
    # Layer 0 reaches 20.4 dB at best: below 25, it stays exact and says what each candidate reached.
    t0 = tensors["layers.0.mlp.up.weight"]
    assert t0["action"] == "kept" and "no candidate meets the 25.0 dB budget" in t0["reason"]
    assert set(t0["auto"]["sqnr_db"]) == {"NVF4", "MXFP4"}
    t1 = tensors["layers.1.mlp.up.weight"]
    assert t1["action"] == "quantized" and t1["grade"] == torch_grit.Grade.MXFP4.canonical
    assert t1["auto"]["sqnr_db"]["MXFP4"] >= 25.0
    assert file_grades(dst) == {"layers.1.mlp.up.weight": "MXFP4"}
    assert tensors["layers.0.mlp.up.bias"]["auto"] is None  # not a weight the rule was asked about


@pytest.mark.parametrize("argv, message", [
    (("--grade", "auto", "--budget-db", "nan"), "--budget-db is the minimum weight SQNR in dB"),
    (("--grade", "auto", "--budget-db", "lots"), "found 'lots'"),
    (("--grade", "auto", "--candidates", "MXFP4,FOO"), "--candidates: unknown grade 'FOO'"),
    (("--grade", "auto", "--candidates", "MXFP4,,NVF4"), "each candidate is a grade name"),
    (("--grade", "auto", "--candidates", "grit1(e=u4,k0=32,s0=binary16,zp=u4,esr=exp2floormaxabs)"),
     "cannot be a candidate: esr=exp2floormaxabs with a zero point"),
    (("--grade", "MXFP4", "--budget-db", "20"), "--budget-db applies to --grade auto only"),
    (("--grade", "NVF4", "--candidates", "MXFP4"), "--candidates applies to --grade auto only"),
])
def test_bad_auto_options_write_nothing(tmp_path, source, capsys, argv, message):
    _, src = source
    dst = tmp_path / "out"
    assert run_cli(src, dst, *argv) == 2
    assert message in capsys.readouterr().err
    assert not dst.exists() and sorted(os.listdir(tmp_path)) == ["src.safetensors"]


def test_quantize_refuses_a_bad_budget_before_touching_the_model():
    m = crafted_model()
    before = {k: v.clone() for k, v in m.state_dict().items()}
    with pytest.raises(ValueError, match="budget_db is the minimum weight SQNR"):
        torch_grit.quantize_(m, "auto", budget_db=float("nan"))
    with pytest.raises(ValueError, match="candidates: unknown grade 'MXFP5'"):
        torch_grit.quantize_(m, "auto", candidates=("MXFP4", "MXFP5"))
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())
