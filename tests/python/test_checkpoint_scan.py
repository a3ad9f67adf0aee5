"""What grit-datatype 1.1.0's scanner (grit-scan) makes of our checkpoints: a recorded finding.

The scanner reads ``__metadata__["__grit__"]`` (a JSON string, entry name ->
128 hex digits) and checks a declared descriptor against the ONE entry of the
same name: that entry's shape is taken as the logical shape and its byte
length must equal the sum of the four plane lengths. Stock safetensors
requires every entry to hold exactly prod(shape) * element size bytes. No
reference grade stores a whole number of bytes per element, so the two rules
cannot both hold for one entry with the tensor's true shape.

``test_candidate_layouts`` writes each layout one could try, by hand, and
asserts what both tools say. The only layout both accept with the descriptor
"declared" (L5: a zero-byte entry whose shape contains a 0) passes the scanner
vacuously: the size check is skipped for an empty entry, a descriptor for the
wrong grade passes too, and the gid is computed for a shape that is not the
tensor's. torch_grit therefore keys the descriptors by the logical name (no
such entry) and stores the planes as ordinary U8 entries:
``test_our_checkpoint_scans_clean`` asserts that grit-scan reports the file
clean (exit 0, no finding) and that it sees no descriptor at all.
"""

import json
import os
import subprocess
import sys

import pytest
import torch
from grit.scan import scan_paths
from safetensors.torch import load_file

import torch_grit
from checkpoint_cases import packed_model, write_raw

GRIT_SCAN = os.path.join(os.path.dirname(sys.executable), "grit-scan")
REF_NAMES = ("MXFP4", "Q4KS", "NVF4", "I8S24")


@pytest.mark.parametrize("grade", REF_NAMES)
def test_no_reference_grade_is_a_whole_number_of_bytes_per_element(grade):
    # The root of the finding: sum(planes) = numel * bits/8 with bits in {4.25, 4.625, 4.5+, 5.5}.
    planes = torch_grit.Descriptor(grade, (64, 256)).expected_plane_bytes()
    bits = 8 * sum(planes) / (64 * 256)
    assert bits not in (4, 6, 8, 16, 32, 64), bits  # the safetensors element widths


@pytest.mark.parametrize("grade", REF_NAMES)
def test_our_checkpoint_scans_clean(tmp_path, grade):
    path = str(tmp_path / "m.safetensors")
    model = packed_model(grade)
    torch_grit.save(model, path)
    done = subprocess.run([GRIT_SCAN, "--json", path], capture_output=True, text=True, timeout=60)
    report = json.loads(done.stdout)
    assert done.returncode == 0 and report["exit_code_graded"] == 0, done.stdout
    assert report["findings"] == [] and report["files_parsed"] == 1
    tensors = {t["name"]: t for t in report["tensors"]}
    assert set(tensors) == set(load_file(path))
    # The finding: the scanner sees no descriptor, declared or inferred.
    assert all(t["desc_hex"] is None and t["desc_source"] is None and t["inferred_desc_hex"] is None
               for t in tensors.values())
    # ... although every one is in __metadata__.__grit__, in the scanner's own encoding.
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        meta = json.loads(f.read(n))["__metadata__"]
    descriptors = json.loads(meta["__grit__"])
    packed = {k: v for k, v in model.state_dict().items() if isinstance(v, torch_grit.GritTensor)}
    assert descriptors == {k: v.descriptor.to_bytes().hex() for k, v in packed.items()}
    assert not set(descriptors) & set(tensors)  # keyed by the logical name: not an entry


