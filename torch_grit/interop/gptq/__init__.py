"""GPTQ and AWQ checkpoints imported as GRIT grades with the zero-point convention declared
(docs/interop.md)."""

from .convert import import_quantized
from .layout import LayoutError, grade_text, planes

__all__ = ["import_quantized", "LayoutError", "grade_text", "planes"]
