"""Convert a float safetensors checkpoint to a GRIT checkpoint, one tensor at a time.

The whole output layout (every header, every offset) follows from the source
headers and each tensor's grade, so it is fixed before any weight is written.
With a fixed grade no weight is read for that; with ``grade="auto"`` a first
pass reads each selected tensor once, runs torch_grit.auto's rule (the one
``quantize_(model, "auto")`` uses) and drops it. Then each source tensor is
read with pread (no memory map: mapped pages would count against the
process), packed or copied, written at its offset and dropped.
Peak memory is about one source tensor, its packed planes and a constant,
whatever the checkpoint size. The source is opened read-only and never
modified; the output is committed atomically (checkpoint.write_units).
"""

import contextlib
import os
import re
from dataclasses import dataclass
from typing import Optional

import torch

from ..quantization import auto
from .format import Packed, Plain, packed_unit, plan_shards, write_units
from .read import open_layout
from ..contract.errors import InexpressibleError
from ..contract.grade import Grade, parse_fixed, resolve_grade
from ..contract.grade_names import PerChannel, grade_for
from ..contract.int4_groups import Int4Groups
from .safetensors_io import read_entry
from ..tensor.grit_tensor import fit_error, quantize

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
    auto: Optional[object] = None  # grade="auto": the AutoChoice for this tensor

    def to_json(self):
        return {"name": self.name, "action": self.action, "shape": list(self.shape),
                "dtype": self.dtype, "bytes_before": self.bytes_before,
                "bytes_after": self.bytes_after, "grade": self.grade, "reason": self.reason,
                "file": self.file, "auto": self.auto.to_json() if self.auto else None}


def output_path(dst):
    """``DST`` ending in .safetensors is the file; anything else is a folder holding model.safetensors."""
    dst = os.path.abspath(str(dst))
    return dst if dst.endswith(".safetensors") else os.path.join(dst, "model.safetensors")


def _select(name, entry, grade, pattern, explicit):
    """(quantize?, reason kept). Raises ConvertError for an explicit pick that cannot be packed.

    ``grade`` None (grade="auto"): the shape is left to the auto rule, which
    tries each candidate and keeps the tensor exact when none fits.
    """
    if not pattern.search(name):
        return False, "not selected by the filter %r" % pattern.pattern
    if entry.dtype not in FLOAT_DTYPES or len(entry.shape) != 2:
        return False, "not a 2-D float tensor (%s %s)" % (entry.dtype, list(entry.shape))
    if not explicit and DEFAULT_EXCLUDE.search(name):
        return False, "an embedding (left in float by default; select it with --filter)"
    if grade is None:
        return True, None
    reason = fit_error(entry.shape, grade, name)
    if reason is None:
        return True, None
    if explicit:
        raise ConvertError(reason, "unpackable")
    return False, reason


def plan(src, grade, filter=None, *, budget_db=auto.DEFAULT_BUDGET_DB,
         candidates=auto.CANDIDATES, on_entry=None, exclude=frozenset(), load_guard=False):
    """Check the source and decide every tensor: ``(layout, [(header, entry, unit, reason, choice)])``.

    ``grade="auto"`` reads each selected tensor once (pread) and applies
    ``quantization.auto.choose`` with ``budget_db`` and ``candidates``; ``choice`` is
    its AutoChoice (None for a fixed grade or an unselected tensor).
    ``on_entry(name, nbytes)`` is called after each source entry is decided.
    Entries named in ``exclude`` are left out of the output; ``load_guard``
    gives each packed tensor its load guard (a Hugging Face model folder).
    """
    refuse_inexpressible(src, grade, filter)
    is_auto = auto.is_auto(grade)
    if is_auto:
        budget_db = auto.parse_budget(budget_db)
        grades = auto.parse_candidates(candidates)
        grade = None
    else:
        grade = parse_fixed(grade)
    lay = open_layout(src)
    if lay.packed:
        names = sorted(lay.packed)
        raise ConvertError("the source already holds %d packed GRIT tensor(s) (%s%s); convert "
                           "starts from float weights" % (len(names), ", ".join(names[:3]),
                                                         ", ..." if len(names) > 3 else ""),
                           "already_packed")
    pattern = re.compile(filter if filter is not None else DEFAULT_FILTER)
    items = []
    # The auto pass reuses one read buffer, as the writing pass does.
    scratch = torch.empty(max((e.nbytes for h in lay.headers for e in h.entries.values()),
                              default=0) if is_auto else 0, dtype=torch.uint8)
    for h in lay.headers:
        with open(h.path, "rb") if is_auto else contextlib.nullcontext() as f:
            for name, e in h.entries.items():  # offset order: the file is read front to back
                if name in exclude:
                    continue
                take, reason = _select(name, e, grade, pattern, filter is not None)
                choice, unit = None, None
                if take and is_auto:
                    w = read_entry(f, h, e, scratch).view(FLOAT_DTYPES[e.dtype]).reshape(e.shape)
                    choice = auto.choose(w, grades, budget_db,
                                         lambda g: fit_error(e.shape, g, name))
                    del w
                    if choice.grade is not None:
                        unit = packed_unit(name, choice.grade, e.shape, FLOAT_DTYPES[e.dtype])
                    reason = choice.reason
                elif take:
                    unit = packed_unit(name, grade_for(grade, e.shape), e.shape, FLOAT_DTYPES[e.dtype])
                if unit is None:
                    unit = Plain(name, e.dtype, e.shape)
                else:
                    unit.guard = bool(load_guard)
                items.append((h, e, unit, reason, choice))
                if on_entry is not None:
                    on_entry(name, e.nbytes)
    return lay, items


