"""``torch-grit import SRC.gguf DST`` and ``torch-grit export SRC DST.gguf``."""

import argparse
import json
import os
import sys

from ..util import strict_json
from .common import fail as _fail

EXIT_OK = 0
EXIT_USAGE = 2        # bad arguments, unknown grade, DST would overwrite SRC, DST not .gguf
EXIT_SOURCE = 3       # SRC missing, not GGUF / not a checkpoint, truncated, a refused block or descriptor
EXIT_UNPACKABLE = 4   # a tensor that cannot be carried across (named, with the reason)
EXIT_WRITE = 5        # DST could not be written (nothing replaced)
# Tensors of a kind GRIT cannot carry (yet): exit 4, not a broken source.
GGUF_UNPACKABLE = ("ggml_type", "requantize", "rank")
FOLDER_UNPACKABLE = ("bits_unsupported", "symmetric", "strategy", "num_bits", "format", "weight_scale_dtype",
                     "activations")

IMPORT_EPILOG = """\
SRC is a GGUF file, or a Hugging Face model folder of a GPTQ, AWQ or
compressed-tensors (pack- or int-quantized) model (its config.json's
quantization_config says which). A folder becomes a GRIT model
folder DST (every other file copied, quantization_config replaced by GRIT's,
each layer a GRIT grade with its zero-point convention declared), which
torch_grit.load(model=...) and from_pretrained load.

A GGUF file: Q8_0, Q4_K and MXFP4 tensors become GritTensors of the
grades grit-scan names for them (their blocks repacked into GRIT's planes; the
decode equals gguf.quants.dequantize bit for bit), F32/F16/BF16 and integer
tensors stay plain. Every other block type (Q4_0, Q4_1, Q5_*, Q6_K, IQ*, ...)
is refused naming the reason, unless --requantize GRADE: then gguf-py decodes it
and GRADE's encoder packs it, with its SQNR printed. Names are kept as in SRC.
DST ending in .safetensors is the output file; any other DST is a folder that
receives model.safetensors. Written to a temporary file and renamed into place.

exit codes
  0  imported; DST written
  2  usage: bad arguments or grade, DST would overwrite SRC
  3  SRC is missing, not GGUF, truncated, or holds a block the import refuses
     (an MXFP4 scale of 0xFF, a non-finite binary16 scale, a descriptor that lies);
     a model folder whose tensors disagree with each other or with its config
  4  a tensor of a type GRIT cannot carry, without --requantize; a GPTQ or AWQ
     bit width torch_grit does not read (nothing written)
  5  DST could not be written (nothing replaced)
"""

EXPORT_EPILOG = """\
SRC is a torch_grit checkpoint (a .safetensors file, a folder or an index).
Packed tensors of the grades ggml has blocks for (Q8_0's grade, GRADE_Q4KS,
GRADE_MXFP4) are written as ggml Q8_0 / Q4_K / MXFP4 blocks with their GRIT
descriptor in the KV entry grit.desc.<tensor>; float and integer tensors as
they are. Any other grade is refused naming the tensor (nothing written).

When SRC is a model folder (config.json beside the weights) of an architecture
llama.cpp's layout is written for (llama, mistral, qwen2, qwen3, bert), the file
follows llama.cpp's conventions: tensor names from gguf-py's TensorNameMap,
Llama's q/k rows in llama.cpp's rotary order, the hyperparameters from
config.json, the vocab from SRC's tokenizer.json ("none" without one), a BERT
embedder's pooling from SRC/1_Pooling/config.json. --layout source keeps the
checkpoint's names.

exit codes
  0  exported; DST written
  2  usage: bad arguments, DST does not end in .gguf
  3  SRC is missing or not a checkpoint that passes load's checks
  4  a tensor has no GGUF form (named, with the reason; nothing written)
  5  DST could not be written (nothing replaced)
"""


