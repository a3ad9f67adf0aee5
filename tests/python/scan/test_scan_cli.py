"""The command line: exit codes, the --json document, grouped text, explain on files."""

import json
import subprocess
import sys

from torch_grit.cli import main

JSON_KEYS = {"schema", "files", "tensors", "findings", "counts", "exit_policy", "exit_code", "exit_code_graded",
             "exit_code_simple"}
FINDING_KEYS = {"class", "severity", "path", "tensor", "message", "data"}
TENSOR_KEYS = {"path", "name", "container", "shape", "dtype", "nbytes", "source", "family", "grade", "label",
               "expressible", "reason", "logical_shape", "desc_hex", "placement", "gid", "gid_basis", "role",
               "quantised"}


def run_json(args, capsys):
    code = main(["scan", "--json"] + args)
    doc = json.loads(capsys.readouterr().out)
    return code, doc


def test_exit_codes_by_policy(fx, capsys):
    for name, graded, simple in (("plain", 0, 0), ("ours_truncated", 1, 1), ("gptq_v1", 2, 1),
                                 ("ct_w4a16", 3, 1)):
        assert main(["scan", fx[name]]) == graded
        assert main(["scan", "--exit-policy", "simple", fx[name]]) == simple
    capsys.readouterr()


def test_json_document_is_stable(fx, capsys):
    code, doc = run_json([fx["gguf_drift"]], capsys)
    assert set(doc) == JSON_KEYS and doc["schema"] == "torch_grit.scan/1"
    assert code == doc["exit_code"] == doc["exit_code_graded"] == 2 and doc["exit_code_simple"] == 1
    assert all(set(f) - {"fix"} == FINDING_KEYS for f in doc["findings"])
    assert all(set(t) == TENSOR_KEYS for t in doc["tensors"])
    assert doc["counts"] == {"violation": 0, "disagreement": 1, "warning": 4}
    drift = [f for f in doc["findings"] if f["class"] == "grade_drift" and f["data"]["scope"] == "role"]
    assert drift[0]["tensor"] == "ffn_down.weight"


def test_folders_are_walked_and_text_is_grouped(fx, capsys):
    import os

    folder = os.path.dirname(fx["gptq_v1"])
    assert main(["scan", folder]) == 2
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("model.safetensors")
    assert any(line.startswith("  zp_convention_ambiguous [disagreement] x1") for line in out)
    assert out[-1].startswith("torch-grit scan: 1 file(s) parsed") and out[-1].endswith("exit 2 (graded)")


def test_python_dash_m(fx):
    done = subprocess.run([sys.executable, "-m", "torch_grit", "scan", "--json", fx["plain"]],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and json.loads(done.stdout)["findings"] == []


def test_explain_prints_the_finding_diff_for_two_files(fx, capsys):
    from torch_grit.scan import scan_paths

    finding = scan_paths([fx["gptq_v1"], fx["awq"]]).by_class("gid_mismatch")[0]
    assert main(["explain", fx["gptq_v1"] + "::" + finding.tensor, fx["awq"] + "::" + finding.tensor]) == 2
    assert capsys.readouterr().out == finding.data["explain"]
    assert main(["explain", fx["gptq_v1"], fx["awq"]]) == 2
    out = capsys.readouterr().out
    assert finding.tensor in out and out.rstrip().endswith("4 of 4 shared tensor(s) differ")


def test_explain_still_takes_descriptors(capsys):
    import torch_grit

    a = torch_grit.Descriptor("MXFP4", (64, 256)).to_bytes().hex()
    b = torch_grit.Descriptor("NVF4", (64, 256)).to_bytes().hex()
    assert main(["explain", a, a]) == 0
    assert main(["explain", a, b]) == 2
    assert "scale0" in capsys.readouterr().out


def test_explain_same_checkpoint_twice_is_clean(fx, capsys):
    assert main(["explain", fx["ours_MXFP4"], fx["ours_MXFP4"]]) == 0
    assert capsys.readouterr().out.strip().endswith("0 of 4 shared tensor(s) differ")
