"""``import_gguf``: a GGUF file to a torch_grit safetensors checkpoint, streaming.

The whole header is planned and checked first (``open_gguf``): a tensor that
cannot be imported fails the call before DST is opened. Then one tensor at a
time is read from the memory-mapped file, repacked (or requantized) and
written at its offset in a temporary file that is renamed over DST at the
end: a failure midway (a refused block) leaves DST as it was.
"""

import os

from ...checkpoint.convert import output_path
from ...checkpoint.format import Packed, write_units
from ...checkpoint.safetensors_io import tensor_bytes
from .read import open_gguf


class ImportRecord:
    """What happened to one tensor: ``action`` is "packed", "plain" or "requantized"."""

    __slots__ = ("name", "ggml_type", "action", "grade", "shape", "bytes_before", "bytes_after", "error")

    def __init__(self, plan, unit_bytes, error=None):
        self.name, self.ggml_type, self.shape = plan.name, plan.ggml_type, list(plan.shape)
        self.action = {"packed": "packed", "plain": "plain", "requantize": "requantized"}[plan.kind]
        self.grade = plan.grade
        self.bytes_before, self.bytes_after, self.error = plan.nbytes, unit_bytes, error

    def to_json(self):
        out = {"name": self.name, "ggml_type": self.ggml_type, "action": self.action, "shape": self.shape,
               "bytes_before": self.bytes_before, "bytes_after": self.bytes_after}
        if self.grade is not None:
            out["grade"] = self.grade
        if self.error is not None:
            out.update(self.error)
        return out


def import_gguf(src, dst, requantize=None, max_shard_size=None, on_tensor=None):
    """Write the tensors of GGUF ``src`` as a checked torch_grit checkpoint at ``dst``
    (a .safetensors path, or a folder that receives model.safetensors).

    Returns ``(files written, [ImportRecord])``; ``on_tensor(record)`` after each.
    """
    imp = open_gguf(src, requantize)
    target = output_path(dst)
    if os.path.abspath(str(src)) == target:
        raise ValueError("DST %s would overwrite SRC" % target)
    units = [p.unit() for p in imp.plans]
    plans = {p.name: p for p in imp.plans}
    records = []

    def fill(u):
        plan = plans[u.name]
        t, error = imp.read(plan), None
        if plan.kind == "requantize":
            t, error = t
        if isinstance(u, Packed):
            out = [tensor_bytes(p) for p, n in zip(t.planes, u.plane_bytes) if n]
        else:
            out = [tensor_bytes(t)]
        rec = ImportRecord(plan, sum(memoryview(b).nbytes for b in out), error)
        records.append(rec)
        if on_tensor is not None:
            on_tensor(rec)
        return out

    os.makedirs(os.path.dirname(target), exist_ok=True)
    try:
        files = write_units(target, units, fill, max_shard_size=max_shard_size)
    finally:
        imp.close()
    return files, records
