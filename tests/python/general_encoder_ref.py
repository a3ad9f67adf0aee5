"""An independent Python reading of the general encoder's rules
(docs/numerics.md, "Encoders for any grade"), on grit-datatype's format
layer (grit.fmt): the bytes the core's encode_general must give, and the
values the decode law gives back for them. Slow and plain on purpose."""

import math
import struct
from dataclasses import dataclass

from grit import fmt as gf

FLT_MAX = struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0]


def f32(x):
    """Round a Python float to binary32 (a binary32 op's result, computed in binary64)."""
    if x != x or x in (math.inf, -math.inf):
        return x
    if abs(x) > FLT_MAX:
        # Past the largest finite value: inf from half an ulp above it on.
        return math.copysign(FLT_MAX if abs(x) < 2.0 ** 128 - 2.0 ** 103 else math.inf, x)
    return struct.unpack("<f", struct.pack("<f", x))[0]


@dataclass(frozen=True)
class Spec:
    e: str
    k0: int
    s0: str
    esr: str
    zp: str = None
    minus1: bool = False
    er: str = "rne"
    pad8: bool = False
    msb: bool = False

    @property
    def grade(self):
        parts = ["e=%s" % self.e, "k0=%d" % self.k0, "s0=%s" % self.s0]
        if self.zp:
            parts.append("zp=%s" % self.zp)
        if self.minus1:
            parts.append("zpc=minus1")
        if self.pad8:
            parts.append("ct=pad8")
        if self.msb:
            parts.append("po=msb")
        if self.er != "rne":
            parts.append("er=%s" % self.er)
        parts.append("esr=%s" % self.esr)
        return "grit1(%s)" % ",".join(parts)


def _int_range(word):
    info = gf.fmt_unpack(word)
    if info.unsigned:
        return 0, (1 << info.width) - 1
    hi = (1 << (info.width - 1)) - 1
    return -hi, hi


def _round_int(x, er):
    if er == "rne":
        return float(round(x))  # Python rounds half to even
    if er == "rna":
        return math.copysign(math.floor(abs(x) + 0.5), x)
    if er == "rtz":
        return float(math.trunc(x))
    if er == "rtp":
        return float(math.ceil(x))
    return float(math.floor(x))


def _encode_elem(word, x, er):
    """fmt_encode(word, x, er, satfinite) for a non-NaN x."""
    info = gf.fmt_unpack(word)
    if info.is_integer:
        lo, hi = _int_range(word)
        r = hi if x == math.inf else (lo if x == -math.inf else _round_int(x, er))
        q = int(min(max(r, lo), hi))
        return q & ((1 << info.width) - 1)
    if er == "rne":
        return gf.fmt_encode_rne(word, x, "satfinite")
    mags, codes = gf.fmt_ladder(word)
    a, neg = abs(x), math.copysign(1.0, x) < 0
    if a >= mags[-1]:
        c = codes[-1]
    else:
        i = max(j for j in range(len(mags)) if mags[j] <= a)
        d_lo, d_hi = a - mags[i], mags[i + 1] - a
        up = {"rtz": False, "rna": d_hi <= d_lo, "rtp": (not neg) and d_lo > 0,
              "rtn": neg and d_lo > 0}[er]
        c = codes[i + 1] if up else codes[i]
    if neg and gf.fmt_unpack(word).sign_bits:
        c |= gf.fmt_sign_mask(word)
    return c


def _exp2_exponent(amax, esr):
    m, e = math.frexp(amax)
    e_floor, f = e - 1, 2.0 * m
    if esr == "exp2floormaxabs":
        return e_floor
    if esr == "exp2ceilmaxabs":
        return e_floor + (1 if f > 1.0 else 0)
    return e_floor + (1 if f * f > 2.0 else 0)


def _pow2_range(word):
    xs = []
    for x in range(-149, 128):
        p = 2.0 ** x
        if gf.fmt_decode(word, gf.fmt_encode_rne(word, p, "satfinite")) == p:
            xs.append(x)
    return min(xs), max(xs)


def _smallest_positive(word):
    if gf.fmt_width(word) > 8:
        return 1
    mags, codes = gf.fmt_ladder(word)
    return next(c for m, c in zip(mags, codes) if m > 0)


