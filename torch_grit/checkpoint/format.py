"""The GRIT checkpoint format, written: units, metadata, shards, one streaming writer.

A checkpoint is a list of units, one per logical tensor: ``Plain`` (one
ordinary entry) or ``Packed`` (its non-empty planes as ``<name>.grit.<plane>``
U8 entries, its descriptor in ``__metadata__["__grit__"]`` and its record in
``__metadata__["torch_grit"]``). See torch_grit/checkpoint/save_load.py for the layout
and why it is this one. ``write_units`` lays the files out from shapes alone,
then lets the caller produce one unit at a time (``save`` from memory, the
converter from a source file).
"""

import json
import os
import re
from dataclasses import dataclass, field
from typing import List, Optional

import torch

from ..contract.check import digest
from ..contract.descriptor import Descriptor
from ..contract.grade import Grade
from .safetensors_io import AtomicFiles, entry_nbytes, layout, pwrite_all, render_header

PLANE_NAMES = ("data", "scale0", "scale1", "aux")
PLANE_SUFFIXES = tuple(".grit." + p for p in PLANE_NAMES)
META_DESCRIPTORS = "__grit__"
META_TORCH_GRIT = "torch_grit"
# Inside the torch_grit record: how the grades were chosen, when per tensor (grade="auto").
# torch-grit scan reads it: a mixture the checkpoint declares is not grade drift.
META_GRADE_POLICY = "grade_policy"
META_ACTIVATIONS = "activations"  # {module name: "s8" | "bf16"}: layers that run an activation mode
# ``<layer>.input_perm``: int64 [in_features], the permutation of a packed layer's inputs
# (GritLinear.input_perm, GPTQ act-order), an ordinary entry beside ``<layer>.weight``.
INPUT_PERM_SUFFIX = ".input_perm"
FORMAT_VERSION = 1
PLANE_RE = re.compile(r"^(.*)\.grit\.(data|scale0|scale1|aux)$")
_DIGEST_PLACEHOLDER = "0" * 32
DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}
DTYPES_BY_NAME = {v: k for k, v in DTYPE_NAMES.items()}
VERIFY_LEVELS = ("structure", "digest")


# -- what a checkpoint holds, one logical tensor at a time -------------------------------

@dataclass
class Plain:
    """A tensor stored unchanged."""
    name: str
    dtype: str            # safetensors dtype
    shape: tuple

    def entries(self):
        return [(self.name, self.dtype, self.shape)]


@dataclass
class Packed:
    """A GRIT tensor: planes as U8 entries, descriptor and record in the metadata."""
    name: str
    descriptor: Descriptor
    dtype: str            # logical dtype name ("float32", ...)
    digest: Optional[str] = None
    plane_entries: List = field(default_factory=list)  # read side: Entry or None per plane
    # The load guard: a zero-byte U8 entry under the logical name, shape [rows, cols, 0].
    # A float model expects [rows, cols] there, so a loader that does not know GRIT
    # (transformers without torch_grit) fails on a size mismatch instead of loading
    # random weights. Written in Hugging Face model folders; optional on read.
    guard: bool = False

    @property
    def grade(self):
        return self.descriptor.grade

    @property
    def shape(self):
        return self.descriptor.shape

    @property
    def plane_bytes(self):
        return self.descriptor.expected_plane_bytes()

    def guard_entry(self):
        return (self.name, "U8", tuple(self.shape) + (0,))

    def planes_written(self):
        """The plane entries, in plane order (what a writer's ``fill`` produces)."""
        return [(self.name + PLANE_SUFFIXES[i], "U8", (n,))
                for i, n in enumerate(self.plane_bytes) if n]

    def entries(self):
        return ([self.guard_entry()] if self.guard else []) + self.planes_written()

    def record(self):
        return {"grade": self.grade.canonical, "shape": list(self.shape), "dtype": self.dtype,
                "digest": self.digest or _DIGEST_PLACEHOLDER}


