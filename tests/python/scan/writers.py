"""Fixture writers for the scan tests: every file is made by a real writer.

- GGUF: gguf-py's GGUFWriter, with blocks from gguf-py's own quantizer
  (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, MXFP4, TQ1_0, TQ2_0). For block types gguf-py
  cannot quantize (K-quants, IQ*), the blocks are random bytes with their f16
  scale fields set finite, accepted by gguf-py's own dequantizer (checked).
- compressed-tensors: the package's own ModelCompressor on a small model.
- GPTQ / AWQ: packed here by the published conventions (AutoGPTQ's pack:
  qweight along the input axis, zeros stored minus one in v1; AutoAWQ GEMM:
  along the output axis in the order 0,2,4,6,1,3,5,7), written by safetensors.
- marlin-24: compressed-tensors 0.20 ships no marlin-24 compressor (the format
  is legacy), so the layout is packed here by its published convention
  (the legacy Marlin24Compressor: 2:4 pruned, transposed, tiled 16x16 and
  permuted with the package's own get_permutations_24, eight 4-bit codes per
  int32), written by safetensors with the config the compressor wrote.
- ours: torch_grit.save.
"""

import json
import os

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import save_file

import gguf

ROWS, COLS = 64, 256


def weights(seed, rows=ROWS, cols=COLS):
    return np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32) * 0.05


# -- GGUF -------------------------------------------------------------------------------------

QUANTIZABLE = {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "MXFP4", "TQ1_0", "TQ2_0"}
# f16 scale fields (byte offsets in the block) for the types gguf-py cannot quantize
_F16_FIELDS = {"Q2_K": (80, 82), "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,),
               "IQ4_NL": (0,), "IQ4_XS": (0,), "IQ2_XXS": (0,), "IQ3_S": (0,)}


def ggml_blocks(arr, qtype_name):
    qtype = gguf.GGMLQuantizationType[qtype_name]
    if qtype_name in ("F32", "F16"):
        return arr.astype(np.float32 if qtype_name == "F32" else np.float16)
    if qtype_name in QUANTIZABLE:
        return gguf.quants.quantize(arr, qtype)
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    n_blocks = arr.size // block
    raw = np.random.default_rng(arr.size).integers(0, 256, (n_blocks, size), dtype=np.uint8)
    for off in _F16_FIELDS[qtype_name]:
        raw[:, off:off + 2] = np.frombuffer(np.float16(0.01).tobytes(), dtype=np.uint8)
    out = raw.reshape(arr.shape[0], -1)
    assert np.isfinite(gguf.quants.dequantize(out, qtype)).all()
    return out


def write_gguf(path, tensors, file_type=None, kv=None, shapes=None):
    """``tensors``: [(name, float array or bytes array, ggml type name)]."""
    w = gguf.GGUFWriter(str(path), "llama")
    if file_type is not None:
        w.add_file_type(int(file_type))
    for key, value in (kv or {}).items():
        w.add_string(key, value)
    for name, arr, qname in tensors:
        data = ggml_blocks(arr, qname) if arr.dtype == np.float32 else arr
        raw_dtype = None if qname in ("F32", "F16") else gguf.GGMLQuantizationType[qname]
        w.add_tensor(name, data, raw_shape=(shapes or {}).get(name), raw_dtype=raw_dtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


# -- GPTQ / AWQ ---------------------------------------------------------------------------------

AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)


