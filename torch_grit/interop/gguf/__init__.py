"""GGUF files: import ggml tensors as checked GritTensors, export GRIT tensors as ggml blocks
(docs/interop.md)."""

from .read import GgufImport, TensorPlan, load_gguf, open_gguf
from .write import save_gguf

__all__ = ["GgufImport", "TensorPlan", "load_gguf", "open_gguf", "save_gguf"]