def packed_unit(name, grade, shape, dtype):
    """The Packed unit for a weight ``shape`` packed to ``grade`` (canonical placement)."""
    if dtype not in DTYPE_NAMES:
        raise TypeError("%s: logical dtype %s is not one of %s" % (name, dtype, list(DTYPE_NAMES)))
    return Packed(name, Descriptor(Grade.parse(grade), tuple(int(s) for s in shape)),
                  DTYPE_NAMES[dtype])


def unit_nbytes(unit):
    return sum(entry_nbytes(d, s) for _, d, s in unit.entries())


# -- writing -------------------------------------------------------------------------------

def parse_size(size):
    """Bytes from an int or a string such as ``"500MB"``, ``"2GiB"``; None stays None."""
    if size is None or isinstance(size, int):
        return size
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*((?:[KMGT]i?)?B?)\s*", str(size), re.IGNORECASE)
    if not m:
        raise ValueError("a size is a byte count or a number with a unit (500MB, 2GiB); found %r"
                         % (size,))
    unit = m.group(2).upper().rstrip("B")
    scale = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
             "KI": 2**10, "MI": 2**20, "GI": 2**30, "TI": 2**40}[unit]
    return int(float(m.group(1)) * scale)


def _metadata(units, grade_policy=None, activations=None):
    records = {u.name: u.record() for u in units if isinstance(u, Packed)}
    ours = {"version": FORMAT_VERSION, "tensors": records}
    if grade_policy is not None:  # grades chosen per tensor on purpose (torch_grit.auto)
        ours[META_GRADE_POLICY] = grade_policy
    if activations:  # layers that run an activation mode, s8 or bf16 (GritLinear.activations)
        ours[META_ACTIVATIONS] = dict(activations)
    meta = {"format": "pt",  # transformers refuses safetensors files without it
            META_TORCH_GRIT: json.dumps(ours, sort_keys=True, separators=(",", ":"))}
    descriptors = {u.name: u.descriptor.to_bytes().hex() for u in units if isinstance(u, Packed)}
    if descriptors:
        meta[META_DESCRIPTORS] = json.dumps(descriptors, sort_keys=True, separators=(",", ":"))
    return meta


def shard_paths(path, count):
    """HF names: ``model.safetensors`` -> ``model-00001-of-00003.safetensors`` (+ ``.index.json``)."""
    folder, base = os.path.split(os.path.abspath(str(path)))
    stem = base[:-len(".safetensors")] if base.endswith(".safetensors") else base
    shards = [os.path.join(folder, "%s-%05d-of-%05d.safetensors" % (stem, i + 1, count))
              for i in range(count)]
    return shards, os.path.join(folder, base + ".index.json")


def _check_unique_entries(units):
    seen = {}
    for u in units:
        for name, _, _ in u.entries():
            if name in seen:
                raise ValueError("entry name %r is used by both %r and %r; rename one tensor (names "
                                 "ending in .grit.<plane> are reserved for packed planes)"
                                 % (name, seen[name], u.name))
            seen[name] = u.name


def plan_shards(path, units, max_shard_size=None):
    """Split ``units`` into files: ``(groups, target paths, index path or None)``.

    One file unless ``max_shard_size`` is given and exceeded; then units go, in
    name order, into shards of at most that size (a larger unit gets its own).
    """
    max_shard_size = parse_size(max_shard_size)
    _check_unique_entries(units)
    sizes = [unit_nbytes(u) for u in units]
    if max_shard_size is None or sum(sizes) <= max_shard_size:
        return [list(units)], [os.path.abspath(str(path))], None
    groups, current = [[]], 0
    for u, n in sorted(zip(units, sizes), key=lambda p: p[0].name):
        if groups[-1] and current + n > max_shard_size:
            groups.append([])
            current = 0
        groups[-1].append(u)
        current += n
    targets, index_path = shard_paths(path, len(groups))
    return groups, targets, index_path


