"""GPTQ and AWQ import (torch_grit.interop.gptq): each layer a GRIT grade with its zero-point
convention declared. The oracle is the families' published dequantization, scale * (q - z),
on tensors packed by their published packers (tests/python/scan/writers.py)."""

import json
import os
import sys

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

import torch_grit as tg
from torch_grit import CheckpointError
from torch_grit.cli import main as cli_main
from torch_grit.interop.gptq import LayoutError, grade_text, import_quantized, planes
from torch_grit.interop.gptq.layout import _pack_codes, input_perm, reference_weight

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "scan"))
import writers as W  # noqa: E402

import hf_cases as H  # noqa: E402
from checkpoint_cases import read_raw, write_raw  # noqa: E402


def _layer_tensor(family, mod, bits=4, fmt=None, sym=False):
    pl, shape, group = planes(family, mod["qweight"], mod["qzeros"], mod["scales"], bits, mod.get("g_idx"), fmt)
    return tg.GritTensor.from_planes([torch.from_numpy(p) for p in pl], grade_text(bits, group, sym), shape)


def _bits(a):
    return np.ascontiguousarray(a, dtype=np.float32).view(np.int32)


def _pack_nbit(family, w, group, bits, version=2):
    """GPTQ / AWQ packing at any of 2, 4, 8 bits (the published conventions, AWQ's order at 4 bits only)."""
    q, scale, zero = W._rtn_asym(w, group, bits)
    order = W.AWQ_ORDER if family == "awq" and bits == 4 else None
    if family == "gptq":
        stored = (zero - 1) & ((1 << bits) - 1) if version == 1 else zero
        return {"qweight": W._pack_rows(q.T, bits), "qzeros": W._pack_cols(stored.T, bits),
                "scales": scale.T.astype(np.float16).copy()}
    return {"qweight": W._pack_cols(q.T, bits, order), "qzeros": W._pack_cols(zero.T, bits, order),
            "scales": scale.T.astype(np.float16).copy()}


@pytest.mark.parametrize("family,bits,version", [("gptq", 4, 1), ("gptq", 4, 2), ("gptq", 8, 1), ("gptq", 2, 2),
                                                 ("awq", 4, None), ("awq", 8, None)])
@pytest.mark.parametrize("group", (32, 128))
def test_dequantize_is_the_published_formula_bit_for_bit(family, bits, version, group):
    w = W.weights(3, 48, 256)
    mod = _pack_nbit(family, w, group, bits, version or 2)
    fmt = "gptq_v2" if version == 2 else None
    t = _layer_tensor(family, mod, bits, fmt)
    ref = reference_weight(family, mod["qweight"], mod["qzeros"], mod["scales"], bits, fmt)
    assert np.array_equal(_bits(t.dequantize()), _bits(ref))
    step = np.repeat(mod["scales"].astype(np.float32).T, group, axis=1)
    assert np.all(np.abs(ref - w) <= step)   # within a step of the source (binary16 scales, clamped codes)


def test_the_seed_case_byte_identical_zero_points_that_decode_differently():
    """GPTQ v1 and v2 (AWQ's convention) write the same tensors, names, dtypes and shapes;
    only checkpoint_format says whether qzeros hold z - 1 or z. The import declares it."""
    w = W.weights(4, 32, 256)
    mod = W.gptq_module(w, 128, version=1)
    v1 = _layer_tensor("gptq", mod, fmt="gptq")
    v2 = _layer_tensor("gptq", mod, fmt="gptq_v2")     # the same bytes read the other way
    assert v1.grade_canonical == v2.grade_canonical
    assert not torch.equal(v1.planes[3], v2.planes[3])   # the zero points as meant differ ...
    diff = (v2.dequantize() - v1.dequantize()).numpy()
    steps = np.repeat(mod["scales"].astype(np.float32).T, 128, axis=1)
    wrapped = (np.repeat(W._rtn_asym(w, 128)[2], 128, axis=1) == 0)   # stored 15 under v1
    assert np.allclose(diff[~wrapped], steps[~wrapped])             # ... by one quantization step
    assert np.allclose(np.abs(v1.dequantize().numpy() - w), np.abs(v1.dequantize().numpy() - w))
    assert np.abs(v1.dequantize().numpy() - w).max() < np.abs(v2.dequantize().numpy() - w).max()


