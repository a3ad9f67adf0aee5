"""compressed-tensors pack-quantized import (torch_grit.interop.compressed). The oracle is the
package's own PackedQuantizationCompressor.decompress, on folders its own compressor wrote
(tests/python/scan/writers.py: write_compressed_tensors)."""

import json
import os
import sys

import pytest
import torch
from safetensors.torch import load_file, save_file

import torch_grit as tg
from torch_grit.cli import main as cli_main
from torch_grit.interop.compressed import import_compressed

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "scan"))
import writers as W  # noqa: E402


def _oracle(src, prefix):
    from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
    from compressed_tensors.quantization import QuantizationScheme

    with open(os.path.join(src, "config.json")) as f:
        group = json.load(f)["quantization_config"]["config_groups"]["group_0"]
    sd = load_file(os.path.join(src, "model.safetensors"))
    leaves = {k: sd["%s.%s" % (prefix, k)] for k in ("weight_packed", "weight_scale", "weight_shape",
                                                      "weight_zero_point") if "%s.%s" % (prefix, k) in sd}
    return PackedQuantizationCompressor.decompress(leaves, QuantizationScheme.model_validate(group))["weight"]


@pytest.mark.parametrize("preset,grade", [
    ("W4A16", "grit1(e=s4,k0=128,s0=binary32,esr=ratiomaxabs)"),
    ("W8A16", "grit1(e=s8,k0=128,s0=binary32,esr=ratiomaxabs)"),
    ("W4A16_ASYM", "grit1(e=u4,k0=128,s0=binary32,zp=u4,esr=affineminmax)"),
])
def test_dequantize_is_the_packages_decompressor_bit_for_bit(tmp_path, preset, grade):
    src = str(tmp_path / "ct")
    W.write_compressed_tensors(src, {"group_0": (preset, ["Linear"])})
    files, records = import_compressed(src, str(tmp_path / "grit"))
    state = tg.load(files[0], verify="digest")
    packed = [n for n, t in state.items() if isinstance(t, tg.GritTensor)]
    assert len(packed) == 4 and "lm_head.weight" in state and not isinstance(state["lm_head.weight"], tg.GritTensor)
    for name in packed:
        t = state[name]
        assert t.grade_canonical == grade
        want = _oracle(src, name[:-len(".weight")])
        assert torch.equal(t.dequantize().view(torch.int32), want.float().view(torch.int32)), name
    assert {r["action"] for r in records} == {"packed", "kept", "dropped"}
    with open(tmp_path / "grit" / "config.json") as f:
        assert json.load(f)["quantization_config"]["grade"] == grade
    from torch_grit.scan import scan_paths
    report = scan_paths([str(tmp_path / "grit")], deep=True)
    assert report.exit_code("graded") == 0, [(f.cls, f.message) for f in report.findings]


def test_the_cli_dispatches_a_compressed_tensors_folder(tmp_path, capsys):
    src = str(tmp_path / "ct")
    W.write_compressed_tensors(src, {"group_0": ("W4A16", ["Linear"])})
    assert cli_main(["import", src, str(tmp_path / "grit")]) == 0
    assert "4 packed" in capsys.readouterr().out


@pytest.mark.parametrize("preset,match", [("W8A8", "activations")])
def test_schemes_grit_cannot_carry_yet_are_exit_4_and_nothing_is_written(tmp_path, capsys, preset, match):
    src = str(tmp_path / "ct")
    W.write_compressed_tensors(src, {"group_0": (preset, ["Linear"])})
    dst = tmp_path / "grit"
    assert cli_main(["import", src, str(dst)]) == 4
    assert match in capsys.readouterr().err
    assert not dst.exists()


def test_a_weight_shape_that_disagrees_with_the_packed_codes_is_exit_3(tmp_path, capsys):
    src = str(tmp_path / "ct")
    path = W.write_compressed_tensors(src, {"group_0": ("W4A16", ["Linear"])})
    sd = load_file(path)
    name = next(n for n in sd if n.endswith("weight_shape"))
    sd[name] = torch.tensor([sd[name][0].item(), sd[name][1].item() * 2])
    save_file(sd, path)
    dst = tmp_path / "grit"
    assert cli_main(["import", src, str(dst)]) == 3
    assert "weight_packed is" in capsys.readouterr().err
    assert not dst.exists()


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("out_f", [13, 16, 40])
def test_zero_points_unpack_as_the_packages_packer_packed_them(bits, out_f):
    from compressed_tensors.compressors.pack_quantized.helpers import pack_to_int32

    from torch_grit.interop.compressed.convert import _zero_points

    g = torch.Generator().manual_seed(out_f + bits)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    zp = torch.randint(lo, hi + 1, (out_f, 3), generator=g, dtype=torch.int8)  # signed, as the package keeps them
    packed = pack_to_int32(zp, bits, packed_dim=0)
    got = _zero_points(packed.numpy(), bits, out_f, 3)
    want = (zp.to(torch.int32) + (1 << (bits - 1))).to(torch.uint8).reshape(-1).numpy()  # offset binary, [out, groups]
    assert got.tolist() == want.tolist()
