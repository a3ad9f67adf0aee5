"""What torch's tensor parallelism (DTensor, ``parallelize_module`` with
``ColwiseParallel`` / ``RowwiseParallel``) asks of a GritTensor weight.

``distribute_tensor`` cuts the weight with ``aten.split`` along dim 0
(column-wise: rows of W) or dim 1 (row-wise: in_features). Then it either
sends the shards out with ``c10d.scatter_`` from ``src_data_rank`` (the
default, rank 0), or, with ``src_data_rank=None``, each rank clones its own
shard. Each shard is a GritTensor with its own descriptor (``shard.py``).
The forward reaches a shard as ``aten.t`` + ``aten.addmm`` / ``aten.mm``,
which ``linear.py`` claims. The backward to the input reaches it as
``aten.mm(grad_y, W)`` (or ``aten.mm(W^T, grad_y^T)``), and only there, in
autograd's backward, is that product taken: it is the packed layer's own
straight-through backward (``packed_linear_grad_input``). In user code a
product over out_features is still refused as requantization.

Refused, with the way out: padding (uneven shards with a ``src_data_rank``,
``aten.constant_pad_nd``), zero shards past the last row
(``aten.new_zeros``), and anything else unclaimed.
"""

import sys

import torch

from ..contract.errors import UnsupportedOpError
from .dispatch import aten, implements, unsupported
from .grit_tensor import GritTensor
from .shard import cut

try:  # a torch built without torch.distributed has no c10d ops: nothing is ever scattered there
    _SCATTER = [torch.ops.c10d.scatter_.default]
except (AttributeError, RuntimeError):
    _SCATTER = []


def _label(w):
    return "GritTensor %r" % w.grit_name if w.grit_name else "GritTensor"


def _chunks(length, size):
    return [(s, min(s + size, length)) for s in range(0, length, size)]


@implements([aten.split.Tensor])
def _split(func, args, kwargs):
    w, size = args[0], int(args[1])
    dim = (args[2] if len(args) > 2 else kwargs.get("dim", 0)) % 2
    if w.transposed:
        raise UnsupportedOpError("%s: split of the transposed view; shard the stored weight [out, in]"
                                 % _label(w))
    length = w.logical_shape[dim]
    chunks = _chunks(length, size)
    return [cut(w, dim, a, b, pieces=len(chunks)) for a, b in chunks]


@implements([aten.slice.Tensor])
def _slice(func, args, kwargs):
    w = args[0]
    dim = (args[1] if len(args) > 1 else kwargs.get("dim", 0)) % 2
    start = args[2] if len(args) > 2 else kwargs.get("start")
    end = args[3] if len(args) > 3 else kwargs.get("end")
    step = args[4] if len(args) > 4 else kwargs.get("step", 1)
    if step != 1:
        raise UnsupportedOpError("%s: a slice with step %d would interleave rows or groups; only "
                                 "step 1 is a shard" % (_label(w), step))
    if w.transposed:
        raise UnsupportedOpError("%s: slice of the transposed view; shard the stored weight [out, in]"
                                 % _label(w))
    length = w.logical_shape[dim]
    start = 0 if start is None else (start + length if start < 0 else start)
    end = length if end is None or end >= sys.maxsize else (end + length if end < 0 else end)
    start, end = max(0, min(start, length)), max(0, min(end, length))
    if end <= start:
        raise UnsupportedOpError("%s: an empty slice (%d..%d of dim %d) holds no weight"
                                 % (_label(w), start, end, dim))
    return cut(w, dim, start, end)


@implements([aten.view.default])
def _view(func, args, kwargs):
    # DTensor.from_local calls view_as(self): the same shape is the tensor itself.
    w, size = args[0], list(args[1])
    if size == list(w.shape):
        return w._derive()
    raise unsupported(func)


@implements([aten.constant_pad_nd.default])
def _pad(func, args, kwargs):
    w = args[0]
    raise UnsupportedOpError(
        "%s %s: aten.constant_pad_nd (torch pads the last shard when the weight does not split "
        "evenly over the ranks and a src_data_rank sends it) would pack padding values into the "
        "weight. Use a number of ranks that divides the sharded dimension, or parallelize_module("
        "..., src_data_rank=None): every rank then cuts its own shard from its own copy"
        % (_label(w), tuple(w.logical_shape)))


@implements([aten.new_zeros.default])
def _new_zeros(func, args, kwargs):
    w = args[0]
    raise UnsupportedOpError("%s %s: aten.new_zeros (torch's empty shards, when there are more ranks "
                             "than rows or groups to give them) has no packed form; use fewer ranks"
                             % (_label(w), tuple(w.logical_shape)))


@implements(_SCATTER)
def _scatter(func, args, kwargs):
    """Scatter plane by plane: the root's shards (already cut by split) into every rank's
    ``empty_like`` shard. Every rank holds the same weight, so the planes' lengths agree."""
    outs, ins, group, root = args[0], args[1], args[2], args[3]
    async_op = args[4] if len(args) > 4 else kwargs.get("async_op", True)
    timeout = args[5] if len(args) > 5 else kwargs.get("timeout", -1)
    if len(outs) != 1 or (ins and len(ins) != 1):
        raise UnsupportedOpError("GritTensor: c10d.scatter_ of several tensors at once")
    out = outs[0]
    shards = list(ins[0]) if ins else []
    for s in shards:
        if not isinstance(s, GritTensor) or (s.grade_canonical, s.logical_shape, s.tiled) != \
                (out.grade_canonical, out.logical_shape, out.tiled):
            raise ValueError("%s: c10d.scatter_ needs shards of one grade, shape and layout; the receiving "
                             "shard is %s %s, a sent one %r" % (_label(out), out.grade_canonical,
                                                                out.logical_shape, s))
    work = None
    for i, plane in enumerate(out.stored_planes):
        if plane.numel() == 0:  # the same on every rank: nothing to send
            continue
        send = [[s.stored_planes[i].contiguous() for s in shards]] if shards else []
        _, work = func([plane], send, group, root, async_op, timeout)
        work.wait()
    return [out], work
