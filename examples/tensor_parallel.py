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
"""

import argparse
import copy
import datetime
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

import torch_grit
from torch_grit.nn import GritLinear

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from causal_lm_quality import build_model  # noqa: E402


def megatron_plan():
    """q/k/v/gate/up column-wise, o/down row-wise: one all-reduce per attention and per MLP."""
    plan = {"model.layers.*.self_attn.%s_proj" % p: ColwiseParallel() for p in "qkv"}
    plan.update({"model.layers.*.mlp.gate_proj": ColwiseParallel(),
                 "model.layers.*.mlp.up_proj": ColwiseParallel(),
                 "model.layers.*.self_attn.o_proj": RowwiseParallel(),
                 "model.layers.*.mlp.down_proj": RowwiseParallel()})
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
    args = ap.parse_args()

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    model = build_model(hidden=args.hidden, intermediate=args.intermediate, layers=args.layers,
                        heads=args.heads, vocab=256)
    torch_grit.quantize_(model, args.grade)
    whole = copy.deepcopy(model)
    full_bytes = packed_bytes(model)
    parallelize_module(model, init_device_mesh("cpu", (world,)), megatron_plan(), src_data_rank=None)

    ids = torch.randint(0, 256, (1, args.tokens), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits, want = model(ids).logits, whole(ids).logits
    diff = (logits - want).abs().max().item()
    ok = bool(((logits - want).abs() <= 256 * torch.finfo(torch.float32).eps * (want.abs() + 1)).all())
    mine = torch.tensor([packed_bytes(model), int(ok)], dtype=torch.int64)
    every = [torch.zeros_like(mine) for _ in range(world)]
    dist.all_gather(every, mine)
    if rank == 0:
        print("grade %s, %d ranks; packed linear weights: %d bytes whole" % (args.grade, world, full_bytes))
        for r, t in enumerate(every):
            print("  rank %d holds %d bytes (%.2fx the whole)" % (r, t[0], t[0].item() / full_bytes))
        print("largest logit difference from the unsharded model: %.3g (%s)"
              % (diff, "within the all-reduce bound" if all(t[1] for t in every) else "TOO LARGE"))
    all_ok = all(t[1] for t in every)
    dist.barrier()
    dist.destroy_process_group()
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
