"""torch-grit quantize: streaming conversion, its selection rules, outputs, exit codes and memory."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from safetensors.torch import load_file, save_file

import torch_grit
from torch_grit import GritTensor
from torch_grit.cli import main as cli_main
from torch_grit.checkpoint.convert import convert
from torch_grit.tensor import group_size
from checkpoint_cases import sha256

HERE = os.path.dirname(os.path.abspath(__file__))


def hf_folder(root, shards=3, seed=0):
    """A small HF-style model folder: config.json, sharded safetensors, an index."""
    g = torch.Generator().manual_seed(seed)
    tensors = {
        "model.embed_tokens.weight": torch.randn(50, 64, generator=g),
        "model.norm.weight": torch.ones(64),
        "model.rotary.inv_freq": torch.rand(16, generator=g).to(torch.bfloat16),
        "model.position_ids": torch.arange(12).reshape(1, 12),
        "lm_head.weight": torch.randn(50, 64, generator=g),
        "model.odd.weight": torch.randn(8, 48, generator=g),  # 48 is not a multiple of 32
    }
    for i in range(4):
        tensors["model.layers.%d.mlp.up.weight" % i] = torch.randn(256, 64, generator=g)
        tensors["model.layers.%d.mlp.down.weight" % i] = torch.randn(64, 256, generator=g).half()
        tensors["model.layers.%d.mlp.down.bias" % i] = torch.randn(64, generator=g)
        tensors["model.layers.%d.attn.q.weight" % i] = torch.randn(64, 64, generator=g).bfloat16()
    names = sorted(tensors)
    os.makedirs(root, exist_ok=True)
    weight_map = {}
    for s in range(shards):
        part = {n: tensors[n] for n in names[s::shards]}
        fname = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
        save_file(part, os.path.join(root, fname), metadata={"format": "pt"})
        weight_map.update({n: fname for n in part})
    with open(os.path.join(root, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f)
    with open(os.path.join(root, "config.json"), "w") as f:
        json.dump({"model_type": "toy"}, f)
    return tensors


def digests(root):
    return {n: sha256(os.path.join(root, n)) for n in sorted(os.listdir(root))}


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
        a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


@pytest.mark.parametrize("grade", ["MXFP4", "NVF4", "Q4KS", "I8S24"])
def test_convert_equals_in_memory_quantize(tmp_path, grade):
    src = str(tmp_path / "src")
    tensors = hf_folder(src)
    before = digests(src)
    files, reports = convert(src, tmp_path / "out", grade)
    assert files == [str(tmp_path / "out" / "model.safetensors")]
    assert digests(src) == before  # the source is never modified
    out = torch_grit.load(files[0], verify="digest")
    assert set(out) == set(tensors)
    packed = {r.name for r in reports if r.action == "quantized"}
    gsize = group_size(grade)  # 32, 16, 256, 32
    expected = {n for n, t in tensors.items() if n.endswith(".weight") and t.dim() == 2
                and t.is_floating_point() and "embed" not in n and t.shape[1] % gsize == 0}
    assert packed == expected and len(packed) >= (4 if grade == "Q4KS" else 9)
    for name, t in tensors.items():
        if name in packed:
            ref = torch_grit.quantize(t, grade, name=name)
            assert isinstance(out[name], GritTensor) and out[name].dtype == t.dtype
            assert all(torch.equal(a, b) for a, b in zip(out[name].planes, ref.planes)), name
        else:
            assert same_bits(out[name], t), name
    reasons = {r.name: r.reason for r in reports if r.action == "kept"}
    assert "embedding" in reasons["model.embed_tokens.weight"]
    assert "not a 2-D float tensor" in reasons["model.norm.weight"]
    if 48 % gsize:
        assert "not a multiple of its group size" in reasons["model.odd.weight"]


def test_every_source_form_gives_the_same_bytes(tmp_path):
    src = str(tmp_path / "src")
    hf_folder(src)
    convert(src, tmp_path / "a", "MXFP4")  # the HF folder (index found)
    convert(os.path.join(src, "model.safetensors.index.json"), tmp_path / "b.safetensors", "MXFP4")
    os.remove(os.path.join(src, "model.safetensors.index.json"))
    convert(src, tmp_path / "c", "MXFP4")  # a folder of shards, no index
    convert(src, tmp_path / "d", "MXFP4")  # twice: deterministic
    a = sha256(tmp_path / "a" / "model.safetensors")
    assert a == sha256(tmp_path / "b.safetensors") == sha256(tmp_path / "c" / "model.safetensors")
    assert a == sha256(tmp_path / "d" / "model.safetensors")
    single = str(tmp_path / "one.safetensors")
    save_file({"w.weight": torch.randn(16, 64)}, single)
    files, reports = convert(single, tmp_path / "e", "MXFP4")
    assert [r.action for r in reports] == ["quantized"] and load_file(files[0])


def test_filter_and_sharded_output(tmp_path):
    src = str(tmp_path / "src")
    tensors = hf_folder(src)
    files, reports = convert(src, tmp_path / "out", "MXFP4", filter=r"(embed_tokens|up)\.weight$|norm",
                             max_shard_size="20KB")
    packed = {r.name for r in reports if r.action == "quantized"}
    assert packed == {"model.embed_tokens.weight"} | {"model.layers.%d.mlp.up.weight" % i for i in range(4)}
    kept = {r.name: r.reason for r in reports if r.action == "kept"}
    assert "not a 2-D float tensor" in kept["model.norm.weight"]
    assert "not selected" in kept["lm_head.weight"]
    index = files[-1]
    assert index.endswith("model.safetensors.index.json") and len(files) > 3
    out = torch_grit.load(index)
    assert set(out) == set(tensors) and isinstance(out["model.embed_tokens.weight"], GritTensor)
    for f in files[:-1]:
        load_file(f)


def run_cli(*argv):
    return cli_main(["quantize", *map(str, argv)])


def test_json_lines_and_report(tmp_path, capsys):
    src = str(tmp_path / "src")
    tensors = hf_folder(src)
    report = tmp_path / "report.json"
    assert run_cli(src, tmp_path / "out", "--grade", "NVF4", "--json", "--report", report) == 0
    lines = [json.loads(l) for l in capsys.readouterr().out.splitlines()]
    assert [l["event"] for l in lines] == ["tensor"] * len(tensors) + ["done"]
    assert {l["name"] for l in lines[:-1]} == set(tensors)
    done = lines[-1]
    assert done["grade"] == torch_grit.Grade.NVF4.canonical
    assert done["totals"]["tensors"] == len(tensors)
    assert done["totals"]["quantized"] == sum(l["action"] == "quantized" for l in lines[:-1])
    assert done["totals"]["bytes_after"] < done["totals"]["bytes_before"]
    doc = json.loads(report.read_text())
    assert doc["totals"] == done["totals"] and doc["tensors"] == [
        {k: v for k, v in l.items() if k != "event"} for l in lines[:-1]]
    # Without --json: one summary line and no progress bar (stderr is not a terminal here).
    assert run_cli(src, tmp_path / "out2", "--grade", "NVF4") == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("wrote ") and captured.err == ""


def test_exit_codes(tmp_path, capsys):
    src = str(tmp_path / "src")
    hf_folder(src)
    before = digests(src)
    out = tmp_path / "out"
    cases = [
        ((src, out, "--grade", "MXFP9"), 2, "unknown grade"),
        ((src, out, "--grade", "MXFP4", "--filter", "(("), 2, "not a regular expression"),
        ((src, out, "--grade", "MXFP4", "--max-shard-size", "lots"), 2, "a size is"),
        ((os.path.join(src, "model-00001-of-00003.safetensors"), src + "/model-00001-of-00003.safetensors",
          "--grade", "MXFP4"), 2, "would overwrite the source"),
        ((tmp_path / "nothing", out, "--grade", "MXFP4"), 3, "no such file"),
        ((src, out, "--grade", "MXFP4", "--filter", "odd"), 4, "not a multiple of its group size"),
    ]
    for argv, code, message in cases:
        assert run_cli(*argv) == code, argv
        assert message in capsys.readouterr().err, argv
    assert not out.exists() and digests(src) == before
    # An already packed source, a truncated one, a DST that cannot be created.
    assert run_cli(src, out, "--grade", "MXFP4") == 0
    assert run_cli(out, tmp_path / "again", "--grade", "MXFP4") == 3
    assert "already holds" in capsys.readouterr().err
    shard = os.path.join(src, "model-00002-of-00003.safetensors")
    with open(shard, "rb") as f:
        blob = f.read()
    with open(shard, "wb") as f:
        f.write(blob[:-10])
    truncated = digests(src)
    assert run_cli(src, tmp_path / "t", "--grade", "MXFP4") == 3
    assert "truncated" in capsys.readouterr().err and digests(src) == truncated
    (tmp_path / "a_file").write_text("x")
    with open(shard, "wb") as f:
        f.write(blob)
    assert run_cli(src, tmp_path / "a_file" / "out", "--grade", "MXFP4") == 5
    assert "cannot write" in capsys.readouterr().err
    # The real process exit status, through the console entry point.
    done = subprocess.run([sys.executable, "-m", "torch_grit", "quantize", src, str(out), "--grade",
                           "MXFP4", "--filter", "odd", "--json"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 4
    assert json.loads(done.stdout.splitlines()[-1])["event"] == "error"
    help_text = subprocess.run([sys.executable, "-m", "torch_grit", "quantize", "--help"],
                               capture_output=True, text=True, timeout=60).stdout
    assert "exit codes" in help_text and "5  DST could not be written" in help_text


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pty and /proc are Linux facilities")
def test_progress_bar_on_a_terminal(tmp_path):
    import fcntl
    import pty
    import struct
    import termios

    src = str(tmp_path / "src")
    hf_folder(src)
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "torch_grit", "quantize", src,
                             str(tmp_path / "out"), "--grade", "MXFP4"],
                            stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    assert proc.wait(timeout=120) == 0
    text = out.decode("utf-8", "replace")
    assert "quantize: 100%|" in text and "wrote " in text, text


MEMORY_SCRIPT = textwrap.dedent("""
    import json, os, resource, sys
    import torch
    from safetensors.torch import save_file
    from torch_grit.checkpoint.convert import convert

    def status(key):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024

    src, dst, budget = sys.argv[1], sys.argv[2], int(sys.argv[3])
    # Warm up on a small file: lazy imports, allocator arenas, and the thread pool (a
    # worker's stack counts as data), so the weight is large enough to be split.
    warm = dst + ".warm-src.safetensors"
    save_file({"a.weight": torch.randn(256, 1024)}, warm)
    convert(warm, dst + ".warm.safetensors", "MXFP4")
    data = status("VmData")
    resource.setrlimit(resource.RLIMIT_DATA, (data + budget, resource.RLIM_INFINITY))
    try:
        convert(src, dst, "MXFP4")
        result = "ok"
    except (MemoryError, RuntimeError) as e:
        result = "refused: " + str(e).splitlines()[0][:120]
    print(json.dumps({"result": result, "vmdata_before": data, "vmdata_after": status("VmData"),
                      "rss_peak": status("VmHWM")}))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_DATA and /proc are Linux")
