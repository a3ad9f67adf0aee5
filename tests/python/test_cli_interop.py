"""``torch-grit import`` and ``torch-grit export``: outputs, --json lines, exit codes,
and nothing written when a run fails."""

import json
import os

import numpy as np
import pytest
import torch

import torch_grit as tg
from torch_grit.cli import main

import gguf_cases as C


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def ggml_file(tmp_path):
    return C.write(tmp_path / "m.gguf", [("blk.0.attn_q.weight", C.random_blocks("Q8_0", 4, 64), "Q8_0"),
                                         ("blk.0.ffn_up.weight", C.random_blocks("Q4_K", 2, 256), "Q4_K"),
                                         ("output_norm.weight", np.ones(64, np.float32), None)])


def test_import_writes_a_checkpoint_that_load_reads_back(tmp_path, capsys, ggml_file):
    code, out, _ = _run(capsys, "import", ggml_file, str(tmp_path / "out"))
    assert code == 0 and "3 tensors (2 packed, 1 plain)" in out
    dst = tmp_path / "out" / "model.safetensors"
    state = tg.load(str(dst), verify="digest")
    src = tg.load(ggml_file)
    assert set(state) == set(src)
    for name, t in src.items():
        if isinstance(t, tg.GritTensor):
            assert all(torch.equal(a, b) for a, b in zip(state[name].planes, t.planes))
        else:
            assert torch.equal(state[name], t)
    code, out, _ = _run(capsys, "export", str(dst), str(tmp_path / "back.gguf"))
    assert code == 0 and "2 as ggml blocks" in out
    # the bytes of every ggml tensor survive import then export
    import gguf

    a = {t.name: bytes(t.data) for t in gguf.GGUFReader(ggml_file).tensors}
    b = {t.name: bytes(t.data) for t in gguf.GGUFReader(str(tmp_path / "back.gguf")).tensors}
    assert a == b


def test_import_refuses_a_type_grit_cannot_carry_and_writes_nothing(tmp_path, capsys):
    src = C.write(tmp_path / "q6.gguf", [("w", C.random_blocks("Q6_K", 2, 256), "Q6_K")])
    code, out, err = _run(capsys, "import", src, str(tmp_path / "o.safetensors"), "--json")
    assert code == 4 and "Q6_K" in err and "--requantize" in err
    assert json.loads(out.splitlines()[-1])["event"] == "error"
    assert sorted(os.listdir(tmp_path)) == ["q6.gguf"]


def test_import_requantize_reports_each_tensor_as_a_json_line(tmp_path, capsys):
    src = C.write(tmp_path / "q6.gguf", [("w", C.random_blocks("Q6_K", 2, 256), "Q6_K")])
    code, out, _ = _run(capsys, "import", src, str(tmp_path / "o.safetensors"), "--requantize", "NVF4", "--json")
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[0]["event"] == "tensor" and lines[0]["action"] == "requantized"
    assert lines[0]["grade"] == tg.Grade.NVF4.canonical and lines[0]["sqnr_db"] > 0
    assert lines[-1]["event"] == "done" and lines[-1]["actions"] == {"requantized": 1}


@pytest.mark.parametrize("argv,code,needle", [
    (["import", "{tmp}/missing.gguf", "{tmp}/o"], 3, "no such file"),
    (["import", "{src}", "{tmp}/o", "--requantize", "NOPE"], 2, "unknown grade"),
    (["export", "{tmp}/missing.safetensors", "{tmp}/o.gguf"], 3, "SRC"),
    (["export", "{ckpt}", "{tmp}/o.bin"], 2, "ends in .gguf"),
    (["export", "{ckpt}", "{tmp}/o.gguf"], 4, "no ggml block type"),
])
def test_exit_codes(tmp_path, capsys, ggml_file, argv, code, needle):
    ckpt = str(tmp_path / "nvf4.safetensors")
    tg.save({"w": tg.quantize(torch.randn(4, 64), "NVF4")}, ckpt)
    argv = [a.format(tmp=tmp_path, src=ggml_file, ckpt=ckpt) for a in argv]
    got, _, err = _run(capsys, *argv)
    assert got == code and needle in err, err
    assert not os.path.exists(tmp_path / "o.gguf") and not os.path.exists(tmp_path / "o")


def test_a_truncated_source_is_exit_3(tmp_path, capsys, ggml_file):
    data = open(ggml_file, "rb").read()
    open(ggml_file, "wb").write(data[:-100])
    code, _, err = _run(capsys, "import", ggml_file, str(tmp_path / "o.safetensors"))
    assert code == 3 and "truncated" in err
    assert not os.path.exists(tmp_path / "o.safetensors")


def test_a_refused_block_midway_leaves_dst_as_it_was(tmp_path, capsys):
    raw = C.random_blocks("MXFP4", 2, 64)
    raw[1, 0] = 0xFF
    src = C.write(tmp_path / "bad.gguf", [("a", C.random_blocks("Q8_0", 2, 64), "Q8_0"), ("b", raw, "MXFP4")])
    dst = tmp_path / "o.safetensors"
    dst.write_bytes(b"previous")
    code, _, err = _run(capsys, "import", src, str(dst))
    assert code == 3 and "0xFF" in err
    assert dst.read_bytes() == b"previous" and sorted(os.listdir(tmp_path)) == ["bad.gguf", "o.safetensors"]
