"""packed_linear on CPU against F.linear and aten's int4 kernel, from DRAM.

A benchmark, not a test: it prints one markdown table (and the targets, met or
missed: at batch 1 MXFP4 >= 6x float32 F.linear, >= 1.2x aten int4 and >= 70% of
the read probe; at batch 32 every grade no slower than float32). For each weight
shape [out, in] and batch size it
times

  - F.linear, float32 weights and activations;
  - F.linear, bfloat16 weights and activations;
  - torch.ops.aten._weight_int4pack_mm_for_cpu at group 32 (weights packed
    with _convert_weight_to_int4pack_for_cpu, bfloat16 scales and zeros),
    bfloat16 activations;
  - torch.ops.grit.packed_linear for each GRIT grade (the reference grades, ggml
    Q8_0's grit1(e=s8,k0=32,s0=binary16,esr=ratiomaxabs), U4Z_G128 (GPTQ/AWQ's u4
    with a zero point per 128), S8_G128 and S4_G128), bfloat16 activations,
    and MXFP4 once more with float32 activations (no pair path for those);
  - torch.ops.grit.packed_linear_tiled for every grade above in the CPU tile
    layout (ops.tile_nibbles, what quantize, quantize_ and load(model=) give on
    CPU by default: the same bytes, each 16-row tile's words one vector apart,
    so the kernels read them in place), bfloat16 activations, and MXFP4 tiled
    once more with float32 activations;
  - torch.ops.grit.packed_linear for seed 001's INT4G32 (binary64 scales,
    products formed in binary64: its own law, no target), bfloat16 activations;
  - torch.ops.grit.packed_linear_s8 (activations="s8": each row of x packed
    to int8 blocks, integer block sums, csrc/grit/s8_linear.h) for every
    grade above with an s8 law, float32 activations (the packing reads x
    once, so x's dtype costs nothing here); on a CPU with AMX-INT8 batches of
    16 rows and more take the AMX kernel, and MXFP4 once more with it
    switched off (the VNNI kernel) shows what it gains.

Every row cycles through a set of layers whose float32 weights total at
least --min-mb (default 512 MB, more than any last-level cache), so each
call reads its weight from DRAM. Columns: median time per call, speedup
over float32 F.linear and over the aten int4 kernel, and the effective
weight bandwidth (weight bytes read per call / time), also as a share of
the read bandwidth measured alongside: a streaming sum over a 1 GiB
buffer. The machine is shared and its speed drifts within seconds, so the
rows are timed in interleaved rounds and every time reported, the probe's
included, is a median over the rounds of its shape: a slow spell lands on
all rows of a round instead of on one row. In a round each row (and then
the probe) runs one untimed pass over its layers and one timed pass: the
timed pass reads every weight from DRAM as before, but not straight after
another row's 0.5 GB stream (a first pass there cost up to 1 ms more per
4096x11008 MXFP4 call, for aten's int4 kernel too; most likely the row's
page-table entries had left the caches).

    .venv/bin/python benchmarks/bench_linear.py            # the full table (a few minutes)
    .venv/bin/python benchmarks/bench_linear.py --min-mb 64 --shapes 4096x4096   # a quick look
"""

import argparse
import math
import platform
import statistics
import subprocess
import time

import torch
import torch.nn.functional as F

from torch_grit import _C, Grade, ops

# The reference grades, then named grades with fast decoders (torch_grit.contract.grade_names):
# ggml Q8_0's, the GPTQ/AWQ asymmetric 4-bit grade, dense s8 per 128 and compressed-tensors int4 per 128.
GRADES = ("MXFP4", "NVF4", "Q4KS", "I8S24", "Q8_0", "U4Z_G128", "S8_G128", "S4_G128")
SPEC = {g: Grade(g).canonical for g in GRADES}
TILED = ("MXFP4", "NVF4", "Q4KS", "I8S24", "Q8_0", "U4Z_G128", "S8_G128", "S4_G128")  # CPU tile layout rows
S8 = ("MXFP4", "NVF4", "Q4KS", "I8S24", "Q8_0", "U4Z_G128", "S8_G128", "S4_G128")  # activations="s8" rows
# activations="s8" at batch 1: >= this many times float32 F.linear (and >= bfloat16 F.linear at batch 32)
S8_TARGET = {"MXFP4": 11.0, "NVF4": 11.0, "Q4KS": 10.0, "I8S24": 10.0, "U4Z_G128": 10.0}
INT4G = "INT4G32"
DEFAULT_SHAPES = ("4096x4096", "4096x11008", "11008x4096")  # [out, in]
BATCHES = (1, 8, 32)
INT4_GROUP = 32


