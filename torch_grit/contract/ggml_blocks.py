"""ggml blocks <-> GRIT planes for the three block types GRIT v1 names.

A ggml tensor is a run of fixed-size blocks along each row (``ne0``). GRIT
holds the same numbers as four planes (data, scale0, scale1, aux), row-major,
which is what every torch_grit kernel reads. Moving between the two is a
placement change: the bytes of each code, scale and zero point are the same
values, only where they sit differs, so the decode does not change.

- Q8_0 (34 bytes / 32): binary16 d, then 32 int8 codes.
  Grade ``grit1(e=s8,k0=32,s0=binary16,esr=ratiomaxabs)``: data = the codes,
  scale0 = the 2-byte d of each group.
- MXFP4 (17 bytes / 32): one E8M0 exponent, then 16 bytes whose low nibbles
  are elements 0..15 and high nibbles 16..31. GRADE_MXFP4: scale0 = the
  exponent, data = the codes two to a byte, element 2i in the low nibble.
- Q4_K (144 bytes / 256): binary16 d and dmin, 12 bytes packing eight 6-bit
  sub-scales and eight 6-bit sub-minima (ggml's ``get_scale_min_k4``), then
  128 bytes where, per 64 elements, byte l holds element l (low nibble) and
  element 32 + l (high). GRADE_Q4KS: scale0 = the sub-scales one per byte,
  scale1 = (d, dmin) per 256, aux = the sub-minima (zero points) one per byte,
  data = the codes two to a byte. x = (d * sc) * q - (dmin * m), GRIT's
  zps=l1 law ``S*e - Z``, one binary32 rounding per step, the same as ggml.

Where the two laws part, the conversion decides, and says so:

- ggml reads MXFP4 code 8 (GRIT's -0.0) as +0.0. A file written by ggml's
  tools means +0.0, so code 8 becomes code 0 on import (``ggml_zero``):
  GRIT then decodes what ggml does, bit for bit.
- An E8M0 exponent of 0xFF is NaN for GRIT; ggml computes 2^127 times twice
  the element (inf for most codes). No block with it is imported.
- A binary16 d or dmin that is inf or NaN gives NaNs whose bits differ
  between the two laws (GRIT's is canonical). No such block is imported.
"""

import numpy as np

from .descriptor import Descriptor
from .placement import WELL_KNOWN

Q8_0_GRADE = "grit1(e=s8,k0=32,s0=binary16,esr=ratiomaxabs)"
MXFP4_GRADE = "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)"
Q4K_GRADE = "grit1(e=u4,k0=32,s0=u6,k1=8,s1=binary16,zp=u6,zps=l1,esr=affineminmax)"


class BlockError(ValueError):
    """A block the conversion refuses: ``block`` is its index in the tensor,
    ``field`` the part at fault (``scale``, ``d``, ``dmin``, ``sub_scale`` ...)."""

    def __init__(self, message, block, field):
        super().__init__(message)
        self.block, self.field = block, field


class BlockType:
    """One ggml block type GRIT can name: its grade, placement and size."""

    __slots__ = ("name", "grade", "placement", "block", "nbytes")

    def __init__(self, name, grade, placement, block, nbytes):
        self.name, self.grade, self.placement = name, grade, placement
        self.block, self.nbytes = block, nbytes

    def descriptor_placement(self):
        """The (data, scale, meta) words a ``grit.desc.*`` entry declares: the
        block placement for the element and scale planes, no metadata plane."""
        return (self.placement, self.placement, None)

    def descriptor(self, shape):
        """The ``grit.desc.*`` descriptor of a tensor of torch ``shape`` [rows, cols].

        It describes the tensor as GGUF lists it, as grit-scan reads it: the
        dimensions in ggml's order (ne0, the contiguous axis, first) and the
        groups along ne0, group_axis 0.
        """
        return Descriptor(self.grade, tuple(reversed(shape)), placement=self.descriptor_placement(),
                          group_axis=0)


TYPES = {
    "Q8_0": BlockType("Q8_0", Q8_0_GRADE, WELL_KNOWN["BLOCK_AOS"], 32, 34),
    "MXFP4": BlockType("MXFP4", MXFP4_GRADE, WELL_KNOWN["BLOCK_AOS"], 32, 17),
    "Q4_K": BlockType("Q4_K", Q4K_GRADE, WELL_KNOWN["PACK_K4_12B"], 256, 144),
}
BY_GRADE = {t.grade: t for t in TYPES.values()}


def _pairs(codes):
    """(n, 2k) codes 0..15 -> (n, k) bytes, element 2i in the low nibble (po=lsb)."""
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)


