"""GGUF import and export (torch_grit.interop.gguf, torch_grit.contract.ggml_blocks).

The oracle for every decode is gguf-py's ``gguf.quants.dequantize`` (a port
of ggml's reference, tested against libggml upstream); files are written by
gguf-py's GGUFWriter; grit-scan 1.1.0 judges what we export.
"""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import gguf
import torch_grit as tg
from torch_grit import CheckpointError
from torch_grit.contract import ggml_blocks
from torch_grit.interop.gguf import open_gguf

import gguf_cases as C

BLOCK_TYPES = ("Q8_0", "MXFP4", "Q4_K")
# ragged row counts; columns a few blocks wide (Q4_K: super-blocks of 256)
SHAPES = {"Q8_0": ((1, 32), (3, 96), (7, 256)), "MXFP4": ((1, 32), (5, 160), (16, 64)),
          "Q4_K": ((1, 256), (3, 512), (9, 256))}
GRADE_OF = {"Q8_0": C.Q8_0, "MXFP4": tg.Grade.MXFP4.canonical, "Q4_K": tg.Grade.Q4KS.canonical}


def _file(tmp_path, tensors, name="m.gguf", kv=None):
    return C.write(tmp_path / name, tensors, kv=kv)


@pytest.mark.parametrize("qname", BLOCK_TYPES)
def test_every_imported_tensor_decodes_as_gguf_py_bit_for_bit(tmp_path, qname):
    tensors = [("w%d" % i, C.random_blocks(qname, r, c, seed=i), qname) for i, (r, c) in enumerate(SHAPES[qname])]
    if qname in ("Q8_0", "MXFP4"):  # and blocks from gguf-py's own quantizer
        a = np.random.default_rng(9).standard_normal((6, 128)).astype(np.float32)
        tensors.append(("q", gguf.quants.quantize(a, gguf.GGMLQuantizationType[qname]), qname))
    path = _file(tmp_path, tensors)
    state = tg.load(path)
    want = C.gguf_decode(path)
    for name, _, _ in tensors:
        w = state[name]
        assert isinstance(w, tg.GritTensor) and w.grade_canonical == GRADE_OF[qname]
        assert tuple(w.shape) == tuple(want[name].shape)
        assert torch.equal(C.bits(w.dequantize()), C.bits(want[name])), (qname, name)


@pytest.mark.parametrize("qname", BLOCK_TYPES)
def test_imported_layers_run_within_the_float32_bound_on_every_cpu_variant(tmp_path, qname):
    r, c = SHAPES[qname][1]
    path = _file(tmp_path, [("w", C.random_blocks(qname, r, c, seed=3), qname)])
    w = tg.load(path)["w"]
    ref_w = C.gguf_decode(path)["w"].double()
    x = torch.randn(4, c, generator=torch.Generator().manual_seed(0))
    ref = F.linear(x.double(), ref_w)
    k = c
    gamma = k * 2.0 ** -24 / (1 - k * 2.0 ** -24) + 2.0 ** -24
    bound = gamma * F.linear(x.double().abs(), ref_w.abs())
    for isa in tg._C.cpu_isas_supported():
        prev = tg._C._set_cpu_isa(isa)
        try:
            y = F.linear(x, w)
        finally:
            tg._C._set_cpu_isa(prev)
        assert bool(((y.double() - ref).abs() <= bound).all()), (qname, isa)


def test_plain_tensors_stay_plain_and_equal(tmp_path):
    a = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    path = _file(tmp_path, [("f32", a, None), ("f16", a.astype(np.float16), None),
                            ("i32", np.arange(12, dtype=np.int32).reshape(3, 4), None),
                            ("norm", np.ones(8, np.float32), None)])
    state = tg.load(path)
    assert torch.equal(state["f32"], torch.from_numpy(a))
    assert state["f16"].dtype == torch.float16 and torch.equal(state["f16"], torch.from_numpy(a.astype(np.float16)))
    assert torch.equal(state["i32"], torch.arange(12, dtype=torch.int32).reshape(3, 4))
    assert state["norm"].shape == (8,)


