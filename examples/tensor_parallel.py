"""A packed Llama-style model split over processes with torch's own tensor
parallelism: ``parallelize_module`` with ``ColwiseParallel`` (q, k, v, gate,
up: each rank holds some rows of W) and ``RowwiseParallel`` (o, down: each
rank holds whole groups of in_features), gloo on CPU.

    torchrun --standalone --nproc-per-node 2 examples/tensor_parallel.py --grade MXFP4

Every rank builds the same model from the same seed (the small Llama of
examples/causal_lm_quality.py), packs it with ``torch_grit.quantize_`` and
keeps one copy whole for the comparison. Each rank cuts its own shards from
its own copy (``src_data_rank=None``, so nothing is sent), then runs a
forward pass. Rank 0 prints each rank's packed bytes against the whole
model's, and the largest logit difference from the unsharded model. It exits
1 if that difference exceeds the float32 bound of the all-reduces.

``--ordered`` runs o and down with ``torch_grit.parallel.OrderedRowwiseParallel``
instead: the ranks' partial sums continue one another in a fixed order, so
the logits equal the unsharded model's bit for bit (and the example exits 1
if they do not).
"""

import argparse
import copy
import datetime
import gc
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

import torch_grit
from torch_grit.nn import GritLinear
from torch_grit.parallel import OrderedRowwiseParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from causal_lm_quality import build_model  # noqa: E402


def megatron_plan(ordered=False):
    """q/k/v/gate/up column-wise, o/down row-wise: one all-reduce per attention and per MLP
    (``ordered``: one chain of point-to-point sends and a broadcast instead)."""
    row = OrderedRowwiseParallel if ordered else RowwiseParallel
    plan = {"model.layers.*.self_attn.%s_proj" % p: ColwiseParallel() for p in "qkv"}
    plan.update({"model.layers.*.mlp.gate_proj": ColwiseParallel(),
                 "model.layers.*.mlp.up_proj": ColwiseParallel(),
                 "model.layers.*.self_attn.o_proj": row(),
                 "model.layers.*.mlp.down_proj": row()})
    return plan


def packed_bytes(model):
    return sum(m.packed_weight.nbytes_packed for m in model.modules() if isinstance(m, GritLinear))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grade", default="MXFP4")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--intermediate", type=int, default=512)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--ordered", action="store_true",
                    help="row-wise layers by the ordered reduction: logits bit for bit")
    args = ap.parse_args()

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    model = build_model(hidden=args.hidden, intermediate=args.intermediate, layers=args.layers,
                        heads=args.heads, vocab=256)
    torch_grit.quantize_(model, args.grade)
    whole = copy.deepcopy(model)
    full_bytes = packed_bytes(model)
    parallelize_module(model, init_device_mesh("cpu", (world,)), megatron_plan(args.ordered),
                      src_data_rank=None)

    ids = torch.randint(0, 256, (1, args.tokens), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits, want = model(ids).logits, whole(ids).logits
    diff = (logits - want).abs().max().item()
    if args.ordered:
        ok = torch.equal(logits, want)
    else:
        ok = bool(((logits - want).abs() <= 256 * torch.finfo(torch.float32).eps * (want.abs() + 1)).all())
    mine = torch.tensor([packed_bytes(model), int(ok)], dtype=torch.int64)
    every = [torch.zeros_like(mine) for _ in range(world)]
    dist.all_gather(every, mine)
    if rank == 0:
        print("grade %s, %d ranks; packed linear weights: %d bytes whole" % (args.grade, world, full_bytes))
        for r, t in enumerate(every):
            print("  rank %d holds %d bytes (%.2fx the whole)" % (r, t[0], t[0].item() / full_bytes))
        print("largest logit difference from the unsharded model: %.3g (%s)"
              % (diff, ("bit for bit" if args.ordered else "within the all-reduce bound")
                 if all(t[1] for t in every) else ("NOT EQUAL" if args.ordered else "TOO LARGE")))
    all_ok = all(t[1] for t in every)
    # Let go of the sharded model (its DTensors hold the mesh and its group) before the group goes.
    del model, whole, logits, want
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
