"""Walk the inputs, scan each file, then the cross-file checks."""

import os

from . import deep as deep_mod
from .cross import cross_checks
from .errors import Unparseable
from .findings import Report
from .gguf_scan import scan_gguf
from .st_scan import scan_safetensors

SUFFIXES = (".safetensors", ".gguf")


def expand(paths):
    """Files as given; folders walked recursively for *.safetensors and *.gguf, in sorted order."""
    out = []
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs.sort()
                out.extend(os.path.join(root, f) for f in sorted(files) if f.endswith(SUFFIXES))
        else:
            out.append(p)
    return out


def _sniff(path):
    """The suffix decides (so a .gguf with a bad magic says bad_magic); otherwise the magic."""
    if path.endswith(".gguf"):
        return "gguf"
    if path.endswith(".safetensors"):
        return "safetensors"
    with open(path, "rb") as fh:
        return "gguf" if fh.read(4) == b"GGUF" else "safetensors"


def scan_file(path, report, deep=False):
    """Scan one file into ``report``; True if it parsed."""
    entry = {"path": path, "container": None, "parsed": False, "tensors": 0, "reason": None}
    report.files.append(entry)
    before_records, before_findings = len(report.records), len(report.findings)
    plan = [] if deep else None
    try:
        container = _sniff(path)
        entry["container"] = container
        (scan_gguf if container == "gguf" else scan_safetensors)(path, report, plan)
        if plan:
            entry["deep_bytes"] = deep_mod.run(report, path, plan)
    except Exception as exc:  # noqa: BLE001  a malformed file never ends the scan with a traceback
        del report.records[before_records:]
        del report.findings[before_findings:]
        if isinstance(exc, Unparseable):
            reason, detail = exc.reason, exc.detail
        elif isinstance(exc, (OSError, MemoryError)):
            reason, detail = type(exc).__name__, str(exc)
        else:
            # A reader bug, not a property of the file: named as such so tests can catch it.
            reason, detail = "internal_error", "%s: %s" % (type(exc).__name__, exc)
        entry["reason"] = "%s: %s" % (reason, detail)
        report.add("unparseable", path, "cannot be parsed: %s: %s" % (reason, detail),
                   data={"reason": reason, "detail": detail})
        return False
    entry["parsed"] = True
    entry["tensors"] = len(report.records) - before_records
    return True


def scan_paths(paths, deep=False):
    """Scan files and folders; returns a ``Report``."""
    report = Report()
    for path in expand(paths):
        scan_file(path, report, deep=deep)
    cross_checks(report)
    return report
