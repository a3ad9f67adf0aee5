"""The GRIT checkpoint format, read: files, index, headers and descriptors, checked.

``open_layout`` reads every header of a checkpoint (a file, an index, a
folder), checks the container (safetensors_io.read_header), the index against
the shards, and every descriptor against its planes at level 1, reading no
tensor data. The first disagreement raises: CheckpointError for the container,
GritCheckError (tensor, field, expected, found) for a descriptor.
"""

import os
import re
from dataclasses import dataclass, field
from typing import Optional

from ..contract.check import check
from .format import (
    FORMAT_VERSION, META_DESCRIPTORS, META_TORCH_GRIT, PLANE_NAMES, PLANE_SUFFIXES, PLANE_RE,
    DTYPES_BY_NAME, Packed,
)
from ..contract.descriptor import Descriptor
from ..contract.errors import GradeError, GritCheckError
from ..contract.grade import Grade
from .safetensors_io import CheckpointError, parse_json_object, read_header


@dataclass
class Layout:
    """A checkpoint whose headers and descriptors passed the level-1 checks."""
    headers: list                                   # Header per file
    plain: dict = field(default_factory=dict)       # name -> (Header, Entry)
    packed: dict = field(default_factory=dict)      # name -> (Header, Packed)
    index_path: Optional[str] = None


def resolve_files(path):
    """The safetensors files of a checkpoint: a file, an ``*.index.json``, or a folder."""
    path = os.path.abspath(str(path))
    if os.path.isdir(path):
        indexes = sorted(f for f in os.listdir(path) if f.endswith(".safetensors.index.json"))
        single = os.path.join(path, "model.safetensors")
        if indexes and os.path.exists(single):
            raise CheckpointError("both model.safetensors and %s exist; pass the one you mean"
                                  % indexes[0], path, field="files")
        if len(indexes) > 1:
            raise CheckpointError("several index files (%s); pass the one you mean"
                                  % ", ".join(indexes), path, field="files")
        if indexes:
            return _index_files(os.path.join(path, indexes[0]))
        if os.path.exists(single):
            return [single], None
        files = sorted(os.path.join(path, f) for f in os.listdir(path)
                       if f.endswith(".safetensors"))
        if not files:
            raise CheckpointError("no .safetensors file in this folder", path, field="files")
        return files, None
    if not os.path.exists(path):
        raise CheckpointError("no such file", path, field="files")
    if path.endswith(".json"):
        return _index_files(path)
    return [path], None


def _index_files(index_path):
    try:
        with open(index_path, "rb") as f:
            text = f.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CheckpointError("cannot read the index: %s" % e, index_path, field="index") from None
    index = parse_json_object(text, index_path, "the index")
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise CheckpointError("the index needs a weight_map object of tensor -> file name",
                              index_path, field="weight_map")
    folder = os.path.dirname(index_path)
    names = sorted(set(weight_map.values()))
    for n in names:
        if os.path.basename(n) != n or n in ("", ".", ".."):
            raise CheckpointError("shard %r is not a plain file name beside the index" % n,
                                  index_path, field="weight_map", found=n)
        if not os.path.exists(os.path.join(folder, n)):
            raise CheckpointError("shard %r is missing" % n, index_path, field="weight_map", found=n)
    return [os.path.join(folder, n) for n in names], (index_path, weight_map)


def _grit_error(message, header, tensor, field, status="SizeMismatch", expected=None, found=None,
                plane=None):
    return GritCheckError("%s (in %s)" % (message, header.path), status, field, expected=expected,
                          found=found, plane=plane, tensor=tensor)


def _descriptor_maps(header):
    meta = header.metadata
    records, descriptors = {}, {}
    if META_TORCH_GRIT in meta:
        ours = parse_json_object(meta[META_TORCH_GRIT], header.path, "__metadata__.torch_grit")
        if ours.get("version") != FORMAT_VERSION:
            raise CheckpointError("torch_grit format version %r; this torch_grit reads version %d"
                                  % (ours.get("version"), FORMAT_VERSION), header.path,
                                  field="torch_grit.version", expected=FORMAT_VERSION,
                                  found=ours.get("version"))
        records = ours.get("tensors")
        if not isinstance(records, dict):
            raise CheckpointError("__metadata__.torch_grit needs a 'tensors' object", header.path,
                                  field="torch_grit.tensors")
    if META_DESCRIPTORS in meta:
        descriptors = parse_json_object(meta[META_DESCRIPTORS], header.path, "__metadata__.__grit__")
    return records, descriptors


