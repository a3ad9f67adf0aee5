"""Reference encode/decode of raw planes, straight from the C++ core.

These are the scalar truth the fast kernels are tested against; use
``torch_grit.quantize`` for tensors.
"""

import numpy as np

from .. import _C
from .check import _buffer, _planes4
from .errors import GradeError
from .grade import Grade


def _raise(err, grade):
    code, message, token, position = err
    if code in ("bad_length", "bad_value", "out_of_range"):
        # The grade parsed fine: the values or planes are what is refused.
        raise ValueError("%s: %s" % (grade.canonical, message))
    raise GradeError(message, code=code, token=token, position=position)


def encode_planes(grade, values):
    """binary32 values (stream order) -> [data, scale0, scale1, aux] bytes."""
    grade = Grade.parse(grade)
    if hasattr(values, "detach"):
        values = values.detach().cpu().float().numpy()
    arr = np.ascontiguousarray(np.asarray(values, dtype=np.float32).reshape(-1))
    planes, err = _C.encode(grade._native, arr)
    if err is not None:
        _raise(err, grade)
    return planes


def decode_planes(grade, planes, numel):
    """Planes -> float32 numpy array of ``numel`` values, by the reference decode."""
    grade = Grade.parse(grade)
    out, err = _C.decode(grade._native, [_buffer(p) for p in _planes4(planes)], int(numel))
    if err is not None:
        _raise(err, grade)
    return np.frombuffer(out, dtype=np.float32).copy()


def decode_factors(grade, planes, numel):
    """The decode as packed_linear's law takes it, per k0-group.

    Returns ``(e, S)`` float32 arrays: ``numel`` element values and one scale
    per group, with ``float32(S*e)`` equal to the decode's value (a group the
    law cannot factor exactly has ``e`` = the decoded weights and ``S`` = 1;
    csrc/grit/decode.h, decode_factors_range).
    """
    grade = Grade.parse(grade)
    e, S, err = _C.decode_factors(grade._native, [_buffer(p) for p in _planes4(planes)], int(numel))
    if err is not None:
        _raise(err, grade)
    return tuple(np.frombuffer(v, dtype=np.float32).copy() for v in (e, S))


def decode_bounds(grade, planes, numel):
    """Each element's representable range [lo, hi] under its stored scales.

    The decode of every element with the format's most negative and most
    positive code: a source value outside [lo, hi] was clamped by the encoder.
    """
    grade = Grade.parse(grade)
    lo, hi, err = _C.decode_bounds(grade._native, [_buffer(p) for p in _planes4(planes)], int(numel))
    if err is not None:
        _raise(err, grade)
    return np.frombuffer(lo, dtype=np.float32).copy(), np.frombuffer(hi, dtype=np.float32).copy()


def decode_terms(grade, planes, numel):
    """The decode as the s8 activation law takes it, per k0-group.

    Returns float32 arrays ``(e, S, z, Z)``: ``numel`` element values (a
    pruned sparse position 0) and per group the scale, the zps=shared zero
    point and the zps=l1 offset (each 0 where the grade has none), so the
    decode is f32(S*e), f32(S*f32(e - z)) or f32(f32(S*e) - Z)
    (csrc/grit/decode.h, decode_terms_range).
    """
    grade = Grade.parse(grade)
    out, err = _C.decode_terms(grade._native, [_buffer(p) for p in _planes4(planes)], int(numel))
    if err is not None:
        _raise(err, grade)
    return tuple(np.frombuffer(v, dtype=np.float32).copy() for v in out)


def s8_law(grade):
    """The s8 activation law of ``grade`` (csrc/grit/s8_linear.h) as a dict:
    ``k0``, ``kb`` (the activation block), ``qe`` (element value = code *
    2^qe) and ``zero`` ("none", "shared" or "offset"). A grade without one is
    refused: ValueError naming the reason."""
    grade = Grade.parse(grade)
    law, err = _C.s8_law(grade._native)
    if err is not None:
        raise ValueError(err[1])
    return dict(law)
