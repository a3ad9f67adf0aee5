"""grit::quantize (the block encoders, over threads on CPU, one thread per
block on CUDA) against the core's scalar reference encoder.

A benchmark, not a test: one markdown table per device. For each grade and
shape, the median time of torch.ops.grit.quantize, of the reference encoder
(torch_grit.contract.codec.encode_planes: csrc/grit/encode.cpp, one thread, the
bytes the op must equal; CPU rows only) and of a float32 -> bfloat16 cast of
the same weight (one read and one half-size write: a floor for any pass over
it), with the op's speedup over the reference and its time as a multiple of
the cast's. Also checks that the op's planes are the reference's bytes.

    .venv/bin/python benchmarks/bench_quantize.py [--shapes 4096x4096] [--device cuda]
"""

import argparse
import platform
import statistics
import time

import torch

import torch_grit  # noqa: F401  (registers the ops)
from torch_grit.contract.codec import encode_planes

GRADES = ("MXFP4", "NVF4", "Q4KS", "I8S24")


def median_time(fn, rounds, sync):
    fn()
    sync()
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="4096x4096,4096x11008")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    dev = torch.device(args.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("bench_quantize.py: no CUDA device visible (torch %s)" % torch.__version__)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else platform.processor() or platform.machine()
    print("grit::quantize on %s (%s), torch %s, %d threads" % (dev, name, torch.__version__, torch.get_num_threads()))
    print()
    print("| shape | grade | quantize ms | reference ms | speedup | cast bf16 ms | x cast | same bytes |")
    print("|---|---|---|---|---|---|---|---|")
    for spec in args.shapes.split(","):
        n, k = (int(v) for v in spec.split("x"))
        w = torch.randn(n, k, generator=torch.Generator().manual_seed(n + k))
        wd = w.to(dev)
        cast = median_time(lambda: wd.to(torch.bfloat16), args.rounds, sync)
        for grade in GRADES:
            t_op = median_time(lambda: torch.ops.grit.quantize(wd, grade), args.rounds, sync)
            t0 = time.perf_counter()
            want = encode_planes(grade, w.numpy())
            t_ref = time.perf_counter() - t0
            got = [p.cpu().numpy().tobytes() for p in torch.ops.grit.quantize(wd, grade)]
            same = got == [bytes(p) for p in want]
            print("| %s | %s | %.1f | %.1f | %.1fx | %.2f | %.1fx | %s |" % (
                spec, grade, t_op * 1e3, t_ref * 1e3, t_ref / t_op, cast * 1e3, t_op / cast,
                "yes" if same else "NO"))


if __name__ == "__main__":
    main()
