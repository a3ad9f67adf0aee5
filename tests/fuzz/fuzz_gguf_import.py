"""atheris (libFuzzer for Python): any bytes as a GGUF file -> torch_grit.load of it
(the bounded header walk, gguf-py's reader, the plan of every tensor, declared
descriptors, the block repack into GRIT planes, the checked GritTensors, and
with the input's first byte odd, requantize="MXFP4" through gguf.quants.dequantize).

Expected, and swallowed: CheckpointError (a file torch_grit refuses, naming why).
Anything else escapes: a finding.

Run: make fuzz / make test-fuzz (or python tests/fuzz/fuzz_gguf_import.py -help=1).
"""

import warnings

import atheris
import numpy  # noqa: F401  (imported before instrumentation: not what is fuzzed)
import torch  # noqa: F401

import pyfuzz  # tests/fuzz/pyfuzz.py: scratch folder, memory ceiling

with atheris.instrument_imports(include=["torch_grit", "gguf"]):
    import gguf  # noqa: F401  (imported here so it is instrumented)
    import torch_grit
    from torch_grit import CheckpointError

FOLDER, PATH = pyfuzz.scratch_path("fuzz_gguf_import_", "model.gguf")
warnings.simplefilter("ignore", RuntimeWarning)   # gguf-py's decoders overflow to inf on random scales


def TestOneInput(data):
    if not data:
        return
    with open(PATH, "wb") as f:
        f.write(data[1:])
    try:
        state = torch_grit.load(PATH, requantize="MXFP4" if data[0] & 1 else None)
    except CheckpointError:
        return
    for t in state.values():
        if isinstance(t, torch_grit.GritTensor):
            t.dequantize()


if __name__ == "__main__":
    pyfuzz.run(TestOneInput)
