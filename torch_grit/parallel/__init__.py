"""Tensor parallelism around torch's own (``parallelize_module``): what a rank
needs beyond the sharded GritTensor itself (``torch_grit/tensor/shard.py``,
``collectives.py``). ``load.py``: a checkpoint read shard by shard into a
parallelized model; see docs/tensor_parallel.md."""

from .load import is_sharded, load_sharded

__all__ = ["is_sharded", "load_sharded"]