def test_gptq_v1_stored_15_is_a_true_zero_of_0():
    """AutoGPTQ's packer writes (z - 1) & 0xF: a true zero point of 0 is stored as 15, and its
    dequantizer reads (stored + 1) & 0xF. The import takes that reading (not 16)."""
    w = np.abs(W.weights(5, 16, 128)) + 0.01   # every group non-negative: the minimum clamps to 0, zero = 0
    q, scale, zero = W._rtn_asym(w, 128)
    assert (zero == 0).all()
    mod = W.gptq_module(w, 128, version=1)
    stored = (mod["qzeros"].view(np.uint32) & 0xF)
    assert (stored == 15).all()
    t = _layer_tensor("gptq", mod, fmt="gptq")
    assert (t.planes[3].numpy() == 0).all()
    assert np.abs(t.dequantize().numpy() - w).max() <= scale.max() / 2 + 1e-6


@pytest.mark.parametrize("edit,field,match", [
    (lambda m: m.update(g_idx=np.concatenate([np.zeros(100), np.ones(156)]).astype(np.int32)), "g_idx",
     "puts 100 inputs in group 0"),
    (lambda m: m.update(g_idx=np.full(256, 2, np.int32)), "g_idx", "is not a group"),
    (lambda m: m.update(g_idx=np.zeros(100, np.int32)), "g_idx", "100"),
    (lambda m: m.update(qzeros=m["qzeros"][:, :3].copy()), "qzeros", "qzeros is"),
    (lambda m: (m.pop("g_idx"), m.update(qweight=m["qweight"][:, :16].copy())), "qweight", "qweight is"),
    (lambda m: m.update(scales=m["scales"].astype(np.float32)), "scales", "float16"),
])
def test_layers_whose_tensors_disagree_are_refused_naming_the_tensor(edit, field, match):
    mod = W.gptq_module(W.weights(6, 32, 256), 128, version=1)
    edit(mod)
    with pytest.raises(LayoutError, match=match) as e:
        planes("gptq", mod["qweight"], mod["qzeros"], mod["scales"], 4, mod.get("g_idx"))
    assert e.value.field == field


def _act_order(w, group, seed=0, version=1, bits=4):
    """A layer quantized with act-order as GPTQ does it (a random column order p, g_idx[p[j]] = j // group)."""
    return W.gptq_act_order_module(w, group, np.random.default_rng(seed).permutation(w.shape[1]), version, bits)


def _summation_bound(x, w):
    """How far two float32 evaluations of x @ w.T in different orders may differ (|x| @ |w|^T times
    twice the float32 summation bound for in_features terms)."""
    n = w.shape[1]
    eps = torch.finfo(torch.float32).eps
    return 2 * (n * eps / (1 - n * eps)) * (x.abs() @ w.abs().T) + 1e-30


