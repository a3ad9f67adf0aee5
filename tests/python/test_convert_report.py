"""torch-grit quantize --report: torch_grit.report's numbers for a streamed conversion, files counted."""

import copy
import json
import os
import struct
import zlib

import torch
from safetensors.torch import save_file

import torch_grit
from torch_grit.cli import main as cli_main
from torch_grit.quantization.report import report


def model():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(256, 64), torch.nn.GELU(), torch.nn.Linear(64, 32),
                            torch.nn.Linear(32, 16, bias=False))
    return m


def run_cli(*argv):
    return cli_main(["quantize", *map(str, argv)])


def source(tmp_path, m):
    path = tmp_path / "src.safetensors"
    save_file(m.state_dict(), str(path))
    return path


def in_memory(m, grade, src, dst):
    q = copy.deepcopy(m)
    torch_grit.quantize_(q, grade)
    return report(m, q, source_file=src, quantized_file=dst)


def test_report_json_equals_torch_grit_report(tmp_path, capsys):
    m = model()
    src, dst = source(tmp_path, m), tmp_path / "q.safetensors"
    out_json = tmp_path / "r.json"
    assert run_cli(src, dst, "--grade", "MXFP4", "--report", out_json) == 0
    printed = capsys.readouterr().out
    doc = json.loads(out_json.read_text())
    ref = in_memory(m, "MXFP4", src, dst)
    ours = doc["report"]
    # Same tensors, same numbers: the CLI names them by tensor, report() by module.
    assert [l["name"] for l in ours["layers"]] == [l.name + ".weight" for l in ref.layers]
    assert len(ours["layers"]) == 3
    for got, want in zip(ours["layers"], json.loads(ref.to_json())["layers"]):
        assert {k: v for k, v in got.items() if k != "name"} == {k: v for k, v in want.items() if k != "name"}
    assert ours["totals"] == ref.totals()
    # Complete files, counted from disk.
    assert ours["totals"]["quantized_file_bytes"] == os.path.getsize(dst)
    assert ours["totals"]["source_file_bytes"] == os.path.getsize(src)
    with open(dst, "rb") as f:
        assert ours["totals"]["quantized_header_bytes"] == 8 + struct.unpack("<Q", f.read(8))[0]
    # The conversion record is still there beside it, and the table was printed.
    assert doc["totals"]["quantized"] == 3 and len(doc["tensors"]) == len(m.state_dict())
    assert "complete files: %d -> %d bytes" % (os.path.getsize(src), os.path.getsize(dst)) in printed
    assert "| 0.weight | GRADE_MXFP4 |" in printed and printed.rstrip().splitlines()[-1].startswith("wrote ")


def test_auto_report_png_and_json_lines(tmp_path, capsys):
    m = model()
    src, dst, png = source(tmp_path, m), tmp_path / "q.safetensors", tmp_path / "errors.png"
    assert run_cli(src, dst, "--grade", "auto", "--budget-db", "17.5", "--report", "--report-png", png,
                   "--json") == 0
    lines = [json.loads(l) for l in capsys.readouterr().out.splitlines()]
    done = lines[-1]
    assert done["event"] == "done" and [l["event"] for l in lines[:-1]] == ["tensor"] * (len(lines) - 1)
    q = copy.deepcopy(m)
    torch_grit.quantize_(q, "auto", budget_db=17.5)
    ref = report(m, q, source_file=src, quantized_file=dst)
    assert done["report"]["layers"] == [dict(l, name=l["name"] + ".weight")
                                        for l in json.loads(ref.to_json())["layers"]]
    grades = {l["name"]: l["grade"] for l in done["report"]["layers"]}
    loaded = torch_grit.load(dst)
    assert grades == {n: loaded[n].grade.name for n in grades}
    assert grades == {"0.weight": "GRADE_NVF4", "2.weight": "GRADE_NVF4", "3.weight": "GRADE_MXFP4"}
    assert done["report"]["totals"]["quantized_file_bytes"] == os.path.getsize(dst)
    assert not (tmp_path / "r.json").exists()  # bare --report: printed, no file
    blob = png.read_bytes()
    assert blob[:8] == b"\x89PNG\r\n\x1a\n" and blob[12:16] == b"IHDR"
    (length,) = struct.unpack(">I", blob[8:12])
    assert struct.unpack(">I", blob[16 + length:20 + length])[0] == zlib.crc32(blob[12:16 + length])
    width, height = struct.unpack(">II", blob[16:24])
    assert width > 100 and height > 100 and blob.endswith(b"IEND\xaeB`\x82")


def test_sharded_output_counts_every_file(tmp_path, capsys):
    g = torch.Generator().manual_seed(1)
    tensors = {"l%d.weight" % i: torch.randn(32, 128, generator=g).half() for i in range(6)}
    tensors.update({"l%d.bias" % i: torch.randn(32, generator=g) for i in range(6)})
    src = tmp_path / "src.safetensors"
    save_file(tensors, str(src))
    out = tmp_path / "out"
    assert run_cli(src, out, "--grade", "NVF4", "--max-shard-size", "6KB", "--report", "--json") == 0
    done = json.loads(capsys.readouterr().out.splitlines()[-1])
    files = sorted(os.listdir(out))
    assert len(files) > 3 and "model.safetensors.index.json" in files
    totals = done["report"]["totals"]
    assert totals["quantized_file_bytes"] == sum(os.path.getsize(out / f) for f in files)
    assert totals["source_file_bytes"] == os.path.getsize(src)
    assert len(done["report"]["layers"]) == 6
    # float16 weights, float32 biases beside them: the probe output includes the bias.
    assert all(l["source_bytes"] == 32 * 128 * 2 for l in done["report"]["layers"])


def test_bad_report_paths_write_nothing(tmp_path, capsys):
    src = source(tmp_path, model())
    dst = tmp_path / "q.safetensors"
    cases = [
        (("--report-png", tmp_path / "no" / "x.png"), "the folder"),
        (("--report", src), "would overwrite a checkpoint file"),
        (("--report", dst), "would overwrite a checkpoint file"),
        (("--report", tmp_path), "is a folder"),
    ]
    for argv, message in cases:
        assert run_cli(src, dst, "--grade", "MXFP4", *argv) == 2, argv
        assert message in capsys.readouterr().err, argv
        assert sorted(os.listdir(tmp_path)) == ["src.safetensors"], argv
