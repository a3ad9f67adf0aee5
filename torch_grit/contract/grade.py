"""``Grade``: the numeric contract, parsed and canonicalised by the C++ core."""

from .. import _C
from .errors import GradeError
from .grade_names import PerChannel, named, per_channel

_REFERENCE = {short.upper(): canonical for _, short, canonical in _C.reference_grades()}
_REFERENCE.update({name.upper(): canonical for name, _, canonical in _C.reference_grades()})


def _parse_native(text):
    native, err = _C.grade_parse(text)
    if err is not None:
        code, message, token, position = err
        group = _C.int4g_parse_name(text)
        if group is not None:
            raise GradeError(
                "grade %r is seed 001's int4 row groups (Grade.int4_groups(%d)), not a GRIT grade: "
                "%s. torch_grit.quantize, quantize_, GritLinear and torch.ops.grit.* take the "
                "name; descriptors, checkpoints, profile and grade='auto' need a GRIT grade"
                % (text, group, _C.int4g_grit_inexpressible()), code="inexpressible",
                token=text.strip(), position=0)
        raise GradeError("grade %r: %s" % (text, message), code=code, token=token, position=position)
    return native


class Grade:
    """A GRIT grade: canonical string, 64-bit id, every field.

    ``Grade(spec)`` and ``Grade.parse(spec)`` take a canonical string, any
    accepted spelling, or the name of a reference grade (``"MXFP4"``,
    ``"GRADE_NVF4"``...); a bad string raises ``GradeError``. Two grades are
    equal iff their canonical strings are equal.
    """

    __slots__ = ("_native",)

    def __init__(self, spec):
        if isinstance(spec, Grade):
            self._native = spec._native
        elif isinstance(spec, str):
            canonical = _REFERENCE.get(spec.strip().upper()) or named(spec)
            if canonical is None and per_channel(spec) is not None:
                raise GradeError("grade %r picks k0 = in_features per weight: torch_grit.quantize, "
                                 "quantize_, GritLinear and torch-grit quantize take the name; "
                                 "elsewhere write the grade with its k0" % spec,
                                 code="inexpressible", token=spec.strip(), position=0)
            self._native = _parse_native(canonical if canonical is not None else spec)
        else:
            raise TypeError("a grade is a Grade or a string, found %s" % type(spec).__name__)

    @classmethod
    def parse(cls, spec):
        return spec if isinstance(spec, Grade) else cls(spec)

    @staticmethod
    def int4_groups(group):
        """Seed 001's signed int4 row-group grade "INT4G<group>" (not a GRIT grade)."""
        from .int4_groups import Int4Groups

        return Int4Groups(group)

    @property
    def canonical(self):
        return self._native.canonical

    @property
    def id(self):
        """FNV-1a-64 of the canonical string, as an unsigned int."""
        return self._native.id

    @property
    def fields(self):
        """Every key with its canonical value (defaults included)."""
        return self._native.fields()

    @property
    def esr(self):
        return self.fields["esr"]

    @property
    def projection(self):
        """The decode-relevant projection: equal projections decode alike."""
        return self._native.projection()

    @property
    def name(self):
        """The reference grade name (``"GRADE_MXFP4"``) or None."""
        for name, _, canonical in _C.reference_grades():
            if canonical == self.canonical:
                return name
        return None

    def plane_bytes(self, numel):
        """Byte lengths of the four planes for ``numel`` elements."""
        return self._native.plane_bytes(int(numel))

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = Grade.parse(other)
            except GradeError:
                return False
        return isinstance(other, Grade) and other.canonical == self.canonical

    def __hash__(self):
        return hash(self.canonical)

    def __str__(self):
        return self.canonical

    def __repr__(self):
        name = self.name
        return "Grade(%r%s)" % (self.canonical, ", %s" % name if name else "")

    def __reduce__(self):
        return (Grade.parse, (self.canonical,))


def parse_fixed(spec):
    """A GRIT ``Grade``, or the ``PerChannel`` family a name such as "S8_CHANNEL"
    stands for (each weight's shape then picks its grade); GradeError otherwise."""
    if isinstance(spec, PerChannel):
        return spec
    family = per_channel(spec) if isinstance(spec, str) else None
    return family if family is not None else Grade.parse(spec)


def resolve_grade(spec):
    """A grade the packed ops accept: a ``Grade`` (GRIT), an ``Int4Groups``
    for seed 001's "INT4G<g>" names (which have no GRIT descriptor), or a
    ``PerChannel`` family ("S8_CHANNEL"), whose grade each weight's shape picks.

    Both have ``.canonical`` (the string the ops take) and ``.name``.
    """
    from .int4_groups import Int4Groups

    if isinstance(spec, (Int4Groups, PerChannel)):
        return spec
    if isinstance(spec, str):
        group = _C.int4g_parse_name(spec)
        if group is not None:
            return Int4Groups(group)
        family = per_channel(spec)
        if family is not None:
            return family
    return Grade.parse(spec)


for _name, _short, _canonical in _C.reference_grades():
    setattr(Grade, _short, Grade(_canonical))
del _name, _short, _canonical