def add_parsers(sub):
    p = sub.add_parser("import", help="import a GGUF file as a checked GRIT checkpoint",
                       description="Import the tensors of a GGUF file as a torch_grit safetensors checkpoint.",
                       epilog=IMPORT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("src", metavar="SRC")
    p.add_argument("dst", metavar="DST")
    p.add_argument("--requantize", metavar="GRADE",
                   help="pack the tensors of block types GRIT cannot carry to GRADE (decoded by gguf-py)")
    p.add_argument("--max-shard-size", metavar="SIZE", help="write HF-style shards of at most SIZE")
    p.add_argument("--json", action="store_true", help="one JSON line per tensor, then a summary line")
    p.set_defaults(fn=run_import)
    p = sub.add_parser("export", help="export a GRIT checkpoint as a GGUF file",
                       description="Export a torch_grit checkpoint as GGUF (ggml blocks + grit.desc.*).",
                       epilog=EXPORT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("src", metavar="SRC")
    p.add_argument("dst", metavar="DST.gguf")
    p.add_argument("--arch", help="general.architecture of the source layout (default torch_grit)")
    p.add_argument("--layout", choices=("auto", "llama.cpp", "source"), default="auto",
                   help="llama.cpp's names, hyperparameters and vocab, or the checkpoint's own names "
                        "(auto: llama.cpp's when SRC is a model folder of an architecture it knows)")
    p.add_argument("--json", action="store_true", help="one JSON line per tensor, then a summary line")
    p.set_defaults(fn=run_export)




def _bar(args, total, desc):
    if args.json or not sys.stderr.isatty():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=desc, file=sys.stderr)


def _run(args, total, unpackable, convert):
    """Run ``convert(on_tensor)`` with the progress bar, the --json tensor lines and the exit codes
    every import shares: ``(files, records)``, or the exit code of a failure (reported)."""
    from ..checkpoint.read import open_layout
    from ..checkpoint.safetensors_io import CheckpointError
    from ..contract.errors import GritCheckError

    bar = _bar(args, total, "import")

    def on_tensor(rec):
        doc = rec if isinstance(rec, dict) else rec.to_json()
        if bar is not None:
            bar.update(doc["bytes_before"])
        if args.json:
            print(strict_json.dumps(dict(event="tensor", **doc)), flush=True)

    try:
        files, records = convert(on_tensor)
        open_layout(files[-1])
    except CheckpointError as e:
        return _fail(args, EXIT_UNPACKABLE if e.field in unpackable else EXIT_SOURCE, "SRC %s" % e)
    except GritCheckError as e:
        return _fail(args, EXIT_SOURCE, "SRC %s" % e)
    except ImportError as e:
        return _fail(args, EXIT_USAGE, "a model folder needs transformers (%s)" % e)
    except ValueError as e:
        return _fail(args, EXIT_USAGE, str(e))
    except OSError as e:
        return _fail(args, EXIT_WRITE, "cannot write %s: %s" % (args.dst, e))
    finally:
        if bar is not None:
            bar.close()
    return files, records


def run_import(args):
    from ..checkpoint.format import parse_size
    from ..contract.errors import GradeError
    from ..contract.grade import resolve_grade
    from ..interop.gguf.convert import import_gguf

    if args.requantize is not None:
        try:
            resolve_grade(args.requantize)
        except (GradeError, TypeError) as e:
            return _fail(args, EXIT_USAGE, "--requantize: unknown grade: %s" % e)
    try:
        max_shard = parse_size(args.max_shard_size)
    except ValueError as e:
        return _fail(args, EXIT_USAGE, str(e))
    if os.path.isdir(args.src):
        return _import_folder(args, max_shard)
    if not os.path.isfile(args.src):
        return _fail(args, EXIT_SOURCE, "SRC %s: no such file" % args.src)
    out = _run(args, os.path.getsize(args.src), GGUF_UNPACKABLE,
               lambda on_tensor: import_gguf(args.src, args.dst, requantize=args.requantize,
                                             max_shard_size=max_shard, on_tensor=on_tensor))
    if isinstance(out, int):
        return out
    files, records = out
    counts = {}
    for r in records:
        counts[r.action] = counts.get(r.action, 0) + 1
    summary = {"src": args.src, "files": files, "tensors": len(records), "actions": counts,
               "bytes_before": sum(r.bytes_before for r in records),
               "bytes_after": sum(r.bytes_after for r in records)}
    if args.json:
        print(strict_json.dumps(dict(event="done", **summary)), flush=True)
        return EXIT_OK
    for r in records:
        if r.action == "requantized":
            print("requantized %s (ggml %s) to %s: %.2f dB, max abs error %.3g"
                  % (r.name, r.ggml_type, r.grade, r.error["sqnr_db"], r.error["max_abs_err"]))
    print("wrote %s: %d tensors (%s)" % (files[-1] if len(files) > 1 else files[0], len(records),
                                         ", ".join("%d %s" % (n, a) for a, n in sorted(counts.items()))))
    return EXIT_OK


def _import_folder(args, max_shard):
    from ..interop.models import import_model_folder

    if args.requantize is not None:
        return _fail(args, EXIT_USAGE, "--requantize applies to GGUF files; a model folder imports as it is")
    if os.path.exists(args.dst) and not os.path.isdir(args.dst):
        return _fail(args, EXIT_USAGE, "DST %s exists and is not a folder" % args.dst)

    total = sum(os.path.getsize(os.path.join(root, f)) for root, _, names in os.walk(args.src)
                for f in names if f.endswith(".safetensors"))
    out = _run(args, total, FOLDER_UNPACKABLE,
               lambda on_tensor: import_model_folder(args.src, args.dst, max_shard_size=max_shard,
                                                     on_tensor=on_tensor))
    if isinstance(out, int):
        return out
    files, records = out
    counts = {}
    for r in records:
        counts[r["action"]] = counts.get(r["action"], 0) + 1
    summary = {"src": args.src, "files": files, "tensors": len(records), "actions": counts}
    if args.json:
        print(strict_json.dumps(dict(event="done", **summary)), flush=True)
        return EXIT_OK
    grades = sorted({r["grade"] for r in records if r.get("grade")})
    print("wrote the model folder %s: %s (%s)" % (args.dst, ", ".join("%d %s" % (n, a) for a, n in sorted(counts.items())),
                                                   ", ".join(grades)))
    return EXIT_OK


def _st_pooling(folder):
    """A sentence-transformers folder's pooling mode (1_Pooling/config.json), else None."""
    try:
        with open(os.path.join(folder, "1_Pooling", "config.json"), encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    keys = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls", "pooling_mode_lasttoken": "last"}
    for key, mode in keys.items():
        if doc.get(key):
            return mode
    return None


def run_export(args):
    from ..checkpoint.safetensors_io import CheckpointError
    from ..checkpoint.save_load import load
    from ..contract.errors import GritCheckError
    from ..interop.gguf.write import save_gguf
    from ..tensor.grit_tensor import GritTensor

    if not args.dst.lower().endswith(".gguf"):
        return _fail(args, EXIT_USAGE, "DST %s: an export target ends in .gguf" % args.dst)
    try:
        state = load(args.src)
    except (CheckpointError, GritCheckError) as e:
        return _fail(args, EXIT_SOURCE, "SRC %s" % e)
    except OSError as e:
        return _fail(args, EXIT_SOURCE, "SRC %s: %s" % (args.src, e))
    folder = args.src if os.path.isdir(args.src) else os.path.dirname(os.path.abspath(args.src))
    model_folder = os.path.isfile(os.path.join(folder, "config.json"))
    if args.layout == "llama.cpp" and not model_folder:
        return _fail(args, EXIT_USAGE, "--layout llama.cpp needs a model folder: no config.json beside %s" % args.src)
    if args.arch and args.layout == "llama.cpp":
        return _fail(args, EXIT_USAGE, "--arch applies to --layout source")
    layout = "source" if args.arch or not model_folder else args.layout
    extra = {}
    if layout != "source":
        extra = dict(config=folder, pooling=_st_pooling(folder),
                     tokenizer=folder if os.path.isfile(os.path.join(folder, "tokenizer.json")) else None)
    try:
        save_gguf(state, args.dst, arch=args.arch, layout=layout, **extra)
    except ValueError as e:
        return _fail(args, EXIT_UNPACKABLE, str(e))
    except OSError as e:
        return _fail(args, EXIT_WRITE, "cannot write %s: %s" % (args.dst, e))
    packed = sum(isinstance(t, GritTensor) for t in state.values())
    if args.json:
        for name, t in state.items():
            print(strict_json.dumps({"event": "tensor", "name": name, "packed": isinstance(t, GritTensor),
                                     "grade": t.grade_canonical if isinstance(t, GritTensor) else None}),
                  flush=True)
        print(strict_json.dumps({"event": "done", "src": args.src, "files": [args.dst],
                                 "tensors": len(state), "packed": packed}), flush=True)
        return EXIT_OK
    print("wrote %s: %d tensors, %d as ggml blocks with grit.desc.* descriptors" % (args.dst, len(state), packed))
    return EXIT_OK
