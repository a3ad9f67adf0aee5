"""``torch-grit inspect``: what a GRIT checkpoint holds, read from its headers alone.

It opens the checkpoint as ``torch_grit.load`` does (``torch_grit.checkpoint.read.open_layout``:
the container, the index against the shards, every descriptor against its planes'
byte lengths at level 1) and reads no tensor data, so it takes milliseconds on any
size. A checkpoint that fails those checks is reported as load would refuse it
(exit 1). ``torch-grit scan --deep`` streams the bytes (level 2) instead.
"""

import json
import os
import sys

from ..util import strict_json

SCHEMA = "torch_grit.inspect/1"

EXIT_HELP = """\
exit codes
  0  the checkpoint passed the header checks; its contents are listed
  1  it did not (container, index or a descriptor against its planes): the
     first disagreement is printed, as torch_grit.load would raise it
  2  usage: no such --tensor, or bad arguments
--json prints one document (schema torch_grit.inspect/1): files, index,
grade_policy, activations (module name -> "s8" for the layers recorded to
pack their input rows), tensors (name, kind, grade, grade_name, shape, dtype, bytes,
bits_per_weight, gid, descriptor, digest, planes, file) and totals.
"""


def _policy(headers):
    from ..checkpoint.format import META_GRADE_POLICY, META_TORCH_GRIT

    for h in headers:
        ours = h.metadata.get(META_TORCH_GRIT)
        if ours is not None:
            policy = json.loads(ours).get(META_GRADE_POLICY)
            if policy is not None:
                return policy
    return None


def inspect_checkpoint(path):
    """The document ``--json`` prints for the checkpoint at ``path`` (checked as load checks it)."""
    from ..checkpoint.format import PLANE_NAMES
    from ..checkpoint.read import activation_modes, open_layout
    from ..checkpoint.safetensors_io import DTYPES, entry_nbytes

    layout = open_layout(path)
    tensors = []
    for name, (h, p) in layout.packed.items():
        rows, cols = p.shape
        planes = [{"plane": PLANE_NAMES[i], "entry": e.name, "bytes": e.nbytes}
                  for i, e in enumerate(p.plane_entries) if e is not None]
        nbytes = sum(q["bytes"] for q in planes)
        tensors.append({
            "name": name, "kind": "packed", "grade": p.grade.canonical, "grade_name": p.grade.name,
            "shape": [rows, cols], "dtype": p.dtype, "bytes": nbytes,
            "bits_per_weight": 8.0 * nbytes / (rows * cols) if rows * cols else None,
            "gid": p.descriptor.gid, "descriptor": p.descriptor.to_bytes().hex(), "digest": p.digest,
            "planes": planes, "file": os.path.basename(h.path)})
    for name, (h, e) in layout.plain.items():
        dtype = DTYPES.get(e.dtype, (None, None))[1]
        tensors.append({"name": name, "kind": "plain", "dtype": str(dtype).replace("torch.", "") if dtype else e.dtype,
                        "shape": list(e.shape),
                        "bytes": entry_nbytes(e.dtype, e.shape), "file": os.path.basename(h.path)})
    tensors.sort(key=lambda t: t["name"])
    packed = [t for t in tensors if t["kind"] == "packed"]
    grades = {}
    for t in packed:
        key = t["grade_name"] or t["grade"]
        grades[key] = grades.get(key, 0) + 1
    return {
        "schema": SCHEMA,
        "path": os.path.abspath(str(path)),
        "files": [h.path for h in layout.headers],
        "index": layout.index_path,
        "grade_policy": _policy(layout.headers),
        "activations": activation_modes(layout),
        "tensors": tensors,
        "totals": {"packed": len(packed), "plain": len(tensors) - len(packed), "grades": grades,
                   "packed_bytes": sum(t["bytes"] for t in packed),
                   "plain_bytes": sum(t["bytes"] for t in tensors if t["kind"] == "plain"),
                   "file_bytes": sum(h.file_size for h in layout.headers)},
    }


def _mb(n):
    return "%.2f MB" % (n / 1e6)


