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
    __slots__ = ("name", "source", "kind", "bt")

    def __init__(self, name, source, kind, bt=None):
        self.name, self.source, self.kind, self.bt = name, source, kind, bt


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
        return blocks.from_planes(out.bt.name, planes, n).reshape(rows, cols // out.bt.block * out.bt.nbytes)
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy()


def save_gguf(obj, path, *, arch=None, names=None, metadata=None):
    """Write a model's (or a state dict's) tensors as a GGUF file at ``path``.

    ``arch``: general.architecture (default "torch_grit"); ``names``: a map
    from state-dict names to GGUF tensor names (default: unchanged);
    ``metadata``: extra KV entries {key: str | int | float | bool}. Returns
    ``[path]``.
    """
    import gguf

    state = obj.state_dict() if isinstance(obj, nn.Module) else obj
    if not hasattr(state, "items"):
        raise TypeError("save() takes an nn.Module or a state dict; found %s" % type(obj).__name__)
    names = dict(names or {})
    outs, seen = [], {}
    for name, t in state.items():
        gname = names.get(name, name)
        if gname in seen:
            raise ValueError("%r and %r would both be written as GGUF tensor %r; nothing was written"
                             % (seen[gname], name, gname))
        seen[gname] = name
        out = _plan(name, t)
        out.name = gname
        outs.append(out)

    path = os.path.abspath(str(path))
    folder, base = os.path.split(path)
    tmp = os.path.join(folder, ".%s.tmp-%d" % (base, os.getpid()))
    writer = gguf.GGUFWriter(tmp, arch or DEFAULT_ARCH)
    try:
        _kv(writer, metadata)
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
