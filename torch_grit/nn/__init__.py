"""Layers over packed weights: ``GritLinear`` (a drop-in for ``nn.Linear``),
``ScriptableGritLinear`` (its TorchScript form) and ``tile_`` / ``untile_``
(a model's 4-bit weights in the CPU tile layout)."""

from .linear import GritLinear, ScriptableGritLinear
from .tiles import tile_, untile_

__all__ = ["GritLinear", "ScriptableGritLinear", "tile_", "untile_"]