def _packed_from_header(header, name, record, desc_hex):
    """Rebuild and level-1 check one packed tensor from the header alone."""
    if not isinstance(record, dict) or set(record) != {"grade", "shape", "dtype", "digest"}:
        raise _grit_error("its torch_grit record must have exactly grade, shape, dtype and digest; "
                          "found %r" % (record,), header, name, "torch_grit", "GradeUnknown")
    try:
        grade = Grade.parse(record["grade"])
    except (GradeError, TypeError) as e:
        raise _grit_error("unknown grade %r: %s" % (record["grade"], e), header, name, "grade",
                          "GradeUnknown", found=record["grade"]) from None
    shape = record["shape"]
    if (not isinstance(shape, list) or len(shape) != 2
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape)):
        raise _grit_error("logical shape must be [rows, cols]; found %r" % (shape,), header, name,
                          "shape", found=shape)
    if record["dtype"] not in DTYPES_BY_NAME:
        raise _grit_error("logical dtype must be one of %s; found %r" % (
            sorted(DTYPES_BY_NAME), record["dtype"]), header, name, "dtype", found=record["dtype"])
    dig = record["digest"]
    if not (isinstance(dig, str) and re.fullmatch(r"[0-9a-f]{32}", dig)):
        raise _grit_error("digest must be 32 lowercase hex digits; found %r" % (dig,), header, name,
                          "digest", "DigestMismatch", found=dig)
    if not (isinstance(desc_hex, str) and re.fullmatch(r"[0-9a-fA-F]{128}", desc_hex)):
        raise _grit_error("__grit__ descriptor must be 128 hex digits (64 bytes); found %r"
                          % (desc_hex,), header, name, "descriptor", "GradeUnknown", found=desc_hex)
    desc = Descriptor.from_bytes(bytes.fromhex(desc_hex), tuple(shape), grade=grade)

    entries = [header.entries.get(name + s) for s in PLANE_SUFFIXES]
    if not any(entries):
        raise _grit_error("the descriptor names a tensor that is missing: none of %s is an entry"
                          % ", ".join(name + s for s in PLANE_SUFFIXES), header, name,
                          "plane_bytes", found=0)
    for i, e in enumerate(entries):
        if e is not None and (e.dtype != "U8" or len(e.shape) != 1):
            raise _grit_error("plane %d (%s) entry %r is %s %s; planes are 1-D U8" % (
                i, PLANE_NAMES[i], e.name, e.dtype, list(e.shape)), header, name, "plane_dtype",
                expected="U8 [n]", found="%s %s" % (e.dtype, list(e.shape)), plane=i)
    try:
        check(desc, [e.nbytes if e is not None else 0 for e in entries])
    except GritCheckError as err:
        if err.plane is not None and entries[err.plane] is None:
            raise _grit_error("plane %d (%s) entry %r is missing; the descriptor needs %s bytes" % (
                err.plane, PLANE_NAMES[err.plane], name + PLANE_SUFFIXES[err.plane], err.expected),
                header, name, err.field, err.status, err.expected, None, err.plane) from None
        raise _grit_error(str(err), header, name, err.field, err.status, err.expected, err.found,
                          err.plane) from None
    canonical = Descriptor(grade, tuple(shape)).placement
    if tuple(desc.placement) != tuple(canonical):
        raise _grit_error("placement %r is not the canonical %r the kernels read" % (
            desc.placement, canonical), header, name, "placement", "PlacementUnknown",
            expected=tuple(canonical), found=tuple(desc.placement))
    return Packed(name, desc, record["dtype"], dig, entries)


