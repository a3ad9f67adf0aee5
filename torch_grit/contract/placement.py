"""Placement words: the physical layout of each plane as a 64-bit value.

The constants come from the C++ core (``ROW_MAJOR``, ``COL_MAJOR``,
``LINEAR_META`` ...); a new layout is a new value, never a new type.
"""

from collections import namedtuple

from .. import _C

PLACEMENT_UNSPECIFIED = 0
WELL_KNOWN = {name.upper(): word for name, word in _C.placements()}
globals().update(WELL_KNOWN)


class Placement(namedtuple("Placement", ["data", "scale", "meta"])):
    """The three placement words of a descriptor (data, scale, metadata)."""

    __slots__ = ()

    def __repr__(self):
        return "Placement(data=%s, scale=%s, meta=%s)" % tuple(_C.placement_name(w) for w in self)


def placement_name(word):
    """The name of a placement word (``"ROW_MAJOR"``, ``"PLACEMENT_UNSPECIFIED"``, ...); a word with
    no name reads as its class and its value in hex."""
    return _C.placement_name(int(word))


def container_bytes(desc, plane_bytes):
    """The bytes a descriptor's planes take in a container, under its placement.

    Row-major planes and BLOCK_AOS (the same planes interleaved block by
    block, as ggml's Q8_0 and MXFP4 blocks) take the plane lengths summed.
    PACK_K4_12B (ggml's Q4_K block) packs each 8 groups' 6-bit sub-scales
    (scale0) and 6-bit zero points (aux), one byte each in GRIT's planes, into
    12 bytes: 3/4 of their length. GRIT's size equations count the planes, so
    a scanner that ignores the placement expects 148 bytes per 256 Q4_K
    weights where the block holds 144.
    """
    data, s0, s1, aux = (int(n) for n in plane_bytes)
    fields = desc.grade.fields if desc.grade is not None else {}
    if (int(desc.placement_scale) == WELL_KNOWN["PACK_K4_12B"] and fields.get("s0") == "u6"
            and fields.get("zp") == "u6" and (s0 + aux) % 4 == 0):
        return data + s1 + (s0 + aux) * 3 // 4
    return data + s0 + s1 + aux
