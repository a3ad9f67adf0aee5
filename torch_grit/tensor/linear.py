"""The matmul family on a GritTensor weight ``W [out, in]``.

Products that contract over ``in`` (the axis the groups run along) run the
packed kernel: ``F.linear(x, W)``, ``x @ W.t()``, ``W @ y``, ``torch.addmm``.
Products that contract over ``out`` would need groups along the other axis:
that is requantization, not a view, so they are refused with the fix.
"""

import torch
import torch.nn.functional as F

from ..contract.errors import GroupAxisError, UnsupportedOpError
from .dispatch import aten, implements, implements_function, unsupported
from .grit_tensor import GritTensor


def _requantization(op, w):
    return GroupAxisError(
        "%s would contract a GritTensor %s over out_features=%d, but its %s groups run along "
        "in_features=%d; changing the group axis is requantization, not a view (GRIT law). "
        "Use x @ W.t() / F.linear(x, W), call W.dequantize() for float math, or quantize the "
        "transposed float weight afresh"
        % (op, tuple(w.logical_shape), w.logical_shape[0], w.grade_canonical, w.logical_shape[1]))


def packed_linear(x, w, bias=None, op="linear"):
    """``x @ W^T + bias`` on the packed bytes (W stored, not the marker view)."""
    if isinstance(x, GritTensor) or isinstance(bias, GritTensor):
        raise unsupported(op)
    if w.requires_grad and torch.is_grad_enabled():
        raise UnsupportedOpError(
            "%s: this GritTensor weight has requires_grad=True, but packed weights are frozen (no "
            "gradient reaches the planes); set requires_grad=False and train the bias or adapters"
            % op)
    in_features = w.logical_shape[1]
    if x.dim() == 0 or x.shape[-1] != in_features:
        raise ValueError("%s: input of shape %s cannot multiply a GritTensor weight %s: the "
                         "input's last dimension must be in_features=%d"
                         % (op, tuple(x.shape), tuple(w.logical_shape), in_features))
    if w.tiled:  # the CPU tile layout (GritTensor.tile): packed_linear's bits
        return torch.ops.grit.packed_linear_tiled(x, *w.stored_planes, w.grade_canonical,
                                                  list(w.logical_shape), bias)
    return torch.ops.grit.packed_linear(x, *w.stored_planes, w.grade_canonical,
                                        list(w.logical_shape), bias)


def _matmul(a, b, op):
    if isinstance(a, GritTensor) and isinstance(b, GritTensor):
        raise UnsupportedOpError("%s of two GritTensors is not supported; dequantize one of them"
                                 % op)
    if isinstance(b, GritTensor):
        if not b.transposed:
            raise _requantization(op, b)
        if a.dim() == 1:
            return packed_linear(a.unsqueeze(0), b, op=op).squeeze(0)
        return packed_linear(a, b, op=op)
    if a.transposed:
        raise _requantization(op, a)
    # W @ y == (y^T @ W^T)^T: the contraction still runs along in_features.
    if b.dim() == 1:
        return packed_linear(b.unsqueeze(0), a, op=op).squeeze(0)
    return packed_linear(b.transpose(-1, -2), a, op=op).transpose(-1, -2)


def _mm(a, b, op):
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError("%s takes two 2-D tensors; found shapes %s and %s"
                         % (op, tuple(a.shape), tuple(b.shape)))
    return _matmul(a, b, op)


def _addmm(bias, a, b, beta, alpha, op):
    if isinstance(bias, GritTensor):
        raise unsupported(op)
    fuse = (isinstance(b, GritTensor) and b.transposed and beta == 1 and alpha == 1
            and bias.dim() == 1 and a.dim() == 2)
    if fuse:
        return packed_linear(a, b, bias, op=op)
    y = _mm(a, b, op)
    return beta * bias + alpha * y


def _get(args, kwargs, i, name, default=None):
    return args[i] if len(args) > i else kwargs.get(name, default)


def _f_linear(func, args, kwargs):
    x, w, bias = _get(args, kwargs, 0, "input"), _get(args, kwargs, 1, "weight"), \
        _get(args, kwargs, 2, "bias")
    if not isinstance(w, GritTensor):
        raise unsupported(func)
    if w.transposed:
        raise _requantization("linear", w)
    return packed_linear(x, w, bias)


def _f_matmul(func, args, kwargs):
    return _matmul(_get(args, kwargs, 0, "input"), _get(args, kwargs, 1, "other"), "matmul")


def _f_rmatmul(func, args, kwargs):
    return _matmul(args[1], args[0], "matmul")


def _f_mm(func, args, kwargs):
    return _mm(_get(args, kwargs, 0, "input"), _get(args, kwargs, 1, "mat2"), "mm")


def _f_addmm(func, args, kwargs):
    return _addmm(_get(args, kwargs, 0, "input"), _get(args, kwargs, 1, "mat1"),
                  _get(args, kwargs, 2, "mat2"), kwargs.get("beta", 1), kwargs.get("alpha", 1),
                  "addmm")


# Above autograd: the packed op's registered backward is the one that runs.
implements_function([F.linear])(_f_linear)
implements_function([torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__])(_f_matmul)
implements_function([torch.Tensor.__rmatmul__])(_f_rmatmul)
implements_function([torch.mm, torch.Tensor.mm])(_f_mm)
implements_function([torch.addmm, torch.Tensor.addmm])(_f_addmm)

def grad_input(grad_y, w):
    """``grad_y @ W`` (W stored, not the marker view): the packed layer's backward to its input."""
    g = grad_y.contiguous()
    if w.tiled:
        return torch.ops.grit.packed_linear_grad_input_tiled(g, *w.stored_planes, w.grade_canonical,
                                                             list(w.logical_shape))
    return torch.ops.grit.packed_linear_grad_input(g, *w.stored_planes, w.grade_canonical,
                                                   list(w.logical_shape))


def _d_mm(func, args, kwargs):
    """aten.mm below autograd. Inside autograd's backward, a product over out_features is the
    backward to the input of ``x @ W^T`` (DTensor's MmBackward on a sharded weight reaches the
    shard as ``mm(grad_y, W)`` or ``mm(W^T, grad_y^T)``): the packed grad_input kernel, the
    layer's own backward. Anywhere else it stays refused as requantization."""
    a, b = _get(args, kwargs, 0, "input"), _get(args, kwargs, 1, "mat2")
    if torch._C._current_autograd_node() is not None and a.dim() == 2 and b.dim() == 2:
        if isinstance(b, GritTensor) and not isinstance(a, GritTensor) and not b.transposed:
            return grad_input(a, b)
        if isinstance(a, GritTensor) and not isinstance(b, GritTensor) and a.transposed:
            return grad_input(b.t(), a.t()).t()
    return _f_mm(func, args, kwargs)


# Below autograd (tracers, or torch-function disabled, DTensor's local ops): the same
# contraction rules, and the backward's product (_d_mm).
implements([aten.linear.default])(_f_linear)
implements([aten.matmul.default])(_f_matmul)
implements([aten.mm.default])(_d_mm)
implements([aten.addmm.default])(_f_addmm)