def _pack(codes, width, msb):
    out = bytearray((len(codes) * width + 7) // 8)
    for i, c in enumerate(codes):
        for k in range(width):
            bit = i * width + k
            if msb:
                if (c >> (width - 1 - k)) & 1:
                    out[bit >> 3] |= 1 << (7 - (bit & 7))
            elif (c >> k) & 1:
                out[bit >> 3] |= 1 << (bit & 7)
    return bytes(out)


def _pack_padded(codes, width):
    size = 1 if width <= 8 else width // 8
    return b"".join(int(c).to_bytes(size, "little") for c in codes)


def encode(spec, values):
    """(planes [data, scale0, scale1, aux], decoded values) for float32 `values`."""
    E, S0 = gf.NAME_FMT[spec.e], gf.NAME_FMT[spec.s0]
    integer = gf.fmt_unpack(E).is_integer
    if integer:
        qmin, qmax = _int_range(E)
        maxnorm = float(qmax)
    else:
        maxnorm = gf.fmt_maxnorm(E)
    emax = math.floor(math.log2(maxnorm))
    if spec.zp:
        Z = gf.NAME_FMT[spec.zp]
        zlo, zhi = _int_range(Z)
        off = 1 if spec.minus1 else 0
        z_lo, z_hi = max(qmin, zlo + off), min(qmax, zhi + off)
    codes, scales, zps, decoded = [], [], [], []
    vals = [float(v) for v in values]
    for g in range(len(vals) // spec.k0):
        x = vals[g * spec.k0:(g + 1) * spec.k0]
        if not all(math.isfinite(v) for v in x):
            scales.append(gf.fmt_nan_code(S0))
            codes += [0] * spec.k0
            zps.append(0)
            decoded += [math.nan] * spec.k0
            continue
        if spec.esr == "affineminmax":
            mn, mx = min(x), max(x)  # the first of equal values, like the core
            lo, hi = (mn if mn < 0 else 0.0), (mx if mx > 0 else 0.0)
            target = 1.0 if hi == lo else f32(f32(hi - lo) / float(qmax - qmin))
        else:
            amax = max(abs(v) for v in x)
            if spec.esr == "ratiomaxabs" and spec.zp:  # GPTQ's symmetric rule
                target = 1.0 if amax == 0 else f32(f32(amax + amax) / float(qmax - qmin))
            elif spec.esr == "ratiomaxabs":
                target = 1.0 if amax == 0 else f32(amax / maxnorm)
            else:
                lo_e, hi_e = _pow2_range(S0)
                e = 0 if amax == 0 else _exp2_exponent(amax, spec.esr) - emax
                target = 2.0 ** min(max(e, lo_e), hi_e)
        if not math.isfinite(target):
            target = FLT_MAX
        sc = gf.fmt_encode_rne(S0, target, "satfinite")
        if gf.fmt_decode(S0, sc) == 0.0:
            sc = _smallest_positive(S0)
        scales.append(sc)
        S = gf.fmt_decode(S0, sc)
        if spec.zp:
            if spec.esr == "affineminmax":
                z = min(max(int(round(f32(-lo / S))) + qmin, z_lo), z_hi)
            else:
                z = (qmin + qmax + 1) // 2
            zps.append((z - off) & ((1 << gf.fmt_width(Z)) - 1))
            for v in x:
                t = f32(v / S)
                r = (qmax if t > 0 else qmin) if not math.isfinite(t) else _round_int(t, spec.er) + z
                q = int(min(max(r, qmin), qmax))
                codes.append(q & ((1 << gf.fmt_width(E)) - 1))
                decoded.append(f32(S * f32(float(q) - float(z))))
        else:
            for v in x:
                c = _encode_elem(E, f32(v / S), spec.er)
                codes.append(c)
                decoded.append(f32(S * gf.fmt_decode(E, c)))
    ew = gf.fmt_width(E)
    width = 8 if spec.pad8 and ew <= 8 else ew
    data = _pack(codes, width, spec.msb and width < 8)
    planes = [data, _pack_padded(scales, gf.fmt_width(S0)), b"",
              _pack_padded(zps, gf.fmt_width(Z)) if spec.zp else b""]
    return planes, decoded
