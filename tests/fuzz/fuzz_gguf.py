"""atheris (libFuzzer for Python): any bytes as a GGUF file -> the scan of it
(header walk, gguf-py's reader, declared and inferred contracts, --deep).

The bytes are written to a private tmpfs folder as model.gguf, since the reader
takes a path. Expected, and swallowed: Unparseable (the scan's exit-4 path).
Anything else escapes: a finding. gguf-py is instrumented too, so coverage
feedback reaches into the reader our bounds walk guards.

Run: make fuzz / make test-fuzz (or python tests/fuzz/fuzz_gguf.py -help=1).
"""

import atheris
import numpy  # noqa: F401  (imported before instrumentation: not what is fuzzed)
import torch  # noqa: F401

import pyfuzz  # tests/fuzz/pyfuzz.py: scratch folder, memory ceiling

with atheris.instrument_imports(include=["torch_grit", "gguf"]):
    import gguf  # noqa: F401  (imported here so it is instrumented)
    import torch_grit.scan  # noqa: F401  (pyfuzz.scan_file's modules, instrumented)
    from torch_grit.scan.gguf_scan import scan_gguf

FOLDER, PATH = pyfuzz.scratch_path("fuzz_gguf_", "model.gguf")


def TestOneInput(data):
    with open(PATH, "wb") as f:
        f.write(data)
    pyfuzz.scan_file(scan_gguf, PATH)


if __name__ == "__main__":
    pyfuzz.run(TestOneInput)
