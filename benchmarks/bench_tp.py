"""Tensor parallelism on this machine: per-rank memory, forward and
training-step time of a packed Llama-style model at 1, 2 and 4 processes
(gloo on loopback, torch's parallelize_module with the Megatron-style plan
of examples/tensor_parallel.py), in interleaved rounds.

    .venv/bin/python benchmarks/bench_tp.py --grade MXFP4 --rounds 3

A training step is forward + backward + SGD on the token embeddings (the
packed layers are frozen; the backward runs every packed layer's grad_input
and the row-wise layers' all-reduces). "ordered forward" is the same forward
with o and down under torch_grit.parallel.OrderedRowwiseParallel (a second
skeleton, loaded the same way): the row-wise sums continued rank after rank
by the CPU kernel variant's continuation, the logits bit for bit one process's.
Threads: the machine's cores are
shared among the ranks (at least one each; 4 ranks on 2 cores oversubscribe).
The model is packed and saved once; each rank builds a skeleton on the meta
device, parallelizes it (1 rank too: a one-rank mesh) and loads its shards
with torch_grit.load(path, model=...). "load peak" is how much the rank's
peak RSS grew during that load (/proc/self/clear_refs resets the peak first).
"""

import argparse
import datetime
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def rank_main(args):
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import parallelize_module

    import torch_grit
    from torch_grit.nn import GritLinear
    from torch_grit.util.peak_memory import peak_growth
    sys.path.insert(0, os.path.join(HERE, "..", "examples"))
    from causal_lm_quality import build_model
    from tensor_parallel import megatron_plan

    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    torch.set_num_threads(max(1, (os.cpu_count() or 1) // args.world))
    dist.init_process_group("gloo", rank=args.rank, world_size=args.world, init_method="file://" + args.init,
                            timeout=datetime.timedelta(seconds=120))
    with torch.device("meta"):
        model = skeleton(args, build_model)
    model.model.rotary_emb = LlamaRotaryEmbedding(config=model.config)  # a non-persistent buffer: no file has it
    mesh = init_device_mesh("cpu", (args.world,))
    parallelize_module(model, mesh, megatron_plan(), src_data_rank=None)
    load_peak = peak_growth(lambda: torch_grit.load(args.checkpoint, model=model))[1]
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # before the second model
    with torch.device("meta"):
        ordered = skeleton(args, build_model)
    ordered.model.rotary_emb = LlamaRotaryEmbedding(config=ordered.config)
    parallelize_module(ordered, mesh, megatron_plan(ordered=True), src_data_rank=None)
    torch_grit.load(args.checkpoint, model=ordered)
    local = sum(m.packed_weight.nbytes_packed for m in model.modules() if isinstance(m, GritLinear))
    for p in model.parameters():
        p.requires_grad_(False)
    emb = model.model.embed_tokens.weight
    emb.requires_grad_(True)
    opt = torch.optim.SGD([emb], lr=1e-3)
    ids = torch.randint(0, 1024, (1, args.tokens), generator=torch.Generator().manual_seed(0))

    def forward():
        with torch.no_grad():
            model(ids)

    def step():
        opt.zero_grad()
        model(ids).logits.float().pow(2).mean().backward()
        opt.step()

    def forward_ordered():
        with torch.no_grad():
            ordered(ids)

    times = {}
    for name, fn in (("forward", forward), ("step", step), ("ordered", forward_ordered)):
        fn()  # warm-up
        dist.barrier()
        samples = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            fn()
            dist.barrier()
            samples.append(time.perf_counter() - t0)
        times[name] = statistics.median(samples)
    if args.rank == 0:
        print(json.dumps({"world": args.world, "packed_bytes": local, "rss": rss, "load_peak": load_peak, **times}))
    dist.barrier()
    dist.destroy_process_group()


def skeleton(args, build_model):
    return build_model(hidden=args.hidden, intermediate=args.intermediate, layers=args.layers,
                       heads=args.heads, vocab=1024, context=args.tokens)


def save_checkpoint(args, path):
    import torch_grit
    sys.path.insert(0, os.path.join(HERE, "..", "examples"))
    from causal_lm_quality import build_model

    model = skeleton(args, build_model)
    torch_grit.quantize_(model, args.grade)
    torch_grit.save(model, path)
    return os.path.getsize(path)


def launch(args, world):
    init = tempfile.mktemp(prefix="grit_bench_tp_")
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS=str(max(1, (os.cpu_count() or 1) // world)))
    cmd = [sys.executable, os.path.abspath(__file__), "--rank-of", str(world), "--init", init, "--grade", args.grade,
           "--hidden", str(args.hidden), "--intermediate", str(args.intermediate), "--layers", str(args.layers),
           "--heads", str(args.heads), "--tokens", str(args.tokens), "--reps", str(args.reps),
           "--checkpoint", args.checkpoint]
    procs = [subprocess.Popen(cmd + ["--rank", str(r)], stdout=subprocess.PIPE, text=True, env=env)
             for r in range(world)]
    outs = [p.communicate(timeout=900)[0] for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit("world %d failed: exit codes %s" % (world, [p.returncode for p in procs]))
    return json.loads(outs[0].strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grade", default="MXFP4")
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--intermediate", type=int, default=2816)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--worlds", default="1,2,4")
    ap.add_argument("--rank-of", type=int, dest="world", help=argparse.SUPPRESS)
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--init", help=argparse.SUPPRESS)
    ap.add_argument("--checkpoint", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank is not None:
        return rank_main(args)
    tmp = tempfile.mkdtemp(prefix="grit_bench_tp_")
    args.checkpoint = os.path.join(tmp, "model.safetensors")
    file_bytes = save_checkpoint(args, args.checkpoint)
    worlds = [int(w) for w in args.worlds.split(",")]
    runs = {w: [] for w in worlds}
    for _ in range(args.rounds):  # interleaved: each round runs every world once
        for w in worlds:
            runs[w].append(launch(args, w))
    print("## Tensor parallelism, %s, hidden %d, intermediate %d, %d layers, %d tokens, %d cores, "
          "torch %s, %s" % (args.grade, args.hidden, args.intermediate, args.layers, args.tokens,
                            os.cpu_count() or 1, __import__("torch").__version__, time.strftime("%Y-%m-%d")))
    print()
    print("Checkpoint: %d bytes. Every rank loads its shards into a meta skeleton." % file_bytes)
    print()
    print("| ranks | packed bytes per rank | load peak per rank (MB) | peak RSS per rank (MB) | forward (ms) "
          "| step (ms) | forward vs 1 rank | step vs 1 rank | ordered forward (ms) | ordered vs forward |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    base = {k: statistics.median(r[k] for r in runs[worlds[0]]) for k in ("forward", "step")}
    for w in worlds:
        med = {k: statistics.median(r[k] for r in runs[w])
               for k in ("forward", "step", "rss", "load_peak", "ordered")}
        print("| %d | %d | %.1f | %.0f | %.1f | %.1f | %.2fx | %.2fx | %.1f | %.2fx |" % (
            w, runs[w][0]["packed_bytes"], med["load_peak"] / 2 ** 20, med["rss"] / 2 ** 20,
            1e3 * med["forward"], 1e3 * med["step"],
            base["forward"] / med["forward"], base["step"] / med["step"],
            1e3 * med["ordered"], med["forward"] / med["ordered"]))


if __name__ == "__main__":
    sys.exit(main())
