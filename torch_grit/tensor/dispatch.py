"""The table of torch ops a GritTensor claims, and the error for the rest.

``grit_tensor.py`` (moves, copies, the transposed-weight marker) and
``linear.py`` (the matmul family) fill it with ``implements`` /
``implements_function``; ``GritTensor.__torch_dispatch__`` and
``__torch_function__`` read it. A separate module so that both fillers import
it and neither imports the other back.
"""

import torch

from ..contract.errors import UnsupportedOpError

aten = torch.ops.aten

_DISPATCH = {}  # aten overload -> impl(func, args, kwargs), below autograd
_FUNCTION = {}  # torch-level callable -> impl(func, args, kwargs), above autograd


def implements(ops):
    """Claim aten overloads for GritTensor (``__torch_dispatch__``)."""
    def register(fn):
        for op in ops:
            _DISPATCH[op] = fn
        return fn
    return register


def implements_function(funcs):
    """Claim torch-level functions (``__torch_function__``).

    Claimed here, a matmul reaches the packed op before autograd decomposes
    it, so the op's own backward runs instead of an aten.mm on the weight.
    """
    def register(fn):
        for f in funcs:
            _FUNCTION[f] = fn
        return fn
    return register


# In-place arithmetic on a weight: what an adapter merge (PEFT's merge_and_unload,
# ``weight.data += delta``) does. Its own refusal, with the reason and the ways out.
_IN_PLACE_MATH = ("add_", "sub_", "mul_", "div_", "addcmul_", "addcdiv_", "lerp_", "addmm_",
                  "normal_", "uniform_", "zero_", "fill_")


def unsupported(func):
    name = getattr(func, "__name__", str(func))
    if isinstance(func, torch._ops.OpOverload):
        name = "aten.%s" % func.overloadpacket.__name__
        if func.overloadpacket.__name__ in _IN_PLACE_MATH:
            return UnsupportedOpError(
                "GritTensor refuses %s: its bytes are a packed weight, and changing its values in "
                "place (an adapter merge such as PEFT's merge_and_unload, an initializer) would "
                "mean quantizing again, a second rounding the adapter was not trained against. "
                "Keep the adapter unmerged (it runs beside the packed layer), or merge into the "
                "float model and quantize that" % name)
    return UnsupportedOpError("GritTensor does not support %s; call .dequantize() first if you "
                              "want float math on the weight" % name)
