"""The ``torch.ops.grit`` operators: typed wrappers, fake kernels, autograd.

The schemas live in csrc/ops/registry.cpp and the CPU kernels next to it;
this module adds what torch needs to trace them (a fake kernel for every
op, so torch.compile and torch.export see output shapes without running
them) and the gradient of ``packed_linear``.

Every op takes the planes as four 1-D uint8 tensors ``[data, scale0,
scale1, aux]`` (an absent plane is an empty tensor), the grade as a string
(canonical, any accepted spelling, or a reference name such as ``"MXFP4"``)
and the logical shape as a list of ints; groups run along the last
dimension. Bad arguments raise TypeError (a dtype) or ValueError (anything
else), naming the op, the argument, the expected and the found value.
"""

import functools
from typing import List, Optional, Sequence, Union

import torch
from torch import Tensor

from . import _C  # noqa: F401  (registers the grit:: schemas and CPU kernels)
from .grade import Grade

__all__ = ["quantize", "dequantize", "packed_linear", "check"]

_FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)

GradeLike = Union[str, Grade]
Planes = Sequence[Optional[Tensor]]


def _grade_str(grade: GradeLike) -> str:
    if isinstance(grade, Grade):
        return grade.canonical
    if not isinstance(grade, str):
        raise TypeError("grade must be a str or torch_grit.Grade, found %s" % type(grade).__name__)
    return grade


def _planes4(planes: Planes) -> List[Tensor]:
    planes = list(planes)
    if not 1 <= len(planes) <= 4:
        raise ValueError("planes: expected 1 to 4 tensors [data, scale0, scale1, aux], found %d"
                         % len(planes))
    device = next((p.device for p in planes if p is not None), torch.device("cpu"))
    planes += [None] * (4 - len(planes))
    return [torch.empty(0, dtype=torch.uint8, device=device) if p is None else p for p in planes]


def _shape(shape) -> List[int]:
    return [int(d) for d in shape]


# ---------------------------------------------------------------------------
# Typed wrappers


def quantize(w: Tensor, grade: GradeLike) -> List[Tensor]:
    """Quantize a 2-D weight ``[out, in]`` with the reference encoder.

    ``w`` is float32, bfloat16 or float16; groups run along ``in``, which
    must be a multiple of the grade's ``k0``. Returns the four planes
    ``[data, scale0, scale1, aux]`` as 1-D uint8 tensors on ``w``'s device
    (absent planes are empty).
    """
    return list(torch.ops.grit.quantize.default(w, _grade_str(grade)))


def dequantize(planes: Planes, grade: GradeLike, shape: Sequence[int],
               dtype: torch.dtype = torch.float32) -> Tensor:
    """Decode planes to a tensor of ``shape`` by the reference decode, cast to ``dtype``.

    The values are the contract's (NaN from a NaN scale included); the
    planes are first checked against the grade and shape.
    """
    return torch.ops.grit.dequantize.default(*_planes4(planes), _grade_str(grade), _shape(shape), dtype)


def packed_linear(x: Tensor, planes: Planes, grade: GradeLike, shape: Sequence[int],
                  bias: Optional[Tensor] = None) -> Tensor:
    """``y = x @ W.T + bias`` with ``W`` the ``[out, in]`` weight the planes decode to.

    ``x`` is ``[..., in]`` of float32, bfloat16 or float16 and ``y`` has
    ``x``'s dtype. Products and sums are float32, each output element is
    reduced in one fixed order (on CPU ascending ``in``, every instruction
    set alike; on CUDA the order csrc/kernels/cuda/packed_linear_cuda.h
    gives), so results do not depend on the thread count, and the bias is
    added last. ``W`` is decoded tile by tile, never
    as a whole. Differentiable in ``x`` and ``bias``.
    """
    return torch.ops.grit.packed_linear.default(x, *_planes4(planes), _grade_str(grade),
                                                _shape(shape), bias)


def check(planes: Planes, grade: GradeLike, shape: Sequence[int]) -> bool:
    """Level-1 check of the planes' byte lengths against the grade and shape.

    Returns True or raises ValueError naming the plane or field, the
    expected value and the one found (TypeError for a plane that is not
    uint8). For descriptors use
    ``torch_grit.check``.
    """
    return torch.ops.grit.check.default(*_planes4(planes), _grade_str(grade), _shape(shape))


# ---------------------------------------------------------------------------
# Fake kernels: output metadata only, for FakeTensor / torch.compile / export


@functools.lru_cache(maxsize=256)
def _parsed(grade: str) -> Grade:
    return Grade.parse(grade)


def _plane_bytes(grade: str, numel) -> List:
    """Plane byte lengths for ``numel`` elements; ``numel`` may be symbolic."""
    g = _parsed(grade)
    if isinstance(numel, int):
        return g.plane_bytes(numel)
    return _plane_bytes_affine(g, numel)


