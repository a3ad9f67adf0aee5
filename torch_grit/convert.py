"""Convert a float safetensors checkpoint to a GRIT checkpoint, one tensor at a time.

The whole output layout (every header, every offset) follows from the source
headers and the grade alone, so it is fixed before any weight is read. Then
each source tensor is read with pread (no memory map: mapped pages would count
against the process), packed or copied, written at its offset and dropped.
Peak memory is about one source tensor, its packed planes and a constant,
whatever the checkpoint size. The source is opened read-only and never
modified; the output is committed atomically (checkpoint.write_units).
"""

import os
import re
from dataclasses import dataclass
from typing import Optional

import torch

from .checkpoint_format import Packed, Plain, packed_unit, plan_shards, write_units
from .checkpoint_read import open_layout
from .grade import Grade
from .safetensors_io import read_entry
from .tensor import fit_error, quantize

FLOAT_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
# Without --filter: 2-D float "*.weight" tensors except embeddings, i.e. those whose
# module name mentions "embed" or is GPT-2's wte/wpe (an nn.Embedding is not a linear
# layer; load(model=...) could not take its packed weight).
DEFAULT_FILTER = r"\.weight$"
DEFAULT_EXCLUDE = re.compile(r"(^|\.)([^.]*embed[^.]*|wte|wpe)\.weight$", re.IGNORECASE)


class ConvertError(ValueError):
    """The conversion cannot be done as asked; nothing was written.

    ``reason`` is ``"unpackable"`` (a selected tensor does not fit the grade),
    ``"already_packed"`` (the source is a GRIT checkpoint) or ``"target"`` (the
    output would overwrite the source).
    """

    def __init__(self, message, reason):
        super().__init__(message)
        self.reason = reason


@dataclass
class TensorReport:
    name: str
    action: str                   # "quantized" or "kept"
    shape: tuple
    dtype: str                    # source safetensors dtype
    bytes_before: int
    bytes_after: int
    grade: Optional[str] = None   # canonical string when quantized
    reason: Optional[str] = None  # why it was kept
    file: Optional[str] = None    # the output file holding it

    def to_json(self):
        return {"name": self.name, "action": self.action, "shape": list(self.shape),
                "dtype": self.dtype, "bytes_before": self.bytes_before,
                "bytes_after": self.bytes_after, "grade": self.grade, "reason": self.reason,
                "file": self.file}


def output_path(dst):
    """``DST`` ending in .safetensors is the file; anything else is a folder holding model.safetensors."""
    dst = os.path.abspath(str(dst))
    return dst if dst.endswith(".safetensors") else os.path.join(dst, "model.safetensors")


def _select(name, entry, grade, pattern, explicit):
    """(quantize?, reason kept). Raises ConvertError for an explicit pick that cannot be packed."""
    if not pattern.search(name):
        return False, "not selected by the filter %r" % pattern.pattern
    if entry.dtype not in FLOAT_DTYPES or len(entry.shape) != 2:
        return False, "not a 2-D float tensor (%s %s)" % (entry.dtype, list(entry.shape))
    if not explicit and DEFAULT_EXCLUDE.search(name):
        return False, "an embedding (left in float by default; select it with --filter)"
    reason = fit_error(entry.shape, grade, name)
    if reason is None:
        return True, None
    if explicit:
        raise ConvertError(reason, "unpackable")
    return False, reason


def plan(src, grade, filter=None):
    """Check the source and decide every tensor: ``(layout, [(header, entry, unit)])``."""
    grade = Grade.parse(grade)
    lay = open_layout(src)
    if lay.packed:
        names = sorted(lay.packed)
        raise ConvertError("the source already holds %d packed GRIT tensor(s) (%s%s); convert "
                           "starts from float weights" % (len(names), ", ".join(names[:3]),
                                                         ", ..." if len(names) > 3 else ""),
                           "already_packed")
    pattern = re.compile(filter if filter is not None else DEFAULT_FILTER)
    items = []
    for h in lay.headers:
        for name, e in h.entries.items():  # offset order: the file is read front to back
            take, reason = _select(name, e, grade, pattern, filter is not None)
            if take:
                dtype = FLOAT_DTYPES[e.dtype]
                unit = packed_unit(name, grade, e.shape, dtype)
            else:
                unit = Plain(name, e.dtype, e.shape)
            items.append((h, e, unit, reason))
    return lay, items


def _check_target(lay, targets):
    sources = [h.path for h in lay.headers] + ([lay.index_path] if lay.index_path else [])
    for t in targets:
        for s in sources:
            if os.path.abspath(t) == os.path.abspath(s) or (
                    os.path.exists(t) and os.path.samefile(t, s)):
                raise ConvertError("the output %s would overwrite the source %s; choose another "
                                   "DST" % (t, s), "target")


def convert(src, dst, grade, *, filter=None, max_shard_size=None, on_tensor=None):
    """Convert ``src`` (file, folder of shards, HF model folder) into a GRIT checkpoint.

    ``filter``: a regular expression; tensors whose name it matches (re.search)
    are packed, and a matching 2-D float tensor that does not fit the grade is
    an error. Without it: 2-D float ``*.weight`` tensors that fit, embeddings
    excepted. ``on_tensor(TensorReport)`` is called after each tensor is
    written. Returns ``(files written, [TensorReport])``.
    """
    grade = Grade.parse(grade)
    lay, items = plan(src, grade, filter)
    out = output_path(dst)
    _, targets, index_path = plan_shards(out, [u for _, _, u, _ in items], max_shard_size)
    _check_target(lay, targets + ([index_path] if index_path else []))
    folder = os.path.dirname(out)
    created = not os.path.exists(folder)
    os.makedirs(folder, exist_ok=True)

    by_unit = {id(u): (h, e, reason) for h, e, u, reason in items}
    handles = {}
    reports = []
    # One read buffer, as large as the largest source tensor, reused for every tensor.
    scratch = torch.empty(max((e.nbytes for _, e, _, _ in items), default=0), dtype=torch.uint8)

    def fill(u):
        h, e, _ = by_unit[id(u)]
        if h.path not in handles:
            handles[h.path] = open(h.path, "rb")
        raw = read_entry(handles[h.path], h, e, scratch)
        if isinstance(u, Plain):
            return [memoryview(raw.numpy())]
        w = raw.view(FLOAT_DTYPES[e.dtype]).reshape(e.shape)
        del raw
        q = quantize(w, grade, name=u.name)
        del w
        return [memoryview(p.numpy()) for p, n in zip(q.planes, u.plane_bytes) if n]

    def done(u, target):
        h, e, reason = by_unit[id(u)]
        after = sum(n for n in u.plane_bytes) if isinstance(u, Packed) else e.nbytes
        r = TensorReport(u.name, "quantized" if isinstance(u, Packed) else "kept", e.shape,
                         e.dtype, e.nbytes, after, grade.canonical if isinstance(u, Packed)
                         else None, reason, os.path.basename(target))
        reports.append(r)
        if on_tensor is not None:
            on_tensor(r)

    try:
        files = write_units(out, [u for _, _, u, _ in items], fill, max_shard_size, done)
    except BaseException:
        if created and not os.listdir(folder):
            os.rmdir(folder)  # a failed conversion leaves nothing behind
        raise
    finally:
        for f in handles.values():
            f.close()
    return files, reports


def source_bytes(src):
    """Total tensor bytes of a source checkpoint (for progress bars)."""
    return sum(e.nbytes for h in open_layout(src).headers for e in h.entries.values())


__all__ = ["convert", "plan", "ConvertError", "TensorReport", "DEFAULT_FILTER"]
