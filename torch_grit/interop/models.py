"""``import_model_folder``: a quantized Hugging Face model folder, by its quant_method."""

import json
import os

from ..checkpoint.safetensors_io import CheckpointError

METHODS = ("gptq", "awq", "compressed-tensors")


def import_model_folder(src, dst, max_shard_size=None, on_tensor=None):
    """A GPTQ, AWQ or compressed-tensors (pack-quantized or int-quantized) model folder ``src`` as a GRIT model
    folder ``dst``; the family is config.json's ``quantization_config.quant_method``. Returns
    ``(files written, records)`` (``interop.folder.import_folder``)."""
    path = os.path.join(str(src), "config.json")
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise CheckpointError("config.json: %s" % e, path, field="config.json") from None
    qc = doc.get("quantization_config") if isinstance(doc, dict) else None
    method = str(qc.get("quant_method", "")).lower() if isinstance(qc, dict) else None
    if method in ("gptq", "awq"):
        from .gptq import import_quantized as run
    elif method == "compressed-tensors":
        from .compressed import import_compressed as run
    else:
        raise CheckpointError("quantization_config.quant_method is %r; torch-grit import reads %s model folders "
                              "(and GGUF files)" % (qc.get("quant_method") if isinstance(qc, dict) else None,
                                                    ", ".join(METHODS)), path, field="quant_method")
    return run(src, dst, max_shard_size=max_shard_size, on_tensor=on_tensor)
