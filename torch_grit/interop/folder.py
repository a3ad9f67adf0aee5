"""Import a quantized Hugging Face model folder (GPTQ, AWQ, compressed-tensors) as a GRIT
model folder, streaming. The families differ only in how a layer's tensors become GRIT planes
(``interop.gptq``, ``interop.compressed``); this is the rest.

Every header and the config are read and every layer planned (shapes, bits against the config,
what a family must read first, such as GPTQ's g_idx) before DST is created; then one tensor at a
time is read, converted and written through torch_grit's checkpoint writer (a temporary file
renamed into place), and the folder is completed as ``torch-grit quantize`` completes one: the
other files copied, config.json's ``quantization_config`` replaced by GRIT's (quant_method
"grit"), a load guard per packed weight. The result loads with ``torch_grit.load(model=...)``
and, with transformers, ``from_pretrained``.
"""

import contextlib
import json
import os

import torch

from ..checkpoint.convert import DEFAULT_EXCLUDE
from ..checkpoint.format import Plain, packed_unit, parse_size, write_units
from ..checkpoint.read import resolve_files
from ..checkpoint.safetensors_io import TORCH_TO_ST, CheckpointError, read_header, tensor_bytes

DEFAULT_MAX_SHARD_SIZE = "50GB"   # save_pretrained's default
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
SCALE_DTYPES = {"F16": torch.float16, "F32": torch.float32}   # a layer's dtype when the config names none


class LayerPlan:
    """One packed layer: ``leaves`` {leaf: (header, entry)} it consumes, the logical ``shape``
    (out, in), ``grade``, logical ``dtype``, and ``convert(arrays) -> four planes`` given
    {leaf: numpy array}; ``extras`` {name: tensor}: plain tensors written beside the packed
    weight (GPTQ act-order's ``<layer>.input_perm``)."""

    __slots__ = ("prefix", "leaves", "shape", "grade", "dtype", "convert", "drop", "extras")

    def __init__(self, prefix, leaves, shape, grade, dtype, convert, drop=(), extras=None):
        self.prefix, self.leaves, self.shape, self.grade = prefix, leaves, shape, grade
        self.dtype, self.convert, self.drop = dtype, convert, tuple(drop)
        self.extras = dict(extras or {})


