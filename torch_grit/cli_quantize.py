"""``torch-grit quantize SRC DST --grade G``: convert a float checkpoint, streaming."""

import argparse
import json
import re
import sys

EXIT_OK = 0
EXIT_USAGE = 2        # bad arguments, unknown grade, bad --filter, DST would overwrite SRC
EXIT_SOURCE = 3       # SRC missing, not safetensors, truncated, lying header, already packed
EXIT_UNPACKABLE = 4   # a tensor --filter selected does not fit the grade
EXIT_WRITE = 5        # DST could not be written (I/O error, disk full); nothing was replaced

EPILOG = """\
SRC is a .safetensors file, a folder of shards (with or without an index JSON)
or a Hugging Face model folder. DST ending in .safetensors is the output file;
any other DST is a folder that receives model.safetensors (or, past
--max-shard-size, model-0000i-of-0000N.safetensors and model.safetensors.index.json).
Tensors are read, packed and written one at a time: peak memory stays near one
source tensor plus its packed planes, whatever the model size. The output is
written to a temporary file and renamed into place; SRC is never modified.

Without --filter, every 2-D float *.weight tensor whose in_features fits the
grade's group size is packed, except embeddings; the rest is copied unchanged.

exit codes
  0  converted; DST written and its headers and descriptors checked
  2  usage: bad arguments, unknown grade, bad --filter regex, DST would overwrite SRC
  3  SRC is missing, not safetensors, truncated, its header lies, or it is already packed
  4  a tensor selected by --filter cannot be packed to the grade (nothing written)
  5  DST could not be written (nothing replaced)
"""


def add_parser(sub):
    p = sub.add_parser("quantize", help="convert a float safetensors checkpoint to a GRIT grade",
                       description="Convert a float safetensors checkpoint to GRIT packed weights.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("src", metavar="SRC")
    p.add_argument("dst", metavar="DST")
    p.add_argument("--grade", required=True,
                   help="a reference grade name (MXFP4, NVF4, Q4KS, I8S24 ...) or a canonical string")
    p.add_argument("--filter", metavar="REGEX",
                   help="pack the tensors whose name matches (re.search); a matching 2-D float "
                        "tensor that does not fit the grade is an error")
    p.add_argument("--max-shard-size", metavar="SIZE",
                   help="write HF-style shards of at most SIZE (bytes, or 500MB, 2GB ...)")
    p.add_argument("--report", metavar="OUT.json", help="write a per-tensor JSON report")
    p.add_argument("--json", action="store_true",
                   help="one JSON line per tensor on stdout, then a summary line; no progress bar")
    p.set_defaults(fn=run)
    return p


def _fail(args, code, message):
    if args.json:
        try:
            print(json.dumps({"event": "error", "exit_code": code, "message": message}), flush=True)
        except BrokenPipeError:
            pass
    print("torch-grit quantize: %s" % message, file=sys.stderr)
    return code


def run(args):
    from .checkpoint_format import parse_size
    from .checkpoint_read import open_layout
    from .convert import ConvertError, convert, source_bytes
    from .errors import GradeError, GritCheckError
    from .grade import Grade
    from .safetensors_io import AtomicFiles, CheckpointError

    try:
        grade = Grade.parse(args.grade)
    except GradeError as e:
        return _fail(args, EXIT_USAGE, "unknown grade: %s" % e)
    if args.filter is not None:
        try:
            re.compile(args.filter)
        except re.error as e:
            return _fail(args, EXIT_USAGE, "--filter %r is not a regular expression: %s"
                         % (args.filter, e))
    try:
        max_shard = parse_size(args.max_shard_size)
    except ValueError as e:
        return _fail(args, EXIT_USAGE, str(e))

    bar = tqdm = None
    if not args.json and sys.stderr.isatty():
        try:
            from tqdm import tqdm
        except ImportError:  # the bar is a courtesy; tqdm is a dev dependency only
            tqdm = None

    def on_tensor(r):
        if bar is not None:
            bar.update(r.bytes_before)
            bar.set_postfix_str(r.name[-40:], refresh=False)
        if args.json:
            print(json.dumps(dict(event="tensor", **r.to_json())), flush=True)

    try:
        if tqdm is not None:
            bar = tqdm(total=source_bytes(args.src), unit="B", unit_scale=True,
                       unit_divisor=1024, desc="quantize", file=sys.stderr)
        files, reports = convert(args.src, args.dst, grade, filter=args.filter,
                                 max_shard_size=max_shard, on_tensor=on_tensor)
        open_layout(files[-1])  # the result (its index when sharded) passes load's checks
    except ConvertError as e:
        code = {"unpackable": EXIT_UNPACKABLE, "already_packed": EXIT_SOURCE,
                "target": EXIT_USAGE}[e.reason]
        return _fail(args, code, str(e))
    except (CheckpointError, GritCheckError) as e:
        return _fail(args, EXIT_SOURCE, "SRC %s" % e)
    except OSError as e:
        return _fail(args, EXIT_WRITE, "cannot write %s: %s" % (args.dst, e))
    finally:
        if bar is not None:
            bar.close()

    quantized = [r for r in reports if r.action == "quantized"]
    totals = {"tensors": len(reports), "quantized": len(quantized),
              "kept": len(reports) - len(quantized),
              "bytes_before": sum(r.bytes_before for r in reports),
              "bytes_after": sum(r.bytes_after for r in reports)}
    summary = {"src": args.src, "files": files, "grade": grade.canonical, "totals": totals}
    if args.report:
        try:
            with AtomicFiles() as out:
                doc = dict(summary, tensors=[r.to_json() for r in reports])
                out.open(args.report).write((json.dumps(doc, indent=2) + "\n").encode("utf-8"))
                out.commit()
        except OSError as e:
            return _fail(args, EXIT_WRITE, "cannot write the report %s: %s" % (args.report, e))
    if args.json:
        print(json.dumps(dict(event="done", **summary)), flush=True)
    else:
        print("wrote %s: %d tensors, %d packed to %s, %d kept; %.1f MB -> %.1f MB" % (
            files[-1] if len(files) > 1 else files[0], totals["tensors"], totals["quantized"],
            grade.name or grade.canonical, totals["kept"], totals["bytes_before"] / 1e6,
            totals["bytes_after"] / 1e6))
    return EXIT_OK
