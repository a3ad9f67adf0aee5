"""float32 fused multiply-add in numpy: the oracle for grad_x's law (one rounding per step)."""

import numpy as np


def fma32(a, b, c):
    """float32 fma(a, b, c) rounded once, elementwise (numpy float32 arrays, broadcast).

    a*b is exact in binary64; s = fl64(a*b + c) and its error e are found by TwoSum. Rounding s to
    float32 gives the right answer except where s lies exactly halfway between two float32 values
    and e is not zero: then the exact sum lies on e's side of the tie.
    """
    p = a.astype(np.float64) * b.astype(np.float64)
    c64 = c.astype(np.float64)
    s = p + c64
    bb = s - p
    e = (p - (s - bb)) + (c64 - bb)
    r = s.astype(np.float32)
    r64 = r.astype(np.float64)
    toward = np.where(s > r64, np.float32(np.inf), np.float32(-np.inf)).astype(np.float32)
    other = np.nextafter(r, toward)
    other64 = other.astype(np.float64)
    finite = np.isfinite(s) & np.isfinite(r64) & np.isfinite(other64) & np.isfinite(e)
    tie = finite & (s != r64) & (np.abs(s - r64) == np.abs(other64 - s))
    fix = tie & (e != 0) & (np.sign(e) == np.sign(other64 - s))
    return np.where(fix, other, r).astype(np.float32)
