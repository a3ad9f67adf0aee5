"""packed_linear's exact integer mode on CPU (seed 002's packed compute:
int8 activations times integer weight codes, csrc/grit/exact_linear.h).

A benchmark, not a test: one markdown table. For each grade with an exact
law (MXFP4, I8S24), shape and batch size, the median time per call of
  - exact, tiles: packed_linear(..., exact=True) under the CPU kernel variant
    this machine runs (avx512 / avx512_bf16 with VNNI: 16 weight rows at a
    time, kernels/cpu/exact_tile.h), activation packing included;
  - exact, rows: the same call under the avx2 variant, which runs the exact
    mode one output at a time (kernels/cpu/exact_dot.h): the baseline the
    tiles replace, same bits;
  - float: packed_linear on the same grade without exact (bfloat16 x);
  - F.linear float32 on the dense weight;
timed in interleaved rounds (each row's timed call right after an untimed
one) on one weight (the mode is compute-bound: DRAM does not set its speed).
Also checks that both exact rows return the same bits.

    .venv/bin/python benchmarks/bench_exact.py [--shapes 4096x4096] [--batches 1 8 32] [--rounds 5]
"""

import argparse
import platform

import torch
import torch.nn.functional as F

from torch_grit import _C, ops

from bench_linear import interleaved_medians  # same folder

GRADES = ("MXFP4", "I8S24")


def medians(rows, rounds):
    """{name: median seconds per call}: bench_linear's interleaved rounds, one call per row, no probe."""
    return interleaved_medians({name: [fn] for name, fn in rows.items()}, rounds, lambda: None, [])


def with_isa(isa, fn):
    def run():
        previous = _C._set_cpu_isa(isa)
        try:
            return fn()
        finally:
            _C._set_cpu_isa(previous)
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", nargs="+", default=["4096x4096"], help="[out]x[in] weights")
    ap.add_argument("--batches", nargs="+", type=int, default=[1, 8, 32])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    active = _C.cpu_isa()
    if "avx2" not in _C.cpu_isas_supported():
        raise SystemExit("this CPU has no avx2 variant to time the one-output-at-a-time baseline on")
    print("exact integer mode on %s, variant %s, torch %s, %d threads" % (
        platform.processor() or platform.machine(), active, torch.__version__, torch.get_num_threads()))
    print()
    print("| shape | grade | batch | exact, tiles ms | exact, rows ms | tiles vs rows | float ms | "
          "F.linear f32 ms | exact / float time | same bits |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for spec in args.shapes:
        n, k = (int(v) for v in spec.split("x"))
        w = torch.randn(n, k, generator=torch.Generator().manual_seed(n + k))
        for grade in GRADES:
            planes = ops.quantize(w, grade)
            for m in args.batches:
                x = torch.randn(m, k, generator=torch.Generator().manual_seed(m))
                xb = x.to(torch.bfloat16)
                tiles = lambda: ops.packed_linear(x, planes, grade, [n, k], exact=True)
                rows = with_isa("avx2", tiles)
                t = medians({
                    "tiles": tiles,
                    "rows": rows,
                    "float": lambda: ops.packed_linear(xb, planes, grade, [n, k]),
                    "f32": lambda: F.linear(x, w),
                }, args.rounds)
                same = torch.equal(tiles().view(torch.int32), rows().view(torch.int32))
                print("| %dx%d | %s | %d | %.2f | %.2f | %.1fx | %.2f | %.2f | %.1fx | %s |" % (
                    n, k, grade, m, t["tiles"] * 1e3, t["rows"] * 1e3, t["rows"] / t["tiles"],
                    t["float"] * 1e3, t["f32"] * 1e3, t["tiles"] / t["float"], "yes" if same else "NO"))


if __name__ == "__main__":
    main()
