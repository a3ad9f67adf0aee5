"""Declared descriptors, judged by the C++ core.

A declared descriptor is 64 bytes of hex in ``__metadata__["__grit__"]``
(safetensors) or a ``grit.desc.<tensor>`` KV (GGUF). Its planes sit in the
named entry, concatenated in plane order (data, scale0, scale1, aux) as the
size equations lay them out. The size equations, the check and the gid all
come from torch_grit (csrc/grit): nothing here computes a number itself.
"""

from .. import _C
from ..contract.check import check
from ..contract.descriptor import Descriptor
from ..contract.errors import GradeError, GritCheckError
from ..contract.grade import Grade
from ..contract.placement import container_bytes as placed_bytes
from .records import fingerprint_gid

_KNOWN = None


def known_grade(grade_id):
    """A grade this scanner can spell by id beyond the core's reference grades:
    the ggml types GRIT names (Q8_0, Q4_K, MXFP4)."""
    global _KNOWN
    if _KNOWN is None:
        from .ggml import ROWS

        _KNOWN = {}
        for row in ROWS.values():
            if row.grade:
                g = Grade.parse(row.grade)
                _KNOWN[g.id] = g
    return _KNOWN.get(grade_id)


def parse_hex(text):
    """``Descriptor`` from hex text; ValueError says why not."""
    if not isinstance(text, str):
        raise ValueError("a descriptor is a hex string, found %s" % type(text).__name__)
    try:
        raw = bytes.fromhex(text.strip())
    except ValueError:
        raise ValueError("not hex: %r" % text[:40]) from None
    if len(raw) != 64:
        raise ValueError("a GRIT descriptor is 64 bytes, found %d" % len(raw))
    return raw


def judge(report, rec, raw, container_bytes, where_source, shape=None, grade_text=None):
    """Attach a declared descriptor to ``rec`` and report what the core says.

    ``shape``: the shape the descriptor describes, when the container lists
    it otherwise than ``rec.shape`` (GGUF: ggml's order, ne0 first, as
    grit-scan reads it). ``grade_text``: the canonical grade string the writer
    recorded beside it (torch_grit's metadata), which names a grade outside
    the registry; the descriptor's grade_id must still be that string's id.
    Returns the expected plane lengths (for --deep) or None.
    """
    path, name = rec.path, rec.name
    shape = tuple(rec.shape if shape is None else shape)
    grade = None
    if isinstance(grade_text, str):
        try:
            grade = _parse_cached(grade_text)
        except (GradeError, TypeError):
            grade = None  # then the registry decides, as without a record
    desc = Descriptor.from_bytes(raw, shape, grade=grade)
    if desc.grade is None and known_grade(desc.grade_id) is not None:
        desc = Descriptor.from_bytes(raw, shape, grade=known_grade(desc.grade_id))
    rec.desc, rec.source = desc, "declared"
    rec.family = where_source
    rec.quantised = True
    data = {"desc_hex": raw.hex(), "shape": list(shape)}
    try:
        expected = desc.expected_plane_bytes()
    except GritCheckError as exc:
        report.add("size" if exc.status == "SizeMismatch" else "check", path,
                   "the size equations do not admit shape %s: %s" % (list(shape), exc),
                   tensor=name, data=dict(data, status=exc.status, field=exc.field,
                                          expected=exc.expected, found=exc.found))
        return None
    total = placed_bytes(desc, expected)
    if total != container_bytes:
        report.add("size", path,
                   "the descriptor requires %d bytes (planes %s, placement %s) for shape %s; the container "
                   "holds %d" % (total, list(expected), _C.placement_name(desc.placement_scale), list(shape),
                                 container_bytes),
                   tensor=name, data=dict(data, expected=total, found=container_bytes, planes=list(expected)),
                   fix="the grade, k0/k1 or shape in the descriptor is not the one the bytes were packed with: "
                       "`torch-grit explain` it against the writer's descriptor")
    try:
        check(desc, expected, tensor=name)
    except GritCheckError as exc:
        if exc.status == "GradeUnknown" and exc.field == "grade_id" and desc.grade is None:
            return _unknown_grade(report, rec, desc, expected, data)
        report.add("check", path, str(exc), tensor=name,
                   data=dict(data, status=exc.status, field=exc.field, expected=exc.expected, found=exc.found))
        return None
    rec.grade = desc.grade.canonical
    rec.label = rec.grade
    rec.expressible = True
    rec.gid, rec.gid_basis = desc.gid, "declared descriptor"
    _note(report, rec, desc)
    return expected


