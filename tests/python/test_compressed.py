"""compressed-tensors pack-quantized and int-quantized import (torch_grit.interop.compressed). The
oracle is the package's own compressor for the folder's format (PackedQuantizationCompressor,
IntQuantizationCompressor) and its decompress, on folders its own ModelCompressor wrote
(tests/python/scan/writers.py: write_compressed_tensors)."""

import json
import os
import sys

import pytest
import torch
from safetensors.torch import load_file, save_file

import torch_grit as tg
from torch_grit.checkpoint.safetensors_io import CheckpointError
from torch_grit.cli import main as cli_main
from torch_grit.interop.compressed import import_compressed

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "scan"))
import writers as W  # noqa: E402


# Weight-only int-quantized schemes. The package infers pack-quantized for weight-only integer
# schemes, so these name their format, as a recipe that wants int-quantized on disk does.
INT_QUANTIZED = {
    "INT_W8_GROUP": dict(num_bits=8, strategy="group", group_size=128, symmetric=True),
    "INT_W8_CHANNEL": dict(num_bits=8, strategy="channel", symmetric=True),
    "INT_W8_ASYM": dict(num_bits=8, strategy="group", group_size=128, symmetric=False),
    "INT_W8_ASYM_CHANNEL": dict(num_bits=8, strategy="channel", symmetric=False),
    "INT_W4_GROUP": dict(num_bits=4, strategy="group", group_size=128, symmetric=True),
}


@pytest.fixture
def int_presets(monkeypatch):
    """INT_QUANTIZED as preset names of the package, for the shared writer."""
    from compressed_tensors.quantization import QuantizationArgs
    from compressed_tensors.quantization.quant_scheme import PRESET_SCHEMES

    for name, args in INT_QUANTIZED.items():
        monkeypatch.setitem(PRESET_SCHEMES, name, dict(weights=QuantizationArgs(type="int", **args),
                                                       format="int-quantized"))


def _group(src):
    with open(os.path.join(src, "config.json")) as f:
        return json.load(f)["quantization_config"]["config_groups"]["group_0"]


def _oracle(src, prefix):
    """The layer's weight as the package's own compressor for the folder's format decompresses it."""
    from compressed_tensors.compressors import BaseCompressor
    from compressed_tensors.quantization import QuantizationScheme

    scheme = QuantizationScheme.model_validate(_group(src))
    sd = load_file(os.path.join(src, "model.safetensors"))
    leaves = {k.rpartition(".")[2]: v for k, v in sd.items() if k.rpartition(".")[0] == prefix}
    return BaseCompressor.get_value_from_registry(scheme.format).decompress(leaves, scheme)["weight"]


def _assert_within_f32_summation_bound(got, x, w):
    """|got - x @ w.T| <= gamma_n * (|x| @ |w|.T), gamma_n = n*u / (1 - n*u) + u, u = 2^-24: any order
    of float32 sums of the exact products (the decoded weights' values, float32 activations)."""
    u, n = 2.0 ** -24, x.shape[-1]
    gamma = n * u / (1 - n * u) + u
    ref = torch.nn.functional.linear(x.double(), w.double())
    bound = gamma * torch.nn.functional.linear(x.double().abs(), w.double().abs())
    assert ((got.double() - ref).abs() <= bound).all(), ((got.double() - ref).abs() - bound).max().item()


@pytest.mark.parametrize("preset,fmt,grade", [
    ("W4A16", "pack-quantized", "grit1(e=s4,k0=128,s0=binary32,esr=ratiomaxabs)"),
    ("W8A16", "pack-quantized", "grit1(e=s8,k0=128,s0=binary32,esr=ratiomaxabs)"),
    ("W4A16_ASYM", "pack-quantized", "grit1(e=u4,k0=128,s0=binary32,zp=u4,esr=affineminmax)"),
    ("INT_W8_GROUP", "int-quantized", "grit1(e=s8,k0=128,s0=binary32,esr=ratiomaxabs)"),
    ("INT_W8_CHANNEL", "int-quantized", "grit1(e=s8,k0=256,s0=binary32,esr=ratiomaxabs)"),
    ("INT_W8_ASYM", "int-quantized", "grit1(e=u8,k0=128,s0=binary32,zp=u8,esr=affineminmax)"),
    ("INT_W8_ASYM_CHANNEL", "int-quantized", "grit1(e=u8,k0=256,s0=binary32,zp=u8,esr=affineminmax)"),
])
def test_dequantize_is_the_packages_decompressor_bit_for_bit(tmp_path, int_presets, preset, fmt, grade):
    src = str(tmp_path / "ct")
    W.write_compressed_tensors(src, {"group_0": (preset, ["Linear"])})
    assert _group(src)["format"] == fmt
    if fmt == "int-quantized":   # both ends of int8, -128 included, go through the bit-for-bit check
        codes = [t for n, t in load_file(os.path.join(src, "model.safetensors")).items() if n.endswith(".weight")
                 and t.dtype == torch.int8]
        assert len(codes) == 4 and all(t.min() == -128 and t.max() == 127 for t in codes)
    files, records = import_compressed(src, str(tmp_path / "grit"))
    state = tg.load(files[0], verify="digest")
    packed = [n for n, t in state.items() if isinstance(t, tg.GritTensor)]
    assert len(packed) == 4 and "lm_head.weight" in state and not isinstance(state["lm_head.weight"], tg.GritTensor)
    model = tg.load(files[0], model=W._Tiny())
    x = torch.randn(5, 256, generator=torch.Generator().manual_seed(1))
    for name in packed:
        t = state[name]
        assert t.grade_canonical == grade
        want = _oracle(src, name[:-len(".weight")])
        assert torch.equal(t.dequantize().view(torch.int32), want.float().view(torch.int32)), name
        _assert_within_f32_summation_bound(model.get_submodule(name[:-len(".weight")])(x), x, want)
    # pack-quantized's weight_shape is dropped: the grade's contiguous groups say the same.
    assert {r["action"] for r in records} == {"packed", "kept"} | ({"dropped"} if fmt == "pack-quantized" else set())
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