def _bias_entry(lay, name, rows):
    """The source's ``<module>.bias`` for weight ``<module>.weight``: (header, entry) or None."""
    if not name.endswith(".weight"):
        return None
    found = lay.plain.get(name[:-len("weight")] + "bias")
    if found is None:
        return None
    h, e = found
    return found if e.dtype in FLOAT_DTYPES and tuple(e.shape) == (rows,) else None


def refuse_inexpressible(src, grade, filter=None):
    """Raise ConvertError ("unpackable") when ``grade`` is one GRIT v1 cannot carry
    (seed 001's "INT4G<g>"), naming the first tensor it would pack and why; nothing
    is written. Does nothing for a GRIT grade or "auto"."""
    if auto.is_auto(grade):
        return
    g = resolve_grade(grade)
    if not isinstance(g, Int4Groups):
        return
    lay = open_layout(src)
    pattern = re.compile(filter if filter is not None else DEFAULT_FILTER)
    first = next((name for h in lay.headers for name, e in h.entries.items()
                  if _select(name, e, g, pattern, filter is not None)[0]), None)
    raise ConvertError(str(InexpressibleError(first or "(no tensor selected)", g.name,
                                              g.grit_inexpressible)), "unpackable")


def _check_target(lay, targets):
    sources = [h.path for h in lay.headers] + ([lay.index_path] if lay.index_path else [])
    for t in targets:
        for s in sources:
            if os.path.abspath(t) == os.path.abspath(s) or (
                    os.path.exists(t) and os.path.samefile(t, s)):
                raise ConvertError("the output %s would overwrite the source %s; choose another "
                                   "DST" % (t, s), "target")


