"""``torch-grit quantize SRC DST --grade G``: convert a float checkpoint, streaming."""

import argparse
import io
import json
import os
import re
import sys

from ..util import strict_json
from .common import fail as _fail
from ..quantization.profile import CANDIDATES, DEFAULT_BUDGET_DB

EXIT_OK = 0
EXIT_USAGE = 2        # bad arguments, unknown grade, bad --filter/--budget-db/--candidates, DST would overwrite SRC
EXIT_SOURCE = 3       # SRC missing, not safetensors, truncated, lying header, already packed
EXIT_UNPACKABLE = 4   # a tensor --filter selected does not fit the grade
EXIT_WRITE = 5        # DST could not be written (I/O error, disk full); nothing was replaced

EPILOG = """\
SRC is a .safetensors file, a folder of shards (with or without an index JSON)
or a Hugging Face model folder. DST ending in .safetensors is the output file;
any other DST is a folder that receives model.safetensors (or, past
--max-shard-size, model-0000i-of-0000N.safetensors and model.safetensors.index.json).
A Hugging Face model folder (SRC holds config.json) becomes a complete GRIT
model folder: every file of SRC that is not a weight is copied, config.json
gains a quantization_config (quant_method "grit"), the model card a note on
what to install, each packed weight a load guard (so that transformers
without torch_grit refuses the folder), buffers the model class does not
persist are dropped, and the weights shard past 50GB unless
--max-shard-size says otherwise (save_pretrained's default). The folder
loads with transformers' from_pretrained once torch_grit is imported.
Tensors are read, packed and written one at a time: peak memory stays near one
source tensor plus its packed planes, whatever the model size. The output is
written to a temporary file and renamed into place; SRC is never modified.

Without --filter, every 2-D float *.weight tensor whose in_features fits the
grade's group size is packed, except embeddings; the rest is copied unchanged.

--grade auto chooses a grade per tensor by the rule quantize_(model, "auto")
uses (torch_grit.auto): of the --candidates the tensor fits, the one with the
fewest bytes whose weight SQNR, measured by running its real encoder, is at
least --budget-db; none: the tensor is kept exact. A first pass reads each
selected tensor once to choose, so the layout is fixed before writing; each
packed tensor's own descriptor carries its grade, and the file records the
budget and candidates (so torch-grit scan reads the mixture as declared, not
drift). With --filter, a selected tensor no candidate fits is kept exact too.
One line per choice and a summary are printed (--json: each tensor's "auto"
field and the "done" line's "auto" summary).

--activations s8 records that every packed linear layer packs its input rows
to int8 blocks (the s8 activation law, W4A8 / W8A8): torch_grit.load(model=...)
and from_pretrained set that mode on each layer (for a model folder,
quantization_config says "activations": "s8"). A grade without an s8 law
(one whose elements are not small integers times a power of two) is refused
with exit 4 before anything is written. --activations bf16 records the bf16
activation law instead (x and the weight rounded to bfloat16, summed in an
AMX tile multiply's order: the training mode for large batches).

--report [OUT.json] measures every packed tensor as torch_grit.report does:
weight MSE, max abs error, SQNR, the layer's output error on a fixed seeded
probe (8 rows, seed 0; with the source's <module>.bias when it has one), and
storage: code, scale, aux and descriptor bytes, safetensors header bytes and
the complete bytes of the files written against the source's. It prints a
table (--json: in the "done" line) and writes OUT.json when given;
--report-png OUT.png draws per-tensor SQNR and output error (matplotlib).

exit codes
  0  converted; DST written and its headers and descriptors checked
  2  usage: bad arguments, unknown grade or candidate, bad --budget-db, bad --filter regex,
     a report path that cannot be written, DST would overwrite SRC
  3  SRC is missing, not safetensors, truncated, its header lies, or it is already packed
  4  a tensor selected by --filter cannot be packed to the grade, the grade cannot be
     written as GRIT at all (INT4G<g>: binary64 scales, short groups), or --activations s8
     names a grade without an s8 law (nothing written)
  5  DST could not be written (nothing replaced)
"""