def _unknown_grade(report, rec, desc, expected, data):
    # Frame passed (the core checks it before the grade); placement is next in its order.
    for plane, word in zip(("placement_data", "placement_scale", "placement_meta"), desc.placement):
        if not _C.placement_known(word):
            report.add("check", rec.path, "PlacementUnknown: %s %s is not a known placement"
                       % (plane, _C.placement_name(word)), tensor=rec.name,
                       data=dict(data, status="PlacementUnknown", field=plane))
            return None
    rec.gid, rec.gid_basis = fingerprint_gid(desc, rec.shape), "unregistered grade fingerprint"
    rec.label = "grade_id:0x%016x" % desc.grade_id
    report.add("unknown_grade", rec.path,
               "grade_id 0x%016x is not a grade this build knows; frame, placement and sizes were checked, "
               "and gid %s is a fingerprint of the grade_id (comparable only with other fingerprints)"
               % (desc.grade_id, rec.gid), tensor=rec.name,
               fix="have the writer record the canonical grade string, or scan with a build that knows it",
               data=dict(data, grade_id="0x%016x" % desc.grade_id, gid=rec.gid))
    _note(report, rec, desc)
    return expected


def _note(report, rec, desc):
    if desc.note & 0x1:
        report.add("assumed", rec.path,
                   "NOTE_ASSUMED is set (producer tag %d): a placement was asserted, never verified"
                   % ((desc.note >> 8) & 0xFF), tensor=rec.name,
                   data={"producer_tag": (desc.note >> 8) & 0xFF, "note": desc.note})


_PARSED = {}


def _parse_cached(text):
    g = _PARSED.get(text) if isinstance(text, str) else None
    if g is None:
        g = Grade.parse(text)
        if len(_PARSED) < 4096:
            _PARSED[text] = g
    return g


def judge_planes(report, rec, raw, grade_text, plane_entries):
    """A declared descriptor whose planes are separate entries (torch_grit.save's form:
    ``W.grit.data`` ... ``W.grit.aux``, grade and logical shape in ``__metadata__["torch_grit"]``).

    Returns True when the level-1 check passed.
    """
    grade = None
    if grade_text is not None:
        try:
            grade = _parse_cached(grade_text)
        except (GradeError, TypeError) as exc:
            report.add("check", rec.path, "the recorded grade %r does not parse: %s" % (grade_text, exc),
                       tensor=rec.name, data={"grade": grade_text})
            return False
    desc = Descriptor.from_bytes(raw, rec.shape, grade=grade)
    if desc.grade is None and known_grade(desc.grade_id) is not None:
        desc = Descriptor.from_bytes(raw, rec.shape, grade=known_grade(desc.grade_id))
    rec.desc, rec.source, rec.family, rec.quantised = desc, "declared", "safetensors __grit__ (planes)", True
    lengths = [e.nbytes if e is not None else 0 for e in plane_entries]
    data = {"desc_hex": raw.hex(), "shape": list(rec.shape), "planes": lengths}
    try:
        check(desc, lengths, tensor=rec.name)
    except GritCheckError as exc:
        if exc.status == "GradeUnknown" and exc.field == "grade_id" and desc.grade is None:
            return _unknown_grade(report, rec, desc, lengths, data) is not None
        report.add("size" if exc.status == "SizeMismatch" else "check", rec.path, str(exc), tensor=rec.name,
                   data=dict(data, status=exc.status, field=exc.field, expected=exc.expected,
                             found=exc.found, plane=exc.plane))
        return False
    rec.grade = rec.label = desc.grade.canonical
    rec.expressible = True
    rec.gid, rec.gid_basis = desc.gid, "declared descriptor"
    _note(report, rec, desc)
    return True
