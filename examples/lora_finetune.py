"""LoRA fine-tuning over a GRIT-quantized MLP, in plain PyTorch (no peft).

1. Train a small float MLP to imitate a fixed random teacher (task A).
2. Pack its linear layers in place with ``torch_grit.quantize_``: the weights
   become frozen GritTensors, the biases stay float.
3. Wrap every GritLinear in a rank-r LoRA adapter and train the adapters
   only, on task B: the same teacher with a low-rank change to each layer,
   which is what an adapter can learn.

Prints the task-B loss every ``--every`` steps and exits 1 unless it fell
to under half its starting value; then times the same adapter training
(the same adapters, data and steps) over the float model, frozen, and
prints both times. Deterministic (fixed seeds, fixed reduction order in the
packed kernel); runs in seconds on a CPU (``--hidden 4096 --batch 512``
for training-size layers). ``--bf16`` trains in bfloat16 instead: the model,
adapters and data in bfloat16 and the packed layers under the bf16
activation law (``activations="bf16"``: AMX tile multiplies where the CPU
has them, else AVX512_BF16's vdpbf16ps), against the same loop over the
bfloat16 float model.

    .venv/bin/python examples/lora_finetune.py --grade NVF4 --rank 8
    .venv/bin/python examples/lora_finetune.py --hidden 4096 --batch 512 --steps 30 --bf16
"""

import argparse
import copy
import sys
import time

import torch
from torch import nn

import torch_grit
from torch_grit.nn import GritLinear

D_IN, D_OUT = 256, 16
D_HIDDEN = 256  # --hidden


def mlp():
    return nn.Sequential(nn.Linear(D_IN, D_HIDDEN), nn.GELU(), nn.Linear(D_HIDDEN, D_OUT))


class LoRALinear(nn.Module):
    """y = base(x) + scale * (x A^T) B^T, with base frozen and B starting at zero."""

    def __init__(self, base, rank, alpha, dtype=torch.float32):
        super().__init__()
        self.base = base
        self.lora_a = nn.Parameter((torch.randn(rank, base.in_features) / base.in_features ** 0.5).to(dtype))
        self.lora_b = nn.Parameter(torch.zeros(base.out_features, rank, dtype=dtype))
        self.scale = alpha / rank

    def forward(self, x):
        return self.base(x) + (x @ self.lora_a.t()) @ self.lora_b.t() * self.scale


def add_adapters(model, rank, alpha, kind=GritLinear, dtype=torch.float32):
    for name, child in list(model.named_children()):
        if isinstance(child, kind):
            setattr(model, name, LoRALinear(child, rank, alpha, dtype))
        else:
            add_adapters(child, rank, alpha, kind, dtype)


def shifted_teacher(teacher, rank, gen):
    """The teacher plus a low-rank change to every weight: task B."""
    shifted = mlp()
    shifted.load_state_dict(teacher.state_dict())
    with torch.no_grad():
        for layer in shifted:
            if isinstance(layer, nn.Linear):
                out, inp = layer.weight.shape
                u = torch.randn(out, rank, generator=gen)
                v = torch.randn(rank, inp, generator=gen)
                layer.weight += 0.5 * (u @ v) / (rank * inp) ** 0.5
    return shifted


def fit(model, params, target, steps, lr, gen, every=0, label="", batch=128, dtype=torch.float32):
    opt = torch.optim.Adam(params, lr=lr)
    losses = []
    for step in range(steps + 1):
        x = torch.randn(batch, D_IN, generator=gen)
        with torch.no_grad():
            y = target(x)
        loss = (model(x.to(dtype)).float() - y).pow(2).mean()
        losses.append(loss.item())
        if every and step % every == 0:
            print("%s step %4d  loss %.5f" % (label, step, loss.item()))
        if step < steps:
            opt.zero_grad()
            loss.backward()
            opt.step()
    return losses


def main(argv=None):
    global D_HIDDEN
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--grade", default="NVF4", help="a GRIT grade or reference name")
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--every", type=int, default=25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hidden", type=int, default=D_HIDDEN, help="the MLP's hidden width")
    parser.add_argument("--batch", type=int, default=128, help="rows per training step")
    parser.add_argument("--bf16", action="store_true",
                        help="train in bfloat16, the packed layers under activations='bf16'")
    args = parser.parse_args(argv)
    D_HIDDEN = args.hidden
    dtype = torch.bfloat16 if args.bf16 else torch.float32

    start = time.time()
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    teacher = mlp().requires_grad_(False)
    student = mlp()
    fit(student, student.parameters(), teacher, 100, 3e-3, gen)
    student = student.to(dtype)
    float_student = copy.deepcopy(student).requires_grad_(False)

    reports = torch_grit.quantize_(student, args.grade, activations="bf16" if args.bf16 else None)
    for r in reports:
        print("%-4s %-12s %s  %6d -> %6d bytes" % (r.fqn, r.shape, "packed" if r.quantized else
                                                  "kept (%s)" % r.skipped, r.bytes_before,
                                                  r.bytes_after))
    student.requires_grad_(False)  # the float leftovers (biases, skipped layers) stay as they are
    add_adapters(student, args.rank, alpha=2.0 * args.rank, dtype=dtype)
    adapters = [p for n, p in student.named_parameters() if "lora_" in n]
    initial = [p.detach().clone() for p in adapters]
    print("training %d adapter weights over %s; the packed weights are frozen"
          % (sum(p.numel() for p in adapters), torch_grit.Grade.parse(args.grade).canonical))

    target = shifted_teacher(teacher, args.rank, gen).requires_grad_(False)
    data_seed = args.seed + 1
    t0 = time.perf_counter()
    losses = fit(student, adapters, target, args.steps, 1e-2, torch.Generator().manual_seed(data_seed),
                 args.every, "task B", args.batch, dtype)
    packed_s = time.perf_counter() - t0
    first, last = losses[0], min(losses[-5:])
    print("loss %.5f -> %.5f (%.1fx lower) in %.1f s" % (first, last, first / last,
                                                         time.time() - start))
    # The same adapter training over the float model: the same initial adapters, data and steps.
    add_adapters(float_student, args.rank, alpha=2.0 * args.rank, kind=nn.Linear, dtype=dtype)
    float_adapters = [p for n, p in float_student.named_parameters() if "lora_" in n]
    with torch.no_grad():
        for p, init in zip(float_adapters, initial):
            p.copy_(init)
    t0 = time.perf_counter()
    fit(float_student, float_adapters, target, args.steps, 1e-2, torch.Generator().manual_seed(data_seed),
        batch=args.batch, dtype=dtype)
    float_s = time.perf_counter() - t0
    print("adapter training, %d steps of %d rows: packed %.2f s, float %.2f s (packed at %.2fx the float speed)"
          % (args.steps, args.batch, packed_s, float_s, float_s / packed_s))
    if not last < 0.5 * first:
        print("FAIL: the loss did not fall", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
