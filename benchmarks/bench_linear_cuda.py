"""packed_linear on CUDA against F.linear (cuBLAS) and aten's int4 kernel.

A benchmark, not a test: one markdown table. Shapes [out, in] 4096x4096,
4096x11008, 11008x4096; batch 1, 8, 32; every row cycles through layers
whose float32 weights total at least --min-mb (default 1024 MB, far more
than the GPU's L2), timed with CUDA events. Rows: F.linear float32,
F.linear bfloat16, torch.ops.aten._weight_int4pack_mm (group 32, when this
torch has it for CUDA), and grit packed_linear per grade and for seed 001's
INT4G32 (binary64 scales and products; bfloat16 x).
Columns: median time per call, speedup over float32 F.linear and bfloat16
F.linear, weight bytes per call / time, and that as a share of the device
read bandwidth measured in the same run.

    python benchmarks/bench_linear_cuda.py
"""

import argparse
import math
import statistics

import torch
import torch.nn.functional as F

from torch_grit import ops

GRADES = ("MXFP4", "NVF4", "Q4KS", "I8S24", "INT4G32")


def timed(calls, rounds):
    for c in calls:
        c()
    torch.cuda.synchronize()
    out = []
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for c in calls:
            c()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) / 1e3 / len(calls))
    return statistics.median(out)


def read_bandwidth(rounds):
    buf = torch.ones(1 << 28, device="cuda")  # 1 GiB
    t = timed([buf.sum], rounds)
    del buf
    return (1 << 30) / t


def int4_rows(w32s, x16):
    """aten's CUDA int4 kernel, if this torch has it (packing needs sm80+)."""
    try:
        n, k = w32s[0].shape
        sets = []
        for _ in w32s:
            # Timing only: random 4-bit codes, two per byte, as the packer takes them.
            q = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device="cuda")
            packed = torch.ops.aten._convert_weight_to_int4pack(q, 8)
            sz = torch.randn(k // 32, n, 2, device="cuda", dtype=torch.bfloat16)
            sets.append((packed, sz))
        calls = [lambda p=p, sz=sz: torch.ops.aten._weight_int4pack_mm(x16, p, 32, sz) for p, sz in sets]
        calls[0]()
        nbytes = sets[0][0].numel() * sets[0][0].element_size() + sets[0][1].numel() * 2
        return calls, nbytes
    except Exception as e:  # noqa: BLE001  (report, do not hide: printed below)
        return None, "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:120])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", nargs="+", default=["4096x4096", "4096x11008", "11008x4096"])
    ap.add_argument("--min-mb", type=float, default=1024)
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench_linear_cuda.py: no CUDA device visible (torch %s)" % torch.__version__)
    bw = read_bandwidth(args.rounds)
    print("## packed_linear on CUDA (%s, torch %s, CUDA %s)\n" % (torch.cuda.get_device_name(), torch.__version__,
                                                                 torch.version.cuda))
    print("Read bandwidth measured in this run: %.0f GB/s. Weight sets >= %d MB float32 per row, cycled.\n"
          % (bw / 1e9, args.min_mb))
    print("| shape [out x in] | batch | kernel | time (us) | vs f32 F.linear | vs bf16 F.linear | weight GB/s | % of read BW |")
    print("|---|---|---|---|---|---|---|---|")
    notes = []
    for s in args.shapes:
        n, k = (int(v) for v in s.split("x"))
        layers = max(1, math.ceil(args.min_mb * 1e6 / (n * k * 4)))
        w32 = [torch.randn(n, k, device="cuda") for _ in range(layers)]
        w16 = [w.to(torch.bfloat16) for w in w32]
        grit = {g: [[p.to("cuda") for p in ops.quantize(w32[0].cpu(), g)]] for g in GRADES}
        for g in GRADES:
            grit[g] += [[p.clone() for p in grit[g][0]] for _ in range(layers - 1)]
        for m in (1, 8, 32):
            x32 = torch.randn(m, k, device="cuda")
            x16 = x32.to(torch.bfloat16)
            rows = [("F.linear float32", n * k * 4, [lambda w=w: F.linear(x32, w) for w in w32]),
                    ("F.linear bfloat16", n * k * 2, [lambda w=w: F.linear(x16, w) for w in w16])]
            calls, nb = int4_rows(w32, x16)
            if calls is None:
                if m == 1 and s == args.shapes[0]:
                    notes.append("aten int4 row left out: " + nb)
            else:
                rows.append(("aten int4 (g32)", nb, calls))
            for g in GRADES:
                rows.append((g if g.startswith("INT4G") else "GRIT " + g, sum(p.numel() for p in grit[g][0]),
                             [lambda pl=pl, g=g: torch.ops.grit.packed_linear(x16, *pl, g, [n, k], None)
                              for pl in grit[g]]))
            times = {name: timed(c, args.rounds) for name, _, c in rows}
            for name, nb, _ in rows:
                t = times[name]
                print("| %s | %d | %s | %.1f | %.2fx | %.2fx | %.0f | %.0f%% |" % (
                    s, m, name, t * 1e6, times["F.linear float32"] / t, times["F.linear bfloat16"] / t,
                    nb / t / 1e9, 100 * nb / t / bw))
        del w32, w16, grit
        torch.cuda.empty_cache()
    for line in notes:
        print("\n" + line)


if __name__ == "__main__":
    main()
