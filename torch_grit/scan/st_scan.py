"""Scan one safetensors file.

Declared descriptors live in ``__metadata__["__grit__"]``, a JSON string
mapping names to 64-byte descriptors in hex. Two layouts are read:

- torch_grit.save's: the key is the logical tensor name ``W``; its planes are
  the U8 entries ``W.grit.data|scale0|scale1|aux`` (zero-length planes are
  omitted); the canonical grade, logical shape and plane digest are in
  ``__metadata__["torch_grit"]``.
- grit-datatype's: the key is an entry holding all planes concatenated in
  plane order, and that entry's shape is the logical shape.

Then every other entry's byte range against dtype x shape, and the
quantization families for what nobody declared.
"""

import json
import re

from .config import load_config
from .declared import judge, judge_planes, parse_hex
from .families import FamilyContext, bitsandbytes, compressed_tensors, gptq_awq
from .records import TensorRecord
from .safetensors_header import read_header

GRIT_KEY = "__grit__"
TORCH_GRIT_KEY = "torch_grit"
GRADE_POLICY_KEY = "grade_policy"  # torch_grit.checkpoint.format.META_GRADE_POLICY
PLANES = ("data", "scale0", "scale1", "aux")
_DIGEST_PLACEHOLDER = "0" * 32
FAMILIES = (bitsandbytes, compressed_tensors, gptq_awq)


def _json_map(report, path, metadata, key):
    raw = metadata.get(key)
    if raw is None:
        return {}
    try:
        doc = json.loads(raw)
        if not isinstance(doc, dict):
            raise ValueError("a JSON object is expected")
        return doc
    except (ValueError, RecursionError) as exc:
        report.add("bad_descriptor", path, "__metadata__[%r] is not a JSON object: %s" % (key, str(exc)[:200]))
        return {}


def scan_safetensors(path, report, deep_plan):
    h = read_header(path)
    grit_map = _json_map(report, path, h.metadata, GRIT_KEY)
    doc = _json_map(report, path, h.metadata, TORCH_GRIT_KEY)
    ours = doc.get("tensors")
    ours = ours if isinstance(ours, dict) else {}
    if isinstance(doc.get(GRADE_POLICY_KEY), dict):  # grades chosen per tensor, on purpose
        report.grade_policies[path] = doc[GRADE_POLICY_KEY]
    entries = h.by_name()
    records, claimed = {}, set()
    span = h.data_span
    last_end = 0
    for e in h.entries:
        rec = TensorRecord(path, e.name, "safetensors", e.shape, e.dtype, e.nbytes)
        records[e.name] = rec
        report.records.append(rec)
        last_end = max(last_end, e.end)
        if e.end > span:
            report.add("truncated", path, "bytes [%d, %d) run past the %d-byte data section: the file ends early"
                       % (e.begin, e.end, span), tensor=e.name, data={"begin": e.begin, "end": e.end, "data_span": span})
        if e.name in grit_map:
            continue
        want = e.dtype_bytes()
        if want != e.nbytes:
            report.add("size", path, "dtype %s x shape %s needs %d bytes; data_offsets give %d"
                       % (e.dtype, list(e.shape), want, e.nbytes), tensor=e.name,
                       data={"expected": want, "found": e.nbytes, "dtype": e.dtype, "shape": list(e.shape)})
    if last_end < span:
        report.add("trailing_bytes", path, "%d bytes after the last tensor belong to no entry"
                   % (span - last_end), data={"data_span": span, "last_end": last_end})

    for name, text in sorted(grit_map.items()):
        try:
            raw = parse_hex(text)
        except ValueError as exc:
            report.add("bad_descriptor", path, "__grit__[%r] is unusable: %s" % (name, exc), tensor=name)
            continue
        if name in entries:                          # grit-datatype's single-entry form
            e = entries[name]
            claimed.add(name)
            record = ours.get(name) if isinstance(ours.get(name), dict) else {}
            expected = judge(report, records[name], raw, e.nbytes, "safetensors __grit__",
                             grade_text=record.get("grade"))
            if deep_plan is not None and expected is not None and e.end <= span:
                deep_plan.append(("declared", records[name], [(h.data_start + e.begin, e.nbytes)], (expected, None)))
            continue
        planes = [entries.get("%s.grit.%s" % (name, p)) for p in PLANES]
        if not any(planes):
            report.add("bad_descriptor", path, "__grit__ names %r, but neither that entry nor its planes "
                       "(%s.grit.data ...) are in this file" % (name, name), tensor=name)
            continue
        claimed.update(p.name for p in planes if p is not None)
        for p in planes:
            if p is not None:
                records[p.name].family = "torch_grit planes of " + name
        record = ours.get(name) if isinstance(ours.get(name), dict) else {}
        shape = record.get("shape")
        if not (isinstance(shape, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                for d in shape)):
            report.add("bad_descriptor", path, "%s: the descriptor has planes but no logical shape is recorded "
                       "(__metadata__[%r].tensors[%r].shape)" % (name, TORCH_GRIT_KEY, name), tensor=name)
            continue
        bad = [p.name for p in planes if p is not None and (p.dtype != "U8" or len(p.shape) != 1)]
        if bad:
            report.add("size", path, "%s: plane entries %s are not 1-D U8" % (name, bad), tensor=name)
            continue
        rec = TensorRecord(path, name, "safetensors", shape, "grit", sum(p.nbytes for p in planes if p))
        report.records.append(rec)
        ok = judge_planes(report, rec, raw, record.get("grade"), planes)
        digest = record.get("digest")
        digest = digest if isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{32}", digest) \
            and digest != _DIGEST_PLACEHOLDER else None
        if deep_plan is not None and ok and all(p is None or p.end <= span for p in planes):
            deep_plan.append(("declared", rec, [(h.data_start + p.begin, p.nbytes) if p else None for p in planes],
                              (None, digest)))

    ctx = FamilyContext(path, h, load_config(path), records, report, deep_plan, claimed)
    for family in FAMILIES:
        family.infer(ctx)
    return h
