"""Tensor parallelism around torch's own (``parallelize_module``): what a rank
needs beyond the sharded GritTensor itself (``torch_grit/tensor/shard.py``,
``collectives.py``). ``load.py``: a checkpoint read shard by shard into a
parallelized model; ``styles.py``: ``OrderedRowwiseParallel``, a row-wise
plan whose output has the single-process bits; see docs/tensor_parallel.md."""

from .load import is_sharded, load_sharded
from .styles import OrderedRowwiseParallel

__all__ = ["OrderedRowwiseParallel", "is_sharded", "load_sharded"]