def _check_guard(header, name, packed, where):
    """An entry under a packed tensor's own name is its load guard, or an error."""
    e = header.entries.get(name)
    want = packed.guard_entry()
    if e is None:
        raise _grit_error("it is packed here and an ordinary entry in %s" % where, header, name,
                          "descriptor", "GradeUnknown")
    if e.dtype != want[1] or tuple(e.shape) != want[2]:
        raise _grit_error("an entry under a packed tensor's name must be its zero-byte load "
                          "guard, U8 %s; found %s %s" % (list(want[2]), e.dtype, list(e.shape)),
                          header, name, "guard", "SizeMismatch", expected=list(want[2]),
                          found=list(e.shape))


def open_layout(path):
    """Read and check every header, index and descriptor of a checkpoint; read no tensor data.

    Raises CheckpointError (the container) or GritCheckError (a descriptor
    against its planes) on the first disagreement.
    """
    files, index = resolve_files(path)
    out = Layout([read_header(f) for f in files], index_path=index[0] if index else None)
    owner = {}
    for h in out.headers:
        for name in h.entries:
            if name in owner:
                raise CheckpointError("entry %r is in both %s and %s" % (name, owner[name], h.path),
                                      h.path, name, field="duplicate_entry")
            owner[name] = h.path
    if index:
        index_path, weight_map = index
        for name, where in owner.items():
            if weight_map.get(name) != os.path.basename(where):
                raise CheckpointError("the index maps %r to %r but it is in %s" % (
                    name, weight_map.get(name), os.path.basename(where)), index_path, name,
                    field="weight_map", expected=os.path.basename(where), found=weight_map.get(name))
        for name, shard in weight_map.items():
            if name not in owner:
                raise CheckpointError("the index lists %r in %s but no shard holds it" % (
                    name, shard), index_path, name, field="weight_map")

    described, maps = {}, []
    for h in out.headers:  # every descriptor of every file first: a duplicate is named as one
        records, descriptors = _descriptor_maps(h)
        maps.append((records, descriptors))
        for name in sorted(set(records) | set(descriptors)):
            if name in described:
                raise _grit_error("two descriptors for one tensor: in %s and in %s" % (
                    described[name], h.path), h, name, "descriptor", "GradeUnknown")
            described[name] = h.path
    for h, (records, descriptors) in zip(out.headers, maps):
        for name in sorted(set(records) | set(descriptors)):
            if name not in descriptors:
                raise _grit_error("torch_grit records this tensor but __grit__ has no descriptor "
                                  "for it", h, name, "descriptor", "GradeUnknown")
            if name not in records:
                raise _grit_error("__grit__ has a descriptor for it but torch_grit has no record "
                                  "(grade, shape, dtype, digest) to check it against", h, name,
                                  "torch_grit", "GradeUnknown")
            packed = _packed_from_header(h, name, records[name], descriptors[name])
            if name in owner:
                _check_guard(h, name, packed, owner[name])
                packed.guard = True
            out.packed[name] = (h, packed)
        for name, e in h.entries.items():
            m = PLANE_RE.match(name)
            if m:
                if m.group(1) not in out.packed or out.packed[m.group(1)][0] is not h:
                    raise _grit_error("a plane entry without a descriptor in this file", h, name,
                                      "descriptor", "GradeUnknown")
            elif name not in out.packed:
                out.plain[name] = (h, e)
    return out


def activation_modes(layout):
    """{module name: mode} the checkpoint records (``GritLinear.activations``), checked."""
    from .format import META_ACTIVATIONS
    modes = {}
    for h in layout.headers:
        raw = h.metadata.get(META_TORCH_GRIT)
        if not raw:
            continue
        found = parse_json_object(raw, h.path, "__metadata__.torch_grit").get(META_ACTIVATIONS, {})
        if not isinstance(found, dict) or not all(
                isinstance(k, str) and v in ("s8", "bf16") for k, v in found.items()):
            raise CheckpointError("__metadata__.torch_grit.activations must map module names to "
                                  "'s8' or 'bf16'; found %r" % (found,), h.path, field="torch_grit.activations")
        modes.update(found)
    return modes