def write_units(path, units, fill, max_shard_size=None, on_unit=None, grade_policy=None,
                activations=None):
    """Write ``units`` to ``path`` (one file, or shards + index past ``max_shard_size``).

    ``fill(unit)`` returns the bytes of each of ``unit.entries()`` in order (any
    buffer; for a Packed unit its ``planes_written()``, the guard has no bytes) and is called once per unit in the order given, so a caller can
    produce one tensor at a time; a Packed unit's digest is computed here.
    The header is laid out from shapes alone before any data is written, the
    data go in at their offsets, and the header is rewritten at the end with
    the digests (same length: they are fixed-width hex). Returns the paths
    written. Atomic: see AtomicFiles. ``grade_policy`` (a JSON-able dict) is
    recorded in every file's torch_grit metadata when grades were chosen per
    tensor.
    """
    groups, targets, index_path = plan_shards(path, units, max_shard_size)
    try:
        return _write_planned(groups, targets, index_path, units, fill, on_unit, grade_policy,
                              activations)
    except OSError as e:
        if e.filename is not None:  # open/rename errors already name their file
            raise
        # a write or fsync error (ENOSPC, EFBIG, EIO) names no file: name the checkpoint
        raise OSError(e.errno, "%s while writing the checkpoint" % e.strerror, str(path)) from e


def _write_planned(groups, targets, index_path, units, fill, on_unit, grade_policy=None,
                   activations=None):
    shard_of = {}
    plans = []
    with AtomicFiles() as out:
        for target, group in zip(targets, groups):
            entries = layout([e for u in group for e in u.entries()])
            for u in group:
                u.digest = None
            header = render_header(entries, _metadata(group, grade_policy, activations))
            f = out.open(target)
            os.ftruncate(f.fileno(), len(header) + (entries[-1].end if entries else 0))
            plans.append((f, group, {e.name: e for e in entries}, len(header)))
            for u in group:
                shard_of[u.name] = len(plans) - 1
        for u in units:
            f, _, entries, data_start = plans[shard_of[u.name]]
            buffers, planes = list(fill(u)), None
            names = u.planes_written() if isinstance(u, Packed) else u.entries()
            if len(buffers) != len(names):
                raise ValueError("%s: %d buffers for %d entries" % (u.name, len(buffers), len(names)))
            for (name, _, _), buf in zip(names, buffers):
                e = entries[name]
                if memoryview(buf).nbytes != e.nbytes:
                    raise ValueError("%s: %d bytes produced, the header reserves %d"
                                     % (name, memoryview(buf).nbytes, e.nbytes))
                pwrite_all(f.fileno(), buf, data_start + e.begin)
            if isinstance(u, Packed):
                planes = [None] * 4
                for (name, _, _), buf in zip(names, buffers):
                    planes[PLANE_SUFFIXES.index(name[len(u.name):])] = buf
                u.digest = digest(planes).hex()
            del buffers, planes  # free this tensor before the next one is produced
            if on_unit is not None:
                on_unit(u, targets[shard_of[u.name]])
        for f, group, entries, data_start in plans:
            ordered = sorted(entries.values(), key=lambda e: e.begin)
            header = render_header(ordered, _metadata(group, grade_policy, activations))
            if len(header) != data_start:  # fixed-width digests: cannot happen
                raise RuntimeError("%s: the header changed length after the digests" % f.name)
            pwrite_all(f.fileno(), header, 0)
        if index_path is not None:
            weight_map = {}
            for target, group in zip(targets, groups):
                for u in group:
                    for name, _, _ in u.entries():
                        weight_map[name] = os.path.basename(target)
            index = {"metadata": {"total_size": sum(unit_nbytes(u) for u in units)},
                     "weight_map": {k: weight_map[k] for k in sorted(weight_map)}}
            out.open(index_path).write((json.dumps(index, indent=2) + "\n").encode("utf-8"))
        out.commit()
    return targets + ([index_path] if index_path else [])
