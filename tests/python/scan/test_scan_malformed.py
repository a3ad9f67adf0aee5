"""Malformed inputs: exit 4 with a reason, never a traceback, in bounded time and memory.

Valid files come from the real writers; the malformed ones are those files
cut short or with one field overwritten (which no writer would produce).
A file whose header is whole but whose data section ends early is not
unparseable: that is the ``truncated`` violation (exit 1).
"""

import json
import os
import random
import struct
import subprocess
import sys
import time
import tracemalloc

import pytest

import writers as W
from torch_grit.scan import scan_paths

LIMIT_S = 2.0
LIMIT_BYTES = 64 << 20


def scan_bounded(path):
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        r = scan_paths([str(path)], deep=True)
    finally:
        elapsed = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert elapsed < LIMIT_S, elapsed
    assert peak < LIMIT_BYTES, peak
    return r


def assert_unparseable(path, reason):
    r = scan_bounded(path)
    assert r.exit_code() == 4 and r.exit_code("simple") == 2, [f.message for f in r.findings]
    (f,) = r.findings
    assert f.cls == "unparseable" and f.data["reason"] == reason, f.message
    return f


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("gguf")
    import gguf

    w = gguf.GGUFWriter(str(d / "ok.gguf"), "llama")
    w.add_array("test.arr", [1, 2, 3])
    w.add_uint32("general.alignment", 32)
    w.add_file_type(int(gguf.LlamaFileType.MOSTLY_Q8_0))
    w.add_tensor("blk.0.attn_q.weight", W.ggml_blocks(W.weights(1), "Q8_0"), raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("blk.0.attn_k.weight", W.ggml_blocks(W.weights(2), "Q8_0"), raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(d / "ok.gguf")


@pytest.fixture(scope="module")
def st_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("st")
    return W.write_ours(d / "ok.safetensors", "MXFP4")


def patched(src, tmp_path, edits, name="bad"):
    data = bytearray(open(src, "rb").read())
    for off, raw in edits:
        data[off:off + len(raw)] = raw
    out = tmp_path / name
    out.write_bytes(bytes(data))
    return out


def _after(data, key):
    """Offset just past the first occurrence of ``key`` (a GGUF key or tensor name)."""
    i = bytes(data).index(key)
    return i + len(key)


def test_valid_inputs_scan(gguf_file, st_file):
    assert scan_bounded(gguf_file).exit_code() in (0, 3)
    assert scan_bounded(st_file).exit_code() == 0


def _header_end_st(path):
    with open(path, "rb") as f:
        return 8 + struct.unpack("<Q", f.read(8))[0]


@pytest.mark.parametrize("seed", range(3))
def test_random_truncation_safetensors(st_file, tmp_path, seed):
    data = open(st_file, "rb").read()
    end = _header_end_st(st_file)
    rng = random.Random(seed)
    for cut in sorted({rng.randrange(0, len(data)) for _ in range(12)} | {0, 7, end - 1, end}):
        p = tmp_path / ("cut%d" % cut)
        p.write_bytes(data[:cut])
        r = scan_bounded(p)
        if cut < end:
            assert r.exit_code() == 4 and r.findings[0].data["reason"] != "internal_error", cut
        else:
            assert r.exit_code() == 1 and r.by_class("truncated"), cut


@pytest.mark.parametrize("seed", range(3))
def test_random_truncation_gguf(gguf_file, tmp_path, seed):
    from torch_grit.scan.gguf_header import read_header

    data = open(gguf_file, "rb").read()
    data_start = read_header(gguf_file).data_offset
    rng = random.Random(seed)
    for cut in sorted({rng.randrange(0, len(data)) for _ in range(12)} | {0, 3, 4, 23, data_start}):
        p = tmp_path / ("cut%d" % cut)
        p.write_bytes(data[:cut])
        r = scan_bounded(p)
        reasons = [f.data.get("reason") for f in r.findings if f.cls == "unparseable"]
        assert "internal_error" not in reasons, (cut, [f.message for f in r.findings])
        if r.exit_code() == 4:
            assert cut < data_start + 1, cut
        else:   # the header is whole: the missing tensor bytes are the truncated violation
            assert cut >= data_start - 32 and r.exit_code() == 1 and r.by_class("truncated"), cut


def st_raw(tmp_path, header_bytes, body=b"", length=None):
    p = tmp_path / "raw.safetensors"
    n = len(header_bytes) if length is None else length
    p.write_bytes(struct.pack("<Q", n) + header_bytes + body)
    return p


def short_file(tmp_path, raw):
    p = tmp_path / "short.safetensors"
    p.write_bytes(raw)
    return p


def _hdr(d):
    return json.dumps(d).encode()


ST_CASES = [
    ("header_truncated", lambda t: short_file(t, b"\x05\x00")),
    ("header_too_large", lambda t: st_raw(t, b"{}", length=1 << 63)),
    ("header_truncated", lambda t: st_raw(t, b"{}", length=1000)),
    ("header_not_json", lambda t: st_raw(t, b"{not json")),
    ("header_not_json", lambda t: st_raw(t, b"[1, 2]")),
    ("header_not_json", lambda t: st_raw(t, b'{"a":' + b"[" * 200000)),
    ("header_not_utf8", lambda t: st_raw(t, b'{"\xff": 1}')),
    ("bad_metadata", lambda t: st_raw(t, _hdr({"__metadata__": {"a": 1}}))),
    ("bad_entry", lambda t: st_raw(t, _hdr({"w": 3}))),
    ("bad_dtype", lambda t: st_raw(t, _hdr({"w": {"dtype": "F7", "shape": [1], "data_offsets": [0, 4]}}), b"\0" * 4)),
    ("bad_shape", lambda t: st_raw(t, _hdr({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}))),
    ("bad_shape", lambda t: st_raw(t, _hdr({"w": {"dtype": "F32", "shape": [1] * 100, "data_offsets": [0, 4]}}))),
    ("bad_offsets", lambda t: st_raw(t, _hdr({"w": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}}))),
    ("bad_offsets", lambda t: st_raw(t, _hdr({"w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}),
                                     b"\0" * 8)),                            # a hole before it
    ("bad_offsets", lambda t: st_raw(t, _hdr({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                              "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}),
                                     b"\0" * 8)),                            # overlap
    ("bad_offsets", lambda t: st_raw(t, _hdr({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, "4"]}}))),
]


@pytest.mark.parametrize("reason,make", ST_CASES)
def test_malformed_safetensors(tmp_path, reason, make):
    assert_unparseable(make(tmp_path), reason)


def test_huge_shape_is_a_size_finding_not_a_crash(tmp_path):
    p = st_raw(tmp_path, _hdr({"w": {"dtype": "F32", "shape": [1 << 62, 1 << 62], "data_offsets": [0, 4]}}), b"\0" * 4)
    r = scan_bounded(p)
    assert [f.cls for f in r.findings] == ["size"]


def gguf_cases(src):
    data = open(src, "rb").read()
    arr = _after(data, b"test.arr") + 4 + 4          # key, value type, element type -> count
    align = _after(data, b"general.alignment") + 4    # key, value type -> value
    t0 = _after(data, b"blk.0.attn_q.weight")         # name -> n_dims u32, dims u64 x2, type u32, offset u64
    t1 = _after(data, b"blk.0.attn_k.weight")
    return [
        ("bad_magic", [(0, b"GGUX")]),
        ("bad_version", [(4, struct.pack("<I", 1))]),
        ("bad_version", [(4, struct.pack("<I", 4))]),
        ("huge_count", [(8, struct.pack("<Q", 1 << 40))]),
        ("huge_count", [(16, struct.pack("<Q", 1 << 19))]),
        ("huge_length", [(24, struct.pack("<Q", 1 << 60))]),
        ("huge_count", [(arr, struct.pack("<Q", 1 << 60))]),
        ("header_truncated", [(arr, struct.pack("<Q", 1 << 20))]),
        ("bad_value_type", [(arr - 4, struct.pack("<I", 99))]),
        ("bad_value_type", [(arr - 4, struct.pack("<I", 9))]),          # nested array
        ("bad_alignment", [(align, struct.pack("<I", 0))]),
        ("bad_alignment", [(align, struct.pack("<I", 48))]),
        ("bad_alignment", [(align - 4, struct.pack("<I", 10))]),       # alignment as a u64
        ("bad_rank", [(t0, struct.pack("<I", 9))]),
        ("bad_dims", [(t0 + 4, struct.pack("<Q", 1 << 63))]),           # ne[0] past int64
        ("bad_alignment", [(t0 + 4 + 16 + 4, struct.pack("<Q", 3))]),  # misaligned tensor offset
        ("bad_offsets", [(t1 + 4 + 16 + 4, struct.pack("<Q", 0))]),    # attn_k overlaps attn_q
        ("duplicate_tensor", [(t1 - len(".weight") - 1, b"q")]),   # attn_k -> attn_q
    ]


def test_malformed_gguf(gguf_file, tmp_path):
    for i, (reason, edits) in enumerate(gguf_cases(gguf_file)):
        assert_unparseable(patched(gguf_file, tmp_path, edits, "bad%d.gguf" % i), reason)


def test_gguf_offset_past_the_end_is_truncation(gguf_file, tmp_path):
    data = open(gguf_file, "rb").read()
    t1 = _after(data, b"blk.0.attn_k.weight")
    p = patched(gguf_file, tmp_path, [(t1 + 4 + 16 + 4, struct.pack("<Q", 1 << 40))])
    r = scan_bounded(p)
    assert r.exit_code() == 1 and [f.tensor for f in r.by_class("truncated")] == ["blk.0.attn_k.weight"]


def test_unknown_ggml_type_is_a_warning(gguf_file, tmp_path):
    data = open(gguf_file, "rb").read()
    t1 = _after(data, b"blk.0.attn_k.weight")
    r = scan_bounded(patched(gguf_file, tmp_path, [(t1 + 4 + 16, struct.pack("<I", 99))]))
    assert "unknown_ggml_type" in {f.cls for f in r.findings}


def test_cli_prints_the_reason_and_no_traceback(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + struct.pack("<I", 3) + struct.pack("<Q", 1 << 60) + struct.pack("<Q", 0))
    done = subprocess.run([sys.executable, "-m", "torch_grit", "scan", str(bad)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 4
    assert "huge_count" in done.stdout and "Traceback" not in done.stdout + done.stderr


def test_huge_files_are_read_by_header_only(tmp_path):
    # A 1 GiB sparse safetensors file: the header scan reads the header, not the data.
    p = tmp_path / "sparse.safetensors"
    n = 1 << 30
    hdr = _hdr({"w": {"dtype": "U8", "shape": [n], "data_offsets": [0, n]}})
    with open(p, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)) + hdr)
        f.truncate(8 + len(hdr) + n)
    tracemalloc.start()
    t0 = time.perf_counter()
    r = scan_paths([str(p)])
    elapsed = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert r.findings == [] and elapsed < LIMIT_S and peak < LIMIT_BYTES
    assert os.path.getsize(p) > n


@pytest.mark.parametrize("num_bits", [0, -4, 9, "4", 4.0])
def test_compressed_tensors_num_bits_out_of_range_is_a_layout_finding(tmp_path, num_bits):
    """A config's num_bits is untrusted: 0 divided by zero here once (found by tests/fuzz/fuzz_safetensors.py)."""
    import torch

    p = "model.layers.0.mlp.down_proj"
    cfg = {"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": [],
           "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
               "num_bits": num_bits, "type": "int", "strategy": "group", "group_size": 32, "symmetric": True}}}}
    path = W.write_quantized_folder(str(tmp_path), {}, cfg, extra={
        p + ".weight_packed": torch.zeros(16, 8, dtype=torch.int32),
        p + ".weight_scale": torch.ones(16, 2, dtype=torch.float16)})
    r = scan_bounded(path)
    (f,) = r.by_class("family_layout")
    assert "num_bits is %r" % (num_bits,) in f.message and not r.unparseable


@pytest.mark.parametrize("groups,fmt", [
    ({"group_0": ["Linear"]}, "pack-quantized"),                       # a group that is not an object (found by fuzz_safetensors)
    ({"group_0": {"targets": "Linear", "weights": []}}, "pack-quantized"),
    ({"group_0": {"targets": [3, None, "Linear"], "format": ["x"]}}, ["pack-quantized"]),
])
def test_compressed_tensors_malformed_config_groups_do_not_crash(tmp_path, groups, fmt):
    """config.json is untrusted: odd group, target, weights and format types are ignored, not tracebacks."""
    import torch

    p = "model.layers.0.mlp.down_proj"
    cfg = {"quant_method": "compressed-tensors", "format": fmt, "ignore": [], "config_groups": groups}
    path = W.write_quantized_folder(str(tmp_path), {}, cfg, extra={
        p + ".weight_packed": torch.zeros(16, 8, dtype=torch.int32),
        p + ".weight_scale": torch.ones(16, 2, dtype=torch.float16)})
    r = scan_bounded(path)
    assert not r.unparseable
    assert r.exit_code() in (0, 1, 2, 3)
    assert not [f for f in r.findings if f.cls == "internal_error"]
