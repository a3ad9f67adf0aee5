"""Export to GGUF: GRIT tensors whose grade is a ggml block type become those
blocks, with their descriptor in ``grit.desc.<tensor>``; float tensors stay
float (F32 / F16 / BF16); anything else is refused before a byte is written.

The file is written by gguf-py's ``GGUFWriter`` (header, KV and tensor infos
first, then the tensors one at a time, so memory stays one tensor deep) into a
temporary file beside the target, fsynced and renamed over it: the target is
the old file or the complete new one.
"""

import os

import numpy as np
import torch
from torch import nn

from ...checkpoint.safetensors_io import fsync_dir
from ...tensor.grit_tensor import GritTensor
from ...contract import ggml_blocks as blocks

_PLAIN = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
          torch.int8: "I8", torch.int16: "I16", torch.int32: "I32", torch.int64: "I64"}
DEFAULT_ARCH = "torch_grit"


class _Out:
    __slots__ = ("name", "source", "kind", "bt", "rows")

    def __init__(self, name, source, kind, bt=None):
        self.name, self.source, self.kind, self.bt = name, source, kind, bt
        self.rows = None   # a row order (llama.cpp's layout), else as stored


def _refuse(name, message):
    raise ValueError("%s: %s; nothing was written" % (name, message))


def _plan(name, t):
    if isinstance(t, GritTensor):
        if t.transposed:
            _refuse(name, "a transposed GritTensor view; save the weight itself")
        if t.is_int4_groups:
            _refuse(name, "grade %s (seed 001's int4 row groups) has no GRIT descriptor and no ggml block type"
                    % t.grade_canonical)
        bt = blocks.BY_GRADE.get(t.grade_canonical)
        if bt is None:
            _refuse(name, "grade %s has no ggml block type that decodes by GRIT's law (GGUF carries %s); "
                    "save it as safetensors, or quantize it to one of those grades"
                    % (t.grade_canonical, ", ".join("%s = ggml %s" % (b.grade, b.name)
                                                    for b in blocks.TYPES.values())))
        cols = t.logical_shape[-1]
        if cols % bt.block:
            _refuse(name, "rows of %d elements are not a multiple of ggml %s's %d-element block"
                    % (cols, bt.name, bt.block))
        return _Out(name, t, "blocks", bt)
    if not isinstance(t, torch.Tensor):
        _refuse(name, "not a tensor (%s)" % type(t).__name__)
    if t.dtype not in _PLAIN:
        _refuse(name, "dtype %s has no ggml type (GGUF holds %s)" % (t.dtype, ", ".join(sorted(_PLAIN.values()))))
    if t.dim() == 0 or t.dim() > 4:
        _refuse(name, "a %d-D tensor: ggml tensors have 1 to 4 dimensions" % t.dim())
    return _Out(name, t, "plain")


