"""Every JSON torch_grit writes parses under a strict (RFC 8259) reader, even
when a number is infinite: a lossless layer's SQNR is +inf."""

import copy
import json
import math

import torch

import torch_grit
from torch_grit.util.strict_json import dumps, strict


def strict_loads(text):
    def refuse(token):
        raise ValueError("non-standard JSON token %s" % token)
    return json.loads(text, parse_constant=refuse)


def test_strict_spells_non_finite_floats_as_strings():
    doc = {"a": [1.0, float("inf"), (float("-inf"), float("nan"))], "b": {"c": 2, "d": "x"}}
    out = strict_loads(dumps(doc))
    assert out == {"a": [1.0, "inf", ["-inf", "nan"]], "b": {"c": 2, "d": "x"}}
    assert [float(v) for v in out["a"][1:2] + out["a"][2][:1]] == [math.inf, -math.inf]
    assert strict(3.5) == 3.5 and strict("inf") == "inf"


def lossless_linear():
    """MXFP4 represents this weight exactly: e2m1 values, each 32-block holding 6.0 (scale 1)."""
    torch.manual_seed(0)
    values = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
    w = values[torch.randint(0, 8, (16, 64))] * torch.where(torch.rand(16, 64) < 0.5, -1.0, 1.0)
    w[:, 0] = 6.0
    w[:, 32] = -6.0
    lin = torch.nn.Linear(64, 16, bias=False)
    with torch.no_grad():
        lin.weight.copy_(w)
    return torch.nn.Sequential(lin)


def test_report_of_a_lossless_layer_is_strict_json():
    src = lossless_linear()
    q = copy.deepcopy(src)
    torch_grit.quantize_(q, "MXFP4")
    rep = torch_grit.report(src, q)
    assert rep.layers[0].weight_mse == 0.0 and rep.layers[0].sqnr_db == math.inf
    doc = strict_loads(rep.to_json())
    assert doc["layers"][0]["sqnr_db"] == "inf"


def test_cli_report_json_of_a_lossless_layer_is_strict(tmp_path, capsys):
    from safetensors.torch import save_file
    from torch_grit.cli import main

    src = tmp_path / "src.safetensors"
    save_file({"0.weight": lossless_linear()[0].weight.detach().contiguous()}, str(src))
    out_json = tmp_path / "report.json"
    assert main(["quantize", str(src), str(tmp_path / "q.safetensors"), "--grade", "MXFP4",
                 "--report", str(out_json), "--json"]) == 0
    for line in capsys.readouterr().out.splitlines():
        strict_loads(line)
    doc = strict_loads(out_json.read_text())
    assert doc["report"]["layers"][0]["sqnr_db"] == "inf"


def test_profile_json_is_strict(tmp_path, capsys):
    from safetensors.torch import save_file
    from torch_grit.cli import main

    src = tmp_path / "src.safetensors"
    save_file({"0.weight": lossless_linear()[0].weight.detach().contiguous()}, str(src))
    assert main(["profile", str(src), "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    docs = [strict_loads(l) for l in lines]
    assert docs and '"inf"' in "".join(lines)  # MXFP4's SQNR on this tensor
