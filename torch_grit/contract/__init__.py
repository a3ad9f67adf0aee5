"""The contract's Python face: thin facades over the C++ core (csrc/grit).

``grade`` (the grammar and reference grades), ``placement``, ``descriptor``
(64 bytes, gid), ``check`` (level 1 and the level-2 digest), ``codec``
(reference encode/decode of planes), ``int4_groups`` (seed 001's signed int4
row groups) and ``errors``. Nothing here computes a number: every value comes
from ``torch_grit._C``. This folder imports nothing else of torch_grit.
"""
