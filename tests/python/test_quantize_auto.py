"""quantize_(model, "auto", budget_db=...): per-layer grade choice from the real encoders."""

import pytest
import torch

import torch_grit as tg
from torch_grit.quantization.profile import preview


def _model():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(256, 64), torch.nn.ReLU(), torch.nn.Linear(64, 96))
    return m


def test_auto_picks_the_smallest_grade_within_budget(tmp_path):
    m = _model()
    x = torch.randn(3, 256)
    budgets = {}
    for fqn in ("0", "2"):
        w = dict(m.named_modules())[fqn].weight.detach().numpy()
        budgets[fqn] = {g: preview(w, g) for g in ("MXFP4", "NVF4", "Q4KS", "I8S24")}
    reports = tg.quantize_(m, "auto", budget_db=18.0)
    by_fqn = {r.fqn: r for r in reports}
    for fqn, previews in budgets.items():
        ok = [p for p in previews.values() if p.applies and p.sqnr_db >= 18.0]
        want = min(ok, key=lambda p: p.bytes).grade
        assert by_fqn[fqn].grade == tg.Grade.parse(want).canonical
        assert dict(m.named_modules())[fqn].weight.grade == tg.Grade.parse(want)
    assert torch.isfinite(m(x)).all()
    # A mixed-grade checkpoint describes itself: each descriptor carries its own grade.
    path = tmp_path / "mixed.safetensors"
    tg.save(m, path)
    sd = tg.load(path)
    for fqn in ("0", "2"):
        assert sd[fqn + ".weight"].grade.canonical == by_fqn[fqn].grade


def test_auto_leaves_a_layer_exact_when_no_grade_meets_the_budget():
    m = _model()
    reports = tg.quantize_(m, "auto", budget_db=80.0)
    for r in reports:
        assert not r.quantized
        assert "no candidate meets the 80.0 dB budget" in r.skipped
    assert isinstance(m[0], torch.nn.Linear) and not isinstance(m[0], tg.nn.GritLinear)


def test_auto_respects_shapes_and_candidates():
    m = _model()
    reports = tg.quantize_(m, "auto", budget_db=0.0, candidates=("Q4KS",))
    by_fqn = {r.fqn: r for r in reports}
    assert by_fqn["0"].grade == tg.Grade.Q4KS.canonical
    assert not by_fqn["2"].quantized and "256" in by_fqn["2"].skipped  # 64 columns cannot hold Q4KS super-blocks