def _rtn_asym(w, group, bits=4):
    """Round-to-nearest asymmetric per-group quantization of w [out, in]: (q [out,in], scale, zero)."""
    out_f, in_f = w.shape
    g = w.reshape(out_f, in_f // group, group)
    lo, hi = np.minimum(g.min(-1), 0), np.maximum(g.max(-1), 0)
    maxq = (1 << bits) - 1
    scale = np.where(hi > lo, (hi - lo) / maxq, 1.0).astype(np.float32)
    zero = np.clip(np.round(-lo / scale), 0, maxq).astype(np.int64)
    q = np.clip(np.round(g / scale[..., None]) + zero[..., None], 0, maxq).astype(np.int64)
    return q.reshape(out_f, in_f), scale, zero      # scale, zero: [out, groups]


def _pack_gptq3_rows(v):
    """AutoGPTQ's 3-bit packer, its loop followed word by word: [n, m] codes (n a multiple of 32)
    -> int32 [n*3/32, m]. Word w of each three holds ten codes from bit w; between words, the
    11th and 22nd code of every 32 is split, its low 2 - w bits at the top of word w and the
    rest at the bottom of word w + 1."""
    v = v.astype(np.uint32)
    out = np.zeros((v.shape[0] // 32 * 3, v.shape[1]), dtype=np.uint32)
    i = 0
    for row in range(0, out.shape[0], 3):
        for w in range(3):
            for j in range(10):
                out[row + w] |= v[i + j] << np.uint32(3 * j + w)
            i += 10
            if w < 2:
                out[row + w] |= v[i] << np.uint32(30 + w)
                out[row + w + 1] |= v[i] >> np.uint32(2 - w)
                i += 1
    return out.view(np.int32)


def _pack_rows(v, bits, order=None):
    """Pack along axis 0 of an [n, m] code array into int32 [n*bits/32, m] (element i at bits*i;
    3 bits by AutoGPTQ's packer)."""
    if bits == 3:
        return _pack_gptq3_rows(v)
    per = 32 // bits
    v = v.reshape(v.shape[0] // per, per, v.shape[1]).astype(np.uint32)
    if order is not None:
        v = v[:, list(order), :]
    out = np.zeros((v.shape[0], v.shape[2]), dtype=np.uint32)
    for i in range(per):
        out |= v[:, i, :] << np.uint32(bits * i)
    return out.view(np.int32)


def gptq_module(w, group, version=1, act_order_perm=None, bits=4):
    """AutoGPTQ's layout for one linear w [out, in]."""
    out_f, in_f = w.shape
    q, scale, zero = _rtn_asym(w, group, bits)
    g_idx = np.arange(in_f, dtype=np.int32) // group
    if act_order_perm is not None:
        g_idx = g_idx[act_order_perm]
    stored_zero = (zero - 1) & ((1 << bits) - 1) if version == 1 else zero
    return {
        "qweight": _pack_rows(q.T, bits),                           # [in*bits/32, out]
        "qzeros": _pack_cols(stored_zero.T, bits),                  # [groups, out*bits/32]
        "scales": scale.T.astype(np.float16).copy(),                 # [groups, out]
        "g_idx": g_idx,
    }


def gptq_act_order_module(w, group, perm, version=1, bits=4):
    """GPTQ's layout for one linear w [out, in] quantized with act-order (desc_act): the
    columns are quantized in the order ``perm`` (GPTQ: descending Hessian diagonal), in
    contiguous groups of that order, so g_idx[perm[j]] = j // group; the codes are packed
    back in the original input order."""
    out_f, in_f = w.shape
    qp, scale, zero = _rtn_asym(w[:, perm], group, bits)
    q = np.empty_like(qp)
    q[:, perm] = qp
    g_idx = np.empty(in_f, dtype=np.int32)
    g_idx[perm] = np.arange(in_f) // group
    stored_zero = (zero - 1) & ((1 << bits) - 1) if version == 1 else zero
    return {
        "qweight": _pack_rows(q.T, bits),                           # [in*bits/32, out]
        "qzeros": _pack_cols(stored_zero.T, bits),                  # [groups, out*bits/32]
        "scales": scale.T.astype(np.float16).copy(),                 # [groups, out]
        "g_idx": g_idx,
    }


def _pack_cols(v, bits, order=None):
    """Pack along axis 1 of an [n, m] code array into int32 [n, m*bits/32]."""
    return np.ascontiguousarray(_pack_rows(np.ascontiguousarray(v.T), bits, order).T)


def awq_module(w, group):
    """AutoAWQ GEMM's layout for one linear w [out, in]."""
    q, scale, zero = _rtn_asym(w, group)
    return {
        "qweight": _pack_cols(q.T, 4, AWQ_ORDER),                   # [in, out/8]
        "qzeros": _pack_cols(zero.T, 4, AWQ_ORDER),                 # [groups, out/8]
        "scales": scale.T.astype(np.float16).copy(),                # [groups, out]
    }


def write_quantized_folder(folder, modules, config, extra=None, filename="model.safetensors"):
    """``modules``: {prefix: {leaf: array}}; config.json carries ``quantization_config``."""
    os.makedirs(folder, exist_ok=True)
    tensors = {"%s.%s" % (p, k): torch.from_numpy(np.ascontiguousarray(v)) for p, m in modules.items()
               for k, v in m.items()}
    tensors.update(extra or {})
    save_file(tensors, os.path.join(folder, filename))
    if config is not None:
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump({"architectures": ["LlamaForCausalLM"], "quantization_config": config}, f)
    return os.path.join(folder, filename)


def layer_names(n, roles=("self_attn.q_proj", "mlp.down_proj")):
    return ["model.layers.%d.%s" % (i, r) for i in range(n) for r in roles]


# -- compressed-tensors -------------------------------------------------------------------------

class _Tiny(torch.nn.Module):
    def __init__(self, n_layers=2, in_f=COLS, out_f=ROWS * 2):
        super().__init__()
        self.model = torch.nn.Module()
        self.model.layers = torch.nn.ModuleList()
        for _ in range(n_layers):
            layer = torch.nn.Module()
            layer.self_attn = torch.nn.Module()
            layer.self_attn.q_proj = torch.nn.Linear(in_f, out_f, bias=False)
            layer.mlp = torch.nn.Module()
            layer.mlp.down_proj = torch.nn.Linear(in_f, out_f, bias=False)
            self.model.layers.append(layer)
        self.lm_head = torch.nn.Linear(in_f, 32, bias=False)


def write_compressed_tensors(folder, groups, ignore=("lm_head",), seed=0):
    """Quantize a tiny model with compressed-tensors' own lifecycle and compressors.

    ``groups``: {group name: (preset scheme name, targets)}.
    """
    from compressed_tensors.compressors.model_compressors.model_compressor import ModelCompressor
    from compressed_tensors.quantization import (QuantizationConfig, apply_quantization_config,
                                                 preset_name_to_scheme)
    from compressed_tensors.quantization.utils.helpers import calculate_qparams, generate_gparam

    torch.manual_seed(seed)
    model = _Tiny()
    cfg = QuantizationConfig(config_groups={g: preset_name_to_scheme(s, list(t)) for g, (s, t) in groups.items()},
                             ignore=list(ignore))
    apply_quantization_config(model, cfg)
    for _, mod in model.named_modules():
        scheme = getattr(mod, "quantization_scheme", None)
        if scheme is None:
            continue
        args, w = scheme.weights, mod.weight.data
        if args.strategy in ("group", "tensor_group"):
            g = w.reshape(w.shape[0], -1, args.group_size)
            lo, hi = g.amin(-1), g.amax(-1)
        elif args.strategy == "channel":
            lo, hi = w.amin(-1, keepdim=True), w.amax(-1, keepdim=True)
        else:
            lo, hi = w.amin().reshape(1), w.amax().reshape(1)
        gscale = None
        if hasattr(mod, "weight_global_scale"):
            gscale = generate_gparam(w.amin(), w.amax())
            mod.weight_global_scale.data.copy_(gscale)
        scale, zp = calculate_qparams(lo, hi, args, global_scale=gscale)
        mod.weight_scale.data.copy_(scale.reshape(mod.weight_scale.shape))
        if hasattr(mod, "weight_zero_point"):
            mod.weight_zero_point.data.copy_(zp.reshape(mod.weight_zero_point.shape))
    compressor = ModelCompressor.from_pretrained_model(model)
    compressor.compress_model(model)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.safetensors")
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, path)
    compressor.update_config(folder)
    return path


def marlin24_module(w, group=128, tile=16):
    """The legacy compressed-tensors marlin-24 layout for one linear w [out, in] (4-bit, symmetric).

    weight_packed I32 [in/32, 2*out], scale_packed F16 [in/group, out] (Marlin's scale permutation),
    meta I16 [in/32, 2*out] (the 2:4 positions, two 2-bit indices per group of four, four groups per
    int16; Marlin additionally interleaves them for its tensor cores, which the scan does not read).
    """
    from compressed_tensors.utils.permutations_24 import get_permutations_24

    out_f, in_f = w.shape
    wt = torch.from_numpy(np.ascontiguousarray(w.T))                          # [k, n]
    quads = wt.reshape(in_f // 4, 4, out_f)
    keep = quads.abs().topk(2, dim=1).indices.sort(dim=1).values              # [k/4, 2, n]
    kept = quads.gather(1, keep).reshape(in_f // 2, out_f)                    # [k/2, n]
    scale = wt.reshape(in_f // group, group, out_f).abs().amax(1) / 7.0       # [k/g, n]
    rep = scale.repeat_interleave(group // 2, dim=0)
    q = (torch.round(kept / rep).clamp(-8, 7) + 8).to(torch.int64)           # codes + 2^(b-1)
    perm, scale_perm, _ = get_permutations_24(4)
    k2 = in_f // 2
    t = q.reshape(k2 // tile, tile, out_f // tile, tile).permute(0, 2, 1, 3).reshape(k2 // tile, out_f * tile)
    t = t.reshape(-1, perm.numel())[:, perm].reshape(t.shape).numpy().astype(np.uint32)
    packed = np.zeros((t.shape[0], t.shape[1] // 8), dtype=np.uint32)
    for i in range(8):
        packed |= t[:, i::8] << (4 * i)
    scales = scale.reshape(-1, len(scale_perm))[:, scale_perm].reshape(-1, out_f).to(torch.float16)
    idx = keep.permute(2, 0, 1).numpy().astype(np.uint16)                    # [n, k/4, 2]
    nib = idx[:, :, 0] | (idx[:, :, 1] << 2)                                  # [n, k/4]
    nib = nib.reshape(out_f, in_f // 16, 4)
    meta = nib[:, :, 0] | (nib[:, :, 1] << 4) | (nib[:, :, 2] << 8) | (nib[:, :, 3] << 12)   # [n, k/16]
    meta = np.ascontiguousarray(meta.reshape(in_f // 32, 2 * out_f)).view(np.int16)
    return {"weight_packed": packed.view(np.int32), "scale_packed": scales.numpy(), "meta": meta}


MARLIN24_CONFIG = {
    "quant_method": "compressed-tensors", "format": "marlin-24", "ignore": ["lm_head"],
    "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
        "num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True}}},
}


# -- ours -----------------------------------------------------------------------------------------

def our_model(grade, seed=0, n_layers=2):
    import torch_grit

    torch.manual_seed(seed)
    model = _Tiny(n_layers=n_layers)
    del model.lm_head
    torch_grit.quantize_(model, grade)
    return model


def write_ours(path, grade, seed=0):
    import torch_grit

    torch_grit.save(our_model(grade, seed), str(path))
    return str(path)


def rewrite(path, edit_meta=None, edit_tensors=None, out=None):
    """Re-save a safetensors file through safetensors itself, editing metadata and/or tensors."""
    with safe_open(str(path), "pt") as f:
        meta = dict(f.metadata() or {})
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    if edit_meta:
        meta = edit_meta(meta)
    if edit_tensors:
        tensors = edit_tensors(tensors)
    save_file(tensors, str(out or path), metadata=meta)
    return str(out or path)


def edit_grit(meta, name, grade=None, desc=None):
    """Replace one packed tensor's descriptor (and the grade torch_grit records) in a metadata dict."""
    descs, ours = json.loads(meta["__grit__"]), json.loads(meta["torch_grit"])
    if desc is not None:
        descs[name] = desc.to_bytes().hex()
    if grade is not None:
        ours["tensors"][name]["grade"] = grade
    meta["__grit__"], meta["torch_grit"] = json.dumps(descs), json.dumps(ours)
    return meta
