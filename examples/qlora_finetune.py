"""QLoRA-style fine-tuning through the Hugging Face stack: PEFT LoRA over GRIT packed weights.

The small Llama of causal_lm_quality.py is trained briefly on the first half of
the training text (the "pretrained" model) and saved with save_pretrained; the
folder is converted with ``torch-grit quantize``, reloaded with
``AutoModelForCausalLM.from_pretrained`` and given PEFT LoRA adapters on every
projection; the adapters are then trained on the second half (the "task")
while the packed weights stay frozen. The same adapter training runs over the
float model (same initial adapters, same batches), and both loss curves and the
time per step are printed. Nothing is downloaded. Seeded.

    .venv/bin/python examples/qlora_finetune.py [--steps N] [--grade G] [--json]
"""

import argparse
import json
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import causal_lm_quality as clq  # noqa: E402

import torch_grit  # noqa: E402  (registers quant_method "grit" with transformers)
from torch_grit.cli import main as torch_grit_cli  # noqa: E402
from torch_grit.quantization.quality import causal_lm_nll  # noqa: E402

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def lora(model, rank, seed):
    import peft
    torch.manual_seed(seed)  # the same initial adapters over either base model
    config = peft.LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=TARGETS, lora_dropout=0.0)
    return peft.get_peft_model(model, config)


def fit(model, ids, steps, batch, seq, seed, lr=2e-3):
    """AdamW on the adapters over seeded windows of ``ids``: (losses, seconds per step)."""
    gen = torch.Generator().manual_seed(seed)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    model.train()
    losses, times = [], []
    for _ in range(steps):
        starts = torch.randint(0, ids.numel() - seq - 1, (batch,), generator=gen)
        x = torch.stack([ids[s:s + seq + 1] for s in starts.tolist()])
        t0 = time.perf_counter()
        logits = model(input_ids=x[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    model.eval()
    times.sort()
    return losses, times[len(times) // 2]


def run(steps=40, pretrain_steps=40, grade="MXFP4", rank=8, batch=8, seq=128, seed=0):
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    train_ids, eval_ids = clq.load_tokens()
    half = train_ids.numel() // 2
    base = clq.build_model(seed=seed)
    clq.train(base, train_ids[:half], pretrain_steps, batch=16, seq=seq, seed=seed)
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "float"), os.path.join(tmp, "grit")
        base.save_pretrained(src)
        code = torch_grit_cli(["quantize", src, dst, "--grade", grade])
        if code != 0:
            raise SystemExit("torch-grit quantize exited %d" % code)
        packed = AutoModelForCausalLM.from_pretrained(dst)
        float_model = AutoModelForCausalLM.from_pretrained(src)
        packed_nll = causal_lm_nll(packed, eval_ids, window=clq.WINDOW).nll
        packed_bytes = os.path.getsize(os.path.join(dst, "model.safetensors"))
    results = {}
    for label, model in (("packed", packed), ("float", float_model)):
        tuned = lora(model, rank, seed)
        losses, step_s = fit(tuned, train_ids[half:], steps, batch, seq, seed + 1)
        results[label] = {"losses": losses, "seconds_per_step": step_s,
                          "eval_nll": causal_lm_nll(tuned, eval_ids, window=clq.WINDOW).nll}
    return {"grade": grade, "steps": steps, "rank": rank, "batch": batch, "seq": seq,
            "packed_file_bytes": packed_bytes, "packed_nll_before": packed_nll,
            "threads": torch.get_num_threads(), "machine": clq.machine(), **results}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=40, help="adapter training steps (default 40)")
    ap.add_argument("--pretrain-steps", type=int, default=40)
    ap.add_argument("--grade", default="MXFP4")
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="one JSON document instead of the table")
    args = ap.parse_args()
    out = run(args.steps, args.pretrain_steps, args.grade, args.rank, seed=args.seed)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    p, f = out["packed"], out["float"]
    print("LoRA rank %d on %s over %s packed weights (%d steps of %dx%d tokens, %d threads)"
          % (out["rank"], ", ".join(TARGETS), out["grade"], out["steps"], out["batch"], out["seq"],
             out["threads"]))
    print("step  packed loss  float loss")
    every = max(1, out["steps"] // 10)
    for i in list(range(0, out["steps"], every)) + [out["steps"] - 1]:
        print("%4d  %11.4f  %10.4f" % (i, p["losses"][i], f["losses"][i]))
    print("held-out NLL (nats/token): packed before %.4f, after %.4f; float after %.4f"
          % (out["packed_nll_before"], p["eval_nll"], f["eval_nll"]))
    print("time per step (median): packed %.1f ms, float %.1f ms (packed at %.2fx the float speed)"
          % (p["seconds_per_step"] * 1e3, f["seconds_per_step"] * 1e3,
             f["seconds_per_step"] / p["seconds_per_step"]))


if __name__ == "__main__":
    main()