def test_bf16_round_trips_through_export(tmp_path):
    t = torch.randn(3, 64).to(torch.bfloat16)
    path = str(tmp_path / "b.gguf")
    tg.save({"b": t}, path)
    assert gguf.GGUFReader(path).tensors[0].tensor_type == gguf.GGMLQuantizationType.BF16
    back = tg.load(path)["b"]
    assert back.dtype == torch.bfloat16 and torch.equal(back.view(torch.int16), t.view(torch.int16))


# ----------------------------------------------------------------- where the laws part

def _mxfp4_with_code_8(rows=2, cols=64):
    raw = C.random_blocks("MXFP4", rows, cols, seed=5).reshape(-1, 17)
    raw[:, 1:] = (raw[:, 1:] & 0xF0) | 0x08   # every low nibble: code 8
    return raw.reshape(rows, -1)


def test_mxfp4_code_8_reads_as_ggml_zero_on_import(tmp_path):
    path = _file(tmp_path, [("w", _mxfp4_with_code_8(), "MXFP4")])
    got = tg.load(path)["w"].dequantize()
    want = C.gguf_decode(path)["w"]
    assert torch.equal(C.bits(got), C.bits(want))
    assert int((C.bits(got) == 0).sum()) >= 64   # +0.0, ggml's reading, not GRIT's -0.0


def test_our_mxfp4_export_keeps_grit_bytes_and_differs_from_ggml_only_in_the_sign_of_zero(tmp_path):
    planes = ggml_blocks.to_planes("MXFP4", _mxfp4_with_code_8().reshape(-1, 17), ggml_zero=False)
    w = tg.GritTensor.from_planes([torch.from_numpy(p) for p in planes], "MXFP4", (2, 64))
    path = str(tmp_path / "ours.gguf")
    tg.save({"w": w}, path)
    back = tg.load(path)["w"]   # declared by grit.desc.w: read by GRIT's law, bytes kept
    assert all(torch.equal(a, b) for a, b in zip(back.planes, w.planes))
    ours, theirs = back.dequantize(), C.gguf_decode(path)["w"]
    neg_zero = C.bits(ours) == np.int32(-2 ** 31)
    assert int(neg_zero.sum()) >= 64
    assert bool((C.bits(theirs)[neg_zero] == 0).all())
    assert torch.equal(C.bits(ours)[~neg_zero], C.bits(theirs)[~neg_zero])
    assert torch.equal(ours, theirs)   # equal as numbers everywhere


def test_an_e8m0_scale_of_0xff_is_refused_with_its_position(tmp_path):
    raw = C.random_blocks("MXFP4", 3, 64, seed=2)
    raw[2, 17] = 0xFF   # row 2, second block
    path = _file(tmp_path, [("blk.0.ffn_up.weight", raw, "MXFP4")])
    with pytest.raises(CheckpointError) as e:
        tg.load(path)
    msg = str(e.value)
    assert "0xFF" in msg and "row 2, columns 32..63" in msg and "blk.0.ffn_up.weight" in msg
    assert e.value.field == "scale"


@pytest.mark.parametrize("qname,offset,what", [("Q8_0", 0, "scale d"), ("Q4_K", 0, "scale d"),
                                               ("Q4_K", 2, "dmin")])
def test_a_non_finite_binary16_scale_is_refused(tmp_path, qname, offset, what):
    raw = C.random_blocks(qname, 2, 256, seed=4)
    raw[1, offset:offset + 2] = np.frombuffer(np.float16(np.inf).tobytes(), np.uint8)  # row 1's first block
    path = _file(tmp_path, [("w", raw, qname)])
    with pytest.raises(CheckpointError, match=what) as e:
        tg.load(path)
    assert "row 1" in str(e.value)


# ----------------------------------------------------------------- what GRIT cannot name

def test_q4_0_is_refused_naming_the_scale_rule_v1_lacks(tmp_path):
    a = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    path = _file(tmp_path, [("w", gguf.quants.quantize(a, gguf.GGMLQuantizationType.Q4_0), "Q4_0")])
    with pytest.raises(CheckpointError, match="esr") as e:
        tg.load(path)
    assert e.value.field == "ggml_type" and "requantize" in str(e.value)


