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


def test_activation_error_is_the_s8_layers_on_the_fixed_probe():
    """profile(activations="s8"): per grade, the output SQNR of the s8 law against float activations
    on the same packed weight, which a GritLinear in the mode gives on the same probe."""
    import math
    from torch_grit.nn import GritLinear
    from torch_grit.quantization.profile import PROBE_ROWS

    torch.manual_seed(3)
    lin = torch.nn.Linear(256, 48, bias=False)
    grades = ("MXFP4", "NVF4", "Q4KS", "I8S24", "MXFP8")
    prof = profile({"w": lin.weight.detach()}, grades=grades, activations="s8")
    assert prof.activations == "s8"
    x = torch.randn(PROBE_ROWS, 256, generator=torch.Generator().manual_seed(0))
    for g in grades[:4]:
        p = prof.tensors[0].previews[g]
        layer = GritLinear.from_linear(lin, g, activations="s8")
        with torch.no_grad():
            y = layer(x).double()
        ref = x.double() @ layer.weight.dequantize().double().T
        want = 10 * math.log10(float((ref ** 2).sum()) / float(((y - ref) ** 2).sum()))
        assert p.activation_sqnr_db == pytest.approx(want, rel=1e-12), g
        assert 25 < p.activation_sqnr_db < 60, g  # int8 blocks: far below the weight error's noise
    mx8 = prof.tensors[0].previews[prof.grades[4]]  # named by its canonical string
    assert mx8.applies and mx8.activation_sqnr_db is None and "no s8 activation law" in mx8.activation_reason
    table = prof.table()
    assert "s8 activations: output SQNR dB" in table and "(no s8 law)" in table
    plain = profile({"w": lin.weight.detach()}, grades=("MXFP4",))
    assert plain.tensors[0].previews["MXFP4"].activation_sqnr_db is None
    assert "s8 activations" not in plain.table()
    with pytest.raises(ValueError, match="activations"):
        profile({"w": lin.weight.detach()}, activations="s4")


def test_cli_profile_activations(tmp_path, capsys):
    import json
    from safetensors.torch import save_file
    from torch_grit.cli import main
    torch.manual_seed(4)
    src = tmp_path / "w.safetensors"
    save_file({"fc.weight": torch.randn(32, 256)}, str(src))
    assert main(["profile", str(src), "--activations", "s8", "--json"]) == 0
    line = json.loads(capsys.readouterr().out.splitlines()[0])
    assert all(isinstance(v["activation_sqnr_db"], float) for v in line["grades"].values())
    assert main(["profile", str(src), "--activations", "s8"]) == 0
    assert "s8 activations: output SQNR dB" in capsys.readouterr().out


def test_activation_error_under_the_bf16_law():
    """profile(activations="bf16"): the output SQNR of the bf16 law (x and the weight in bfloat16)
    against float activations on the same packed weight, as a GritLinear in the mode gives it; every
    grade has the law (MXFP8 too)."""
    import math
    from torch_grit.nn import GritLinear
    from torch_grit.quantization.profile import PROBE_ROWS

    torch.manual_seed(5)
    lin = torch.nn.Linear(256, 48, bias=False)
    grades = ("MXFP4", "NVF4", "MXFP8")
    prof = profile({"w": lin.weight.detach()}, grades=grades, activations="bf16")
    x = torch.randn(PROBE_ROWS, 256, generator=torch.Generator().manual_seed(0))
    for g in prof.grades:
        p = prof.tensors[0].previews[g]
        layer = GritLinear.from_linear(lin, g, activations="bf16")
        with torch.no_grad():
            y = layer(x).double()
        ref = x.double() @ layer.weight.dequantize().double().T
        want = 10 * math.log10(float((ref ** 2).sum()) / float(((y - ref) ** 2).sum()))
        assert p.activation_sqnr_db == pytest.approx(want, rel=1e-12), g
        assert 40 < p.activation_sqnr_db < 70, g  # bfloat16 rounding: 2^-9 relative
    assert "bf16 activations: output SQNR dB" in prof.table()
