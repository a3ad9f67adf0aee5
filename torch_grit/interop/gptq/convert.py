"""Import a GPTQ or AWQ Hugging Face model folder as a GRIT model folder, streaming.

Every header is read and every layer planned (shapes, bits against the config, the g_idx of
act-order layers) before DST is created; then one tensor at a time is read, converted and
written through torch_grit's checkpoint writer (a temporary file renamed into place), and the
folder is completed as ``torch-grit quantize`` completes one: the other files copied,
config.json's ``quantization_config`` replaced by GRIT's (quant_method "grit"). The result loads
with ``torch_grit.load(model=...)`` and, with transformers, ``from_pretrained``.
"""

import contextlib
import json
import os

import numpy as np
import torch

from ...checkpoint.convert import DEFAULT_EXCLUDE
from ...checkpoint.format import Plain, packed_unit, parse_size, write_units
from ...checkpoint.read import resolve_files
from ...checkpoint.safetensors_io import CheckpointError, read_header, tensor_bytes
from ...contract.errors import GradeError
from ...contract.grade import Grade
from .layout import LayoutError, grade_text, planes

LEAVES = ("qweight", "qzeros", "scales", "g_idx")
FAMILIES = ("gptq", "awq")
DEFAULT_MAX_SHARD_SIZE = "50GB"   # save_pretrained's default


class QuantConfig:
    """The ``quantization_config`` of a GPTQ/AWQ folder, checked."""

    def __init__(self, doc, path):
        self.path = path
        qc = doc.get("quantization_config")
        if not isinstance(qc, dict):
            raise CheckpointError("config.json has no quantization_config: not a GPTQ or AWQ folder", path,
                                  field="quantization_config")
        method = str(qc.get("quant_method", "")).lower()
        if method not in FAMILIES:
            raise CheckpointError("quantization_config.quant_method is %r; torch_grit imports %s folders here"
                                  % (qc.get("quant_method"), " and ".join(FAMILIES)), path, field="quant_method",
                                  found=qc.get("quant_method"))
        self.family = method
        bits = qc.get("bits", qc.get("w_bit"))
        if not isinstance(bits, int) or isinstance(bits, bool):
            raise CheckpointError("quantization_config.bits is %r; an integer is needed" % (bits,), path,
                                  field="bits", found=bits)
        self.bits = bits
        group = qc.get("group_size", qc.get("q_group_size"))
        self.group = group if isinstance(group, int) and not isinstance(group, bool) else None
        self.sym = bool(qc.get("sym", False)) if method == "gptq" else not qc.get("zero_point", True)
        self.checkpoint_format = qc.get("checkpoint_format") if method == "gptq" else None
        version = qc.get("version", "gemm") if method == "awq" else None
        if version is not None and str(version).lower() != "gemm":
            raise CheckpointError("AWQ version %r: torch_grit reads the GEMM layout" % version, path,
                                  field="version", found=version)
        self.skip = list(qc.get("modules_to_not_convert") or [])
        # The logical dtype of the packed weights: the model's (float16 when it says none).
        names = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
        self.dtype = names.get(str(doc.get("torch_dtype", doc.get("dtype", "float16"))), torch.float16)


class _Layer:
    __slots__ = ("prefix", "leaves", "shape", "grade", "dtype")

    def __init__(self, prefix, leaves):
        self.prefix, self.leaves = prefix, leaves
        self.shape = self.grade = self.dtype = None


def _modules(entries):
    """{prefix: {leaf: (header, entry)}} for every module holding qweight."""
    by = {}
    for name, he in entries.items():
        prefix, _, leaf = name.rpartition(".")
        if leaf in LEAVES:
            by.setdefault(prefix, {})[leaf] = he
    return {p: l for p, l in by.items() if "qweight" in l}


def _read(handles, he):
    h, e = he
    return handles[h.path].get_tensor(e.name)