def _layouts(tmp_path):
    q = torch_grit.quantize(torch.randn(64, 256, generator=torch.Generator().manual_seed(0)), "MXFP4")
    desc = q.descriptor.to_bytes().hex()
    wrong = torch_grit.Descriptor("NVF4", (64, 256)).to_bytes().hex()
    data, scale0 = (p.numpy().tobytes() for p in q.planes[:2])
    both = data + scale0

    def e(dtype, shape, b):
        return {"dtype": dtype, "shape": shape, "bytes": b}

    planes = {"w.grit.data": e("U8", [len(data)], data), "w.grit.scale0": e("U8", [len(scale0)], scale0)}
    grit = lambda key, d=desc: {"__grit__": json.dumps({key: d})}  # noqa: E731
    return q, {
        # name: (metadata, entries), what stock safetensors says, scanner exit, declared, true gid
        "L1 one U8 entry [nbytes]": (grit("w"), {"w": e("U8", [len(both)], both)}),
        "L2 one U8 entry [rows, nbytes/rows]": (grit("w"), {"w": e("U8", [64, len(both) // 64], both)}),
        "L3 one F4 entry [rows, cols]": (grit("w"), {"w": e("F4", [64, 256], both)}),
        "L4 one U8 entry [rows, cols]": (grit("w"), {"w": e("U8", [64, 256], both)}),
        "L5 zero-byte marker [rows, cols, 0] + planes": (
            grit("w"), dict({"w": e("U8", [64, 256, 0], b"")}, **planes)),
        "L5b the same marker with a WRONG (NVF4) descriptor": (
            grit("w", wrong), dict({"w": e("U8", [64, 256, 0], b"")}, **planes)),
        "L6 planes, descriptor keyed by the data plane": (grit("w.grit.data"), dict(planes)),
        "L7 planes, descriptor keyed by the logical name (ours)": (grit("w"), dict(planes)),
    }


# layout -> (stock load_file opens it, grit-scan exit code, "w"-descriptor declared, gid true)
EXPECTED = {
    "L1 one U8 entry [nbytes]": (True, 1, True, None),        # size equations refuse rank 1
    "L2 one U8 entry [rows, nbytes/rows]": (True, 1, True, None),  # 136 not a multiple of k0
    "L3 one F4 entry [rows, cols]": (False, 0, True, True),  # stock refuses the byte count
    "L4 one U8 entry [rows, cols]": (False, 0, True, True),  # idem
    "L5 zero-byte marker [rows, cols, 0] + planes": (True, 0, True, False),
    "L5b the same marker with a WRONG (NVF4) descriptor": (True, 0, True, False),
    "L6 planes, descriptor keyed by the data plane": (True, 1, True, None),
    "L7 planes, descriptor keyed by the logical name (ours)": (True, 0, False, None),
}


def test_candidate_layouts(tmp_path):
    q, layouts = _layouts(tmp_path)
    true_gid = q.descriptor.gid_bytes.hex()
    seen = {}
    for i, (name, (meta, entries)) in enumerate(layouts.items()):
        path = str(tmp_path / ("L%d.safetensors" % i))
        write_raw(path, meta, entries)
        try:
            load_file(path)
            stock = True
        except Exception as exc:  # safetensors_rust.SafetensorError
            assert "invalid shape, data type, or offset" in str(exc) or "offset" in str(exc), exc
            stock = False
        report = scan_paths([path])
        declared = [t for t in report.tensors if t.desc_source == "safetensors __grit__"]
        gid_true = (declared[0].gid == true_gid) if declared and declared[0].gid else None
        seen[name] = (stock, report.exit_code(), bool(declared), gid_true)
    assert seen == EXPECTED
    # Both tools accept a layout, with the descriptor declared, only where the check is vacuous.
    both = [n for n, (stock, code, declared, _) in seen.items() if stock and code == 0 and declared]
    assert both == ["L5 zero-byte marker [rows, cols, 0] + planes",
                    "L5b the same marker with a WRONG (NVF4) descriptor"]


def test_the_load_guard_is_the_marker_layout(tmp_path):
    # Hugging Face model folders carry each packed weight's load guard (save(load_guard=True)):
    # layout L5 above. grit-scan 1.1.0 then sees the descriptor (and skips its size check);
    # torch_grit.load checks it as for any file.
    path = str(tmp_path / "g.safetensors")
    model = packed_model("MXFP4")
    torch_grit.save(model, path, load_guard=True)
    report = scan_paths([path])
    declared = {t.name for t in report.tensors if t.desc_source == "safetensors __grit__"}
    packed = {k for k, v in model.state_dict().items() if isinstance(v, torch_grit.GritTensor)}
    assert report.exit_code() == 0 and declared == packed
    assert {k: tuple(v.shape) for k, v in load_file(path).items() if k in packed} == {
        k: tuple(model.state_dict()[k].shape) + (0,) for k in packed}
    back = torch_grit.load(path, verify="digest")
    assert all(torch.equal(back[k].dequantize(), model.state_dict()[k].dequantize()) for k in packed)
