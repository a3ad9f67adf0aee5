"""profile(): the preview equals the result of actually quantizing."""

import numpy as np
import pytest
import torch

import torch_grit as tg
from torch_grit.quantization.profile import profile, preview


def _model():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(256, 64), torch.nn.LayerNorm(64), torch.nn.Linear(64, 96))
    with torch.no_grad():
        m[0].weight[3, 7] = 40.0  # an outlier: its block scale squeezes the neighbours
    return m


@pytest.mark.parametrize("grade", ["MXFP4", "NVF4", "Q4KS", "I8S24"])
def test_preview_equals_quantizing(grade):
    w = _model()[0].weight.detach()
    p = preview(w.numpy(), grade)
    q = tg.quantize(w, grade)
    d = q.dequantize().double()
    err = (d - w.double()).flatten()
    assert p.max_abs_err == pytest.approx(float(err.abs().max()), rel=0, abs=0)
    assert p.mse == pytest.approx(float((err ** 2).mean()), rel=1e-12)
    assert p.collapsed == int(((w != 0) & (d == 0)).sum())
    assert p.bytes == sum(x.numel() for x in q.planes) + 64


def test_clamped_counts_the_encoders_saturation():
    # MXFP4's floor rule: amax 7.5 gets scale 2^0 (e2m1 max 6), so 7.5 saturates to 6.
    w = np.zeros((1, 32), np.float32)
    w[0, 0], w[0, 1] = 7.5, -7.0
    p = preview(w, "MXFP4")
    assert p.clamped == 2 and p.max_abs_err == 1.5


def test_exempt_and_not_applicable():
    prof = profile(_model())
    by_name = {t.name: t for t in prof.tensors}
    assert by_name["0.bias"].exempt.startswith("rank 1")
    assert by_name["1.weight"].exempt.startswith("rank 1")
    assert not by_name["2.weight"].previews["Q4KS"].applies  # 64 is not a multiple of 256
    assert "multiple of 256" in by_name["2.weight"].previews["Q4KS"].reason
    assert by_name["0.weight"].previews["Q4KS"].applies


def test_recommendation_and_hints():
    prof = profile(_model(), budget_db=15.0)
    for t in prof.tensors:
        if t.exempt:
            continue
        ok = [p for p in t.previews.values() if p.applies and p.sqnr_db >= 15.0]
        assert t.choice == (min(ok, key=lambda p: p.bytes).grade if ok else "")
    hints = prof.hints()
    assert len(hints) == 4 and all("of 2 tensors" in h for h in hints)
    totals = prof.totals()
    assert totals["MXFP4"] < sum(t.source_bytes for t in prof.tensors)
    assert "| 0.weight |" in prof.table()


def test_refuses_quantized_tensors():
    m = _model()
    tg.quantize_(m, "MXFP4")
    with pytest.raises(TypeError, match="already quantized"):
        profile(m)


def test_cli_profile(tmp_path, capsys):
    import json

    import safetensors.torch

    from torch_grit.cli import main

    src = tmp_path / "m.safetensors"
    safetensors.torch.save_file(_model().state_dict(), str(src))
    before = src.read_bytes()
    assert main(["profile", str(src), "--budget", "15"]) == 0
    out = capsys.readouterr().out
    assert "| 0.weight | (64, 256) | MXFP4" in out and "within the 15.0 dB budget" in out
    assert main(["profile", str(src), "--json", "--grades", "MXFP4,NVF4"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["tensor"] for x in lines[:-1]] == ["0.weight", "2.weight"]
    assert set(lines[0]["grades"]) == {"MXFP4", "NVF4"} and lines[-1]["summary"]
    assert src.read_bytes() == before  # writes nothing
    assert main(["profile", str(tmp_path / "missing.safetensors")]) == 3
