"""The ``torch-grit`` command line (also ``python -m torch_grit``)."""

import argparse
import sys


def _cmd_grades(args):
    from . import Descriptor, Grade

    for g in (Grade.MXFP4, Grade.Q4KS, Grade.NVF4, Grade.I8S24, Grade.MXFP4_RNE, Grade.NVF4_RTZ):
        d = Descriptor(g, (args.rows, args.cols))
        print("%-16s id=0x%016x gid=%s" % (g.name, g.id, d.gid))
        print("  %s" % g.canonical)
        print("  descriptor %s" % d.to_bytes().hex())
    return 0


def _read_descriptor(text):
    from . import Descriptor

    text = text.strip()
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        with open(text, "rb") as f:
            raw = f.read()
    if len(raw) != 64:
        raise SystemExit("torch-grit: %r is not a 64-byte descriptor (found %d bytes)" % (text, len(raw)))
    return Descriptor.from_bytes(raw)


def _cmd_explain(args):
    a, b = _read_descriptor(args.a), _read_descriptor(args.b)
    sys.stdout.write(a.explain(b))
    return 0 if a.to_bytes() == b.to_bytes() else 2


def main(argv=None):
    parser = argparse.ArgumentParser(prog="torch-grit", description="GRIT quantized tensors for PyTorch")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("grades", help="print the reference grades with their ids, descriptors and gids")
    p.add_argument("--rows", type=int, default=4096)
    p.add_argument("--cols", type=int, default=4096)
    p.set_defaults(fn=_cmd_grades)
    p = sub.add_parser("explain", help="field-by-field diff of two descriptors (hex or 64-byte files)")
    p.add_argument("a")
    p.add_argument("b")
    p.set_defaults(fn=_cmd_explain)
    from .cli_quantize import add_parser as _add_quantize
    _add_quantize(sub)
    from .cli_profile import add_parser as _add_profile
    _add_profile(sub)
    from .cli_inspect import add_parser as _add_inspect
    _add_inspect(sub)
    from . import cli_scan

    cli_scan.register(sub)  # `scan`, and `explain` on checkpoint files too
    args = parser.parse_args(argv)
    return args.fn(args)
