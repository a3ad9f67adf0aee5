"""Scan fixtures, each made once per session by a real writer (see writers.py)."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

import gguf  # noqa: E402
import torch_grit  # noqa: E402
from torch_grit.contract.placement import WELL_KNOWN  # noqa: E402

import writers as W  # noqa: E402

Q8_0_GRADE = "grit1(e=s8,k0=32,s0=binary16,esr=ratiomaxabs)"
AOS = (WELL_KNOWN["BLOCK_AOS"], WELL_KNOWN["BLOCK_AOS"], None)
FT = gguf.LlamaFileType


def q8_desc(shape, grade=Q8_0_GRADE):
    return torch_grit.Descriptor(torch_grit.Grade.parse(grade), shape, placement=AOS)


def _gguf_clean_f32(d):
    return W.write_gguf(d / "clean_f32.gguf", [("blk.0.attn_q.weight", W.weights(1), "F32"),
                                               ("output_norm.weight", np.ones(256, np.float32), "F32")],
                        file_type=FT.ALL_F32)


def _gguf_declared(d):
    names = ["blk.%d.attn_q.weight" % i for i in range(2)]
    kv = {"grit.desc." + n: q8_desc((W.ROWS, W.COLS)).to_bytes().hex() for n in names}
    return W.write_gguf(d / "declared_q8.gguf", [(n, W.weights(i), "Q8_0") for i, n in enumerate(names)],
                        file_type=FT.MOSTLY_Q8_0, kv=kv)


def _gguf_declared_mxfp4(d):
    desc = torch_grit.Descriptor("MXFP4", (W.ROWS, W.COLS), placement=AOS)
    return W.write_gguf(d / "declared_mxfp4.gguf", [("blk.0.ffn_up.weight", W.weights(7), "MXFP4")],
                        file_type=FT.MOSTLY_MXFP4_MOE, kv={"grit.desc.blk.0.ffn_up.weight": desc.to_bytes().hex()})


def _gguf_wrong_group(d):
    # Q8_0 blocks (32 per scale) declared with k0=64: the size equations see the wrong group size.
    desc = q8_desc((W.ROWS, W.COLS), "grit1(e=s8,k0=64,s0=binary16,esr=ratiomaxabs)")
    return W.write_gguf(d / "wrong_group.gguf", [("blk.0.attn_q.weight", W.weights(1), "Q8_0")],
                        file_type=FT.MOSTLY_Q8_0, kv={"grit.desc.blk.0.attn_q.weight": desc.to_bytes().hex()})


def _gguf_file_type(d):
    # Says MOSTLY_Q4_0; the bytes are mostly Q8_0.
    return W.write_gguf(d / "file_type.gguf", [("blk.0.attn_q.weight", W.weights(1), "Q8_0"),
                                               ("blk.0.attn_k.weight", W.weights(2), "Q8_0"),
                                               ("blk.0.ffn_up.weight", W.weights(3), "Q4_0")],
                        file_type=FT.MOSTLY_Q4_0)


def _gguf_drift(d):
    # ffn_down is Q8_0 in layer 0 and Q4_0 in layer 1; file_type MOSTLY_Q8_0 is true by bytes.
    return W.write_gguf(d / "drift.gguf", [("blk.0.ffn_down.weight", W.weights(1), "Q8_0"),
                                           ("blk.1.ffn_down.weight", W.weights(2), "Q4_0"),
                                           ("blk.0.attn_q.weight", W.weights(3), "Q8_0")],
                        file_type=FT.MOSTLY_Q8_0)


def _gguf_inexpressible(d):
    return W.write_gguf(d / "inexpressible.gguf", [("blk.0.ffn_up.weight", W.weights(1), "IQ4_NL"),
                                                   ("blk.0.ffn_gate.weight", W.weights(2), "Q4_0"),
                                                   ("blk.0.ffn_down.weight", W.weights(3), "Q6_K")],
                        file_type=FT.MOSTLY_IQ4_NL)


def _gguf_inferred(d):
    return W.write_gguf(d / "inferred.gguf", [("blk.0.attn_q.weight", W.weights(1), "Q8_0"),
                                              ("blk.0.ffn_up.weight", W.weights(256, 256, 512), "Q4_K")],
                        file_type=FT.MOSTLY_Q8_0)


def _gguf_blocking(d):
    raw = W.ggml_blocks(W.weights(1), "Q8_0").view(np.int8)
    return W.write_gguf(d / "blocking.gguf", [("blk.0.attn_q.weight", raw, "Q8_0")],
                        shapes={"blk.0.attn_q.weight": (W.ROWS * 8, 34)})


def _gguf_truncated(d):
    path = W.write_gguf(d / "truncated.gguf", [("blk.0.attn_q.weight", W.weights(1), "Q8_0"),
                                               ("blk.0.attn_k.weight", W.weights(2), "Q8_0")],
                        file_type=FT.MOSTLY_Q8_0)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 1000)
    return path


def _ours(grade):
    def make(d):
        return W.write_ours(d / ("ours_%s.safetensors" % grade), grade)
    return make


def _ours_edited(name, edit):
    def make(d):
        src = W.write_ours(d / ("src_%s.safetensors" % name), "MXFP4" if name != "dense_sparse" else "I8S24")
        return W.rewrite(src, edit_meta=edit, out=d / ("%s.safetensors" % name))
    return make


TARGET = "model.layers.0.mlp.down_proj.weight"


def _wrong_group_meta(meta):
    g = "grit1(e=e2m1,k0=64,s0=e8m0,esr=exp2floormaxabs)"
    return W.edit_grit(meta, TARGET, grade=g, desc=torch_grit.Descriptor(g, (W.ROWS * 2, W.COLS)))


def _dense_sparse_meta(meta):
    g = "grit1(e=s8,k0=32,s0=binary16,esr=ratiomaxabs)"
    return W.edit_grit(meta, TARGET, grade=g, desc=torch_grit.Descriptor(g, (W.ROWS * 2, W.COLS)))


def _forgotten_padding(d):
    # Q4KS's u6 zero points, one per byte (CT_PAD8), rewritten packed 6 bits each: the aux plane is short.
    src = W.write_ours(d / "src_q4ks.safetensors", "Q4KS")

    def edit(t):
        aux = t[TARGET + ".grit.aux"]
        t[TARGET + ".grit.aux"] = aux[: (aux.numel() * 6 + 7) // 8].clone()
        return t
    return W.rewrite(src, edit_tensors=edit, out=d / "forgotten_padding.safetensors")


def _truncated_ours(d):
    path = W.write_ours(d / "truncated_ours.safetensors", "MXFP4")
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 100)
    return path


def _gptq(version=1, group_cfg=128, desc_act=False, perm=False, fmt=None, name=None, bad_qzeros=False):
    def make(d):
        folder = d / (name or "gptq_v%d" % version)
        mods = {}
        for i, p in enumerate(W.layer_names(2)):
            w = W.weights(i, W.ROWS * 2, W.COLS)
            mods[p] = W.gptq_module(w, 128, version=version,
                                    act_order_perm=np.random.default_rng(i).permutation(W.COLS) if perm else None)
            if bad_qzeros:
                mods[p]["qzeros"] = mods[p]["qzeros"][:, :-1].copy()
        cfg = {"quant_method": "gptq", "bits": 4, "group_size": group_cfg, "desc_act": desc_act, "sym": False}
        if fmt:
            cfg["checkpoint_format"] = fmt
        return W.write_quantized_folder(str(folder), mods, cfg)
    return make


def _awq(d):
    mods = {p: W.awq_module(W.weights(i, W.ROWS * 2, W.COLS), 128) for i, p in enumerate(W.layer_names(2))}
    return W.write_quantized_folder(str(d / "awq"), mods, {"quant_method": "awq", "bits": 4, "group_size": 128,
                                                         "version": "gemm", "zero_point": True})


def _ct(groups, name, ignore=("lm_head",)):
    def make(d):
        return W.write_compressed_tensors(str(d / name), groups, ignore=ignore)
    return make


def _half_converted(d):
    # A compressed-tensors export whose layer-1 down_proj went back to float (a half-done conversion),
    # re-saved through safetensors; config.json still targets every Linear and ignores only lm_head.
    import shutil
    import torch

    src = W.write_compressed_tensors(str(d / "ct_partial_src"), {"group_0": ("W8A8", ["Linear"])})
    os.makedirs(d / "ct_partial", exist_ok=True)
    shutil.copy(os.path.join(os.path.dirname(src), "config.json"), d / "ct_partial" / "config.json")
    p = "model.layers.1.mlp.down_proj."

    def edit(t):
        del t[p + "weight_scale"]
        t[p + "weight"] = torch.from_numpy(W.weights(9, W.ROWS * 2, W.COLS))
        return t
    return W.rewrite(src, edit_tensors=edit, out=d / "ct_partial" / "model.safetensors")


def _ct_fnuz(d):
    import torch
    from safetensors.torch import save_file
    import json

    folder = d / "ct_fnuz"
    os.makedirs(folder, exist_ok=True)
    t = {}
    for i, p in enumerate(W.layer_names(1)):
        w = torch.from_numpy(W.weights(i, W.ROWS * 2, W.COLS))
        scale = w.abs().amax(1, keepdim=True) / 240.0
        t[p + ".weight"] = (w / scale).to(torch.float8_e4m3fnuz)
        t[p + ".weight_scale"] = scale.float()
    save_file(t, str(folder / "model.safetensors"))
    cfg = {"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": [],
           "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
               "num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True}}}}
    with open(folder / "config.json", "w") as f:
        json.dump({"quantization_config": cfg}, f)
    return str(folder / "model.safetensors")


def _ct_marlin24(d):
    mods = {p: W.marlin24_module(W.weights(i, W.ROWS * 2, W.COLS)) for i, p in enumerate(W.layer_names(1))}
    return W.write_quantized_folder(str(d / "ct_marlin24"), mods, W.MARLIN24_CONFIG)


def _bnb_nf4(d):
    # bitsandbytes is not installed: the layout follows transformers' serialization of
    # bnb Params4bit (packed U8 codes + absmax + quant_map + quant_state JSON bytes).
    import json
    import torch
    from safetensors.torch import save_file

    state = json.dumps({"quant_type": "nf4", "blocksize": 64, "dtype": "float16",
                        "shape": [W.ROWS, W.COLS]}).encode()
    n = W.ROWS * W.COLS
    t = {"model.layers.0.mlp.down_proj.weight": torch.zeros(n // 2, 1, dtype=torch.uint8),
         "model.layers.0.mlp.down_proj.weight.absmax": torch.ones(n // 64, dtype=torch.float32),
         "model.layers.0.mlp.down_proj.weight.quant_map": torch.linspace(-1, 1, 16),
         "model.layers.0.mlp.down_proj.weight.quant_state.bitsandbytes__nf4":
             torch.frombuffer(bytearray(state), dtype=torch.uint8)}
    os.makedirs(d / "bnb", exist_ok=True)
    save_file(t, str(d / "bnb" / "model.safetensors"))
    return str(d / "bnb" / "model.safetensors")


def _plain(d):
    import torch
    from safetensors.torch import save_file

    os.makedirs(d / "plain", exist_ok=True)
    save_file({"model.layers.0.mlp.down_proj.weight": torch.randn(8, 16),
               "model.norm.weight": torch.ones(16, dtype=torch.bfloat16)}, str(d / "plain" / "model.safetensors"))
    return str(d / "plain" / "model.safetensors")


BUILDERS = {
    "gguf_clean_f32": _gguf_clean_f32, "gguf_declared": _gguf_declared, "gguf_declared_mxfp4": _gguf_declared_mxfp4,
    "gguf_wrong_group": _gguf_wrong_group, "gguf_file_type": _gguf_file_type, "gguf_drift": _gguf_drift,
    "gguf_inexpressible": _gguf_inexpressible, "gguf_inferred": _gguf_inferred, "gguf_blocking": _gguf_blocking,
    "gguf_truncated": _gguf_truncated,
    "ours_MXFP4": _ours("MXFP4"), "ours_NVF4": _ours("NVF4"), "ours_Q4KS": _ours("Q4KS"), "ours_I8S24": _ours("I8S24"),
    "ours_wrong_group": _ours_edited("wrong_group", _wrong_group_meta),
    "ours_dense_sparse": _ours_edited("dense_sparse", _dense_sparse_meta),
    "ours_forgotten_padding": _forgotten_padding, "ours_truncated": _truncated_ours,
    "gptq_v1": _gptq(1), "gptq_v2": _gptq(2, fmt="gptq_v2"), "awq": _awq,
    "gptq_group_mismatch": _gptq(1, group_cfg=64, name="gptq_group_mismatch"),
    "gptq_act_order": _gptq(1, desc_act=True, perm=True, name="gptq_act_order"),
    "gptq_act_order_hidden": _gptq(1, desc_act=False, perm=True, name="gptq_act_order_hidden"),
    "gptq_bad_qzeros": _gptq(1, bad_qzeros=True, name="gptq_bad_qzeros"),
    "ct_w4a16": _ct({"group_0": ("W4A16", ["Linear"])}, "ct_w4a16"),
    "ct_mxfp4": _ct({"group_0": ("MXFP4A16", ["Linear"])}, "ct_mxfp4"),
    "ct_nvfp4": _ct({"group_0": ("NVFP4A16", ["Linear"])}, "ct_nvfp4"),
    "ct_w8a8": _ct({"group_0": ("W8A8", ["Linear"])}, "ct_w8a8"),
    "ct_fp8": _ct({"group_0": ("FP8", ["Linear"])}, "ct_fp8"),
    "ct_drift": _ct({"group_0": ("W8A8", ["re:.*layers\\.0\\.mlp.*"]), "group_1": ("MXFP4A16", ["Linear"])},
                    "ct_drift"),
    "ct_partial": lambda d: _half_converted(d),
    "ct_fnuz": _ct_fnuz, "ct_marlin24": _ct_marlin24, "bnb_nf4": _bnb_nf4, "plain": _plain,
}
CLEAN = ("gguf_clean_f32", "gguf_declared", "gguf_declared_mxfp4", "ours_MXFP4", "ours_NVF4", "ours_Q4KS",
         "ours_I8S24", "plain")


class Fixtures:
    def __init__(self, root):
        self.root, self.paths = root, {}

    def __getitem__(self, name):
        if name not in self.paths:
            d = self.root / "fx"
            d.mkdir(exist_ok=True)
            self.paths[name] = str(BUILDERS[name](d))
        return self.paths[name]


@pytest.fixture(scope="session")
def fx(tmp_path_factory):
    return Fixtures(tmp_path_factory.mktemp("scan"))
