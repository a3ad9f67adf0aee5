"""A causal language model before and after quantizing: NLL and perplexity on fixed text.

Nothing is downloaded. The text is examples/data/corpus.txt (our own prose,
shipped in the repo), the tokenizer is its UTF-8 bytes (256 token ids), and
the model is a small Llama-style transformers model (every projection an
nn.Linear whose in_features, 256 or 512, every reference grade's groups tile)
built from a config and trained briefly on the first 90% of the text. For each
grade a copy is quantized in place with torch_grit.quantize_ and scored on the
last 10% (held out, cut into fixed windows) with torch_grit.quality.causal_lm_nll;
torch_grit.report adds the per-layer errors. Seeded: the same machine and
thread count print the same numbers.

    .venv/bin/python examples/causal_lm_quality.py [--steps N] [--json]
"""

import argparse
import copy
import functools
import json
import os
import platform
import time

import torch

import torch_grit
from torch_grit.quantization.quality import causal_lm_nll

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "corpus.txt")
GRADES = ("MXFP4", "NVF4", "Q4KS", "I8S24", "auto")
HELD_OUT = 0.1   # the last tenth of the text is never trained on
WINDOW = 128     # tokens of context per scored window


def load_tokens(path=CORPUS, held_out=HELD_OUT):
    """(train_ids, eval_ids): the corpus's UTF-8 bytes as token ids, split at a fixed point."""
    with open(path, "rb") as f:
        ids = torch.tensor(list(f.read()), dtype=torch.long)
    cut = int(round(ids.numel() * (1.0 - held_out)))
    return ids[:cut], ids[cut:]


def build_model(hidden=256, intermediate=512, layers=2, heads=4, vocab=256, context=256, seed=0):
    """A Llama-style causal LM from a config, randomly initialised with ``seed``."""
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    config = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=intermediate,
                         num_hidden_layers=layers, num_attention_heads=heads,
                         num_key_value_heads=heads, max_position_embeddings=context,
                         tie_word_embeddings=False, attn_implementation="sdpa")
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


def train(model, ids, steps, batch=16, seq=WINDOW, lr=3e-3, seed=0):
    """AdamW on random windows of ``ids`` (positions drawn from a seeded generator).

    Returns the training loss (nats/token) of every step.
    """
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 10) * max(0.1, 1.0 - s / max(steps, 1)))
    model.train()
    losses = []
    for _ in range(steps):
        starts = torch.randint(0, ids.numel() - seq - 1, (batch,), generator=gen)
        x = torch.stack([ids[s:s + seq + 1] for s in starts.tolist()])
        logits = model(input_ids=x[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
    model.eval()
    return losses


def compare_grades(model, eval_ids, grades=GRADES, window=WINDOW):
    """Quantize a copy of ``model`` to each grade; one dict per grade with its quality and report."""
    quality = functools.partial(causal_lm_nll, token_ids=eval_ids, window=window)
    rows = []
    for grade in grades:
        t0 = time.perf_counter()
        quantized = copy.deepcopy(model)
        layers = torch_grit.quantize_(quantized, grade)
        packed = [l for l in layers if l.quantized]
        rep = torch_grit.report(model, quantized, quality=quality)
        chosen = {}
        for l in packed:
            name = torch_grit.Grade.parse(l.grade).name or l.grade
            name = name[len("GRADE_"):] if name.startswith("GRADE_") else name
            chosen[name] = chosen.get(name, 0) + 1
        rows.append({
            "grade": grade, "grades_chosen": chosen,
            "layers_packed": len(packed), "layers": len(layers),
            "linear_bytes_before": sum(l.bytes_before for l in packed),
            "linear_bytes_after": sum(l.bytes_after for l in packed),
            "before": rep.quality_before, "after": rep.quality_after,
            "seconds": time.perf_counter() - t0, "report": rep})
    return rows


def machine():
    return "%s, %d cores visible, torch %d threads, torch %s, transformers %s" % (
        platform.machine(), os.cpu_count(), torch.get_num_threads(), torch.__version__,
        __import__("transformers").__version__)


def print_results(info, rows, tables=True):
    print("causal LM: %s; %d parameters; trained %d steps of %d x %d tokens in %.1f s wall, "
          "%.1f s CPU (loss %.3f -> %.3f)"
          % (info["model"], info["parameters"], info["steps"], info["batch"], info["seq"],
             info["train_seconds"], info["train_cpu_seconds"], info["train_loss_first"],
             info["train_loss_last"]))
    print("held-out text: %d bytes, windows of %d tokens; untrained model NLL %.4f"
          % (info["eval_tokens"], info["window"], info["untrained_nll"]))
    print("machine: %s" % info["machine"])
    print()
    print("| grade | layers packed | packed weights KB | NLL nats/token | perplexity | ppl change |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        name = r["grade"]
        if r["grade"] == "auto":
            name += " (%s)" % ", ".join("%s x%d" % kv for kv in sorted(r["grades_chosen"].items()))
        b, a = r["before"], r["after"]
        print("| %s | %d/%d | %.1f -> %.1f | %.4f -> %.4f | %.3f -> %.3f | %+.2f%% |" % (
            name, r["layers_packed"], r["layers"], r["linear_bytes_before"] / 1024,
            r["linear_bytes_after"] / 1024, b["nll"], a["nll"], b["perplexity"], a["perplexity"],
            100.0 * (a["perplexity"] / b["perplexity"] - 1.0)))
    if tables:
        for r in rows:
            print()
            print("## %s" % r["grade"])
            print(r["report"].table())


def run(steps=60, hidden=256, intermediate=512, layers=2, heads=4, batch=16, seq=WINDOW, seed=0,
        grades=GRADES):
    """Build, train and compare; returns (info, rows)."""
    train_ids, eval_ids = load_tokens()
    model = build_model(hidden, intermediate, layers, heads, seed=seed)
    untrained = causal_lm_nll(model, eval_ids, window=WINDOW)
    t0, c0 = time.perf_counter(), time.process_time()
    losses = train(model, train_ids, steps, batch=batch, seq=seq, seed=seed)
    seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
    rows = compare_grades(model, eval_ids, grades)
    info = {"model": "Llama hidden %d, intermediate %d, %d layers, %d heads, byte vocabulary 256"
                     % (hidden, intermediate, layers, heads),
            "parameters": sum(p.numel() for p in model.parameters()), "steps": steps,
            "batch": batch, "seq": seq, "seed": seed, "train_seconds": seconds, "train_cpu_seconds": cpu_seconds,
            "train_loss_first": losses[0] if losses else float("nan"),
            "train_loss_last": losses[-1] if losses else float("nan"),
            "untrained_nll": untrained.nll, "eval_tokens": eval_ids.numel(), "window": WINDOW,
            "machine": machine()}
    return info, rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=60, help="training steps (default 60)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON document instead")
    parser.add_argument("--no-tables", action="store_true", help="leave out the per-layer tables")
    args = parser.parse_args()
    info, rows = run(steps=args.steps, seed=args.seed)
    if args.json:
        for r in rows:
            r["report"] = json.loads(r["report"].to_json())
        print(json.dumps({"info": info, "grades": rows}, indent=2))
    else:
        print_results(info, rows, tables=not args.no_tables)


if __name__ == "__main__":
    main()
