"""report(): errors per layer, storage counted honestly, file bytes equal the files on disk."""

import copy
import json
import os

import numpy as np
import pytest
import safetensors.torch
import torch

import torch_grit as tg
from torch_grit.quantization.report import report


def _pair(grade="MXFP4"):
    torch.manual_seed(0)
    src = torch.nn.Sequential(torch.nn.Linear(256, 64), torch.nn.GELU(), torch.nn.Linear(64, 32))
    q = copy.deepcopy(src)
    tg.quantize_(q, grade)
    return src, q


def test_layer_errors_match_a_direct_computation():
    src, q = _pair()
    r = report(src, q)
    assert [l.name for l in r.layers] == ["0", "2"]
    l0 = r.layers[0]
    w = src[0].weight.detach().double()
    d = q[0].weight.dequantize().double()
    assert l0.weight_mse == pytest.approx(float(((d - w) ** 2).mean()), rel=1e-12)
    assert l0.weight_max_abs == float((d - w).abs().max())
    assert l0.sqnr_db == pytest.approx(10 * np.log10(float((w ** 2).sum() / ((d - w) ** 2).sum())), rel=1e-9)
    x = torch.randn(8, 256, generator=torch.Generator().manual_seed(0))
    y = torch.nn.functional.linear(x.double(), w, src[0].bias.detach().double())
    with torch.no_grad():
        got = float((q[0](x).double() - y).abs().max())
    assert l0.output_max_abs == pytest.approx(got, rel=1e-12)


def test_storage_is_split_and_file_bytes_equal_the_files(tmp_path):
    src, q = _pair("Q4KS")
    fs, fq = tmp_path / "src.safetensors", tmp_path / "q.safetensors"
    safetensors.torch.save_file(src.state_dict(), str(fs))
    tg.save(q, fq)
    r = report(src, q, source_file=fs, quantized_file=fq)
    t = r.totals()
    assert t["source_file_bytes"] == os.path.getsize(fs)
    assert t["quantized_file_bytes"] == os.path.getsize(fq)
    l0 = r.layers[0]
    assert (l0.code_bytes, l0.scale_bytes, l0.aux_bytes) == (256 * 64 // 2, 512 + 64 * 2 * 2, 512)  # codes; u6 scales + (d, dmin) per 256; u6 mins
    # Every packed byte on disk is counted: planes + header + the exact tensors account for the file.
    exact = sum(v.numel() * v.element_size() for k, v in q.state_dict().items() if k.endswith("bias"))
    exact += src[2].weight.numel() * 4  # 64 columns cannot hold Q4KS super-blocks: left float
    planes = t["code_bytes"] + t["scale_bytes"] + t["aux_bytes"]
    assert t["quantized_file_bytes"] == t["quantized_header_bytes"] + planes + exact
    assert "complete files" in r.table()
    doc = json.loads(r.to_json())
    assert doc["totals"]["quantized_file_bytes"] == os.path.getsize(fq)


def test_plot_writes_a_png(tmp_path):
    src, q = _pair()
    path = report(src, q).plot(tmp_path / "errors.png")
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_mismatched_models_are_refused():
    src, q = _pair()
    with pytest.raises(ValueError, match="no float nn.Linear"):
        report(torch.nn.Sequential(torch.nn.Linear(256, 64)), q)