def test_conversion_streams_under_a_memory_limit(tmp_path):
    """A 4-shard, ~321 MiB checkpoint converts with heap+anonymous memory capped at
    2 x its largest tensor (8 MiB) + 16 MiB above the warmed-up process (RLIMIT_DATA);
    a 4 MiB cap is refused, which shows the limit is enforced."""
    src = tmp_path / "big"
    src.mkdir()
    g = torch.Generator().manual_seed(0)
    largest = 1024 * 2048 * 4
    for s in range(4):
        part = {"layers.%d.w%d.weight" % (s, i): torch.empty(1024, 2048).normal_(generator=g)
                for i in range(10)}
        part["layers.%d.norm.weight" % s] = torch.ones(2048)
        save_file(part, str(src / ("model-%05d-of-00004.safetensors" % (s + 1))))
        del part
    total = sum(os.path.getsize(src / f) for f in os.listdir(src))
    budget = 2 * largest + 16 * 2**20
    assert total > 9 * budget

    def run(dst, cap):
        done = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, str(src), str(dst), str(cap)],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.splitlines()[-1])

    ok = run(tmp_path / "out.safetensors", budget)
    assert ok["result"] == "ok", ok
    out = torch_grit.load(tmp_path / "out.safetensors")
    assert len(out) == 44 and isinstance(out["layers.3.w9.weight"], GritTensor)
    refused = run(tmp_path / "small.safetensors", 4 * 2**20)
    assert refused["result"].startswith("refused"), refused
    assert not (tmp_path / "small.safetensors").exists()  # a failed conversion leaves nothing
