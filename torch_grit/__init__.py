"""torch_grit: GRIT quantized tensors for PyTorch.

A quantized weight carries its numeric contract (a GRIT grade), its layout
(placement) and its shape in a 64-byte descriptor that every boundary can
check against the bytes in O(1). The contract is implemented once, in C++
(csrc/grit); this package is its Python face.
"""

import torch  # noqa: F401  (loads libc10/libtorch, which the extension links)

from ._native import load as _load_native

_C = _load_native()  # the native core; a clear ImportError if it is missing or built for another torch
from .check import check, digest
from .codec import decode_planes, encode_planes
from .descriptor import Descriptor
from .errors import GradeError, GritCheckError
from .grade import Grade
from .placement import Placement, placement_name
from . import ops  # noqa: F401  (torch.ops.grit.*: fake kernels and autograd)
from . import nn  # noqa: F401
from .quantize import quantize_
from .cpu_tiles import tile_, untile_
# After the submodule import above, which binds torch_grit.quantize to the module.
from .tensor import GritTensor, quantize, safe_globals
from .checkpoint import load, save
from .safetensors_io import CheckpointError
# Functions named like their modules: bound after the submodule import, as quantize is.
from .profile import profile
from .report import report
from . import quality  # noqa: F401  (torch_grit.quality.causal_lm_nll)

__version__ = "0.1.0"

__all__ = [
    "Grade", "Descriptor", "Placement", "check", "digest", "GritCheckError", "GradeError",
    "encode_planes", "decode_planes", "placement_name",
    "GritTensor", "quantize", "quantize_", "tile_", "untile_", "safe_globals", "nn",
    "save", "load", "CheckpointError", "profile", "report",
]