def plan_folder(src):
    """(QuantConfig, the safetensors files, units in write order, {unit name: how to fill it},
    the names of the float linear weights). Reads headers, config.json and g_idx tensors only."""
    cfg_path = os.path.join(src, "config.json")
    try:
        with open(cfg_path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise CheckpointError("config.json: %s" % e, cfg_path, field="config.json") from None
    cfg = QuantConfig(doc if isinstance(doc, dict) else {}, cfg_path)
    files, _ = resolve_files(src)
    headers = [read_header(p) for p in files]
    entries = {}
    for h in headers:
        for name, e in h.entries.items():
            entries[name] = (h, e)
    mods = _modules(entries)
    return cfg, headers, entries, mods


def _check_leaves(prefix, leaves):
    for leaf in ("qzeros", "scales"):
        if leaf not in leaves:
            raise CheckpointError("%s.qweight has no %s beside it" % (prefix, leaf), leaves["qweight"][0].path,
                                  prefix + ".qweight", field=leaf)


def import_quantized(src, dst, max_shard_size=None, on_tensor=None):
    """Write GPTQ/AWQ model folder ``src`` as a GRIT model folder ``dst``.

    Returns ``(files written, records)``; each record is a dict (name, action "packed",
    "kept" or "dropped", grade, shape, bytes_before, bytes_after); ``on_tensor(record)``
    after each.
    """
    from ...integrations.hf import GritConfig
    from ...integrations.hf import folder as hf

    src, dst = str(src), str(dst)
    if os.path.abspath(src) == os.path.abspath(dst):
        raise ValueError("DST %s is SRC" % dst)
    cfg, headers, entries, mods = plan_folder(src)
    if not mods:
        raise CheckpointError("no qweight tensor: the folder holds no %s layer" % cfg.family.upper(), src,
                              field="qweight")
    consumed, units, fills, records = set(), [], {}, []
    with contextlib.ExitStack() as stack:
        from safetensors import safe_open

        handles = {h.path: stack.enter_context(safe_open(h.path, framework="pt")) for h in headers}
        layers = []
        for prefix, leaves in sorted(mods.items()):
            _check_leaves(prefix, leaves)
            layer = _Layer(prefix, leaves)
            qw, qz, sc = (leaves[k][1] for k in ("qweight", "qzeros", "scales"))
            where = prefix + ".qweight"
            _static_checks(cfg, prefix, qw, qz, sc, leaves)
            g_idx = _read(handles, leaves["g_idx"]).numpy() if "g_idx" in leaves else None
            per = 32 // cfg.bits
            out_f = sc.shape[1]
            in_f = qw.shape[0] * per if cfg.family == "gptq" else qw.shape[0]
            groups = sc.shape[0]
            try:
                _probe(cfg, g_idx, in_f, groups)
            except LayoutError as e:
                raise CheckpointError(str(e), leaves["qweight"][0].path, where, field=e.field,
                                      expected=e.expected, found=e.found) from None
            layer.shape = (out_f, in_f)
            try:
                layer.grade = Grade.parse(grade_text(cfg.bits, in_f // groups, cfg.sym))
            except GradeError as e:
                raise CheckpointError("the layer's grade: %s" % e, leaves["qweight"][0].path, where,
                                      field="grade") from None
            layer.dtype = cfg.dtype
            layers.append(layer)
            consumed.update(e.name for _, e in leaves.values())
        for layer in layers:
            u = packed_unit(layer.prefix + ".weight", layer.grade, layer.shape, layer.dtype)
            u.guard = True
            units.append(u)
            fills[u.name] = ("layer", layer)
        exact = []
        for name, (h, e) in sorted(entries.items()):
            if name in consumed:
                continue
            if name.endswith(".weight") and len(e.shape) == 2 and e.dtype in ("F16", "BF16", "F32") \
                    and not DEFAULT_EXCLUDE.search(name):
                exact.append(name[:-len(".weight")])
            units.append(Plain(name, e.dtype, tuple(e.shape)))
            fills[name] = ("plain", (h, e))
        grades = sorted({layer.grade.canonical for layer in layers})
        if len(grades) != 1:   # one config, one bits and group size: cannot happen unless groups differ
            raise CheckpointError("the layers have different group sizes (%s); a model folder records one "
                                  "grade" % grades, src, field="group_size")

        def fill(u):
            kind, what = fills[u.name]
            if kind == "plain":
                t = _read(handles, what)
                out = [tensor_bytes(t)]
                rec = {"name": u.name, "action": "kept", "shape": list(u.shape), "bytes_before": what[1].nbytes,
                       "bytes_after": what[1].nbytes}
            else:
                layer = what
                arr = {k: _read(handles, layer.leaves[k]).numpy() for k in ("qweight", "qzeros", "scales")}
                try:
                    pl, shape, _ = planes(cfg.family, arr["qweight"], arr["qzeros"], arr["scales"], cfg.bits,
                                          None, cfg.checkpoint_format)
                except LayoutError as e:
                    raise CheckpointError(str(e), layer.leaves["qweight"][0].path, layer.prefix + ".qweight",
                                          field=e.field) from None
                out = [p for p, n in zip(pl, u.plane_bytes) if n]
                before = sum(layer.leaves[k][1].nbytes for k in layer.leaves)
                rec = {"name": u.name, "action": "packed", "grade": u.grade.canonical, "shape": list(shape),
                       "bytes_before": before, "bytes_after": sum(len(p) for p in out)}
            records.append(rec)
            if on_tensor is not None:
                on_tensor(rec)
            return out

        target = os.path.join(dst, "model.safetensors")
        os.makedirs(dst, exist_ok=True)
        files = write_units(target, units, fill, max_shard_size=parse_size(
            max_shard_size if max_shard_size is not None else DEFAULT_MAX_SHARD_SIZE))
    for name, (h, e) in sorted(entries.items()):
        if name.endswith(".g_idx"):
            records.append({"name": name, "action": "dropped", "shape": list(e.shape), "bytes_before": e.nbytes,
                            "bytes_after": 0, "reason": "contiguous groups: the GRIT grade's k0 says the same"})
    hf.complete_folder(src, dst, GritConfig(grade=grades[0], modules_to_not_convert=exact))
    return files, records


def _static_checks(cfg, prefix, qw, qz, sc, leaves):
    """Dtypes, ranks and the config's bits and group size against the shapes (header only)."""
    path = leaves["qweight"][0].path
    where = prefix + ".qweight"
    if cfg.bits not in (2, 4, 8):
        raise CheckpointError("quantization_config.bits = %d: torch_grit reads 2, 4 and 8 bits (3-bit GPTQ packs "
                              "codes across int32 words)" % cfg.bits, path, where, field="bits_unsupported",
                              found=cfg.bits)
    for leaf, e, dt in (("qweight", qw, "I32"), ("qzeros", qz, "I32"), ("scales", sc, "F16")):
        if e.dtype != dt or len(e.shape) != 2:
            raise CheckpointError("%s is %s %s; the %s layout has a 2-D %s tensor there"
                                  % (leaf, e.dtype, list(e.shape), cfg.family.upper(), dt), path,
                                  prefix + "." + leaf, field=leaf, expected=dt, found=e.dtype)
    per = 32 // cfg.bits
    groups, out_f = sc.shape
    in_f = qw.shape[0] * per if cfg.family == "gptq" else qw.shape[0]
    want_qw = [in_f // per, out_f] if cfg.family == "gptq" else [in_f, out_f // per]
    if out_f % per or list(qw.shape) != want_qw:
        raise CheckpointError("qweight is %s, but scales %s at %d bits need %s: the config's bits are not the "
                              "ones the planes hold, or the tensors disagree"
                              % (list(qw.shape), list(sc.shape), cfg.bits, want_qw), path, where, field="qweight",
                              expected=want_qw, found=list(qw.shape))
    if list(qz.shape) != [groups, out_f // per]:
        raise CheckpointError("qzeros is %s; scales %s need [%d, %d] at %d bits (quantization_config.bits): the "
                              "config's bits are not the ones the planes hold, or the tensors disagree"
                              % (list(qz.shape), list(sc.shape), groups, out_f // per, cfg.bits),
                              path, prefix + ".qzeros", field="qzeros", expected=[groups, out_f // per],
                              found=list(qz.shape))
    if groups == 0 or in_f % groups:
        raise CheckpointError("%d input features do not split into %d groups" % (in_f, groups), path,
                              prefix + ".scales", field="scales", found=groups)
    if cfg.group is not None and cfg.group != -1 and cfg.group != in_f // groups:
        raise CheckpointError("quantization_config.group_size is %d, but scales %s give groups of %d over %d "
                              "inputs" % (cfg.group, list(sc.shape), in_f // groups, in_f), path, where,
                              field="group_size", expected=cfg.group, found=in_f // groups)
    if "g_idx" in leaves:
        g = leaves["g_idx"][1]
        if list(g.shape) != [in_f]:
            raise CheckpointError("g_idx has shape %s; the layer has %d inputs" % (list(g.shape), in_f), path,
                                  prefix + ".g_idx", field="g_idx", expected=[in_f], found=list(g.shape))


def _probe(cfg, g_idx, in_f, groups):
    if g_idx is None:
        return
    if not np.array_equal(g_idx, np.arange(in_f) // (in_f // groups)):
        raise LayoutError("act-order: g_idx maps inputs to groups out of order (desc_act); GRIT v1's groups are "
                          "contiguous runs of the input axis and torch_grit stores no input permutation, so "
                          "this layer is not imported", "act_order")
