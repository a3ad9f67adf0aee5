"""The errors torch_grit raises. Each names what failed, what was expected
and what was found; none is raised after anything has been modified."""


class GradeError(ValueError):
    """A grade string did not parse.

    ``code`` is the error class (``unknown_key``, ``not_an_alias``,
    ``inexpressible`` ...), ``token`` the offending text and ``position``
    its byte offset in the string that was parsed.
    """

    def __init__(self, message, code="malformed", token="", position=-1):
        super().__init__(message)
        self.code = code
        self.token = token
        self.position = position


class GritCheckError(ValueError):
    """A descriptor disagrees with its bytes, or cannot be believed.

    ``status`` is the GRIT status (``SizeMismatch``, ``GradeUnknown``,
    ``PlacementUnknown``, ``DigestMismatch``), ``field`` the descriptor field
    or rule, ``plane`` the plane index when one is at fault, ``expected`` and
    ``found`` the two sides, ``tensor`` the tensor name when known.
    """

    def __init__(self, message, status, field, expected=None, found=None, plane=None, tensor=None):
        prefix = "%s: " % tensor if tensor else ""
        super().__init__(prefix + message)
        self.status = status
        self.field = field
        self.expected = expected
        self.found = found
        self.plane = plane
        self.tensor = tensor


class UnsupportedOpError(RuntimeError):
    """An op a GritTensor does not implement; the message names the op.

    A RuntimeError, not a TypeError: Python turns a TypeError raised inside a
    binary operator (``W + 1``) into its own message, which would lose the name.
    """


class GroupAxisError(ValueError):
    """A product would need the groups along the other axis of a packed weight.

    Changing the group axis is requantization, not a view (a GRIT law).
    """


class InexpressibleError(ValueError):
    """A tensor whose grade GRIT v1 cannot carry (seed 001's INT4G) was to be
    exported as GRIT; nothing was written. ``tensor`` and ``grade`` name it."""

    def __init__(self, tensor, grade, reason):
        super().__init__("%s: grade %s cannot be exported as a GRIT checkpoint: %s. Nothing was "
                         "written; keep it in memory, dequantize it, or pack it to a GRIT grade "
                         "(MXFP4, NVF4, Q4KS, I8S24)" % (tensor, grade, reason))
        self.tensor = tensor
        self.grade = grade