def convert(src, dst, grade, *, filter=None, max_shard_size=None, on_tensor=None,
            budget_db=auto.DEFAULT_BUDGET_DB, candidates=auto.CANDIDATES, on_entry=None,
            on_packed=None, exclude=frozenset(), load_guard=False, activations=None):
    """Convert ``src`` (file, folder of shards, HF model folder) into a GRIT checkpoint.

    ``filter``: a regular expression; tensors whose name it matches (re.search)
    are packed, and a matching 2-D float tensor that does not fit the grade is
    an error. Without it: 2-D float ``*.weight`` tensors that fit, embeddings
    excepted. ``grade="auto"``: each selected tensor gets its own grade by
    torch_grit.auto's rule over ``candidates`` within ``budget_db`` (a tensor
    no candidate fits or meets is kept exact, never an error), and its
    descriptor records it. ``on_entry(name, nbytes)`` is called as each entry
    is decided (the auto pass reads them), ``on_packed(name, weight, packed,
    bias)`` after each tensor is packed (the source weight, its GritTensor
    and the source's ``<module>.bias`` or None), ``on_tensor(TensorReport)``
    after each tensor is written. ``exclude`` (names) are dropped: each gets a
    TensorReport with action "dropped". ``load_guard``: see ``plan``.
    ``activations="s8"`` (or ``"bf16"``) records that every packed
    ``<module>.weight`` runs that activation law (``torch_grit.load(model=...)``
    sets it); a packed tensor whose grade has no s8 law is refused before
    anything is written.
    Returns ``(files written, [TensorReport])``.
    """
    refuse_inexpressible(src, grade, filter)
    if not auto.is_auto(grade):
        grade = parse_fixed(grade)
    lay, items = plan(src, grade, filter, budget_db=budget_db, candidates=candidates,
                      on_entry=on_entry, exclude=exclude, load_guard=load_guard)
    modes = _activation_modes(items, activations)
    out = output_path(dst)
    _, targets, index_path = plan_shards(out, [it[2] for it in items], max_shard_size)
    _check_target(lay, targets + ([index_path] if index_path else []))
    folder = os.path.dirname(out)
    created = not os.path.exists(folder)
    os.makedirs(folder, exist_ok=True)

    by_unit = {id(it[2]): it for it in items}
    handles = {}
    reports = []
    # One read buffer, as large as the largest source tensor, reused for every tensor.
    scratch = torch.empty(max((it[1].nbytes for it in items), default=0), dtype=torch.uint8)

    def handle(h):
        if h.path not in handles:
            handles[h.path] = open(h.path, "rb")
        return handles[h.path]

    def fill(u):
        h, e = by_unit[id(u)][:2]
        raw = read_entry(handle(h), h, e, scratch)
        if isinstance(u, Plain):
            return [memoryview(raw.numpy())]
        w = raw.view(FLOAT_DTYPES[e.dtype]).reshape(e.shape)
        del raw
        # Written as GRIT planes: the tile layout only when on_packed runs the kernels.
        q = quantize(w, u.grade, name=u.name, tile=None if on_packed else False)
        if on_packed is not None:
            found = _bias_entry(lay, u.name, e.shape[0])
            bias = None
            if found is not None:  # its own buffer: the scratch holds w
                bias = read_entry(handle(found[0]), found[0], found[1]).view(
                    FLOAT_DTYPES[found[1].dtype])
            on_packed(u.name, w, q, bias)
        del w
        return [memoryview(p.numpy()) for p, n in zip(q.planes, u.plane_bytes) if n]

    def done(u, target):
        h, e, _, reason, choice = by_unit[id(u)]
        after = sum(n for n in u.plane_bytes) if isinstance(u, Packed) else e.nbytes
        r = TensorReport(u.name, "quantized" if isinstance(u, Packed) else "kept", e.shape,
                         e.dtype, e.nbytes, after, u.grade.canonical if isinstance(u, Packed)
                         else None, reason, os.path.basename(target), choice)
        reports.append(r)
        if on_tensor is not None:
            on_tensor(r)

    try:
        files = write_units(out, [it[2] for it in items], fill, max_shard_size, done,
                            grade_policy=_grade_policy(grade, budget_db, candidates),
                            activations=modes)
    except BaseException:
        if created and not os.listdir(folder):
            os.rmdir(folder)  # a failed conversion leaves nothing behind
        raise
    finally:
        for f in handles.values():
            f.close()
    for name in sorted(exclude):
        if name in lay.plain:
            e = lay.plain[name][1]
            r = TensorReport(name, "dropped", e.shape, e.dtype, e.nbytes, 0, reason=
                             "a non-persistent buffer of the model class (transformers neither "
                             "loads nor saves it)")
            reports.append(r)
            if on_tensor is not None:
                on_tensor(r)
    return files, reports


def _activation_modes(items, activations):
    """{module: mode} for every packed ``<module>.weight`` under ``activations="s8"`` or
    ``"bf16"`` (ConvertError "unpackable" naming a tensor whose grade has no s8 law); {}
    otherwise. The converter writes GRIT grades only, which the bf16 law takes."""
    from ..nn.linear import check_activations, check_s8_law

    mode = check_activations(activations)
    if mode is None:
        return {}
    modes = {}
    for it in items:
        u = it[2]
        if not isinstance(u, Packed) or not u.name.endswith(".weight"):
            continue
        if mode == "s8":
            try:
                check_s8_law(u.name, u.grade.canonical)
            except ValueError as e:
                raise ConvertError(str(e), "unpackable") from None
        modes[u.name[:-len(".weight")]] = mode
    return modes


def _grade_policy(grade, budget_db, candidates):
    """What the file records about how its grades were chosen: for grade="auto" and the
    per-channel families (one k0 per tensor)."""
    if isinstance(grade, PerChannel):
        return grade.policy()
    return auto.policy(budget_db, candidates) if auto.is_auto(grade) else None


def source_bytes(src):
    """Total tensor bytes of a source checkpoint (for progress bars)."""
    return sum(e.nbytes for h in open_layout(src).headers for e in h.entries.values())


__all__ = ["convert", "plan", "ConvertError", "TensorReport", "DEFAULT_FILTER"]
