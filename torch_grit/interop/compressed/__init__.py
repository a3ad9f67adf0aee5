"""compressed-tensors pack-quantized and int-quantized checkpoints imported as GRIT grades (docs/interop.md)."""

from .convert import import_compressed

__all__ = ["import_compressed"]