@pytest.mark.parametrize("group,version,bits", [(32, 1, 4), (128, 2, 4), (32, 2, 8)])
def test_act_order_layers_import_with_an_input_permutation(group, version, bits):
    """desc_act: the packed weight holds W[:, perm] in contiguous groups, the layer permutes its
    input, and its un-permuted weight is the published formula with g_idx bit for bit."""
    w = W.weights(7, 48, 256)
    mod = _act_order(w, group, version=version, bits=bits)
    assert not np.array_equal(mod["g_idx"], np.arange(256) // group)
    fmt = "gptq_v2" if version == 2 else None
    t = _layer_tensor("gptq", mod, bits, fmt)
    perm = input_perm(mod["g_idx"], 256, group)
    assert perm.dtype == np.int64 and sorted(perm) == list(range(256))
    assert (np.diff(mod["g_idx"][perm]) >= 0).all()          # W[:, perm] has contiguous groups
    layer = tg.nn.GritLinear.from_packed(t, input_perm=torch.from_numpy(perm))
    ref = reference_weight("gptq", mod["qweight"], mod["qzeros"], mod["scales"], bits, fmt, g_idx=mod["g_idx"])
    assert np.array_equal(_bits(layer.unpermuted_weight()), _bits(ref))
    assert np.array_equal(_bits(layer.weight.dequantize()), _bits(ref[:, perm]))   # the stored tensor is W'
    step = mod["scales"].astype(np.float32).T[:, mod["g_idx"]]
    assert np.all(np.abs(ref - w) <= step)
    x = torch.randn(5, 256, generator=torch.Generator().manual_seed(0))
    want = torch.nn.functional.linear(x, torch.from_numpy(ref))
    assert ((layer(x) - want).abs() <= _summation_bound(x, torch.from_numpy(ref))).all()


@pytest.mark.parametrize("version", (1, 2))
@pytest.mark.parametrize("group", (32, 128))
def test_three_bit_gptq_imports_widened_to_u4_bit_for_bit(version, group):
    """AutoGPTQ's 3-bit packer (codes straddling int32 words) against the quantizer's own codes:
    the oracle is scale * (q - z) from the codes before packing, not an unpacker of ours."""
    w = W.weights(7, 96, 256)
    q, scale, zero = W._rtn_asym(w, group, 3)
    q[0, :32] = np.arange(32) % 8               # every code value, at every straddling position
    zero[:3, 0] = (0, 7, 4)                      # v1 stores 0 as 7: (z - 1) & 7
    mod = W.gptq_module(w, group, version=version, bits=3)
    mod["qweight"] = W._pack_rows(q.T, 3)
    mod["qzeros"] = W._pack_cols(((zero - 1) & 7 if version == 1 else zero).T, 3)
    assert mod["qweight"].shape == (256 * 3 // 32, 96) and mod["qzeros"].shape == (256 // group, 96 * 3 // 32)
    fmt = "gptq_v2" if version == 2 else None
    t = _layer_tensor("gptq", mod, 3, fmt)
    assert t.grade_canonical == "grit1(e=u4,k0=%d,s0=binary16,zp=u4,esr=custom:u3affineminmax)" % group
    s = np.repeat(mod["scales"].astype(np.float32).T, group, axis=1)
    z = np.repeat(zero.astype(np.float32), group, axis=1)
    want = (s * (q.astype(np.float32) - z)).astype(np.float32)
    assert np.array_equal(_bits(t.dequantize()), _bits(want))
    assert t.planes[3].max() <= 7 and (t.planes[0] >> 4).max() <= 7   # widened: values 0..7 of u4
    assert tg._C.cpu_fast_kind(tg.Grade(t.grade_canonical)._native) == "nibble_zp"
    x = torch.randn(3, 256, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        got = tg.nn.GritLinear.from_packed(t)(x)
    ref = torch.nn.functional.linear(x, torch.from_numpy(want))
    assert ((got - ref).abs() <= _summation_bound(x, torch.from_numpy(want))).all()


def test_three_bit_awq_and_five_bit_gptq_are_refused():
    mod = W.gptq_module(W.weights(6, 32, 256), 128)
    for family, bits in (("awq", 3), ("gptq", 5)):
        with pytest.raises(LayoutError, match="%d-bit" % bits) as e:
            planes(family, mod["qweight"], mod["qzeros"], mod["scales"], bits)
        assert e.value.field == "bits_unsupported"


def test_gptq_grades_run_the_fast_decoder():
    for group in (32, 64, 128):
        for sym in (False, True):
            assert tg._C.cpu_fast_kind(tg.Grade(grade_text(4, group, sym))._native) == "nibble_zp"


# ----------------------------------------------------------------- whole folders

def _gptq_folder(root, family="gptq", version=1, group=32, act_order=False, bits=4):
    """A tiny Llama packed layer by layer by the published packers, as a GPTQ/AWQ model folder; and the
    float reference weights (the published dequantization)."""
    m = H.tiny_llama()
    src = H.float_folder(m, os.path.join(root, "float"))
    sd = load_file(os.path.join(src, "model.safetensors"))
    out, ref = {}, {}
    for i, (name, t) in enumerate(sorted(sd.items())):
        if name.endswith("proj.weight"):
            w = t.numpy()
            if act_order:
                mod = _act_order(w, group, seed=i, version=version)
            else:
                mod = W.gptq_module(w, group, version=version, bits=bits) if family == "gptq" else W.awq_module(w, group)
            p = name[:-len(".weight")]
            out.update({"%s.%s" % (p, k): torch.from_numpy(np.ascontiguousarray(v)) for k, v in mod.items()})
            fmt = "gptq_v2" if family == "gptq" and version == 2 else None
            ref[name] = torch.from_numpy(reference_weight(family, mod["qweight"], mod["qzeros"], mod["scales"], bits, fmt,
                                                          g_idx=mod.get("g_idx") if act_order else None))
        else:
            out[name] = t
    folder = os.path.join(root, family)
    os.makedirs(folder)
    save_file(out, os.path.join(folder, "model.safetensors"))
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    qc = {"quant_method": family, "bits": bits, "group_size": group}
    qc.update({"desc_act": act_order, "sym": False, "checkpoint_format": "gptq" if version == 1 else "gptq_v2"}
              if family == "gptq" else {"version": "gemm", "zero_point": True})
    cfg["quantization_config"] = qc
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)
    return src, folder, ref


@pytest.mark.parametrize("family,version,bits", [("gptq", 1, 4), ("gptq", 2, 4), ("awq", None, 4), ("gptq", 1, 3)])
def test_a_gptq_or_awq_model_folder_imports_and_loads_with_from_pretrained(tmp_path, family, version, bits):
    from transformers import AutoModelForCausalLM

    src, folder, ref = _gptq_folder(str(tmp_path), family, version or 1, bits=bits)
    dst = str(tmp_path / "grit")
    files, records = import_quantized(folder, dst)
    assert files == [os.path.join(dst, "model.safetensors")]
    assert {r["action"] for r in records} >= {"packed", "kept"}
    with open(os.path.join(dst, "config.json")) as f:
        qc = json.load(f)["quantization_config"]
    assert qc["quant_method"] == "grit" and qc["grade"] == grade_text(bits, 32, False)
    state = tg.load(dst, verify="digest")
    for name, w in ref.items():
        assert np.array_equal(_bits(state[name].dequantize()), _bits(w)), name
    # The scanner knows the (non-registry) grades from the recorded canonical strings.
    from torch_grit.scan import scan_paths
    report = scan_paths([dst], deep=True)
    assert report.exit_code("graded") == 0, [(f.cls, f.message) for f in report.findings]
    model = AutoModelForCausalLM.from_pretrained(dst).eval()
    want = AutoModelForCausalLM.from_pretrained(src).eval()
    want.load_state_dict({**want.state_dict(), **ref})
    ids = torch.randint(0, 256, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        a, b = model(ids).logits, want(ids).logits
    assert type(model.model.layers[0].mlp.down_proj).__name__ == "GritLinear"
    assert torch.allclose(a, b, atol=1e-5, rtol=1e-4), (a - b).abs().max()


def test_an_act_order_folder_imports_and_loads_with_its_input_permutations(tmp_path):
    from transformers import AutoModelForCausalLM

    src, folder, ref = _gptq_folder(str(tmp_path), act_order=True)
    dst = str(tmp_path / "grit")
    _, records = import_quantized(folder, dst)
    added = [r for r in records if r["action"] == "added"]
    assert sorted(r["name"] for r in added) == sorted(n[:-len(".weight")] + ".input_perm" for n in ref)
    state = tg.load(dst, verify="digest")
    for name, w in ref.items():
        perm = state[name[:-len(".weight")] + ".input_perm"]
        assert perm.dtype == torch.int64
        layer = tg.nn.GritLinear.from_packed(state[name], input_perm=perm)
        assert np.array_equal(_bits(layer.unpermuted_weight()), _bits(w)), name
    from torch_grit.scan import scan_paths
    report = scan_paths([dst], deep=True)
    assert report.exit_code("graded") == 0, [(f.cls, f.message) for f in report.findings]

    want = AutoModelForCausalLM.from_pretrained(src).eval()
    want.load_state_dict({**want.state_dict(), **ref})
    ids = torch.randint(0, 256, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        b = want(ids).logits
    loaded = tg.load(dst, model=AutoModelForCausalLM.from_pretrained(src).eval())
    hf = AutoModelForCausalLM.from_pretrained(dst).eval()
    for model in (loaded, hf):
        down = model.model.layers[0].mlp.down_proj
        assert type(down).__name__ == "GritLinear" and down.input_perm is not None
        assert np.array_equal(_bits(down.unpermuted_weight()), _bits(ref["model.layers.0.mlp.down_proj.weight"]))
        with torch.no_grad():
            a = model(ids).logits
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4), (a - b).abs().max()
    # save -> load keeps the permutations (torch_grit.save and save_pretrained)
    tg.save(loaded, str(tmp_path / "again.safetensors"))
    again = tg.load(str(tmp_path / "again.safetensors"))
    for name in ref:
        key = name[:-len(".weight")] + ".input_perm"
        assert torch.equal(again[key], state[key]), key
    hf.save_pretrained(str(tmp_path / "hf_again"))
    back = AutoModelForCausalLM.from_pretrained(str(tmp_path / "hf_again")).eval()
    with torch.no_grad():
        assert torch.equal(back(ids).logits, hf(ids).logits)


def test_a_g_idx_whose_groups_are_not_group_size_long_is_exit_3(tmp_path, capsys):
    _, folder, _ = _gptq_folder(str(tmp_path), act_order=True)
    path = os.path.join(folder, "model.safetensors")
    sd = load_file(path)
    name = "model.layers.1.self_attn.o_proj.g_idx"
    g = sd[name].clone()
    g[g == 0] = 1            # group 0 empty, group 1 twice its size
    sd[name] = g
    save_file(sd, path)
    dst = tmp_path / "grit"
    assert cli_main(["import", folder, str(dst)]) == 3
    err = capsys.readouterr().err
    assert "o_proj.g_idx" in err and "group 0" in err
    assert not dst.exists()


@pytest.mark.parametrize("edit,match", [
    (lambda qc: qc.update(bits=8), "at 8 bits (quantization_config.bits)"),
    (lambda qc: qc.update(group_size=64), "group_size is 64"),
    (lambda qc: qc.update(quant_method="bitsandbytes"), "quant_method"),
])
def test_a_config_that_disagrees_with_the_planes_is_exit_3(tmp_path, capsys, edit, match):
    _, folder, _ = _gptq_folder(str(tmp_path))
    path = os.path.join(folder, "config.json")
    with open(path) as f:
        cfg = json.load(f)
    edit(cfg["quantization_config"])
    with open(path, "w") as f:
        json.dump(cfg, f)
    dst = tmp_path / "grit"
    assert cli_main(["import", folder, str(dst)]) == 3
    assert match in capsys.readouterr().err
    assert not dst.exists()


def test_the_cli_imports_a_folder_with_json_lines(tmp_path, capsys):
    _, folder, _ = _gptq_folder(str(tmp_path), "awq")
    assert cli_main(["import", folder, str(tmp_path / "grit"), "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[-1]["event"] == "done" and lines[-1]["actions"]["packed"] == 14
    assert all(line["event"] == "tensor" for line in lines[:-1])


def test_a_converted_folder_with_a_bad_input_permutation_is_refused_by_every_loader(tmp_path):
    from transformers import AutoModelForCausalLM

    src, folder, _ = _gptq_folder(str(tmp_path), act_order=True)
    dst = str(tmp_path / "grit")
    import_quantized(folder, dst)
    path = os.path.join(dst, "model.safetensors")
    meta, entries = read_raw(path)
    name = "model.layers.0.mlp.up_proj.input_perm"
    perm = np.frombuffer(entries[name]["bytes"], np.int64).copy()
    perm[1] = perm[0]                                   # a repeated index
    entries[name]["bytes"] = perm.tobytes()
    write_raw(path, meta, entries)
    with pytest.raises(CheckpointError, match="up_proj.input_perm.*not a permutation"):
        tg.load(dst)
    model = AutoModelForCausalLM.from_pretrained(src).eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(CheckpointError, match="up_proj.input_perm.*not a permutation"):
        tg.load(dst, model=model)
    assert type(model.model.layers[0].mlp.up_proj) is torch.nn.Linear
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    with pytest.raises(CheckpointError, match="up_proj.input_perm.*not a permutation"):
        AutoModelForCausalLM.from_pretrained(dst)