def add_parser(sub):
    p = sub.add_parser("quantize", help="convert a float safetensors checkpoint to a GRIT grade",
                       description="Convert a float safetensors checkpoint to GRIT packed weights.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("src", metavar="SRC")
    p.add_argument("dst", metavar="DST")
    p.add_argument("--grade", required=True,
                   help="a reference grade name (MXFP4, NVF4, Q4KS, I8S24 ...), a canonical string, "
                        "or auto (a grade per tensor, see below)")
    p.add_argument("--budget-db", metavar="DB",
                   help="--grade auto: the minimum weight SQNR in dB a chosen grade must reach "
                        "(default %g)" % DEFAULT_BUDGET_DB)
    p.add_argument("--candidates", metavar="G1,G2,...",
                   help="--grade auto: the grades to choose from, comma-separated (default %s)"
                        % ",".join(CANDIDATES))
    p.add_argument("--filter", metavar="REGEX",
                   help="pack the tensors whose name matches (re.search); a matching 2-D float "
                        "tensor that does not fit the grade is an error")
    p.add_argument("--activations", choices=("float", "s8", "bf16"), default="float",
                   help="s8: every packed linear layer packs its input rows to int8 blocks when "
                        "loaded (the s8 activation law, W4A8/W8A8); bf16: the bf16 activation law "
                        "(the training mode); recorded in the checkpoint and, for a model folder, in "
                        "quantization_config; default float")
    p.add_argument("--max-shard-size", metavar="SIZE",
                   help="write HF-style shards of at most SIZE (bytes, or 500MB, 2GB ...)")
    p.add_argument("--report", metavar="OUT.json", nargs="?", const="",
                   help="measure every packed tensor (errors, storage; see below) and print the "
                        "table; with OUT.json also write it, with the per-tensor conversion record")
    p.add_argument("--report-png", metavar="OUT.png",
                   help="draw the per-tensor error chart (needs matplotlib); implies --report")
    p.add_argument("--json", action="store_true",
                   help="one JSON line per tensor on stdout, then a summary line; no progress bar")
    p.set_defaults(fn=run)
    return p




def _check_report_paths(args):
    """Report outputs are checked before anything is written: None, or what is wrong."""
    from ..checkpoint.read import resolve_files
    from ..checkpoint.convert import output_path
    from ..checkpoint.safetensors_io import CheckpointError

    protected = {os.path.abspath(output_path(args.dst))}
    try:
        protected.update(os.path.abspath(f) for f in resolve_files(args.src)[0])
    except (CheckpointError, OSError):  # a bad SRC is reported by the conversion itself
        pass
    for flag, path in (("--report", args.report), ("--report-png", args.report_png)):
        if not path:
            continue
        full = os.path.abspath(path)
        if full in protected:
            return "%s %s would overwrite a checkpoint file; choose another path" % (flag, path)
        if not os.path.isdir(os.path.dirname(full)):
            return "%s %s: the folder %s does not exist" % (flag, path, os.path.dirname(full))
        if os.path.isdir(full):
            return "%s %s is a folder; give a file name" % (flag, path)
    if args.report_png:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            return "--report-png needs matplotlib, which is not installed (pip install matplotlib)"
    return None


def _auto_options(args):
    """(budget_db, candidate grades) for --grade auto; ValueError naming the bad option."""
    from ..quantization.auto import parse_budget, parse_candidates

    budget = parse_budget(DEFAULT_BUDGET_DB if args.budget_db is None else args.budget_db,
                          "--budget-db")
    grades = parse_candidates(CANDIDATES if args.candidates is None else args.candidates,
                              "--candidates")
    return budget, grades


def choice_line(r):
    """One printed line per tensor the auto rule decided: name, shape, grade or exact, why."""
    shape = "[%s]" % ", ".join(str(int(n)) for n in r.shape)
    if r.action == "quantized":
        from ..contract.grade import Grade
        from ..quantization.profile import short_name

        chosen = short_name(Grade.parse(r.grade))
        return "auto %s %s: %s %.2f dB (%s)" % (r.name, shape, chosen,
                                                r.auto.previews[chosen].sqnr_db, r.auto.tried())
    return "auto %s %s: exact, %s" % (r.name, shape, r.reason)


def _auto_summary(reports, budget, grades):
    from ..quantization.profile import short_name

    decided = [r for r in reports if r.auto is not None]
    counts = {}
    for r in decided:
        if r.action == "quantized":
            name = short_name(r.auto.grade)
            counts[name] = counts.get(name, 0) + 1
    return {"budget_db": budget, "candidates": [g.canonical for g in grades],
            "chosen": counts, "exact": sum(r.action != "quantized" for r in decided)}


def run(args):
    from ..quantization.auto import is_auto
    from ..checkpoint.format import parse_size
    from ..checkpoint.read import open_layout
    from ..checkpoint.convert import ConvertError, convert, source_bytes
    from ..checkpoint.convert_report import ConversionReport
    from ..contract.errors import GradeError, GritCheckError
    from ..contract.grade import Grade, parse_fixed
    from ..contract.grade_names import PerChannel
    from ..checkpoint.safetensors_io import AtomicFiles, CheckpointError

    auto = is_auto(args.grade)
    grade = budget = grades = None
    if auto:
        try:
            budget, grades = _auto_options(args)
        except ValueError as e:
            return _fail(args, EXIT_USAGE, str(e))
    else:
        try:
            grade = parse_fixed(args.grade)
        except GradeError as e:
            return _int4g_refusal(args) or _fail(args, EXIT_USAGE, "unknown grade: %s" % e)
        for flag, value in (("--budget-db", args.budget_db), ("--candidates", args.candidates)):
            if value is not None:
                return _fail(args, EXIT_USAGE, "%s applies to --grade auto only; found --grade %s"
                             % (flag, args.grade))
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
    measuring = args.report is not None or args.report_png is not None
    bad = _check_report_paths(args) if measuring else None
    if bad:
        return _fail(args, EXIT_USAGE, bad)

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
            print(strict_json.dumps(dict(event="tensor", **r.to_json())), flush=True)

    def on_entry(name, nbytes):  # the auto pass: the bar runs twice over the source
        if bar is not None:
            bar.update(nbytes)
            bar.set_postfix_str("choosing " + name[-30:], refresh=False)

    measured = ConversionReport() if measuring else None
    hf = None
    if os.path.isdir(args.src) and os.path.isfile(os.path.join(args.src, "config.json")) \
            and not args.dst.endswith(".safetensors"):
        try:  # a Hugging Face model folder becomes a complete GRIT model folder
            from ..integrations.hf import folder as hf
            exclude = hf.skipped_buffers(args.src)
            if max_shard is None:  # save_pretrained's default, so both write the same files
                max_shard = parse_size(hf.DEFAULT_MAX_SHARD_SIZE)
        except ImportError as e:
            return _fail(args, EXIT_USAGE, "SRC is a Hugging Face model folder; writing a model "
                         "folder needs transformers (%s)" % e)
        except (OSError, ValueError, KeyError) as e:
            return _fail(args, EXIT_SOURCE, "SRC %s: config.json: %s" % (args.src, e))
    try:
        if tqdm is not None:
            bar = tqdm(total=source_bytes(args.src) * (2 if auto else 1), unit="B",
                       unit_scale=True, unit_divisor=1024, desc="quantize", file=sys.stderr)
        files, reports = convert(args.src, args.dst, "auto" if auto else grade, filter=args.filter,
                                 max_shard_size=max_shard, on_tensor=on_tensor,
                                 budget_db=budget if auto else DEFAULT_BUDGET_DB,
                                 candidates=grades if auto else CANDIDATES,
                                 on_entry=on_entry if auto else None,
                                 on_packed=measured.on_packed if measured else None,
                                 exclude=exclude if hf else frozenset(), load_guard=hf is not None,
                                 activations=args.activations)
        open_layout(files[-1])  # the result (its index when sharded) passes load's checks
        if hf is not None:
            hf.complete_folder(args.src, args.dst, hf.folder_config(
                "auto" if auto else grade, reports, budget, grades,
                activations=None if args.activations == "float" else args.activations))
        source = open_layout(args.src) if measuring else None  # the files to count
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
    dropped = [r for r in reports if r.action == "dropped"]
    reports = [r for r in reports if r.action != "dropped"]
    totals = {"tensors": len(reports), "quantized": len(quantized),
              "kept": len(reports) - len(quantized), "dropped": [r.name for r in dropped],
              "bytes_before": sum(r.bytes_before for r in reports),
              "bytes_after": sum(r.bytes_after for r in reports)}
    label = "auto" if auto else (grade.name if isinstance(grade, PerChannel) else grade.canonical)
    summary = {"src": args.src, "files": files, "grade": label,
               "totals": totals}
    if args.activations != "float":
        summary["activations"] = args.activations
    if auto:
        summary["auto"] = _auto_summary(reports, budget, grades)
    rep = None
    if measured is not None:
        rep = measured.build([h.path for h in source.headers]
                             + ([source.index_path] if source.index_path else []), files)
        summary["report"] = json.loads(rep.to_json())
    try:
        with AtomicFiles() as out:
            if args.report:
                doc = dict(summary, tensors=[r.to_json() for r in reports])
                out.open(args.report).write((strict_json.dumps(doc, indent=2) + "\n").encode("utf-8"))
            if args.report_png:
                png = io.BytesIO()
                rep.plot(png)
                out.open(args.report_png).write(png.getvalue())
            out.commit()
    except OSError as e:
        return _fail(args, EXIT_WRITE, "cannot write the report: %s" % e)
    if args.json:
        print(strict_json.dumps(dict(event="done", **summary)), flush=True)
        return EXIT_OK
    if auto:
        for r in reports:
            if r.auto is not None:
                print(choice_line(r))
        a = summary["auto"]
        print("auto: %d tensors packed (%s), %d kept exact; budget %g dB, candidates %s" % (
            sum(a["chosen"].values()),
            ", ".join("%s %d" % kv for kv in a["chosen"].items()) or "none", a["exact"],
            budget, ",".join(short for short in _short_names(grades))))
    if rep is not None:
        print(rep.table())
    for r in dropped:
        print("dropped %s: %s" % (r.name, r.reason))
    if hf is not None:
        print("wrote the model folder %s: config.json (quantization_config), and every file of "
              "SRC that is not a weight" % args.dst)
    print("wrote %s: %d tensors, %d packed to %s%s, %d kept; %.1f MB -> %.1f MB" % (
        files[-1] if len(files) > 1 else files[0], totals["tensors"], totals["quantized"],
        "auto-chosen grades" if auto else grade.name or grade.canonical,
        "" if args.activations == "float" else " (activations %s)" % args.activations, totals["kept"],
        totals["bytes_before"] / 1e6, totals["bytes_after"] / 1e6))
    return EXIT_OK


def _short_names(grades):
    from ..quantization.profile import short_name

    return [short_name(g) for g in grades]


def _int4g_refusal(args):
    """--grade INT4G<g>: GRIT cannot carry it, so refuse (exit 4) naming the first tensor
    it would pack and why; nothing is written. None for any other grade string."""
    from .. import _C
    from ..checkpoint.convert import ConvertError, refuse_inexpressible
    from ..contract.errors import GritCheckError
    from ..checkpoint.safetensors_io import CheckpointError

    if _C.int4g_parse_name(args.grade) is None:
        return None
    try:
        refuse_inexpressible(args.src, args.grade, args.filter)
    except ConvertError as e:
        return _fail(args, EXIT_UNPACKABLE, str(e))
    except (CheckpointError, GritCheckError) as e:
        return _fail(args, EXIT_SOURCE, "SRC %s" % e)
    except re.error as e:
        return _fail(args, EXIT_USAGE, "--filter %r is not a regular expression: %s"
                     % (args.filter, e))
    return None
