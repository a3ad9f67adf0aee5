"""Signed 4-bit row groups with binary64 scales: seed 001's format, "INT4G<g>".

Numbers come from the C++ core (csrc/grit/int4_groups.h). GRIT v1 cannot
carry this grade (binary64 scales, short final groups), so it has no GRIT
descriptor: ``Int4Groups.grit_inexpressible`` says why.
"""

import numpy as np

from .. import _C


class Int4GroupsError(ValueError):
    """A refusal of the int4 group reader or encoder; ``kind`` names it:
    payload_length, scale_count, bad_scale, reserved_code, padding,
    non_finite, out_of_range."""

    def __init__(self, message, kind):
        super().__init__(message)
        self.kind = kind


class Int4Groups:
    """The grade "INT4G<g>": signed codes -7..7, one binary64 scale per row group of g."""

    __slots__ = ("group",)

    def __init__(self, group):
        group = int(group)
        if group < 1:
            raise ValueError("INT4G needs a positive group size, found %d" % group)
        self.group = group

    @classmethod
    def parse(cls, name):
        """"INT4G<g>" in any case, surrounding whitespace ignored (the core's parser,
        the one the ops use)."""
        group = _C.int4g_parse_name(name) if isinstance(name, str) else None
        if group is None:
            raise ValueError("not an INT4G grade name (expected e.g. 'INT4G32'): %r" % (name,))
        return cls(group)

    @property
    def name(self):
        return "INT4G%d" % self.group

    @property
    def canonical(self):
        """The string the grit:: ops take (as ``Grade.canonical`` is for GRIT grades)."""
        return self.name

    @property
    def grit_inexpressible(self):
        return _C.int4g_grit_inexpressible()

    def storage_bytes(self, rows, cols):
        """(code bytes, scale bytes) for one R x C matrix."""
        return (rows * cols + 1) // 2, 8 * rows * (-(-cols // self.group))

    def encode(self, w):
        """2-D weights -> (packed code bytes, float64 scales)."""
        w = np.ascontiguousarray(np.asarray(w, dtype=np.float64))
        if w.ndim != 2:
            raise ValueError("INT4G encodes a 2-D matrix, found shape %s" % (w.shape,))
        packed, scales, err = _C.int4g_encode(w.reshape(-1), w.shape[0], w.shape[1], self.group)
        if err is not None:
            raise Int4GroupsError("%s %s: %s" % (self.name, w.shape, err[1]), err[0])
        return packed, np.frombuffer(scales, dtype=np.float64).copy()

    def decode(self, shape, packed, scales):
        """Validate (every reader refusal) and reconstruct the float64 matrix."""
        rows, cols = (int(s) for s in shape)
        scales = np.ascontiguousarray(np.asarray(scales, dtype=np.float64)).reshape(-1)
        out, err = _C.int4g_decode(rows, cols, self.group, bytes(packed), scales)
        if err is not None:
            raise Int4GroupsError("%s (%d, %d): %s" % (self.name, rows, cols, err[1]), err[0])
        return np.frombuffer(out, dtype=np.float64).reshape(rows, cols).copy()

    def __eq__(self, other):
        return isinstance(other, Int4Groups) and other.group == self.group

    def __hash__(self):
        return hash(("INT4G", self.group))

    def __repr__(self):
        return "Int4Groups(%d)" % self.group