def cpu_name():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


PROBE_BYTES = 1 << 30


def interleaved_medians(rows, rounds, probe, probe_times):
    """{row: median over rounds of one timed pass over its calls / len(calls)},
    each timed pass right after an untimed one; each round ends with an
    untimed and a timed probe() (appended to probe_times)."""
    for calls in rows.values():  # warm-up pass: allocator, threads, code
        for c in calls:
            c()
    times = {name: [] for name in rows}
    for _ in range(rounds):
        for name, calls in rows.items():
            for c in calls:  # untimed: not straight after another row's stream
                c()
            t0 = time.perf_counter()
            for c in calls:
                c()
            times[name].append((time.perf_counter() - t0) / len(calls))
        probe()
        t0 = time.perf_counter()
        probe()
        probe_times.append(time.perf_counter() - t0)
    return {name: statistics.median(t) for name, t in times.items()}


def int4_pack(w):
    """Asymmetric 4-bit, groups of 32 along in: w ~ (q - 8) * scale + zero."""
    n, k = w.shape
    g = w.reshape(n, k // INT4_GROUP, INT4_GROUP)
    lo, hi = g.amin(-1, keepdim=True), g.amax(-1, keepdim=True)
    scale = ((hi - lo) / 15).clamp_min(1e-12)
    q = ((g - lo) / scale).round().clamp(0, 15).to(torch.int32).reshape(n, k)
    zero = lo + scale * 8
    packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1)
    sz = torch.stack([scale.squeeze(-1), zero.squeeze(-1)], -1).transpose(0, 1).contiguous()
    return packed, sz.to(torch.bfloat16)


def without_amx(x, planes, n, k):
    """MXFP4 under activations="s8" with the AMX kernel switched off (the VNNI kernel)."""
    before = _C._cpu_set_s8_amx(0)
    try:
        return torch.ops.grit.packed_linear_s8(x, *planes, "MXFP4", [n, k], None)
    finally:
        _C._cpu_set_s8_amx(before)


