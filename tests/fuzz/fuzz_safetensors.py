"""atheris (libFuzzer for Python): any bytes as a safetensors file -> torch_grit.load
and the scan of it (--deep included), and with a config.json the model folder
import (torch_grit.interop.models.import_model_folder: GPTQ, AWQ, compressed-tensors)
into a scratch folder.

Input: byte 0 is a flag; with bit 0 set, a little-endian u16 length n and n bytes
of config.json follow (the GPTQ / AWQ / compressed-tensors families read their
contract from it); the rest is the .safetensors file. Both are written to a
private tmpfs folder, since the readers take paths.

Expected, and swallowed: CheckpointError and GritCheckError from load and the
import (their documented refusals) and Unparseable from the scan (exit 4). Anything else
escapes: a finding.

Run: make fuzz / make test-fuzz (or python tests/fuzz/fuzz_safetensors.py -help=1).
"""

import os
import shutil

import atheris
import torch  # noqa: F401  (imported before instrumentation: torch itself is not what is fuzzed)

import pyfuzz  # tests/fuzz/pyfuzz.py: scratch folder, memory ceiling

with atheris.instrument_imports(include=["torch_grit"]):
    import torch_grit
    from torch_grit.contract.errors import GritCheckError
    from torch_grit.checkpoint.safetensors_io import CheckpointError
    import torch_grit.scan  # noqa: F401  (pyfuzz.scan_file's modules, instrumented)
    from torch_grit.scan.st_scan import scan_safetensors
    from torch_grit.interop.models import import_model_folder

FOLDER, PATH = pyfuzz.scratch_path("fuzz_st_", "model.safetensors")
CONFIG = os.path.join(FOLDER, "config.json")
OUT = FOLDER + "_out"


def split(data):
    """(config bytes or None, file bytes)."""
    if not data:
        return None, b""
    if data[0] & 1 and len(data) >= 3:
        n = int.from_bytes(data[1:3], "little")
        return data[3:3 + n], data[3 + n:]
    return None, data[1:]


def TestOneInput(data):
    config, blob = split(data)
    with open(PATH, "wb") as f:
        f.write(blob)
    if config is None:
        if os.path.exists(CONFIG):
            os.unlink(CONFIG)
    else:
        with open(CONFIG, "wb") as f:
            f.write(config)

    try:
        torch_grit.load(PATH, verify="digest")
    except (CheckpointError, GritCheckError):
        pass

    pyfuzz.scan_file(scan_safetensors, PATH)

    if config is not None:
        shutil.rmtree(OUT, ignore_errors=True)
        try:
            import_model_folder(FOLDER, OUT)
        except (CheckpointError, GritCheckError):
            pass


if __name__ == "__main__":
    pyfuzz.run(TestOneInput)
