"""Named grades (torch_grit.contract.grade_names): each name is its canonical grade
everywhere a grade is taken, the names match the grades the importers write, and the
per-channel families pick k0 = in_features per weight, in quantize, quantize_,
GritLinear, save/load and ``torch-grit quantize``, with the choice recorded so the
scanner reads it as intended."""

import json

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

import torch_grit
from torch_grit import Grade
from torch_grit.nn import GritLinear
from torch_grit.checkpoint.safetensors_io import read_header
from torch_grit.cli import main as cli_main
from torch_grit.contract.errors import GradeError
from torch_grit.contract.grade_names import NAMED, PerChannel
from torch_grit.interop.gptq.layout import grade_text
from torch_grit.scan import scan_paths


def planes(t):
    return [bytes(p.numpy().tobytes()) for p in t.planes]


@pytest.mark.parametrize("name", sorted(NAMED))
def test_a_name_is_its_canonical_grade(name):
    assert Grade(name) == Grade(NAMED[name]) and Grade(name.lower()).canonical == Grade(NAMED[name]).canonical
    w = torch.randn(8, 256, generator=torch.Generator().manual_seed(3))
    a, b = torch_grit.quantize(w, name), torch_grit.quantize(w, NAMED[name])
    assert a.grade_canonical == Grade(NAMED[name]).canonical and planes(a) == planes(b)


def test_names_match_the_grades_the_importers_write():
    for k in (32, 64, 128):
        assert Grade("U4Z_G%d" % k) == Grade(grade_text(4, k, sym=False))  # GPTQ / AWQ asymmetric
        assert Grade("U4S_G%d" % k) == Grade(grade_text(4, k, sym=True))   # GPTQ symmetric
        assert Grade("U8Z_G%d" % k) == Grade(grade_text(8, k, sym=False))
        assert Grade("S4_G%d" % k) == Grade("grit1(e=s4,k0=%d,s0=binary16,esr=ratiomaxabs)" % k)
    assert Grade("Q8_0") == Grade("grit1(e=s8,k0=32,s0=binary16,esr=ratiomaxabs)")  # the scanner's Q8_0


def test_a_gptq_shaped_grade_runs_through_its_fast_decoder_and_matches_the_reference():
    w = torch.randn(64, 256, generator=torch.Generator().manual_seed(4))
    t = torch_grit.quantize(w, "U4Z_G128")
    x = torch.randn(3, 256, generator=torch.Generator().manual_seed(5))
    ref = x @ t.dequantize().t()
    torch.testing.assert_close(torch.nn.functional.linear(x, t), ref, rtol=1e-5, atol=1e-5)


def test_per_channel_picks_k0_per_weight():
    w = torch.randn(16, 384, generator=torch.Generator().manual_seed(6))
    t = torch_grit.quantize(w, "S8_CHANNEL")
    assert t.grade_canonical == Grade("grit1(e=s8,k0=384,s0=binary32,esr=ratiomaxabs)").canonical
    assert torch_grit.quantize(w, "u4z_channel").grade_canonical == \
        Grade("grit1(e=u4,k0=384,s0=binary16,zp=u4,esr=affineminmax)").canonical
    with pytest.raises(GradeError, match="picks k0 = in_features per weight"):
        Grade("S8_CHANNEL")
    with pytest.raises(ValueError, match="has no single canonical grade"):
        PerChannel("S4_CHANNEL").canonical


def test_quantize_model_with_a_per_channel_family_saves_and_loads(tmp_path):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(384, 64), nn.ReLU(), nn.Linear(64, 8))
    x = torch.randn(2, 384)
    reports = torch_grit.quantize_(m, "S8_CHANNEL")
    assert [r.grade for r in reports] == [Grade("grit1(e=s8,k0=%d,s0=binary32,esr=ratiomaxabs)" % k).canonical
                                          for k in (384, 64)]
    assert m.grit_grade_policy["grade"] == "S8_CHANNEL"
    y = m(x)
    path = tmp_path / "m.safetensors"
    torch_grit.save(m, path)
    assert scan_paths([str(path)]).exit_code("graded") == 0  # the mixture of k0s is declared
    fresh = nn.Sequential(nn.Linear(384, 64), nn.ReLU(), nn.Linear(64, 8))
    torch_grit.load(path, model=fresh)
    assert isinstance(fresh[0], GritLinear)
    assert torch.equal(fresh(x), y)
    layer = GritLinear.from_linear(nn.Linear(96, 4), "S4_CHANNEL")
    assert layer.weight.grade_canonical == Grade("grit1(e=s4,k0=96,s0=binary32,esr=ratiomaxabs)").canonical


def test_cli_quantize_takes_names_and_records_the_per_channel_choice(tmp_path, capsys):
    src = tmp_path / "src.safetensors"
    g = torch.Generator().manual_seed(7)
    save_file({"a.weight": torch.randn(16, 256, generator=g), "b.weight": torch.randn(8, 128, generator=g),
               "a.bias": torch.randn(16, generator=g)}, str(src))
    assert cli_main(["quantize", str(src), str(tmp_path / "z.safetensors"), "--grade", "U4Z_G128"]) == 0
    assert cli_main(["quantize", str(src), str(tmp_path / "c.safetensors"), "--grade", "S8_CHANNEL"]) == 0
    assert "packed to S8_CHANNEL" in capsys.readouterr().out
    meta = read_header(str(tmp_path / "c.safetensors")).metadata
    policy = json.loads(meta["torch_grit"]).get("grade_policy")
    assert policy["grade"] == "S8_CHANNEL" and policy["rule"] == "torch_grit.per_channel"
    sd = torch_grit.load(tmp_path / "c.safetensors")
    assert sd["a.weight"].grade_canonical.startswith("grit1(e=s8,k0=256,")
    assert sd["b.weight"].grade_canonical.startswith("grit1(e=s8,k0=128,")
    assert scan_paths([str(tmp_path / "c.safetensors")]).exit_code("graded") == 0
