"""``check``: descriptor versus planes at a boundary, and the plane digest."""

from .. import _C
from .descriptor import Descriptor, raise_check


def _length(p):
    if p is None:
        return 0
    if isinstance(p, int):
        return p
    if hasattr(p, "untyped_storage"):  # a torch tensor: its byte length, on any device
        return p.numel() * p.element_size()
    return memoryview(p).nbytes


def _buffer(p):
    if p is None:
        return None
    if isinstance(p, int):
        raise TypeError("a level-2 check reads the plane bytes: pass buffers, not lengths")
    if hasattr(p, "untyped_storage"):
        import torch

        t = p.detach().reshape(-1)
        if t.device.type != "cpu":
            t = t.cpu()
        return t.contiguous().view(torch.uint8).numpy()
    if hasattr(p, "__array_interface__"):
        import numpy as np

        return np.ascontiguousarray(p).reshape(-1).view(np.uint8)
    return memoryview(p).cast("B") if memoryview(p).ndim > 1 or memoryview(p).format != "B" else p


def _planes4(planes):
    planes = list(planes)
    if len(planes) > 4:
        raise ValueError("a GRIT array has at most four planes (data, scale0, scale1, aux), found %d"
                         % len(planes))
    return planes + [None] * (4 - len(planes))


def check(desc, planes, level=1, digest=None, tensor=None):
    """Check a descriptor against its planes; raise GritCheckError on failure.

    Level 1 (always) checks the frame, the grade, the placement and every
    plane length against the size equations: it reads no plane bytes, so
    ``planes`` may also be plain byte counts. Level 2 reads the bytes: the
    plane digest against ``digest`` (16 bytes or hex) when given, and the
    sparsity metadata order the descriptor declares. ``tensor`` names the
    tensor in the error message.
    """
    if not isinstance(desc, Descriptor):
        raise TypeError("check() takes a torch_grit.Descriptor, found %s" % type(desc).__name__)
    planes = _planes4(planes)
    grade = desc.grade._native if desc.grade is not None else None
    if level <= 1:
        result = _C.check_lengths(desc._d, list(desc.shape), [_length(p) for p in planes], grade)
    else:
        if isinstance(digest, str):
            digest = bytes.fromhex(digest)
        result = _C.check_planes(desc._d, list(desc.shape), [_buffer(p) for p in planes],
                                 int(level), digest, grade)
    raise_check(result, tensor)


def digest(planes):
    """FNV-1a-128 content digest of up to four planes (16 bytes)."""
    return _C.digest([_buffer(p) for p in _planes4(planes)])
