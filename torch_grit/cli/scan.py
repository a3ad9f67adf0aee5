"""``torch-grit scan`` and the file-aware ``torch-grit explain``."""

import os
import sys

from ..util import strict_json

EXIT_HELP = """\
exit codes (--exit-policy graded, the default)
  0  clean: no finding
  1  structural violation: descriptor vs bytes, truncation, a family's layout,
     or one of several inputs unparseable
  2  disagreement: file_type_mismatch, undeclared zp convention, gid_mismatch,
     role-scope grade_drift
  3  warnings only: inferred contracts, inexpressible formats, unknown grades ...
  4  unparseable: no input could be read (the reason is printed)
(--exit-policy simple: 0 clean, 1 any finding, 2 nothing parseable.)
--json prints the stable document (schema torch_grit.scan/1): files, tensors,
findings (class, severity, path, tensor, message, data, fix), counts, and
exit_code / exit_code_graded / exit_code_simple.
"""


def cmd_scan(args):
    from ..scan import render, scan_paths, to_json

    report = scan_paths(args.paths, deep=args.deep)
    if args.json:
        print(strict_json.dumps(to_json(report, args.exit_policy), indent=2, sort_keys=True))
    else:
        print(render(report, args.exit_policy))
    return report.exit_code(args.exit_policy)


def _descriptors_of(spec):
    """``{name: Descriptor}`` for a file (optionally FILE::TENSOR), or ``{None: Descriptor}`` for hex/64 bytes."""
    from ..contract.descriptor import Descriptor
    from ..scan import scan_paths

    path, _, tensor = spec.partition("::")
    if os.path.isfile(path) and os.path.getsize(path) != 64:
        report = scan_paths([path])
        if report.unparseable:
            raise SystemExit("torch-grit explain: %s" % report.unparseable[0]["reason"])
        out = {r.name: r.desc for r in report.records if r.desc is not None and (not tensor or r.name == tensor)}
        if not out:
            raise SystemExit("torch-grit explain: %s has no descriptor (declared or inferred)%s"
                             % (path, " for %r" % tensor if tensor else ""))
        return out
    text = spec.strip()
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        try:
            with open(text, "rb") as f:
                raw = f.read(65)
        except OSError as exc:
            raise SystemExit("torch-grit explain: %r is neither hex nor a readable file (%s)" % (text, exc))
    if len(raw) != 64:
        raise SystemExit("torch-grit explain: %r is not a 64-byte descriptor (found %d bytes)" % (text, len(raw)))
    return {None: Descriptor.from_bytes(raw)}


def cmd_explain(args):
    a, b = _descriptors_of(args.a), _descriptors_of(args.b)
    if None in a or None in b or (len(a) == 1 and len(b) == 1):
        (na, da), (nb, db) = next(iter(a.items())), next(iter(b.items()))
        sys.stdout.write(da.explain(db))
        return 0 if (da.to_bytes() == db.to_bytes() and da.shape == db.shape) else 2
    common = sorted(set(a) & set(b))
    if not common:
        raise SystemExit("torch-grit explain: the two files share no tensor name with a descriptor")
    differ = 0
    for name in common:
        da, db = a[name], b[name]
        if da.to_bytes() == db.to_bytes() and da.shape == db.shape:
            continue
        differ += 1
        sys.stdout.write("%s\n%s" % (name, "".join("  " + ln + "\n" for ln in da.explain(db).splitlines())))
    print("%d of %d shared tensor(s) differ" % (differ, len(common)))
    return 2 if differ else 0


def register(sub):
    """Add ``scan`` and ``explain`` to the CLI."""
    import argparse

    p = sub.add_parser("scan", help="audit safetensors / GGUF files and folders (declared and inferred contracts)",
                       formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXIT_HELP)
    p.add_argument("paths", nargs="+", metavar="PATH", help="safetensors or GGUF files, or folders (recursive)")
    p.add_argument("--deep", action="store_true", help="also stream the bytes: level-2 checks, g_idx, zero points")
    p.add_argument("--json", action="store_true", help="print the stable JSON document (schema torch_grit.scan/1)")
    p.add_argument("--exit-policy", choices=("graded", "simple"), default="graded")
    p.set_defaults(fn=cmd_scan)
    p = sub.add_parser("explain", help="field-by-field diff of two descriptors (hex, 64-byte files or checkpoint "
                       "tensors)", description="field-by-field diff of two descriptors: hex, 64-byte files, or "
                       "checkpoint files (safetensors / GGUF, optionally FILE::TENSOR), declared or inferred")
    p.add_argument("a")
    p.add_argument("b")
    p.set_defaults(fn=cmd_explain)
