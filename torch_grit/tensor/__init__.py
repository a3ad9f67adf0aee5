"""``GritTensor``: a packed GRIT weight as a torch tensor subclass.

``grit_tensor`` holds the class, ``quantize`` and what moves, copies and
pickles it; ``dispatch`` the table of claimed torch ops; ``linear`` the
matmul family that runs the packed kernels; ``collectives`` and ``shard``
what torch's tensor parallelism asks (splits into shards, scatters); both
imported here, so that the table is full whenever the class can be reached.
"""

from .grit_tensor import LOGICAL_DTYPES, GritTensor, fit_error, group_size, quantize, safe_globals
from . import linear  # noqa: F401  (claims F.linear, matmul, mm, addmm for GritTensor)
from . import collectives  # noqa: F401  (claims split, slice, c10d.scatter_: tensor parallelism)

__all__ = ["GritTensor", "quantize", "safe_globals", "group_size", "fit_error", "LOGICAL_DTYPES"]
