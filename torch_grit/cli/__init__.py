"""The ``torch-grit`` command line (also ``python -m torch_grit``)."""

import argparse
import os
import sys


def _cmd_grades(args):
    from ..contract.descriptor import Descriptor
    from ..contract.grade import Grade

    for g in (Grade.MXFP4, Grade.Q4KS, Grade.NVF4, Grade.I8S24, Grade.MXFP4_RNE, Grade.NVF4_RTZ):
        d = Descriptor(g, (args.rows, args.cols))
        print("%-16s id=0x%016x gid=%s" % (g.name, g.id, d.gid))
        print("  %s" % g.canonical)
        print("  descriptor %s" % d.to_bytes().hex())
    return 0


def build_parser():
    """The ``torch-grit`` argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(prog="torch-grit", description="GRIT quantized tensors for PyTorch")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("grades", help="print the reference grades with their ids, descriptors and gids")
    p.add_argument("--rows", type=int, default=4096)
    p.add_argument("--cols", type=int, default=4096)
    p.set_defaults(fn=_cmd_grades)
    from .quantize import add_parser as _add_quantize
    _add_quantize(sub)
    from .profile import add_parser as _add_profile
    _add_profile(sub)
    from .inspect import add_parser as _add_inspect
    _add_inspect(sub)
    from .interop import add_parsers as _add_interop
    _add_interop(sub)  # `import` and `export`
    from . import scan as cli_scan

    cli_scan.register(sub)  # `scan` and `explain`
    return parser


def main(argv=None):
    """Run ``torch-grit`` with ``argv`` (default: the process's); returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except BrokenPipeError:
        # The reader went away (`torch-grit scan --json | head`): stop quietly, as cat does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, the shell's code for a writer whose pipe closed
