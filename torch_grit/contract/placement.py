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
