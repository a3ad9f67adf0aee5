"""GGUF fixtures for the import/export tests, written by gguf-py's GGUFWriter.

Blocks come from gguf-py's quantizer where it has one (Q8_0, Q4_0, MXFP4), or
are random bytes with every scale field set to a random finite binary16 (Q4_K,
Q6_K), so each file exercises codes, sub-scales and minima gguf-py's own
dequantizer accepts.
"""

import numpy as np
import torch

import gguf

Q8_0 = "grit1(e=s8,k0=32,s0=binary16,esr=ratiomaxabs)"


def finite_f16(rng, n):
    """``n`` random finite binary16 values of either sign, subnormals included, as (n, 2) bytes."""
    bits = rng.integers(0, 1 << 16, size=n, dtype=np.uint32)
    bits = np.where((bits & 0x7C00) == 0x7C00, bits & 0x83FF, bits).astype(np.uint16)
    return bits.view(np.uint8).reshape(n, 2)


def random_blocks(type_name, rows, cols, seed=0):
    """(rows, cols / block * type_size) uint8: random ggml blocks of ``type_name``."""
    rng = np.random.default_rng(seed)
    qtype = gguf.GGMLQuantizationType[type_name]
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    n = rows * cols // block
    raw = rng.integers(0, 256, size=(n, size), dtype=np.uint8)
    if type_name == "Q8_0":
        raw[:, 0:2] = finite_f16(rng, n)
    elif type_name == "Q4_K":
        raw[:, 0:2] = finite_f16(rng, n)
        raw[:, 2:4] = finite_f16(rng, n)
    elif type_name == "MXFP4":
        raw[:, 0] = rng.integers(0, 255, size=n)           # every exponent but 0xFF
    elif type_name == "Q6_K":
        raw[:, 208:210] = finite_f16(rng, n)
    elif type_name == "Q4_0":
        raw[:, 0:2] = finite_f16(rng, n)
    return raw.reshape(rows, -1)


def write(path, tensors, kv=None, arch="llama"):
    """``tensors``: [(name, array, ggml type name or None for a plain array)]."""
    w = gguf.GGUFWriter(str(path), arch)
    for key, value in (kv or {}).items():
        w.add_string(key, value)
    for name, arr, qname in tensors:
        if qname is None:
            w.add_tensor(name, arr)
        else:
            w.add_tensor(name, arr, raw_dtype=gguf.GGMLQuantizationType[qname])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


def gguf_decode(path):
    """{name: float32 torch tensor} by gguf.quants.dequantize (the oracle), in torch's shapes."""
    out = {}
    for t in gguf.GGUFReader(str(path)).tensors:
        if t.tensor_type == gguf.GGMLQuantizationType.BF16:
            continue
        v = np.ascontiguousarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32)
        shape = tuple(int(s) for s in reversed(t.shape.tolist()))
        out[t.name] = torch.from_numpy(v.copy()).reshape(shape)
    return out


def bits(t):
    return t.float().contiguous().view(torch.int32)