def _unpairs(data, n, per):
    b = data.reshape(n, per // 2)
    out = np.empty((n, per), dtype=np.uint8)
    out[:, 0::2] = b & 0x0F
    out[:, 1::2] = b >> 4
    return out


def _f16_bad(two_bytes):
    """Indices of blocks whose little-endian binary16 (n, 2) is inf or NaN."""
    v = np.ascontiguousarray(two_bytes).view("<u2").reshape(-1)
    return np.flatnonzero((v & 0x7C00) == 0x7C00)


def _refuse_f16(two_bytes, what, type_name):
    bad = _f16_bad(two_bytes)
    if bad.size:
        raise BlockError("%s block %d has a binary16 %s that is %s (%d such blocks): GRIT's decode gives a "
                         "canonical NaN there and ggml's a different NaN or inf, so it is not imported"
                         % (type_name, int(bad[0]), what, "inf or NaN", bad.size), int(bad[0]), what)


def to_planes(type_name, blocks, ggml_zero=True, refuse=True):
    """(n, nbytes) uint8 ggml blocks -> the four GRIT planes (1-D uint8 arrays).

    ``ggml_zero``: the bytes mean what ggml reads (a file from ggml's tools),
    so MXFP4 code 8 becomes code 0; False for bytes written under a declared
    GRIT descriptor, kept as they are. ``refuse``: raise BlockError for the
    blocks the two laws decode differently (see the module doc); False only
    moves the bytes (the scanner's --deep, which judges by GRIT's law alone).
    """
    blocks = np.ascontiguousarray(blocks, dtype=np.uint8)
    n = blocks.shape[0]
    empty = np.zeros(0, dtype=np.uint8)
    if type_name == "Q8_0":
        if refuse:
            _refuse_f16(blocks[:, 0:2], "scale d", type_name)
        return [blocks[:, 2:].reshape(-1), blocks[:, 0:2].reshape(-1), empty, empty]
    if type_name == "MXFP4":
        bad = np.flatnonzero(blocks[:, 0] == 0xFF) if refuse else ()
        if len(bad):
            raise BlockError("MXFP4 block %d has E8M0 scale 0xFF (%d such blocks): GRIT decodes it as NaN, "
                             "ggml as 2^127 times twice each element (inf for all but codes 0 and +-0.5); "
                             "neither is a weight, so the tensor is not imported" % (int(bad[0]), bad.size),
                             int(bad[0]), "scale")
        qs = blocks[:, 1:]
        codes = np.concatenate([qs & 0x0F, qs >> 4], axis=1)
        if ggml_zero:
            codes[codes == 8] = 0
        return [_pairs(codes).reshape(-1), blocks[:, 0].copy(), empty, empty]
    if type_name == "Q4_K":
        if refuse:
            _refuse_f16(blocks[:, 0:2], "super-block scale d", type_name)
            _refuse_f16(blocks[:, 2:4], "super-block minimum scale dmin", type_name)
        sc, mn = _unpack_scale_min(blocks[:, 4:16])
        qs = blocks[:, 16:].reshape(n, 4, 32)
        codes = np.concatenate([qs & 0x0F, qs >> 4], axis=2).reshape(n, 256)
        return [_pairs(codes).reshape(-1), sc.reshape(-1), blocks[:, 0:4].reshape(-1), mn.reshape(-1)]
    raise KeyError(type_name)


def from_planes(type_name, planes, n):
    """The four GRIT planes of ``n`` blocks -> (n, nbytes) uint8 ggml blocks."""
    data, s0, s1, aux = (np.ascontiguousarray(p, dtype=np.uint8).reshape(-1) for p in planes)
    if type_name == "Q8_0":
        return np.concatenate([s0.reshape(n, 2), data.reshape(n, 32)], axis=1)
    if type_name == "MXFP4":
        codes = _unpairs(data, n, 32)
        qs = (codes[:, :16] | (codes[:, 16:] << 4)).astype(np.uint8)
        return np.concatenate([s0.reshape(n, 1), qs], axis=1)
    if type_name == "Q4_K":
        sc, mn = s0.reshape(n, 8), aux.reshape(n, 8)
        for what, v in (("sub_scale", sc), ("sub_minimum", mn)):
            bad = np.flatnonzero((v > 63).any(axis=1))
            if bad.size:
                raise BlockError("Q4_K block %d: a u6 %s byte holds %d, more than 6 bits"
                                 % (int(bad[0]), what.replace("_", "-"), int(v[bad[0]].max())),
                                 int(bad[0]), what)
        codes = _unpairs(data, n, 256).reshape(n, 4, 2, 32)
        qs = (codes[:, :, 0, :] | (codes[:, :, 1, :] << 4)).astype(np.uint8).reshape(n, 128)
        return np.concatenate([s1.reshape(n, 4), _pack_scale_min(sc, mn), qs], axis=1)
    raise KeyError(type_name)


def _unpack_scale_min(packed):
    """ggml's 12-byte pack -> (sub-scales, sub-minima), each (n, 8) values 0..63.

    Bytes 0-3: scale j (low 6 bits) and bits 4-5 of scale j+4 (top 2);
    bytes 4-7: the same for the minima; bytes 8-11: the low 4 bits of scale
    j+4 (low nibble) and of minimum j+4 (high nibble).
    """
    d, m, md = packed[:, 0:4], packed[:, 4:8], packed[:, 8:12]
    sc = np.concatenate([d & 0x3F, (md & 0x0F) | ((d >> 2) & 0x30)], axis=1)
    mn = np.concatenate([m & 0x3F, (md >> 4) | ((m >> 2) & 0x30)], axis=1)
    return sc.astype(np.uint8), mn.astype(np.uint8)


def _pack_scale_min(sc, mn):
    lo_s, hi_s, lo_m, hi_m = sc[:, :4], sc[:, 4:], mn[:, :4], mn[:, 4:]
    d = lo_s | ((hi_s >> 4) << 6)
    m = lo_m | ((hi_m >> 4) << 6)
    md = (hi_s & 0x0F) | ((hi_m & 0x0F) << 4)
    return np.concatenate([d, m, md], axis=1).astype(np.uint8)


def container_bytes(type_name, numel):
    """Bytes of ``numel`` elements as ggml blocks of ``type_name``."""
    t = TYPES[type_name]
    return numel // t.block * t.nbytes
