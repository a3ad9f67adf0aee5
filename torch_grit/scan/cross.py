"""Findings that need more than one tensor: gid disagreement across files,
grade drift inside one checkpoint, NOTE_ASSUMED exposure by producer."""

import os


def explain_pair(a, b):
    """The field-by-field diff ``torch-grit explain`` prints (the core's explain, plus shape)."""
    return a.explain(b)


def cross_checks(report):
    _gid_mismatch(report)
    _grade_drift(report)
    _escape_hatch(report)


def _gid_mismatch(report):
    by_name = {}
    for rec in report.records:
        if rec.gid is not None:
            by_name.setdefault(rec.name, []).append(rec)
    for name, recs in sorted(by_name.items()):
        gids = sorted({r.gid for r in recs})
        if len(gids) < 2:
            continue
        a = recs[0]
        b = next(r for r in recs if r.gid != a.gid)
        diff = explain_pair(a.desc, b.desc)
        report.add("gid_mismatch", a.path,
                   "%s carries %d different gids across files (%s: %s, %s: %s):\n%s"
                   % (name, len(gids), a.path, a.gid, b.path, b.gid, diff.rstrip("\n")),
                   tensor=name, fix="the differing fields above are the incident: `torch-grit explain %s %s`"
                   % (a.path, b.path),
                   data={"gids": gids, "paths": sorted({r.path for r in recs}), "explain": diff,
                         "sources": sorted({r.source or "" for r in recs})})


def _group_key(path):
    """One checkpoint: a file, or the shards of one folder (model-00001-of-00004...)."""
    base = os.path.basename(path)
    return os.path.dirname(path) if "-of-" in base else path


def _declared_mixture(report, recs):
    """The checkpoint says its grades were chosen per tensor (torch_grit's "grade_policy",
    written by ``torch-grit quantize --grade auto``) and every tensor in question carries its
    own declared descriptor: the mixture is described, not drift."""
    return all(r.source == "declared" and r.path in report.grade_policies for r in recs)


def _grade_drift(report):
    roles, artifacts, members = {}, {}, {}
    for rec in report.records:
        if not rec.quantised or rec.label is None:
            continue
        key = _group_key(rec.path)
        roles.setdefault((key, rec.role), {}).setdefault(rec.label, []).append(rec.name)
        artifacts.setdefault(key, set()).add(rec.label)
        members.setdefault(key, []).append(rec)
    described = {key for key, recs in members.items() if _declared_mixture(report, recs)}
    for (key, role), labels in sorted(roles.items()):
        if len(labels) > 1 and key not in described:
            report.add("grade_drift", key,
                       "role %s carries %d grades in one checkpoint: %s" % (
                           role, len(labels), "; ".join("%s (%d tensors, e.g. %s)" % (g, len(n), sorted(n)[0])
                                                        for g, n in sorted(labels.items()))),
                       tensor=role, data={"scope": "role", "role": role,
                                          "grades": {g: sorted(n)[:8] for g, n in sorted(labels.items())}})
    for key, labels in sorted(artifacts.items()):
        if len(labels) > 1 and key not in described:
            report.add("grade_drift", key, "the checkpoint mixes %d grades (%s); no single type declaration "
                       "or file name says so" % (len(labels), ", ".join(sorted(labels))), severity="warning",
                       data={"scope": "artifact", "grades": sorted(labels)})


def _escape_hatch(report):
    tags = {}
    for rec in report.records:
        if rec.source == "declared" and rec.desc is not None and rec.desc.note & 0x1:
            tags.setdefault((rec.desc.note >> 8) & 0xFF, []).append(rec.name)
    for tag, names in sorted(tags.items()):
        report.add("escape_hatch_exposure", "(all files)", "producer tag %d: %d descriptor(s) carry NOTE_ASSUMED: %s"
                   % (tag, len(names), ", ".join(sorted(names)[:8])),
                   data={"producer_tag": tag, "count": len(names), "tensors": sorted(names)[:16]})