def _tensor_bytes(out):
    """The bytes of one tensor as gguf-py writes them (uint8 rows for block types)."""
    t = out.source
    if out.kind == "blocks":
        planes = [p.cpu().numpy() for p in t.planes]
        rows, cols = t.logical_shape
        n = rows * cols // out.bt.block
        data = blocks.from_planes(out.bt.name, planes, n).reshape(rows, cols // out.bt.block * out.bt.nbytes)
        return data if out.rows is None else np.ascontiguousarray(data[out.rows])
    t = t.detach().cpu()
    if out.rows is not None:
        t = t[torch.from_numpy(out.rows)]
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy()


def save_gguf(obj, path, *, arch=None, names=None, metadata=None, layout="auto", config=None,
              tokenizer=None, pooling=None):
    """Write a model's (or a state dict's) tensors as a GGUF file at ``path``.

    ``layout``: "llama.cpp" writes llama.cpp's tensor names, q/k row order, hyperparameters and
    vocab (``interop.gguf.llama_cpp``) from ``config`` (default: the model's ``.config``), so
    llama.cpp runs the file; "source" keeps the state dict's names and writes general.architecture
    ``arch`` (default "torch_grit") with no hyperparameters; "auto" (the default) is "llama.cpp"
    for a config of an architecture it knows (``llama_cpp.ARCHES``: llama, mistral, qwen2, qwen3, gemma,
    gemma2, gemma3_text, phi3, bert), else "source".
    ``tokenizer``: a folder holding tokenizer.json, or a transformers tokenizer (llama.cpp's
    layout; without one the vocab is "none": llama.cpp runs on token ids). ``pooling``: a BERT
    embedder's pooling ("mean", "cls", "last", "none"). ``names``: a map from state-dict names to
    GGUF tensor names ("source" layout). ``metadata``: extra KV entries {key: str | int | float |
    bool}. Returns ``[path]``.
    """
    import tempfile

    import gguf

    from . import llama_cpp

    state = obj.state_dict() if isinstance(obj, nn.Module) else obj
    if not hasattr(state, "items"):
        raise TypeError("save() takes an nn.Module or a state dict; found %s" % type(obj).__name__)
    if config is None and isinstance(obj, nn.Module):
        config = getattr(obj, "config", None)
    conv = llama_cpp.plan(config, state, layout, pooling)
    if conv is not None and (names or arch):
        raise ValueError("names= and arch= apply to layout='source'; llama.cpp's layout names the tensors "
                         "and the architecture itself")
    names = dict(names or {})
    outs, seen = [], {}
    for name, t in state.items():
        gname = names.get(name, name) if conv is None else conv.rename(name)
        if gname is None:
            continue
        if gname in seen:
            raise ValueError("%r and %r would both be written as GGUF tensor %r; nothing was written"
                             % (seen[gname], name, gname))
        seen[gname] = name
        out = _plan(name, t)
        out.name = gname
        if conv is not None:
            shape = t.logical_shape if out.kind == "blocks" else tuple(t.shape)
            out.rows = conv.row_order(name, shape[0])
            if out.kind == "plain":
                out.source = conv.plain_tensor(name, t)
        outs.append(out)
    if conv is not None:
        arch = conv.arch_name
        for gname, values in conv.extra:   # what llama.cpp computes rope from (Llama 3, Phi-3 LongRoPE)
            if gname in seen:
                raise ValueError("%r is in the state dict and llama.cpp's layout generates it from the config; "
                                 "nothing was written" % seen[gname])
            outs.append(_Out(gname, torch.from_numpy(values), "plain"))

    path = os.path.abspath(str(path))
    folder, base = os.path.split(path)
    tmp = os.path.join(folder, ".%s.tmp-%d" % (base, os.getpid()))
    writer = gguf.GGUFWriter(tmp, arch or DEFAULT_ARCH)
    try:
        _kv(writer, metadata)
        if conv is not None:
            with tempfile.TemporaryDirectory() as tok_dir:
                conv.write_kv(writer, llama_cpp.tokenizer_folder(tokenizer, tok_dir))
        for out in outs:
            if out.kind == "blocks":
                t = out.source
                writer.add_string("grit.desc." + out.name, out.bt.descriptor(t.logical_shape).to_bytes().hex())
                rows, cols = t.logical_shape
                nbytes = rows * cols // out.bt.block * out.bt.nbytes
                writer.add_tensor_info(out.name, [rows, nbytes // rows], np.dtype(np.uint8), nbytes,
                                       raw_dtype=gguf.GGMLQuantizationType[out.bt.name])
            else:
                t = out.source
                shape = list(t.shape)
                nbytes = t.numel() * t.element_size()
                if t.dtype == torch.bfloat16:
                    writer.add_tensor_info(out.name, shape[:-1] + [shape[-1] * 2], np.dtype(np.uint8), nbytes,
                                           raw_dtype=gguf.GGMLQuantizationType.BF16)
                else:
                    writer.add_tensor_info(out.name, shape, t.detach()[:0].cpu().numpy().dtype, nbytes)
        writer.write_header_to_file(path=tmp)
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        for out in outs:
            writer.write_tensor_data(_tensor_bytes(out))
        writer.flush()
        for f in writer.fout:
            os.fsync(f.fileno())
        writer.close()
        os.replace(tmp, path)
        fsync_dir(folder)
    except BaseException:
        writer.close()
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return [path]


def _kv(writer, metadata):
    writer.add_quantized_by("torch_grit")
    for key, value in (metadata or {}).items():
        if not isinstance(key, str) or key.startswith("grit.desc."):
            raise ValueError("metadata key %r: keys are strings, and grit.desc.* is written by torch_grit"
                             % (key,))
        if isinstance(value, bool):
            writer.add_bool(key, value)
        elif isinstance(value, int):
            writer.add_int64(key, value)
        elif isinstance(value, float):
            writer.add_float32(key, value)
        elif isinstance(value, str):
            writer.add_string(key, value)
        else:
            raise TypeError("metadata %r: a str, int, float or bool; found %s" % (key, type(value).__name__))