def render(doc, detail=False):
    """The text report: one line per tensor; ``detail`` adds each packed tensor's descriptor and planes."""
    tot = doc["totals"]
    lines = ["%s: %d file(s)%s, %s" % (doc["path"], len(doc["files"]),
                                       " (index %s)" % os.path.basename(doc["index"]) if doc["index"] else "",
                                       _mb(tot["file_bytes"])),
             "%d packed tensor(s) (%s), %s; %d plain tensor(s), %s" % (
                 tot["packed"], ", ".join("%s x%d" % kv for kv in sorted(tot["grades"].items())) or "none",
                 _mb(tot["packed_bytes"]), tot["plain"], _mb(tot["plain_bytes"]))]
    if doc["grade_policy"] is not None:
        lines.append("grade policy: %s" % json.dumps(doc["grade_policy"], sort_keys=True))
    if doc.get("activations"):
        modes = sorted(doc["activations"].items())
        lines.append("activations: %s for %d layer(s): %s" % (
            "/".join(sorted({m for _, m in modes})), len(modes), ", ".join(n for n, _ in modes)))
    width = max([len(t["name"]) for t in doc["tensors"]] + [6])
    lines.append("%-*s  %-14s %-13s %-9s %12s %6s  %s" % (width, "tensor", "grade", "shape", "dtype", "bytes",
                                                          "bits/w", "gid"))
    for t in doc["tensors"]:
        shape = "x".join(str(s) for s in t["shape"]) or "scalar"
        if t["kind"] == "plain":
            lines.append("%-*s  %-14s %-13s %-9s %12d" % (width, t["name"], "(plain)", shape, t["dtype"], t["bytes"]))
            continue
        name = (t["grade_name"] or "custom").replace("GRADE_", "")
        bits = "%.3f" % t["bits_per_weight"] if t["bits_per_weight"] is not None else "-"
        lines.append("%-*s  %-14s %-13s %-9s %12d %6s  %s" % (width, t["name"], name, shape, t["dtype"], t["bytes"],
                                                              bits, t["gid"]))
        if detail:
            lines.append("    grade      %s" % t["grade"])
            lines.append("    descriptor %s" % t["descriptor"])
            lines.append("    digest     %s (fnv1a-128 of the planes; checked by load(verify='digest') and "
                         "scan --deep)" % t["digest"])
            for q in t["planes"]:
                lines.append("    plane %-6s %-40s %d bytes" % (q["plane"], q["entry"], q["bytes"]))
    return "\n".join(lines)


def cmd_inspect(args):
    from ..contract.errors import GritCheckError
    from ..checkpoint.safetensors_io import CheckpointError

    try:
        doc = inspect_checkpoint(args.path)
    except (CheckpointError, GritCheckError) as e:
        print("torch-grit inspect: %s" % e, file=sys.stderr)
        return 1
    if args.tensor:
        names = {t["name"] for t in doc["tensors"]}
        missing = [n for n in args.tensor if n not in names]
        if missing:
            print("torch-grit inspect: no tensor %s in %s" % (", ".join(repr(n) for n in missing), args.path),
                  file=sys.stderr)
            return 2
        doc["tensors"] = [t for t in doc["tensors"] if t["name"] in args.tensor]
    if args.json:
        print(strict_json.dumps(doc, indent=2, sort_keys=True))
    else:
        print(render(doc, detail=bool(args.tensor)))
    return 0


def add_parser(sub):
    import argparse

    p = sub.add_parser("inspect", help="list what a GRIT checkpoint holds (headers only, checked as load checks them)",
                       description=__doc__.split("\n\n")[1].replace("\n", " "),
                       formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXIT_HELP)
    p.add_argument("path", metavar="PATH", help="a .safetensors file, an *.index.json, or a checkpoint folder")
    p.add_argument("--tensor", action="append", metavar="NAME",
                   help="only this tensor, with its descriptor, digest and planes (repeatable)")
    p.add_argument("--json", action="store_true", help="print the JSON document (schema torch_grit.inspect/1)")
    p.set_defaults(fn=cmd_inspect)
