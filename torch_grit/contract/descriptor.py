"""``Descriptor``: the 64-byte GRIT descriptor plus the shape it describes."""

from .. import _C
from .errors import GritCheckError
from .grade import Grade
from .placement import Placement

_FIELDS = (
    "magic", "hdr_bytes", "version", "n_levels", "flags", "elem", "scale0", "scale1", "zp_fmt",
    "group_axis", "k0", "k1", "sp_n", "sp_m", "sp_meta_fmt", "sp_order", "container",
    "frame_rsvd", "note", "placement_data", "placement_scale", "placement_meta", "grade_id",
)


def _grade_for_id(grade_id):
    for name, _, canonical in _C.reference_grades():
        g = Grade.parse(canonical)
        if g.id == grade_id:
            return g
    return None


def raise_check(result, tensor=None):
    """Turn a native check tuple into GritCheckError (or return on Ok)."""
    code, status, field, plane, expected, found, message = result
    if code == 0:
        return
    raise GritCheckError(message, status, field, expected=expected, found=found,
                         plane=plane if plane >= 0 else None, tensor=tensor)


class Descriptor:
    """A GRIT descriptor: grade + placement + frame fields, for a shape.

    ``Descriptor(grade, shape)`` builds the canonical descriptor of a grade
    (row-major planes; groups along the last axis unless ``group_axis`` says
    otherwise). ``Descriptor.from_bytes(b, shape, grade=None)`` reads any 64
    bytes without judging them; ``torch_grit.check`` judges.
    """

    __slots__ = ("_d", "shape", "_grade")

    def __init__(self, grade, shape, placement=None, group_axis=None, note=0):
        grade = Grade.parse(grade)
        shape = tuple(int(s) for s in shape)
        if group_axis is None:
            group_axis = max(len(shape) - 1, 0)
        pd, ps, pm = placement if placement is not None else (None, None, None)
        self._d = _C.descriptor_for(grade._native, pd, ps, pm, int(group_axis), int(note))
        self.shape = shape
        self._grade = grade

    @classmethod
    def from_bytes(cls, data, shape=(), grade=None):
        data = bytes(data)
        if len(data) != 64:
            raise ValueError("a GRIT descriptor is exactly 64 bytes, found %d" % len(data))
        obj = cls.__new__(cls)
        obj._d = _C._Descriptor.from_bytes(data)
        obj.shape = tuple(int(s) for s in shape)
        obj._grade = Grade.parse(grade) if grade is not None else _grade_for_id(obj._d.grade_id)
        return obj

    def to_bytes(self):
        return self._d.to_bytes()

    @property
    def grade(self):
        """The Grade this descriptor claims, or None if its grade_id is unknown."""
        return self._grade

    @property
    def placement(self):
        return Placement(self._d.placement_data, self._d.placement_scale, self._d.placement_meta)

    @property
    def gid_bytes(self):
        """The 128-bit contract fingerprint (16 bytes, big-endian)."""
        if self._grade is None:
            raise ValueError("grade_id 0x%016x is not a known grade: pass grade= to "
                             "Descriptor.from_bytes to compute its gid" % self._d.grade_id)
        return _C.gid(self._d, self._grade.canonical, list(self.shape))

    @property
    def gid(self):
        """The gid as 26 Crockford base32 symbols."""
        return _C.crockford32(self.gid_bytes)

    @property
    def fields(self):
        return {name: getattr(self._d, name) for name in _FIELDS}

    def __getattr__(self, name):
        if name in _FIELDS:
            return getattr(self._d, name)
        raise AttributeError("Descriptor has no attribute %r" % name)

    def replace(self, **fields):
        """A copy with some raw fields changed (for tests and repairs)."""
        obj = Descriptor.from_bytes(self.to_bytes(), self.shape, self._grade)
        for name, value in fields.items():
            if name == "shape":
                obj.shape = tuple(value)
            elif name in _FIELDS:
                setattr(obj._d, name, value)
            else:
                raise TypeError("unknown descriptor field %r" % name)
        return obj

    def expected_plane_bytes(self):
        """The four plane lengths the size equations require."""
        sizes, err = _C.expected_plane_bytes(self._d, list(self.shape))
        if err is not None:
            raise_check(err)
        return sizes

    def explain(self, other):
        """Field-by-field difference from another descriptor."""
        text = _C.explain(self._d, other._d)
        if self.shape != other.shape:
            text += "shape                 %-40s %s\n" % (self.shape, other.shape)
        return text

    def __eq__(self, other):
        return isinstance(other, Descriptor) and self.to_bytes() == other.to_bytes() and self.shape == other.shape

    def __hash__(self):
        return hash((self.to_bytes(), self.shape))

    def __repr__(self):
        grade = self._grade.canonical if self._grade is not None else "grade_id=0x%016x" % self._d.grade_id
        return "Descriptor(%s, shape=%s, %r)" % (grade, self.shape, self.placement)

    def __reduce__(self):
        return (Descriptor.from_bytes, (self.to_bytes(), self.shape,
                                        self._grade.canonical if self._grade is not None else None))
