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

``full_tensor()`` (a redistribution to Replicate) reaches a shard as
``_c10d_functional.all_gather_into_tensor`` (the ranks' shards as rows, one
after another) and ``wait_tensor``, then, for a row-wise shard, ``aten.split``
along dim 0 and ``aten.cat`` along dim 1: the shards' planes are gathered as
they are and joined (``shard.join``), so the whole weight has the bytes of the
weight that was cut, and its own descriptor.

Refused, with the way out: padding (uneven shards with a ``src_data_rank``,
``aten.constant_pad_nd``), zero shards past the last row
(``aten.new_zeros``), and anything else unclaimed.
"""

import sys

import torch

from ..contract.errors import UnsupportedOpError
from .dispatch import aten, implements, unsupported
from .grit_tensor import GritTensor
from .shard import cut, join

try:  # a torch built without torch.distributed has no c10d ops: nothing is ever scattered there
    _SCATTER = [torch.ops.c10d.scatter_.default]
    _GATHER = [torch.ops._c10d_functional.all_gather_into_tensor.default]
    _WAIT = [torch.ops._c10d_functional.wait_tensor.default]
    import torch.distributed._functional_collectives  # noqa: F401 (defines _wrap_tensor_autograd)
    _WAIT.append(torch.ops._c10d_functional._wrap_tensor_autograd.default)
except (AttributeError, RuntimeError, ImportError):
    _SCATTER, _GATHER, _WAIT = [], [], []


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


@implements(_GATHER)
def _all_gather(func, args, kwargs):
    """Every rank's shard, rows after rows in rank order, as one GritTensor: each rank's planes
    (bytes as they are, whatever their lengths) gathered as objects, then joined along dim 0.
    Synchronous: the ``wait_tensor`` that follows has nothing left to wait for."""
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _resolve_process_group

    w, group_size, group_name = args[0], int(args[1]), args[2]
    group = _resolve_process_group(group_name)
    src = w.untile() if w.tiled else w
    if src.transposed:
        raise UnsupportedOpError("%s: all-gather of the transposed view; gather the stored weight [out, in]"
                                 % _label(w))
    mine = (src.grade_canonical, tuple(src.logical_shape), str(src.logical_dtype),
            [p.detach().cpu().numpy().tobytes() for p in src.planes])
    every = [None] * group_size
    dist.all_gather_object(every, mine, group=group)
    pieces = []
    for rank, (grade, shape, dtype, planes) in enumerate(every):
        if (grade, shape[1], dtype) != (mine[0], mine[1][1], mine[2]):
            raise ValueError("%s: rank %d (of this group) holds a %s shard of %s %s, this rank %s of %s %s: "
                             "not shards of one weight" % (_label(w), rank, dtype, grade, list(shape), mine[2],
                                                           mine[0], list(mine[1])))
        tensors = [torch.frombuffer(bytearray(b), dtype=torch.uint8) if b else torch.empty(0, dtype=torch.uint8)
                   for b in planes]
        pieces.append(type(w).from_planes([t.to(w.device) for t in tensors], grade, shape, src.logical_dtype,
                                          placement=_placement(src, shape), name=w.grit_name))
    out = join(pieces, 0, _label(w))
    return out.tile() if w.tiled and out.can_tile else out


def _placement(w, shape):
    from ..contract.descriptor import Descriptor

    return tuple(Descriptor(w.grade_canonical, shape).placement) if w.placement_words else None


@implements(_WAIT)
def _wait(func, args, kwargs):
    """The gather above is done when it returns: no AsyncCollectiveTensor, nothing to wait for."""
    return args[0]._derive()


@implements([aten.cat.default])
def _cat(func, args, kwargs):
    """Shards side by side: ``full_tensor()`` of a row-wise weight joins its pieces along dim 1."""
    tensors = list(args[0])
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    if not all(isinstance(t, GritTensor) for t in tensors):
        raise UnsupportedOpError("GritTensor: aten.cat of a packed weight with a float tensor would "
                                 "quantize the float one; cat their dequantize()d values instead")
    try:
        return join(tensors, dim % 2)
    except ValueError as e:
        raise UnsupportedOpError(str(e)) from None
