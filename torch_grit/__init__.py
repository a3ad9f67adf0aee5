"""torch_grit: GRIT quantized tensors for PyTorch.

A quantized weight carries its numeric contract (a GRIT grade), its layout
(placement) and its shape in a 64-byte descriptor that every boundary can
check against the bytes in O(1). The contract is implemented once, in C++
(csrc/grit); this package is its Python face.
"""

import torch  # noqa: F401  (loads libc10/libtorch, which the extension links)

from ._native import load as _load_native

_C = _load_native()  # the native core; a clear ImportError if it is missing or built for another torch
# The layers bottom up (docs/architecture.md); each folder imports only those above it here.
from .contract.check import check, digest
from .contract.codec import decode_planes, encode_planes
from .contract.descriptor import Descriptor
from .contract.errors import GradeError, GritCheckError
from .contract.grade import Grade
from .contract.placement import Placement, placement_name
from . import ops  # noqa: F401  (torch.ops.grit.*: fake kernels and autograd)
from .tensor import GritTensor, quantize, safe_globals
from . import nn  # noqa: F401  (torch_grit.nn.GritLinear)
from .nn import tile_, untile_
from .quantization.quantize_model import quantize_
from .quantization.profile import profile
from .quantization.report import report
from .quantization import quality  # noqa: F401  (torch_grit.quality.causal_lm_nll)
from .interop.files import load, save
from .checkpoint.safetensors_io import CheckpointError

from .integrations import hook as _hf_hook

__version__ = "0.1.0"

_hf_hook.install()  # quant_method "grit" in transformers, once transformers is imported

_LAZY = {"GritConfig": "GritConfig", "save_pretrained": "save_pretrained"}


def __getattr__(name):
    # The Hugging Face names import transformers: only when asked for.
    if name in _LAZY:
        from .integrations import hf
        return getattr(hf, _LAZY[name])
    raise AttributeError("module 'torch_grit' has no attribute %r" % name)

__all__ = [
    "Grade", "Descriptor", "Placement", "check", "digest", "GritCheckError", "GradeError",
    "encode_planes", "decode_planes", "placement_name",
    "GritTensor", "quantize", "quantize_", "tile_", "untile_", "safe_globals", "nn",
    "save", "load", "CheckpointError", "profile", "report", "GritConfig", "save_pretrained",
]