@pytest.mark.parametrize("preset,fmt,match", [
    ("W8A8", "int-quantized", "activations"),          # int-quantized's common use: weights and activations
    ("INT_W4_GROUP", "int-quantized", "8-bit integer int-quantized"),
])
def test_schemes_grit_cannot_carry_yet_are_exit_4_and_nothing_is_written(tmp_path, capsys, int_presets, preset,
                                                                          fmt, match):
    src = str(tmp_path / "ct")
    W.write_compressed_tensors(src, {"group_0": (preset, ["Linear"])})
    assert _group(src)["format"] == fmt
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


def _int8_codes_too_wide(sd, prefix):
    sd[prefix + ".weight"] = sd[prefix + ".weight"].to(torch.int16)


def _int8_codes_half_as_wide(sd, prefix):
    sd[prefix + ".weight"] = sd[prefix + ".weight"][:, :128].contiguous()


def _int8_codes_off_the_groups(sd, prefix):
    sd[prefix + ".weight"] = sd[prefix + ".weight"][:, :200].contiguous()


def _int8_zero_points_as_int32(sd, prefix):
    sd[prefix + ".weight_zero_point"] = sd[prefix + ".weight_zero_point"].to(torch.int32)


@pytest.mark.parametrize("preset,edit,tensor,found", [
    ("INT_W8_GROUP", _int8_codes_too_wide, "weight", "weight is I16 [128, 256]; int-quantized 8-bit codes are "
                                                     "a 2-D int8 tensor"),
    ("INT_W8_GROUP", _int8_codes_half_as_wide, "weight_scale", "weight_scale is [128, 2]; strategy group with "
                                                               "group_size 128 over [128, 128] needs [128, 1]"),
    ("INT_W8_GROUP", _int8_codes_off_the_groups, "weight", "the weight [128, 200] in groups of 128 (strategy "
                                                           "group): its 200 inputs are no whole number of groups"),
    ("INT_W8_ASYM", _int8_zero_points_as_int32, "weight_zero_point", "weight_zero_point is I32 [128, 2]; 8-bit "
                                                                     "zero points of [128, 2] are int8 [128, 2]"),
])
def test_int_quantized_tensors_that_disagree_are_named_and_nothing_is_written(tmp_path, capsys, int_presets, preset,
                                                                               edit, tensor, found):
    src = str(tmp_path / "ct")
    path = W.write_compressed_tensors(src, {"group_0": (preset, ["Linear"])})
    sd = load_file(path)
    prefix = "model.layers.1.mlp.down_proj"
    edit(sd, prefix)
    save_file(sd, path)
    dst = tmp_path / "grit"
    with pytest.raises(CheckpointError) as e:
        import_compressed(src, str(dst))
    assert e.value.tensor == "%s.%s" % (prefix, tensor) and found in str(e.value)
    assert not dst.exists()
    assert cli_main(["import", src, str(dst)]) == 3
    assert found in capsys.readouterr().err
    assert not dst.exists()


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("out_f", [13, 16, 40])
def test_zero_points_unpack_as_the_packages_packer_packed_them(bits, out_f):
    from compressed_tensors.compressors.pack_quantized.helpers import pack_to_int32

    from torch_grit.interop.compressed.layouts import _zero_points

    g = torch.Generator().manual_seed(out_f + bits)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    zp = torch.randint(lo, hi + 1, (out_f, 3), generator=g, dtype=torch.int8)  # signed, as the package keeps them
    packed = pack_to_int32(zp, bits, packed_dim=0)
    got = _zero_points(packed.numpy(), bits, out_f, 3)
    want = (zp.to(torch.int32) + (1 << (bits - 1))).to(torch.uint8).reshape(-1).numpy()  # offset binary, [out, groups]
    assert got.tolist() == want.tolist()