def bench_shape(n, k, min_bytes, rounds, results):
    """Appends the shape's rows to results; returns the read bandwidth
    measured alongside them (bytes/s, the median probe)."""
    buf = torch.ones(PROBE_BYTES // 4)  # float32
    buf.sum()
    probe_times = []
    layers = max(1, math.ceil(min_bytes / (n * k * 4)))
    gen = torch.Generator().manual_seed(0)
    w32 = [torch.randn(n, k, generator=gen) for _ in range(layers)]
    w16 = [w.to(torch.bfloat16) for w in w32]
    int4 = [int4_pack(w) for w in w32]
    grit = {}
    for g in GRADES:
        # One encode, then a private copy of its bytes per layer: the same
        # values, distinct memory, so every call still reads from DRAM.
        planes = ops.quantize(w32[0], SPEC.get(g, g))
        grit[g] = [[p.clone() for p in planes] for _ in range(layers)]
    tiled = {g: [ops.tile_nibbles(pl, SPEC.get(g, g), (n, k)) for pl in grit[g]] for g in TILED}
    planes = ops.quantize(w32[0], INT4G)
    grit[INT4G] = [[p.clone() for p in planes] for _ in range(layers)]

    wbytes = {
        "F.linear float32": n * k * 4,
        "F.linear bfloat16": n * k * 2,
        "aten int4 (g32)": int4[0][0].numel() * int4[0][0].element_size()
        + int4[0][1].numel() * int4[0][1].element_size(),
    }
    for g in GRADES:
        wbytes["GRIT " + g] = sum(p.numel() for p in grit[g][0])
    wbytes["GRIT MXFP4 (x f32)"] = wbytes["GRIT MXFP4"]
    for g in TILED:
        wbytes["GRIT %s tiled" % g] = sum(p.numel() for p in tiled[g][0])
    wbytes["GRIT MXFP4 tiled (x f32)"] = wbytes["GRIT MXFP4 tiled"]
    wbytes[INT4G] = sum(p.numel() for p in grit[INT4G][0])
    for g in S8:
        wbytes["GRIT %s s8" % g] = wbytes["GRIT " + g]
    wbytes["GRIT MXFP4 s8 (AMX off)"] = wbytes["GRIT MXFP4"]

    for m in BATCHES:
        x32 = torch.randn(m, k, generator=gen)
        x16 = x32.to(torch.bfloat16)
        rows = {
            "F.linear float32": ("float32", [lambda w=w: F.linear(x32, w) for w in w32]),
            "F.linear bfloat16": ("bfloat16", [lambda w=w: F.linear(x16, w) for w in w16]),
            "aten int4 (g32)": ("bfloat16", [
                lambda p=p, sz=sz: torch.ops.aten._weight_int4pack_mm_for_cpu(x16, p, INT4_GROUP, sz)
                for p, sz in int4]),
        }
        for g in GRADES:
            rows["GRIT " + g] = ("bfloat16", [
                lambda pl=pl, g=SPEC.get(g, g): torch.ops.grit.packed_linear(x16, *pl, g, [n, k], None)
                for pl in grit[g]])
        # float32 activations are not bfloat16-exact: the FMA route, one
        # product per instruction (the avx512_bf16 pair path needs bf16 x).
        rows["GRIT MXFP4 (x f32)"] = ("float32", [
            lambda pl=pl: torch.ops.grit.packed_linear(x32, *pl, "MXFP4", [n, k], None)
            for pl in grit["MXFP4"]])
        for g in TILED:
            rows["GRIT %s tiled" % g] = ("bfloat16", [
                lambda tl=tl, g=SPEC.get(g, g): torch.ops.grit.packed_linear_tiled(x16, *tl, g, [n, k], None)
                for tl in tiled[g]])
        # the default path with float32 activations: quantize() tiles MXFP4 on CPU
        rows["GRIT MXFP4 tiled (x f32)"] = ("float32", [
            lambda tl=tl: torch.ops.grit.packed_linear_tiled(x32, *tl, "MXFP4", [n, k], None)
            for tl in tiled["MXFP4"]])
        rows[INT4G] = ("bfloat16", [
            lambda pl=pl: torch.ops.grit.packed_linear(x16, *pl, INT4G, [n, k], None) for pl in grit[INT4G]])
        for g in S8:
            rows["GRIT %s s8" % g] = ("float32", [
                lambda pl=pl, g=SPEC.get(g, g): torch.ops.grit.packed_linear_s8(x32, *pl, g, [n, k], None)
                for pl in grit[g]])
        if _C._cpu_s8_amx_ready() and m >= 16:
            rows["GRIT MXFP4 s8 (AMX off)"] = ("float32", [lambda pl=pl: without_amx(x32, pl, n, k)
                                                           for pl in grit["MXFP4"]])
        med = interleaved_medians({name: calls for name, (_, calls) in rows.items()}, rounds, buf.sum,
                                  probe_times)
        for name, (xdt, _) in rows.items():
            results.append(dict(shape="%dx%d" % (n, k), batch=m, row=name, x=xdt, t=med[name],
                                bytes=wbytes[name], layers=layers))
    del w32, w16, int4, grit, tiled, buf
    return PROBE_BYTES / statistics.median(probe_times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", nargs="+", default=list(DEFAULT_SHAPES), help="[out]x[in] weights")
    ap.add_argument("--min-mb", type=float, default=512, help="float32 weight set per row, MB")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved timed passes over every row's layers")
    args = ap.parse_args()

    results = []
    bws = {}
    for s in args.shapes:
        n, k = (int(v) for v in s.lower().split("x"))
        bws["%dx%d" % (n, k)] = bench_shape(n, k, args.min_mb * 1e6, args.rounds, results)

    print("## packed_linear on CPU (weights from DRAM)\n")
    print("Machine: %s, %d threads, torch %s, GRIT CPU kernels: %s (s8 from 16 batch rows: %s). Read "
          "bandwidth measured alongside each shape: %s. Weight sets >= %d MB float32 per row, cycled; times "
          "are medians of %d interleaved rounds.\n"
          % (cpu_name(), torch.get_num_threads(), torch.__version__, _C.cpu_isa(),
             "AMX-INT8" if _C._cpu_s8_amx_ready() else "VNNI or AVX2",
             ", ".join("%s %.1f GB/s" % (s, v / 1e9) for s, v in bws.items()), args.min_mb, args.rounds))
    print("| shape [out x in] | batch | kernel | x | layers | time (us) | vs f32 F.linear "
          "| vs aten int4 | weight GB/s | % of read BW |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    ref = {(r["shape"], r["batch"], r["row"]): r for r in results}
    for r in results:
        f32 = ref[(r["shape"], r["batch"], "F.linear float32")]["t"]
        i4 = ref[(r["shape"], r["batch"], "aten int4 (g32)")]["t"]
        gbs = r["bytes"] / r["t"]
        print("| %s | %d | %s | %s | %d | %.0f | %.2fx | %.2fx | %.1f | %.0f%% |"
              % (r["shape"], r["batch"], r["row"], r["x"], r["layers"], r["t"] * 1e6, f32 / r["t"],
                 i4 / r["t"], gbs / 1e9, 100 * gbs / bws[r["shape"]]))

    print("\nTargets, per shape:")
    for s in sorted({r["shape"] for r in results}, key=args.shapes.index):
        f32_1 = ref.get((s, 1, "F.linear float32"))
        if f32_1 is None:
            continue
        i4 = ref[(s, 1, "aten int4 (g32)")]
        checks = []
        for row, name in (("GRIT MXFP4", "MXFP4"), ("GRIT MXFP4 tiled", "MXFP4 tiled"),
                          ("GRIT MXFP4 tiled (x f32)", "MXFP4 tiled, x f32 (the default path)")):
            mx = ref[(s, 1, row)]
            share = mx["bytes"] / mx["t"] / bws[s]
            checks += [
                ("batch 1, %s >= 6x float32 F.linear" % name, f32_1["t"] / mx["t"], 6.0),
                ("batch 1, %s >= 1.2x aten int4" % name, i4["t"] / mx["t"], 1.2),
                ("batch 1, %s >= 70%% of read bandwidth" % name, share, 0.70),
            ]
        if (s, 32, "F.linear float32") in ref:
            for g in GRADES + tuple(g + " tiled" for g in TILED):
                checks.append(("batch 32, %s no slower than float32 F.linear" % g,
                               ref[(s, 32, "F.linear float32")]["t"] / ref[(s, 32, "GRIT " + g)]["t"], 1.0))
        for g, want in S8_TARGET.items():
            checks.append(("batch 1, %s s8 >= %gx float32 F.linear" % (g, want),
                           f32_1["t"] / ref[(s, 1, "GRIT %s s8" % g)]["t"], want))
            if (s, 32, "F.linear bfloat16") in ref:
                checks.append(("batch 32, %s s8 no slower than bfloat16 F.linear" % g,
                               ref[(s, 32, "F.linear bfloat16")]["t"] / ref[(s, 32, "GRIT %s s8" % g)]["t"],
                               1.0))
        for what, got, want in checks:
            print("  %-12s %-54s %6.2f (want >= %.2f)  %s"
                  % (s, what, got, want, "met" if got >= want else "MISSED"))


if __name__ == "__main__":
    main()