class Source:
    """A model folder's config.json, headers and entries {name: (header, entry)}, and a reader."""

    def __init__(self, src):
        self.path = src
        cfg_path = os.path.join(src, "config.json")
        try:
            with open(cfg_path, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            raise CheckpointError("config.json: %s" % e, cfg_path, field="config.json") from None
        self.config_path = cfg_path
        self.config = doc if isinstance(doc, dict) else {}
        qc = self.config.get("quantization_config")
        if not isinstance(qc, dict):
            raise CheckpointError("config.json has no quantization_config: not a quantized model folder", cfg_path,
                                  field="quantization_config")
        self.quantization_config = qc
        # The model's dtype, the packed weights' logical dtype (None: the config names none).
        self.dtype = DTYPES.get(str(self.config.get("torch_dtype", self.config.get("dtype"))))
        files, _ = resolve_files(src)
        self.headers = [read_header(p) for p in files]
        self.entries = {}
        for h in self.headers:
            for name, e in h.entries.items():
                self.entries[name] = (h, e)
        self._handles = None

    def modules(self, leaves):
        """{prefix: {leaf: (header, entry)}} of the entries whose last name part is in ``leaves``."""
        by = {}
        for name, he in self.entries.items():
            prefix, _, leaf = name.rpartition(".")
            if leaf in leaves:
                by.setdefault(prefix, {})[leaf] = he
        return by

    def read(self, he):
        h, e = he
        return self._handles[h.path].get_tensor(e.name)


def import_folder(src, dst, planner, max_shard_size=None, on_tensor=None):
    """Write quantized model folder ``src`` as a GRIT model folder ``dst``.

    ``planner(source) -> [LayerPlan]`` is the family's (it may read small tensors through
    ``source.read``). Returns ``(files written, records)``; each record a dict (name, action
    "packed", "kept" or "dropped", grade, shape, bytes_before, bytes_after); ``on_tensor(record)``
    after each written tensor.
    """
    from ..integrations.hf import GritConfig
    from ..integrations.hf import folder as hf

    src, dst = str(src), str(dst)
    if os.path.abspath(src) == os.path.abspath(dst):
        raise ValueError("DST %s is SRC" % dst)
    source = Source(src)
    records = []
    with contextlib.ExitStack() as stack:
        from safetensors import safe_open

        source._handles = {h.path: stack.enter_context(safe_open(h.path, framework="pt")) for h in source.headers}
        layers = planner(source)
        consumed = {e.name for layer in layers for _, e in layer.leaves.values()}
        dropped = {e.name: e for layer in layers for leaf, (_, e) in layer.leaves.items() if leaf in layer.drop}
        units, fills, exact = [], {}, []
        for layer in layers:
            u = packed_unit(layer.prefix + ".weight", layer.grade, layer.shape, layer.dtype)
            u.guard = True
            units.append(u)
            fills[u.name] = layer
            for name, t in sorted(layer.extras.items()):
                if name in source.entries:
                    raise CheckpointError("the import writes %s beside %s, but the folder already holds a tensor "
                                          "of that name" % (name, u.name), src, name, field="name")
                units.append(Plain(name, TORCH_TO_ST[t.dtype], tuple(t.shape)))
                fills[name] = t
        for name, (h, e) in sorted(source.entries.items()):
            if name in consumed:
                continue
            if name.endswith(".weight") and len(e.shape) == 2 and e.dtype in ("F16", "BF16", "F32") \
                    and not DEFAULT_EXCLUDE.search(name):
                exact.append(name[:-len(".weight")])
            units.append(Plain(name, e.dtype, tuple(e.shape)))
            fills[name] = (h, e)
        grades = sorted({layer.grade.canonical for layer in layers})
        if len(grades) != 1:
            raise CheckpointError("the layers hold %d grades (%s); a model folder records one" % (
                len(grades), ", ".join(grades) or "none"), src, field="grade")

        def fill(u):
            what = fills[u.name]
            if isinstance(what, LayerPlan):
                arrays = {k: source.read(he).numpy() for k, he in what.leaves.items() if k not in what.drop}
                planes = what.convert(arrays)
                out = [p for p, n in zip(planes, u.plane_bytes) if n]
                rec = {"name": u.name, "action": "packed", "grade": u.grade.canonical, "shape": list(what.shape),
                       "bytes_before": sum(e.nbytes for _, e in what.leaves.values()),
                       "bytes_after": sum(len(p) for p in out)}
            elif isinstance(what, torch.Tensor):
                out = [tensor_bytes(what)]
                rec = {"name": u.name, "action": "added", "shape": list(u.shape), "bytes_before": 0,
                       "bytes_after": len(out[0]), "reason": "the input permutation of an act-order layer"}
            else:
                out = [tensor_bytes(source.read(what))]
                rec = {"name": u.name, "action": "kept", "shape": list(u.shape), "bytes_before": what[1].nbytes,
                       "bytes_after": what[1].nbytes}
            records.append(rec)
            if on_tensor is not None:
                on_tensor(rec)
            return out

        os.makedirs(dst, exist_ok=True)
        files = write_units(os.path.join(dst, "model.safetensors"), units, fill, max_shard_size=parse_size(
            max_shard_size if max_shard_size is not None else DEFAULT_MAX_SHARD_SIZE))
    permuted = {name for layer in layers for name in layer.extras}
    for name, e in sorted(dropped.items()):
        prefix = name.rpartition(".")[0]
        reason = ("the input permutation %s.input_perm and the GRIT grade's contiguous groups say the same"
                  % prefix if prefix + ".input_perm" in permuted else "the GRIT grade's contiguous groups say the same")
        records.append({"name": name, "action": "dropped", "shape": list(e.shape), "bytes_before": e.nbytes,
                        "bytes_after": 0, "reason": reason})
    hf.complete_folder(src, dst, GritConfig(grade=grades[0], modules_to_not_convert=exact))
    return files, records
