"""Quantization families recognised in safetensors files that carry no descriptor.

Each module exposes ``infer(ctx)`` and returns True when it claimed modules.
``ctx`` (``FamilyContext``) holds the header, the quantization config beside
the file, the records by name, the report and the --deep plan.
"""

from ...contract.descriptor import Descriptor
from ...contract.errors import GradeError, GritCheckError
from ...contract.grade import Grade
from ..records import leaf_split

SCALE_FORMATS = {"F16": "binary16", "F32": "binary32"}


class FamilyContext:
    def __init__(self, path, header, config, records, report, deep_plan, claimed):
        self.path, self.header, self.config = path, header, config
        self.entries = header.by_name()
        self.records, self.report, self.deep_plan = records, report, deep_plan
        self.claimed = claimed   # names already explained (declared or by a family)

    def plan(self, kind, rec, entry, extra):
        """Ask --deep to stream ``entry``'s bytes for a content check of ``kind``."""
        if self.deep_plan is not None and entry.end <= self.header.data_span:
            self.deep_plan.append((kind, rec, [(self.header.data_start + entry.begin, entry.nbytes)], extra))

    def modules(self):
        """``{prefix: {leaf: StEntry}}`` over the entries no one has claimed yet."""
        out = {}
        for e in self.header.entries:
            if e.name in self.claimed:
                continue
            prefix, leaf = leaf_split(e.name)
            out.setdefault(prefix, {})[leaf] = e
        return out


def grade_or_reason(text):
    """``(Grade, None)`` or ``(None, reason)``: the core decides what v1 can spell."""
    try:
        return Grade.parse(text), None
    except GradeError as exc:
        return None, "%s (%s)" % (exc, exc.code)


def mark(ctx, entry, family, grade=None, label=None, expressible=None, reason=None, logical_shape=None,
         placement=None):
    """Label one record as inferred, with a descriptor over the logical shape when a grade names it."""
    rec = ctx.records[entry.name]
    rec.source, rec.family, rec.quantised = "inferred", family, True
    rec.label = label or (grade.canonical if grade is not None else family)
    rec.expressible, rec.reason = expressible, reason
    prefix = leaf_split(entry.name)[0]
    rec.logical_name = (prefix + ".weight") if prefix else "weight"
    if grade is not None:
        rec.grade = grade.canonical
    if logical_shape is not None:
        rec.logical_shape = tuple(logical_shape)
    if grade is not None and logical_shape is not None:
        try:
            desc = Descriptor(grade, logical_shape, placement=placement)
            rec.desc, rec.gid, rec.gid_basis = desc, desc.gid, "inferred descriptor over the logical shape"
        except (GritCheckError, ValueError):
            pass
    return rec


def claim(ctx, leaves):
    for e in leaves.values():
        ctx.claimed.add(e.name)
        rec = ctx.records[e.name]
        if rec.family is None:
            rec.family = "inferred"
