"""atheris (libFuzzer for Python): any bytes as a model folder's config.json and
tokenizer.json -> torch_grit.save(state, "x.gguf", config=..., tokenizer=...) in
llama.cpp's layout (the config's hyperparameters, the tokenizer's vocab, gguf-py's
SpecialVocab / LlamaHfVocab over the folder).

The input: a flag byte (bit 0: write tokenizer.json; bit 1: tokenizer_config.json
too), a u16 length and config.json, then the tokenizer file(s) split at a u16 length.
The state dict is a fixed tiny Llama layer set, so the refusals reached are the
readers' own.

Expected, and swallowed: ValueError (a refusal naming the file and field, nothing
written). Anything else escapes: a finding.

Run: make fuzz / make test-fuzz (or python tests/fuzz/fuzz_gguf_export.py -help=1).
"""

import os
import warnings

import atheris
import numpy  # noqa: F401  (imported before instrumentation: not what is fuzzed)
import torch

import pyfuzz  # tests/fuzz/pyfuzz.py: scratch folder, memory ceiling

with atheris.instrument_imports(include=["torch_grit.interop.gguf", "gguf"]):
    import gguf  # noqa: F401
    import torch_grit
    import torch_grit.interop.gguf.llama_cpp  # noqa: F401  (imported lazily by the export: instrument it here)

FOLDER, PATH = pyfuzz.scratch_path("fuzz_gguf_export_", "out.gguf")
warnings.simplefilter("ignore")

_W = torch.randn(64, 64, generator=torch.Generator().manual_seed(0))
STATE = {
    "model.embed_tokens.weight": torch.zeros(8, 64),
    "model.layers.0.self_attn.q_proj.weight": torch_grit.quantize(_W, "MXFP4"),
    "model.layers.0.self_attn.k_proj.weight": torch_grit.quantize(_W[:32], "MXFP4"),
    "model.norm.weight": torch.ones(64),
}


def _split(data):
    if len(data) < 2:
        return data, b""
    n = int.from_bytes(data[:2], "little")
    return data[2:2 + n], data[2 + n:]


def TestOneInput(data):
    if not data:
        return
    flags, rest = data[0], data[1:]
    config, rest = _split(rest)
    tok, tok_cfg = _split(rest) if flags & 2 else (rest, b"")
    for name, body, on in (("config.json", config, True), ("tokenizer.json", tok, flags & 1),
                           ("tokenizer_config.json", tok_cfg, flags & 2)):
        path = os.path.join(FOLDER, name)
        if on:
            with open(path, "wb") as f:
                f.write(body)
        elif os.path.exists(path):
            os.unlink(path)
    try:
        torch_grit.save(STATE, PATH, layout="llama.cpp", config=FOLDER,
                        tokenizer=FOLDER if flags & 1 else None)
    except ValueError:
        return


if __name__ == "__main__":
    pyfuzz.run(TestOneInput)
