"""The training path on CPU: forward, backward to the input and a LoRA-style step over packed
weights, against plain torch of the same dtype, plus dequantize throughput.

A benchmark, not a test: it prints one markdown table per run. For each weight shape [out, in],
activation dtype (float32, bfloat16) and batch it times, in interleaved rounds (each round runs
every row once untimed and once timed; the medians are reported, so a slow spell of this shared
machine lands on every row of a round):

  - forward: torch F.linear(x, W) with W in the activation dtype, against F.linear(x, Wq) with
    Wq = torch_grit.quantize(W, grade) for each reference grade (no autograd; the default
    layout: MXFP4 and NVF4 tiled on CPU);
  - grad_input: torch `gy @ W` against torch.ops.grit.packed_linear_grad_input(gy, Wq) (its
    _tiled twin for a tiled Wq, as the layer's backward calls it);
  - step: one LoRA-style training step (a frozen layer plus a rank-16 adapter, forward, backward
    to the input and the adapter, SGD step) on a frozen nn.Linear against a GritLinear.

With bfloat16 activations the same rows are timed a second time under the bf16 activation law
(law "bf16": torch_grit.ops.packed_linear_bf16 and packed_linear_bf16_grad_input over the
row-major planes, and a GritLinear with activations="bf16"), which runs on AMX tiles where the
CPU has them, else on AVX512_BF16's vdpbf16ps; law "float" is the default path.

Ratios are torch's time over torch_grit's: above 1.00x torch_grit is faster. Then
GritTensor.dequantize() of each grade, in weights per second, beside a clone of the float32
weight (filling that much fresh memory: with torch's default allocator each call's output is
new pages, whose first touch costs more than the decode; THP_MEM_ALLOC_ENABLE=1 gives torch's
allocations transparent huge pages).

Targets, per row (met or missed is printed): at batch >= 512 forward MXFP4 >= 1.0x and the other
grades >= 0.8x, grad_input >= 0.9x and step >= 0.85x on every grade; dequantize >= 1e9 weights/s.

    .venv/bin/python benchmarks/bench_train.py                      # every shape, dtype, batch
    .venv/bin/python benchmarks/bench_train.py --shapes 4096x4096 --batches 512   # one slice
    .venv/bin/python benchmarks/bench_train.py --dtypes bfloat16 --laws bf16    # the bf16 law alone
    .venv/bin/python benchmarks/bench_train.py --grades INT4G32 S4_G32 --laws float   # other grades

Grades besides the reference four (--grades) are timed the same way and have no target; INT4G
has no bf16 activation law, so its rows run under the float law only.
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import torch_grit
from bench_linear import cpu_name

GRADES = ("MXFP4", "NVF4", "Q4KS", "I8S24")  # the reference grades: the targets are theirs
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
RANK = 16
TARGETS = {"forward": {"MXFP4": 1.0, None: 0.8}, "grad_input": {None: 0.9}, "step": {None: 0.85}}
TARGET_BATCH = 512
DEQUANT_TARGET = 1e9


class LoRA(torch.nn.Module):
    """A frozen base layer plus a trainable rank-RANK adapter: y = base(x) + (x A^T) B^T."""

    def __init__(self, base, dtype):
        super().__init__()
        self.base = base
        g = torch.Generator().manual_seed(1)
        self.a = torch.nn.Parameter((torch.randn(RANK, base.in_features, generator=g) * 0.01).to(dtype))
        self.b = torch.nn.Parameter(torch.zeros(base.out_features, RANK, dtype=dtype))

    def forward(self, x):
        return self.base(x) + F.linear(F.linear(x, self.a), self.b)


def step_fn(model, x, gy):
    opt = torch.optim.SGD([model.a, model.b], lr=1e-3)

    def step():
        opt.zero_grad(set_to_none=True)
        x.grad = None
        model(x).backward(gy)
        opt.step()
    return step


def medians(rows, rounds):
    """{row: median seconds per call}; each round runs every row once untimed, once timed."""
    times = {name: [] for name in rows}
    for _ in range(rounds):
        for name, fn in rows.items():
            fn()
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(t) for name, t in times.items()}


def bench_group(n, k, dtype, batch, rounds, out, law="float", grades=GRADES):
    gen = torch.Generator().manual_seed(0)
    w = (torch.randn(n, k, generator=gen) * 0.02).to(dtype)
    x = torch.randn(batch, k, generator=gen).to(dtype)
    gy = torch.randn(batch, n, generator=gen).to(dtype)
    if law == "bf16":
        grades = [g for g in grades if not g.upper().startswith("INT4G")]
    packed = {g: torch_grit.quantize(w, g) for g in grades}  # logical dtype: the activations'
    if law == "bf16":  # the bf16 law's kernels read the row-major planes
        packed = {g: q.untile() if q.tiled else q for g, q in packed.items()}
    rows = {("forward", None): lambda: F.linear(x, w)}  # nothing here requires grad: no graph
    for g, q in packed.items():
        if law == "bf16":
            planes, canon, shape = q.stored_planes, q.grade_canonical, list(q.logical_shape)
            rows[("forward", g)] = lambda p=planes, c=canon, s=shape: torch.ops.grit.packed_linear_bf16(
                x, *p, c, s, None)
        else:
            rows[("forward", g)] = lambda q=q: F.linear(x, q)
    rows[("grad_input", None)] = lambda: gy @ w
    for g, q in packed.items():   # the op the layer's backward calls: tiled weights read in place
        if law == "bf16":
            op = torch.ops.grit.packed_linear_bf16_grad_input
        else:
            op = torch.ops.grit.packed_linear_grad_input_tiled if q.tiled else torch.ops.grit.packed_linear_grad_input
        planes, canon, shape = q.stored_planes, q.grade_canonical, list(q.logical_shape)
        rows[("grad_input", g)] = lambda p=planes, c=canon, s=shape, op=op: op(gy, *p, c, s)
    dense = torch.nn.Linear(k, n, bias=False, dtype=dtype)
    with torch.no_grad():
        dense.weight.copy_(w)
    dense.weight.requires_grad_(False)
    xg = x.clone().requires_grad_(True)
    rows[("step", None)] = step_fn(LoRA(dense, dtype), xg, gy)
    for g in grades:
        layer = torch_grit.nn.GritLinear.from_packed(packed[g], activations=None if law == "float" else law)
        rows[("step", g)] = step_fn(LoRA(layer, dtype), xg, gy)
    t = medians(rows, rounds)
    for (what, g), sec in t.items():
        if g is not None:
            out.append(dict(shape="%dx%d" % (n, k), dtype=str(dtype).split(".")[1], batch=batch, what=what,
                            grade=g, t=sec, torch=t[(what, None)], law=law))


def dequant_rows(n, k, rounds, grades=GRADES):
    """Weights per second of GritTensor.dequantize() per grade, and of w.clone() on the float32
    weight: the cost of filling that much fresh memory, which bounds any full decode."""
    w32 = torch.randn(n, k, generator=torch.Generator().manual_seed(0))
    rows = {g: (lambda q=torch_grit.quantize(w32, g): q.dequantize()) for g in grades}
    rows["float32 clone"] = w32.clone
    t = medians(rows, rounds)
    return {g: n * k / sec for g, sec in t.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", nargs="+", default=["4096x4096", "11008x4096"], help="[out]x[in]")
    ap.add_argument("--batches", nargs="+", type=int, default=[1, 32, 512, 2048])
    ap.add_argument("--dtypes", nargs="+", choices=sorted(DTYPES), default=["float32", "bfloat16"])
    ap.add_argument("--laws", nargs="+", choices=("float", "bf16"), default=["float", "bf16"],
                    help="float: the default path; bf16: the bf16 activation law (bfloat16 activations only)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--grades", nargs="+", default=list(GRADES),
                    help="grade names or canonical strings (default: the reference grades, which carry the targets)")
    args = ap.parse_args()
    grades = args.grades
    torch.manual_seed(0)
    print("CPU: %s; torch %s, %d threads; torch_grit CPU variant %s"
          % (cpu_name(), torch.__version__, torch.get_num_threads(), torch_grit._C.cpu_isa()))
    print("bf16 law runs on: %s" % ("AMX tiles" if torch_grit._C._cpu_bf16_amx_ready() else
                                    "vdpbf16ps (AVX512_BF16)" if torch_grit._C._cpu_bf16_dp_ready() else
                                    "its scalar copy (expect it to be slow)"))
    results = []
    for s in args.shapes:
        n, k = map(int, s.split("x"))
        for d in args.dtypes:
            for b in args.batches:
                for law in args.laws:
                    if law == "bf16" and d != "bfloat16":
                        continue
                    bench_group(n, k, DTYPES[d], b, args.rounds, results, law, grades)
    print("\n| shape | dtype | batch | law | step | torch ms | " + " | ".join("%s ms (ratio)" % g for g in grades)
          + " |")
    print("|---|---|---|---|---|---|" + "---|" * len(grades))
    keyed = {}
    for r in results:
        keyed.setdefault((r["shape"], r["dtype"], r["batch"], r["law"], r["what"]), {})[r["grade"]] = r
    checks = []
    for (shape, dtype, batch, law, what), by in keyed.items():
        base = next(iter(by.values()))["torch"]
        cells = []
        for g in grades:
            if g not in by:
                cells.append("-")
                continue
            ratio = base / by[g]["t"]
            cells.append("%.2f (%.2fx)" % (by[g]["t"] * 1e3, ratio))
            if batch >= TARGET_BATCH and g in GRADES:
                want = TARGETS[what].get(g, TARGETS[what][None])
                checks.append(("%s %s b%d %s %s %s" % (shape, dtype, batch, law, what, g), ratio, want))
        print("| %s | %s | %d | %s | %s | %.2f | %s |" % (shape, dtype, batch, law, what, base * 1e3,
                                                         " | ".join(cells)))
    n, k = map(int, args.shapes[0].split("x"))
    rates = dequant_rows(n, k, args.rounds, grades)
    print("\nGritTensor.dequantize(), %dx%d, float32 out: " % (n, k)
          + ", ".join("%s %.2f G weights/s" % (g, r / 1e9) for g, r in rates.items()))
    checks += [("dequantize %s" % g, r / DEQUANT_TARGET, 1.0) for g, r in rates.items() if g in GRADES]
    if checks:
        print("\nTargets:")
        for what, got, want in checks:
            print("  %-48s %6.2f (want >= %.2f)  %s" % (what, got, want, "met" if got >= want else "MISSED"))


if __name__ == "__main__":
    main()
