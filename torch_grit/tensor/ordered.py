"""The ordered row-wise reduction: a row-wise (in_features) sharded packed
layer whose output has, bit for bit, the single-process layer's bits.

torch's ``RowwiseParallel`` sums the ranks' partial outputs with an
all-reduce, whose order of additions is the backend's: the result is within
float32 rounding of one process's, not equal to it. The law of
``csrc/grit/linear_law.h`` is one FMA chain per output element over the
groups in ascending order, and a chain cut on a group boundary continues
from the first part's running sum with the same bits. So here rank 0 runs
its groups from +0.0, sends its float32 running sums to rank 1, which
continues them over its groups (``grit::packed_linear_continue``), and so
on; the last rank adds the bias, makes a NaN canonical, casts to x's dtype
and broadcasts y to every rank.

The price: the ranks run one after another (no overlap), plus one
point-to-point message of m x out_features float32 per rank boundary and
one broadcast of y. The continuation runs on the CPU kernel variants (their
GEMM continues the chains at every batch size); there is no CUDA kernel for
it. The backward to x needs no
communication: each rank's columns of ``grad_y @ W`` come from its own
shard, in the single-process order.
"""

import torch
import torch.distributed as dist

from .linear import grad_input


def _refuse(layer, why):
    return ValueError("%s: the ordered row-wise reduction %s" % (layer, why))


class _OrderedRowwise(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, bias, group, ranks):
        n = w.logical_shape[0]
        coord = ranks.index(dist.get_rank())
        last = coord == len(ranks) - 1
        out_shape = (*x.shape[:-1], n)
        acc = torch.zeros(out_shape, dtype=torch.float32)
        if coord > 0:
            dist.recv(acc, src=ranks[coord - 1], group=group)
        res = torch.ops.grit.packed_linear_continue(
            x.contiguous(), *w.planes, w.grade_canonical, list(w.logical_shape), acc,
            bias if last else None, last)
        if last:
            y = res
        else:
            dist.send(res, dst=ranks[coord + 1], group=group)
            y = torch.empty(out_shape, dtype=x.dtype)
        dist.broadcast(y, src=ranks[-1], group=group)
        ctx.w = w
        ctx.n = n
        ctx.bias_dtype = bias.dtype if bias is not None else None
        return y

    @staticmethod
    def backward(ctx, gy):
        gx = grad_input(gy, ctx.w) if ctx.needs_input_grad[0] else None
        gb = None
        if ctx.needs_input_grad[2]:
            gb = gy.reshape(-1, ctx.n).sum(0, dtype=torch.float32).to(ctx.bias_dtype)
        return gx, None, gb, None, None


def ordered_rowwise_linear(x, weight, bias, layer="a GritLinear"):
    """``F.linear(x, W, bias)`` for a row-wise sharded packed weight (a DTensor of GritTensor
    shards placed ``Shard(1)`` on a 1-D CPU mesh), by the ordered reduction; returns a DTensor
    replicated on the mesh. ``x`` is this rank's shard of the input (a DTensor placed ``Shard(-1)``
    or its local tensor), ``bias`` replicated (a DTensor or a tensor) or None."""
    from torch.distributed.tensor import DTensor, Replicate, Shard

    mesh = weight.device_mesh
    if mesh.ndim != 1:
        raise _refuse(layer, "runs on a 1-D device mesh; this weight's mesh has %d dimensions" % mesh.ndim)
    if tuple(weight.placements) != (Shard(1),):
        raise _refuse(layer, "needs the weight sharded along in_features (Shard(1)); found %s"
                      % (tuple(weight.placements),))
    w = weight.to_local()
    if w.device.type != "cpu":
        raise _refuse(layer, "runs on CPU only (its kernel, grit::packed_linear_continue, has no "
                      "%s version); use RowwiseParallel's all-reduce there" % w.device.type)
    if isinstance(x, DTensor):
        p = x.placements
        if not (len(p) == 1 and p[0].is_shard() and p[0].dim % x.dim() == x.dim() - 1):
            x = x.redistribute(mesh, [Shard(x.dim() - 1)])
        x = x.to_local()
    if isinstance(bias, DTensor):
        bias = bias.to_local()
    k = w.logical_shape[1]
    if x.dim() == 0 or x.shape[-1] != k:
        raise _refuse(layer, "takes this rank's shard of the input, in_features=%d; found an input of "
                      "shape %s" % (k, tuple(x.shape)))
    ranks = [int(r) for r in mesh.mesh.tolist()]
    y = _OrderedRowwise.apply(x, w, bias, mesh.get_group(), ranks)
    return DTensor.from_local(y, mesh, [Replicate()], run_check=False)
