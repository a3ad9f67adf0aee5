"""``torch-grit profile SRC``: what each grade would do to a float checkpoint; writes nothing.

SRC is a safetensors file, a folder of shards or a HF model folder. Each 2-D
float tensor is read on its own (pread, one at a time), previewed with every
candidate grade's real encoder (torch_grit.profile), and dropped. Exit codes:
0 done, 3 the source cannot be read.
"""

import sys

from ..util import strict_json
from ..checkpoint.read import open_layout
from ..checkpoint.convert import FLOAT_DTYPES
from ..quantization.profile import CANDIDATES, DEFAULT_BUDGET_DB, profile
from ..checkpoint.safetensors_io import CheckpointError, read_entry

EXIT_SOURCE = 3


def _state(layout):
    """Yield (name, float tensor) for every 2-D float entry, one at a time."""
    for h in layout.headers:
        with open(h.path, "rb") as f:
            for name, e in h.entries.items():
                if e.dtype in FLOAT_DTYPES and len(e.shape) == 2:
                    yield name, read_entry(f, h, e).view(FLOAT_DTYPES[e.dtype]).reshape(e.shape)


def run(args):
    try:
        layout = open_layout(args.src)
    except (CheckpointError, OSError, ValueError) as e:
        print("torch-grit profile: cannot read %s: %s" % (args.src, e), file=sys.stderr)
        return EXIT_SOURCE
    grades = tuple(args.grades.split(",")) if args.grades else CANDIDATES
    prof = None
    tensors = []
    for name, t in _state(layout):
        p = profile({name: t}, grades=grades, budget_db=args.budget,
                    activations=None if args.activations == "float" else args.activations)
        tensors.extend(p.tensors)
        prof = p
        if args.json:
            tp = p.tensors[0]
            print(strict_json.dumps({"tensor": name, "shape": list(tp.shape), "min": tp.minimum,
                              "max": tp.maximum, "choice": tp.choice or None,
                              "grades": {g: vars(v) for g, v in tp.previews.items()}}))
    if prof is None:
        print("torch-grit profile: no 2-D float tensor in %s" % args.src, file=sys.stderr)
        return 0
    prof.tensors = tensors
    if args.json:
        print(strict_json.dumps({"summary": True, "hints": prof.hints(), "totals": prof.totals()}))
    else:
        print(prof.table())
        print()
        for line in prof.hints():
            print(line)
    return 0


def add_parser(sub):
    p = sub.add_parser("profile", help="preview every candidate grade on a checkpoint (writes nothing)")
    p.add_argument("src", help="a safetensors file, a folder of shards or a HF model folder")
    p.add_argument("--grades", default="", help="comma-separated candidates (default %s)" % ",".join(CANDIDATES))
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET_DB, help="minimum weight SQNR in dB")
    p.add_argument("--activations", choices=("float", "s8", "bf16"), default="float",
                   help="s8 (bf16): also measure each grade's output SQNR under the s8 (bf16) activation "
                        "law against float activations, on a fixed seeded probe")
    p.add_argument("--json", action="store_true", help="one JSON line per tensor, then a summary line")
    p.set_defaults(fn=run)
