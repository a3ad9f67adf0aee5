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

The grade may also be seed 001's ``"INT4G<g>"`` (any case; ``Grade.int4_groups``),
on CPU: ``data`` holds the packed codes (ceil(R*C/2) bytes, row-major, low
nibble first), ``scale0`` the R*ceil(C/g) binary64 scales as raw bytes,
``scale1`` and ``aux`` are empty, the shape is 2-D and any row length is
allowed (a short final group). ``quantize`` also takes float64 weights for it;
``dequantize`` gives the core's binary64 decode cast once to ``dtype``;
``check`` runs the core reader (every refusal names its plane); in
``packed_linear`` each product x*w is formed in binary64 from the binary64
weight and rounded once to float32, then summed as for GRIT grades.
"""

import functools
from typing import List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from . import _C  # noqa: F401  (registers the grit:: schemas and CPU kernels)
from .contract.grade import Grade
from .contract.int4_groups import Int4Groups

__all__ = ["quantize", "dequantize", "packed_linear", "check"]

_FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)

GradeLike = Union[str, Grade]
Planes = Sequence[Optional[Tensor]]


def _grade_str(grade: GradeLike) -> str:
    if isinstance(grade, (Grade, Int4Groups)):
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
                  bias: Optional[Tensor] = None, exact: bool = False) -> Tensor:
    """``y = x @ W.T + bias`` with ``W`` the ``[out, in]`` weight the planes decode to.

    ``x`` is ``[..., in]`` of float32, bfloat16 or float16 and ``y`` has
    ``x``'s dtype. Sums are float32 and each output element is reduced in one
    fixed order: on CPU the law of csrc/grit/linear_law.h (the decoded
    weights' exact values, one FMA chain per k0-group in ascending columns,
    a power-of-two or exact scale applied once per group), every instruction set and batch size alike; on CUDA the order
    csrc/kernels/cuda/packed_linear_cuda.h gives. Results do not depend on
    the thread count, and the bias is added last. ``W`` is decoded tile by
    tile, never as a whole. Differentiable in ``x`` and ``bias``.

    ``exact=True`` is the exact integer mode (csrc/grit/exact_linear.h): ``x``
    is packed by :func:`pack_activations` with the grade's block ``k0`` and
    multiplied by :func:`packed_linear_exact`; ``y`` is then float32, the
    same bits for any thread count and on CPU and CUDA, and not
    differentiable. Grades without an exact integer law are refused with the
    reason.
    """
    if exact:
        codes, scales = pack_activations(x, _exact_block(grade))
        return packed_linear_exact(codes, scales, planes, grade, shape, bias)
    return torch.ops.grit.packed_linear.default(x, *_planes4(planes), _grade_str(grade),
                                                _shape(shape), bias)


def packed_linear_continue(x: Tensor, planes: Planes, grade: GradeLike, shape: Sequence[int], acc: Tensor,
                           bias: Optional[Tensor] = None, finish: bool = False) -> Tensor:
    """The law's sums continued: ``acc`` (float32, ``[..., out]``) carried on over this weight's
    groups, for a weight that is a column cut (on group boundaries) of a larger one whose earlier
    columns left ``acc`` (csrc/grit/linear_law.h). ``finish=False`` returns the new float32 acc;
    ``finish=True`` adds ``bias``, makes NaN canonical and returns y in x's dtype: then the cuts,
    continued in order from zeros, give :func:`packed_linear`'s bits on the whole weight. CPU only
    (the active kernel variant; every variant gives the reference's bits); INT4G is refused. Not differentiable (the ordered tensor-parallel
    reduction supplies the gradient)."""
    return torch.ops.grit.packed_linear_continue.default(x, *_planes4(planes), _grade_str(grade), _shape(shape),
                                                         acc, bias, finish)


def packed_linear_s8(x: Tensor, planes: Planes, grade: GradeLike, shape: Sequence[int],
                     bias: Optional[Tensor] = None) -> Tensor:
    """``y = x @ W.T + bias`` with ``x`` packed to int8 blocks: the s8 activation law.

    Each row of ``x`` is packed per block of ``kb`` values (the grade's
    ``k0``, or 256/128/... of a wider group) by :func:`pack_activations`'s
    rule; each block's integer dot product with the weight's integer codes
    is scaled once by ``f32(activation scale * weight group scale)`` and
    summed in float32 in block order (csrc/grit/s8_linear.h). ``y`` has
    ``x``'s dtype; the same bits for every thread count, CPU kernel variant
    and batch composition. Non-finite ``x`` is refused. Differentiable in
    ``x`` (straight through: the float packed weight's transpose) and
    ``bias``. Grades whose elements are not small integers times a power of
    two (e4m3 elements, ...) are refused with the reason. CPU only.
    """
    return torch.ops.grit.packed_linear_s8.default(x, *_planes4(planes), _grade_str(grade),
                                                   _shape(shape), bias)


def packed_linear_bf16(x: Tensor, planes: Planes, grade: GradeLike, shape: Sequence[int],
                       bias: Optional[Tensor] = None) -> Tensor:
    """``y = x @ W.T + bias`` under the bf16 activation law (csrc/grit/bf16_linear.h).

    ``x`` and the decoded weight are rounded to bfloat16 (values below 2^-126 in magnitude count
    as zero), their products summed in chunks of 32 columns in the order of an AMX-BF16 tile
    multiply (two float32 chains over the even and odd columns, subnormal sums flushed), the
    bias added last. On a CPU whose tile multiply follows that order (checked once) the sums run
    on AMX tiles, at bfloat16 GEMM speed; without AMX on AVX512_BF16's vdpbf16ps where that
    follows the law (checked once), else in a scalar copy of the law: the same bits on every route. ``y`` has ``x``'s dtype; the same bits for every thread count and batch composition.
    Differentiable in ``x`` (straight through the rounding) and ``bias``. CPU only; INT4G is
    refused (quantize to S4_G<group> instead).
    """
    return torch.ops.grit.packed_linear_bf16.default(x, *_planes4(planes), _grade_str(grade),
                                                     _shape(shape), bias)


def packed_linear_bf16_grad_input(grad_y: Tensor, planes: Planes, grade: GradeLike,
                                  shape: Sequence[int]) -> Tensor:
    """``grad_y @ W`` under the bf16 activation law: :func:`packed_linear_bf16`'s backward, the
    reduction over out-features in the same chunks and order. ``grad_x`` has grad_y's dtype."""
    return torch.ops.grit.packed_linear_bf16_grad_input.default(grad_y, *_planes4(planes), _grade_str(grade),
                                                                _shape(shape))


def s8_block(grade: GradeLike) -> int:
    """The activation block ``kb`` the s8 law packs ``x`` with under ``grade``
    (ValueError naming the reason for a grade without an s8 law)."""
    from .contract.codec import s8_law
    return s8_law(_grade_str(grade))["kb"]


def _exact_block(grade: GradeLike) -> int:
    """The activation block of the exact mode: the grade's k0 (1 for a name
    that is not a GRIT grade; packed_linear_exact then refuses it with the reason)."""
    try:
        return int(_parsed(_grade_str(grade))._native.k0)
    except (ValueError, TypeError, RuntimeError):
        return 1


def pack_activations(x: Tensor, block: int = 32) -> Tuple[Tensor, Tensor]:
    """Symmetric int8 packing of ``x [..., k]`` in blocks of ``block`` along ``k``.

    Per row and block: ``scale = f32(max|x| / 127)`` (1 for an all-zero
    block, 2^-149 where the division underflows), ``codes =
    round_half_even(x / scale)`` clamped to [-127, 127]. Returns int8
    ``codes`` of ``x``'s shape and float32 ``scales [..., k / block]``.
    Non-finite ``x`` is refused (ValueError naming the row and column); on
    CUDA that check reads one flag back. Not differentiable.
    """
    return tuple(torch.ops.grit.pack_activations.default(x, int(block)))


def packed_linear_exact(codes: Tensor, scales: Tensor, planes: Planes, grade: GradeLike,
                        shape: Sequence[int], bias: Optional[Tensor] = None) -> Tensor:
    """The exact integer product of packed activations with a packed weight.

    ``codes``/``scales`` come from :func:`pack_activations` with the grade's
    ``k0`` as the block. Per output and block: an integer dot product, one
    half-even rescale onto a fixed-point grid, an exact integer sum, one
    rounding to float32 (the law is in csrc/grit/exact_linear.h). Returns
    float32 ``[..., out]``. Grades whose decode is not an integer code times
    one binary16/e8m0 block scale (Q4KS, NVF4, INT4G, ...) are refused with
    the reason, and so is a grade whose block bound would overflow int64.
    """
    return torch.ops.grit.packed_linear_exact.default(codes, scales, *_planes4(planes),
                                                      _grade_str(grade), _shape(shape), bias)


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


def _check_weight_call(op, anchor_name, anchor, planes, shape, bias=None):
    """The real kernels' device rule and [out, in] shape, in a fake."""
    _check_one_device(op, anchor_name, anchor, planes, bias)
    torch._check(len(shape) == 2, lambda: "%s: shape must be [out, in], found %s" % (op, shape))


def _linear_fake(op, x, planes, shape, bias):
    """A fake for y = x W^T (+ bias): x [..., in] gives [..., out] in x's dtype."""
    _check_weight_call(op, "argument 'x'", x, planes, shape, bias)
    torch._check(x.shape[-1] == shape[1],
                 lambda: "%s: x has %s in-features, the weight %s" % (op, x.shape[-1], shape[1]))
    return x.new_empty((*x.shape[:-1], shape[0]))


def _grad_input_fake(op, grad_y, planes, shape):
    """A fake for grad_x = grad_y W: grad_y [..., out] gives [..., in] in grad_y's dtype."""
    _check_weight_call(op, "argument 'grad_y'", grad_y, planes, shape)
    torch._check(grad_y.shape[-1] == shape[0],
                 lambda: "%s: grad_y has %s out-features, the weight %s" % (op, grad_y.shape[-1], shape[0]))
    return grad_y.new_empty((*grad_y.shape[:-1], shape[1]))


@functools.lru_cache(maxsize=256)
def _int4g_group(grade: str):
    """The group size when ``grade`` names seed 001's INT4G, else None."""
    return _C.int4g_parse_name(grade)


def _int4g_planes_fake(w, group):
    """INT4G planes: ceil(R*C/2) code bytes, 8*R*ceil(C/g) scale bytes, two empty planes."""
    torch._check(w.dtype in _FLOAT_DTYPES + (torch.float64,),
                 lambda: "grit::quantize: w must be float32, bfloat16, float16 or float64 for "
                         "INT4G, found %s" % w.dtype)
    rows, cols = w.shape
    return [w.new_empty((rows * cols + 1) // 2, dtype=torch.uint8),
            w.new_empty(8 * rows * ((cols + group - 1) // group), dtype=torch.uint8),
            w.new_empty(0, dtype=torch.uint8), w.new_empty(0, dtype=torch.uint8)]


@torch.library.register_fake("grit::quantize")
def _quantize_fake(w, grade):
    torch._check(w.dim() == 2, lambda: "grit::quantize: w must be 2-D [out, in], found %d dims" % w.dim())
    if _int4g_group(grade) is not None:
        return _int4g_planes_fake(w, _int4g_group(grade))
    torch._check(w.dtype in _FLOAT_DTYPES,
                 lambda: "grit::quantize: w must be float32, bfloat16 or float16, found %s" % w.dtype)
    return [w.new_empty(n, dtype=torch.uint8) for n in _plane_bytes(grade, w.numel())]


@torch.library.register_fake("grit::dequantize")
def _dequantize_fake(data, scale0, scale1, aux, grade, shape, dtype):
    _check_one_device("grit::dequantize", "plane 'data'", data, (data, scale0, scale1, aux))
    return data.new_empty(shape, dtype=dtype)


@torch.library.register_fake("grit::packed_linear")
def _packed_linear_fake(x, data, scale0, scale1, aux, grade, shape, bias):
    return _linear_fake("grit::packed_linear", x, (data, scale0, scale1, aux), shape, bias)


@torch.library.register_fake("grit::packed_linear_grad_input")
def _packed_linear_grad_input_fake(grad_y, data, scale0, scale1, aux, grade, shape):
    return _grad_input_fake("grit::packed_linear_grad_input", grad_y, (data, scale0, scale1, aux), shape)


@torch.library.register_fake("grit::check")
def _check_fake(data, scale0, scale1, aux, grade, shape):
    return True


# Autograd (gradients to x and bias, the planes frozen; double backward; no
# gradient for the exact mode) is C++: csrc/ops/autograd.cpp, under the
# Autograd key, so a call that needs no gradient costs no Python.


# ---------------------------------------------------------------------------
# The exact integer mode: fakes (its refusal to differentiate is in autograd.cpp).

__all__ += ["pack_activations", "packed_linear_exact", "packed_linear_s8", "s8_block", "packed_linear_bf16",
            "packed_linear_bf16_grad_input"]


@torch.library.register_fake("grit::pack_activations")
def _pack_activations_fake(x, block):
    torch._check(x.dim() >= 1, lambda: "grit::pack_activations: x must have at least 1 dimension")
    torch._check(block >= 1 and x.shape[-1] % block == 0,
                 lambda: "grit::pack_activations: block %s must divide k=%s" % (block, x.shape[-1]))
    return (x.new_empty(x.shape, dtype=torch.int8),
            x.new_empty((*x.shape[:-1], x.shape[-1] // block), dtype=torch.float32))


@torch.library.register_fake("grit::packed_linear_exact")
def _packed_linear_exact_fake(codes, scales, data, scale0, scale1, aux, grade, shape, bias):
    _check_weight_call("grit::packed_linear_exact", "argument 'codes'", codes,
                       (scales, data, scale0, scale1, aux), shape, bias)
    torch._check(codes.shape[-1] == shape[1], lambda: "grit::packed_linear_exact: codes have %s "
                 "in-features, the weight %s" % (codes.shape[-1], shape[1]))
    return codes.new_empty((*codes.shape[:-1], shape[0]), dtype=torch.float32)


# ---------------------------------------------------------------------------
# The CPU tile layout of a weight's code and scale0 planes (csrc/kernels/cpu/nibble_tiles.h)

__all__ += ["tile_nibbles", "untile_nibbles", "dequantize_tiled", "packed_linear_tiled",
            "packed_linear_grad_input_tiled"]


def tile_nibbles(planes: Planes, grade: GradeLike, shape: Sequence[int]) -> List[Tensor]:
    """A weight's planes in the CPU tile layout: every grade with a fast CPU decoder (MXFP4,
    NVF4, Q4KS, I8S24, ggml Q8_0's, GPTQ/AWQ's U4Z, the S4 / S8 groups and their siblings).

    Returns ``[tiled_data, tiled_scale0, scale1, aux]``: data and scale0
    permuted so that each 16-row tile's 32-bit words sit one vector apart
    (rows padded with zero bytes), scale1 and aux as they are. The bytes
    are the planes' own: :func:`untile_nibbles` gives them back bit for bit,
    and only the planes are ever exported. :func:`packed_linear_tiled` over
    the tiles has :func:`packed_linear`'s bits; the SIMD kernels read the
    tiles in place, without the transposes the row-major planes need.
    Other grades, and I8S24 planes with a quad that names one position twice
    (its rows' codes then have no fixed offsets), are refused with the
    reason. ``GritTensor.tile()`` and
    ``torch_grit.tile_(model)`` hold weights this way.
    """
    p = _planes4(planes)
    td, ts = torch.ops.grit.tile_nibbles.default(*p, _grade_str(grade), _shape(shape))
    return [td, ts, p[2], p[3]]


def untile_nibbles(tiled: Planes, grade: GradeLike, shape: Sequence[int]) -> List[Tensor]:
    """The GRIT planes ``[data, scale0, scale1, aux]`` of tiles made by :func:`tile_nibbles`."""
    p = _planes4(tiled)
    d, s = torch.ops.grit.untile_nibbles.default(p[0], p[1], _grade_str(grade), _shape(shape))
    return [d, s, p[2], p[3]]


def dequantize_tiled(tiled: Planes, grade: GradeLike, shape: Sequence[int],
                     dtype: torch.dtype = torch.float32) -> Tensor:
    """:func:`dequantize` over :func:`tile_nibbles`'s output, with its bits (CPU): the
    decoders read the tiles in place, without untiling the planes first."""
    return torch.ops.grit.dequantize_tiled.default(*_planes4(tiled), _grade_str(grade), _shape(shape), dtype)


def packed_linear_tiled(x: Tensor, tiled: Planes, grade: GradeLike, shape: Sequence[int],
                        bias: Optional[Tensor] = None) -> Tensor:
    """:func:`packed_linear` over :func:`tile_nibbles`'s output, with its bits (CPU).

    Differentiable in ``x`` and ``bias`` as packed_linear is.
    """
    return torch.ops.grit.packed_linear_tiled.default(x, *_planes4(tiled), _grade_str(grade),
                                                      _shape(shape), bias)


def packed_linear_grad_input_tiled(grad_y: Tensor, tiled: Planes, grade: GradeLike,
                                   shape: Sequence[int]) -> Tensor:
    """``grad_y @ W`` over :func:`tile_nibbles`'s output, with ``packed_linear_grad_input``'s bits
    (CPU): W is decoded from the tiles, never untiled first. packed_linear_tiled's backward."""
    return torch.ops.grit.packed_linear_grad_input_tiled.default(grad_y, *_planes4(tiled), _grade_str(grade),
                                                                 _shape(shape))


def _row_bytes(grade, shape):
    """Bytes per row of the data and scale0 planes of an [n, k] weight (a tiled grade's rows
    hold whole groups of both; level-1 groups may straddle rows, so the whole weight is sized)."""
    n, k = int(shape[0]), int(shape[1])
    if n <= 0:
        return (k // 2, 0)
    planes = _parsed(grade).plane_bytes(n * k)
    return (planes[0] // n, planes[1] // n)


def _tiled_bytes(rows, row_bytes):
    """tiled_plane_bytes of nibble_tiles.h: 16-row tiles, rows padded to 16 bytes."""
    return ((rows + 15) // 16) * 4 * ((row_bytes + 15) // 16) * 64


@torch.library.register_fake("grit::packed_linear_s8")
def _packed_linear_s8_fake(x, data, scale0, scale1, aux, grade, shape, bias):
    return _linear_fake("grit::packed_linear_s8", x, (data, scale0, scale1, aux), shape, bias)


@torch.library.register_fake("grit::packed_linear_bf16")
def _packed_linear_bf16_fake(x, data, scale0, scale1, aux, grade, shape, bias):
    return _linear_fake("grit::packed_linear_bf16", x, (data, scale0, scale1, aux), shape, bias)


@torch.library.register_fake("grit::packed_linear_bf16_grad_input")
def _packed_linear_bf16_grad_input_fake(grad_y, data, scale0, scale1, aux, grade, shape):
    return _grad_input_fake("grit::packed_linear_bf16_grad_input", grad_y, (data, scale0, scale1, aux), shape)


@torch.library.register_fake("grit::packed_linear_continue")
def _packed_linear_continue_fake(x, data, scale0, scale1, aux, grade, shape, acc, bias, finish):
    op = "grit::packed_linear_continue"
    _check_weight_call(op, "argument 'x'", x, (data, scale0, scale1, aux), shape, bias)
    torch._check(x.shape[-1] == shape[1],
                 lambda: "%s: x has %s in-features, the weight %s" % (op, x.shape[-1], shape[1]))
    out = (*x.shape[:-1], shape[0])
    torch._check(tuple(acc.shape) == out, lambda: "%s: acc must have shape %s, found %s"
                 % (op, list(out), list(acc.shape)))
    return x.new_empty(out, dtype=x.dtype if finish else torch.float32)


@torch.library.register_fake("grit::tile_nibbles")
def _tile_nibbles_fake(data, scale0, scale1, aux, grade, shape):
    _check_weight_call("grit::tile_nibbles", "plane 'data'", data, (data, scale0, scale1, aux), shape)
    row = _row_bytes(grade, shape)
    return (data.new_empty(_tiled_bytes(shape[0], row[0])),
            data.new_empty(_tiled_bytes(shape[0], row[1])))


@torch.library.register_fake("grit::untile_nibbles")
def _untile_nibbles_fake(tiled_data, tiled_scale0, grade, shape):
    _check_weight_call("grit::untile_nibbles", "plane 'data'", tiled_data, (tiled_data, tiled_scale0), shape)
    row = _row_bytes(grade, shape)
    return (tiled_data.new_empty(shape[0] * row[0]),
            tiled_data.new_empty(shape[0] * row[1]))


@torch.library.register_fake("grit::dequantize_tiled")
def _dequantize_tiled_fake(tiled_data, tiled_scale0, scale1, aux, grade, shape, dtype):
    _check_weight_call("grit::dequantize_tiled", "plane 'tiled_data'", tiled_data,
                       (tiled_data, tiled_scale0, scale1, aux), shape)
    return tiled_data.new_empty(shape, dtype=dtype)


@torch.library.register_fake("grit::packed_linear_tiled")
def _packed_linear_tiled_fake(x, tiled_data, tiled_scale0, scale1, aux, grade, shape, bias):
    return _linear_fake("grit::packed_linear_tiled", x, (tiled_data, tiled_scale0, scale1, aux), shape, bias)


@torch.library.register_fake("grit::packed_linear_grad_input_tiled")
def _packed_linear_grad_input_tiled_fake(grad_y, tiled_data, tiled_scale0, scale1, aux, grade, shape):
    return _grad_input_fake("grit::packed_linear_grad_input_tiled", grad_y, (tiled_data, tiled_scale0, scale1, aux),
                            shape)