def _plane_bytes_affine(g: Grade, numel) -> List:
    """The size equations as a formula that also takes a SymInt.

    Every plane length is ceil(a * numel / unit) plus a constant (a
    per-tensor scale), with ``unit`` a whole number of groups, super-groups,
    sparsity quads and bytes; so the lengths at 0 and at ``unit`` fix it.
    """
    n = g._native
    unit = n.k0 * max(1, n.k1) * max(1, n.sp_m) * 8
    base = g.plane_bytes(0)
    step = g.plane_bytes(unit)
    return [b + (-((-(s - b) * numel) // unit)) for b, s in zip(base, step)]


_PLANE_NAMES = ("data", "scale0", "scale1", "aux")


def _check_one_device(op, anchor_name, anchor, planes, bias=None):
    """The device rule of the real kernels, in the fakes too.

    A plane on the meta device next to a CPU input would otherwise dispatch
    here (Meta outranks CPU) and hand back an uninitialised CPU tensor.
    """
    named = [("plane '%s'" % n, p) for n, p in zip(_PLANE_NAMES, planes)]
    if bias is not None:
        named.append(("argument 'bias'", bias))
    for name, t in named:
        torch._check_value(t.device == anchor.device, lambda: (
            "%s: %s is on %s but %s is on %s; every tensor argument must be on one device "
            "(move the layer or the input with .to())"
            % (op, name, t.device, anchor_name, anchor.device)))


@torch.library.register_fake("grit::quantize")
def _quantize_fake(w, grade):
    torch._check(w.dim() == 2, lambda: "grit::quantize: w must be 2-D [out, in], found %d dims" % w.dim())
    torch._check(w.dtype in _FLOAT_DTYPES,
                 lambda: "grit::quantize: w must be float32, bfloat16 or float16, found %s" % w.dtype)
    return [w.new_empty(n, dtype=torch.uint8) for n in _plane_bytes(grade, w.numel())]


@torch.library.register_fake("grit::dequantize")
def _dequantize_fake(data, scale0, scale1, aux, grade, shape, dtype):
    _check_one_device("grit::dequantize", "plane 'data'", data, (data, scale0, scale1, aux))
    return data.new_empty(shape, dtype=dtype)


@torch.library.register_fake("grit::packed_linear")
def _packed_linear_fake(x, data, scale0, scale1, aux, grade, shape, bias):
    _check_one_device("grit::packed_linear", "argument 'x'", x, (data, scale0, scale1, aux), bias)
    torch._check(len(shape) == 2, lambda: "grit::packed_linear: shape must be [out, in], found %s" % (shape,))
    torch._check(x.shape[-1] == shape[1],
                 lambda: "grit::packed_linear: x has %s in-features, the weight %s" % (x.shape[-1], shape[1]))
    return x.new_empty((*x.shape[:-1], shape[0]))


@torch.library.register_fake("grit::packed_linear_grad_input")
def _packed_linear_grad_input_fake(grad_y, data, scale0, scale1, aux, grade, shape):
    _check_one_device("grit::packed_linear_grad_input", "argument 'grad_y'", grad_y,
                      (data, scale0, scale1, aux))
    torch._check(len(shape) == 2, lambda: "grit::packed_linear_grad_input: shape must be [out, in]")
    return grad_y.new_empty((*grad_y.shape[:-1], shape[1]))


@torch.library.register_fake("grit::check")
def _check_fake(data, scale0, scale1, aux, grade, shape):
    return True


# ---------------------------------------------------------------------------
# Autograd: gradients flow to x and bias; the packed planes are frozen.


def _packed_linear_setup(ctx, inputs, output):
    x, data, scale0, scale1, aux, grade, shape, bias = inputs
    ctx.save_for_backward(data, scale0, scale1, aux)
    ctx.grade = grade
    ctx.shape = shape
    ctx.bias_dtype = bias.dtype if bias is not None else None


def _packed_linear_backward(ctx, grad_y):
    data, scale0, scale1, aux = ctx.saved_tensors
    grad_x = grad_bias = None
    if ctx.needs_input_grad[0]:
        grad_x = torch.ops.grit.packed_linear_grad_input.default(
            grad_y, data, scale0, scale1, aux, ctx.grade, ctx.shape)
    if ctx.bias_dtype is not None and ctx.needs_input_grad[7]:
        grad_bias = grad_y.reshape(-1, ctx.shape[0]).sum(0, dtype=torch.float32).to(ctx.bias_dtype)
    return grad_x, None, None, None, None, None, None, grad_bias


torch.library.register_autograd("grit::packed_linear", _packed_linear_backward,
                                setup_context=_packed_linear_setup)


def _grad_input_setup(ctx, inputs, output):
    grad_y, data, scale0, scale1, aux, grade, shape = inputs
    ctx.save_for_backward(data, scale0, scale1, aux)
    ctx.grade = grade
    ctx.shape = shape


def _grad_input_backward(ctx, grad_grad_x):
    # grad_x = grad_y @ W is linear in grad_y: its gradient is packed_linear.
    data, scale0, scale1, aux = ctx.saved_tensors
    grad_grad_y = None
    if ctx.needs_input_grad[0]:
        grad_grad_y = torch.ops.grit.packed_linear.default(
            grad_grad_x, data, scale0, scale1, aux, ctx.grade, ctx.shape, None)
    return grad_grad_y, None, None, None, None, None, None


torch.library.register_autograd("grit::packed_linear_grad_input", _grad_input_backward,
                                setup_context=_grad_input_setup)