def test_q6_k_is_refused_with_the_scanner_reason(tmp_path):
    path = _file(tmp_path, [("w", C.random_blocks("Q6_K", 2, 256), "Q6_K")])
    with pytest.raises(CheckpointError, match="6-bit elements"):
        tg.load(path)


@pytest.mark.parametrize("qname", ("Q4_0", "Q6_K"))
def test_requantize_decodes_with_gguf_py_and_packs_with_our_encoder(tmp_path, qname):
    raw = C.random_blocks(qname, 3, 256, seed=6)
    path = _file(tmp_path, [("w", raw, qname), ("keep", C.random_blocks("Q8_0", 2, 64), "Q8_0")])
    report = []
    from torch_grit.interop.gguf import load_gguf

    state = load_gguf(path, requantize="MXFP4", report=report)
    src = C.gguf_decode(path)["w"]
    want = tg.quantize(src, "MXFP4")
    assert all(torch.equal(a, b) for a, b in zip(state["w"].planes, want.planes))
    assert state["keep"].grade_canonical == C.Q8_0   # a type GRIT names is imported, not requantized
    (r,) = report
    assert r["tensor"] == "w" and r["ggml_type"] == qname and r["grade"] == tg.Grade.MXFP4.canonical
    err = (want.dequantize().double() - src.double())
    sqnr = 10 * np.log10(float((src.double() ** 2).sum()) / float((err ** 2).sum()))
    assert r["sqnr_db"] == pytest.approx(sqnr, rel=1e-9)
    assert tg.load(path, requantize="MXFP4")["w"].grade_canonical == tg.Grade.MXFP4.canonical


# ----------------------------------------------------------------- export

class _Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(256, 64)
        self.down = torch.nn.Linear(64, 32)
        self.q8 = torch.nn.Linear(64, 16, bias=False)
        self.norm = torch.nn.LayerNorm(32)


def _model(seed=0):
    torch.manual_seed(seed)
    m = _Mlp()
    for name, grade in (("up", "Q4KS"), ("down", "MXFP4"), ("q8", C.Q8_0)):
        setattr(m, name, tg.nn.GritLinear.from_linear(getattr(m, name), grade))
    return m


def test_export_writes_ggml_blocks_that_gguf_py_decodes_to_our_decode(tmp_path):
    m = _model()
    path = str(tmp_path / "m.gguf")
    assert tg.save(m, path) == [os.path.abspath(path)]
    types = {t.name: t.tensor_type.name for t in gguf.GGUFReader(path).tensors}
    assert types == {"up.weight": "Q4_K", "up.bias": "F32", "down.weight": "MXFP4", "down.bias": "F32",
                     "q8.weight": "Q8_0", "norm.weight": "F32", "norm.bias": "F32"}
    theirs = C.gguf_decode(path)
    sd = m.state_dict()
    for name in ("up.weight", "q8.weight"):
        assert torch.equal(C.bits(sd[name].dequantize()), C.bits(theirs[name])), name
    assert torch.equal(sd["down.weight"].dequantize(), theirs["down.weight"])  # -0.0 vs +0.0 aside
    back = tg.load(path)
    for name, t in sd.items():
        if isinstance(t, tg.GritTensor):
            assert back[name].grade_canonical == t.grade_canonical
            assert all(torch.equal(a, b) for a, b in zip(back[name].planes, t.planes)), name
        else:
            assert torch.equal(back[name], t), name
    fresh = _Mlp()
    tg.load(path, model=fresh)
    x = torch.randn(5, 256)
    assert torch.equal(fresh.norm(fresh.down(fresh.up(x))), m.norm(m.down(m.up(x))))
    assert torch.equal(fresh.q8(torch.ones(2, 64)), m.q8(torch.ones(2, 64)))


