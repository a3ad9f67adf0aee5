"""``OrderedRowwiseParallel``: torch's ``RowwiseParallel`` for packed layers whose output must
equal the single-process layer's bit for bit (``torch_grit/tensor/ordered.py``)."""

from torch import nn
from torch.distributed.tensor.parallel import RowwiseParallel

from ..nn.linear import GritLinear


class OrderedRowwiseParallel(RowwiseParallel):
    """``RowwiseParallel`` (weight ``Shard(1)``, bias replicated, input sharded along its last
    dimension, output replicated) with the partial outputs summed in a fixed order instead of
    by an all-reduce: rank 0's groups first, each next rank continuing the running float32
    sums, the last adding the bias and broadcasting y. The output then has the bits of the
    unsharded layer on one process. Apply it to a packed model, or to a meta-device skeleton
    before ``torch_grit.load(path, model=...)`` reads a packed checkpoint into it. The ranks
    run one after another, so a layer costs about as long as on one process plus the
    messages: choose it where reproducible bits matter more than speed. CPU (gloo) only."""

    def _apply(self, module, device_mesh):
        # A skeleton's nn.Linear on the meta device becomes a GritLinear when torch_grit.load reads
        # a packed weight into it (and the load refuses a float one for a layer planned here).
        skeleton = isinstance(module, nn.Linear) and module.weight.device.type == "meta"
        if not (isinstance(module, GritLinear) or skeleton):
            raise TypeError("OrderedRowwiseParallel applies to GritLinear layers (packed weights, whose "
                            "law can be continued across shards) or to a meta-device skeleton's nn.Linear "
                            "that torch_grit.load will fill with one; found %s. Use RowwiseParallel for it"
                            % type(module).__name__)
        if isinstance(module, GritLinear) and getattr(module, "input_perm", None) is not None:
            raise ValueError("OrderedRowwiseParallel: this layer permutes its inputs before its packed weight "
                             "(input_perm, GPTQ act-order), and tensor parallelism does not take such layers; "
                             "leave it out of the plan")
        if device_mesh.ndim != 1:
            raise ValueError("OrderedRowwiseParallel runs on a 1-D device mesh; found %d dimensions"
                             % device_mesh.ndim)
        if device_mesh.device_type != "cpu":
            raise ValueError("OrderedRowwiseParallel runs on CPU meshes only (its kernel has no %s "
                             "version); use RowwiseParallel there" % device_mesh.device_type)
        module = super()._apply(module, device_mesh)
        module.grit_row_reduction = "ordered"
        return module