def test_a_float_model_exports_to_q8_0_through_the_new_encoder(tmp_path):
    w = torch.randn(16, 96)
    q = tg.quantize(w, C.Q8_0)
    # the rule: S = binary16(amax / 127), codes rne(x / S) clamped to +-127
    blocks = w.reshape(-1, 32)
    s = (blocks.abs().amax(1) / 127).to(torch.float16).float()
    codes = torch.round(blocks / s[:, None]).clamp(-127, 127)
    assert torch.equal(q.dequantize(), (codes * s[:, None]).reshape(16, 96))
    path = str(tmp_path / "q8.gguf")
    tg.save({"w": q}, path)
    assert torch.equal(C.bits(C.gguf_decode(path)["w"]), C.bits(q.dequantize()))


def _scan(path, tool):
    exe = os.path.join(os.path.dirname(sys.executable), tool)
    return subprocess.run([exe, path], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("grade,grit_scan_exit,finding", [
    ("MXFP4", 0, None),
    (C.Q8_0, 3, "grade registry"),              # grit-scan 1.1.0 registers six grades, not Q8_0's
    ("Q4KS", 1, "descriptor requires 1184 bytes (planes [1024, 64, 32, 64]) but the container holds 1152"),
    # its size rule counts GRIT's planes (148 bytes per 256 weights) and ignores PACK_K4_12B (144)
])
def test_scanners_verdict_per_exported_grade(tmp_path, grade, grit_scan_exit, finding):
    w = tg.quantize(torch.randn(8, 256), grade)
    path = str(tmp_path / "one.gguf")
    tg.save({"blk.0.ffn_down.weight": w}, path)
    theirs = _scan(path, "grit-scan")
    assert theirs.returncode == grit_scan_exit, theirs.stdout + theirs.stderr
    if finding:
        assert finding in theirs.stdout
    ours = subprocess.run([os.path.join(os.path.dirname(sys.executable), "torch-grit"), "scan", "--deep", path],
                          capture_output=True, text=True, timeout=120)
    assert ours.returncode == 0, ours.stdout + ours.stderr
    assert "1 declared" in ours.stdout


def test_export_refuses_a_grade_ggml_has_no_block_for_and_writes_nothing(tmp_path):
    path = tmp_path / "m.gguf"
    path.write_bytes(b"old")
    with pytest.raises(ValueError, match="'w'.*NVF4|w: grade grit1") as e:
        tg.save({"ok": torch.ones(2), "w": tg.quantize(torch.randn(4, 64), "NVF4")}, str(path))
    assert "nothing was written" in str(e.value)
    assert path.read_bytes() == b"old" and sorted(os.listdir(tmp_path)) == ["m.gguf"]


# ----------------------------------------------------------------- bad input

def test_a_truncated_file_names_the_tensor_and_returns_nothing(tmp_path):
    path = _file(tmp_path, [("a", C.random_blocks("Q8_0", 2, 64), "Q8_0"), ("b", C.random_blocks("Q8_0", 4, 64), "Q8_0")])
    data = open(path, "rb").read()
    open(path, "wb").write(data[:-40])
    with pytest.raises(CheckpointError, match="truncated") as e:
        tg.load(path)
    assert e.value.tensor == "b" and e.value.field == "data_length"


def test_a_descriptor_that_does_not_describe_the_blocks_is_refused(tmp_path):
    lie = ggml_blocks.TYPES["MXFP4"].descriptor((2, 64)).to_bytes().hex()
    path = _file(tmp_path, [("w", C.random_blocks("Q8_0", 2, 64), "Q8_0")], kv={"grit.desc.w": lie})
    with pytest.raises(CheckpointError, match="not the descriptor of ggml Q8_0 blocks") as e:
        tg.load(path)
    assert e.value.field == "grit.desc"


@pytest.mark.parametrize("kv,match", [({"grit.desc.ghost": "00" * 64}, "does not hold"),
                                      ({"grit.desc.w": "zz"}, "not hex")])
def test_stray_or_broken_descriptors_are_refused(tmp_path, kv, match):
    path = _file(tmp_path, [("w", C.random_blocks("Q8_0", 2, 64), "Q8_0")], kv=kv)
    with pytest.raises(CheckpointError, match=match):
        open_gguf(path)


def test_a_descriptor_on_a_plain_tensor_is_refused(tmp_path):
    desc = ggml_blocks.TYPES["Q8_0"].descriptor((2, 64)).to_bytes().hex()
    path = _file(tmp_path, [("w", np.ones((2, 64), np.float32), None)], kv={"grit.desc.w": desc})
    with pytest.raises(CheckpointError, match="plain F32"):
        tg.load(path)


def test_quantized_tensors_of_other_ranks_are_refused(tmp_path):
    raw = C.random_blocks("Q8_0", 6, 64).reshape(2, 3, 68)
    path = _file(tmp_path, [("experts", raw, "Q8_0")])
    with pytest.raises(CheckpointError, match="2-D"):
        tg.load(path)


@pytest.mark.parametrize("blob", [b"", b"GGUF", b"not a gguf file at all", b"GGUF\x03\0\0\0" + b"\xff" * 16])
def test_garbage_is_a_checkpoint_error(tmp_path, blob):
    path = tmp_path / "g.gguf"
    path.write_bytes(blob)
    with pytest.raises(CheckpointError, match="not a readable GGUF file"):
        tg.load(str(path))


def test_load_options_on_gguf_files(tmp_path):
    path = _file(tmp_path, [("w", C.random_blocks("Q8_0", 2, 64), "Q8_0")])
    assert set(tg.load(path, verify="digest")) == {"w"}   # no digest in GGUF: every tensor is read anyway
    with pytest.raises(ValueError, match="verify is one of"):
        tg.load(path, verify="bytes")
    with pytest.raises(ValueError, match="requantize= applies to GGUF"):
        tg.load(str(tmp_path / "x.safetensors"), requantize="MXFP4")


# ----------------------------------------------------------------- the blocks themselves

@pytest.mark.parametrize("qname", BLOCK_TYPES)
def test_planes_to_blocks_is_the_inverse_of_blocks_to_planes(qname):
    bt = ggml_blocks.TYPES[qname]
    raw = C.random_blocks(qname, 4, 512, seed=8).reshape(-1, bt.nbytes)
    if qname == "Q4_K":   # the 12-byte pack holds 6-bit values: every byte pattern round-trips
        pass
    planes = ggml_blocks.to_planes(qname, raw, ggml_zero=False)
    assert [p.size for p in planes] == tg.Grade(bt.grade).plane_bytes(raw.shape[0] * bt.block)
    assert np.array_equal(ggml_blocks.from_planes(qname, planes, raw.shape[0]), raw)


def test_a_q4ks_sub_scale_byte_over_6_bits_cannot_become_a_q4_k_block():
    planes = ggml_blocks.to_planes("Q4_K", C.random_blocks("Q4_K", 1, 256).reshape(1, 144))
    planes[1][3] = 64
    with pytest.raises(ggml_blocks.BlockError, match="more than 6 bits"):
        ggml_blocks.from_planes("Q4_K", planes, 1)


def test_an_empty_tensor_whose_dimensions_multiply_past_2_63_is_refused(tmp_path):
    """A header tensor of F32 with dimensions [7954877566517510144, 21990232555520, 3298534883328, 0]
    (a fuzzer's find): no bytes, but torch cannot size it; refused naming the shape, not a RuntimeError."""
    import struct

    dims = (7954877566517510144, 21990232555520, 3298534883328, 0)
    blob = b"GGUF" + struct.pack("<IQQ", 3, 1, 0)                      # version 3, one tensor, no KV
    blob += struct.pack("<Q", 0) + struct.pack("<I", len(dims)) + struct.pack("<4Q", *dims)
    blob += struct.pack("<IQ", 0, 0)                                     # F32, offset 0
    blob += b"\0" * (-len(blob) % 32)
    path = tmp_path / "huge.gguf"
    path.write_bytes(blob)
    with pytest.raises(CheckpointError, match="multiply past 2\\^63"):
        tg.load(str(path))
