"""ggml block types and llama.cpp file types, as GRIT sees them.

The byte sizes come from gguf-py's own table (``GGML_QUANT_SIZES``), so a
type gguf-py knows is a type this scanner can size-check. Each quantized
type is one row: the GRIT grade that names it byte for byte, or the reason
GRIT v1 cannot (``grade`` None). Unquantized carriers (F32, F16, BF16, I8..)
have no row: they carry no contract beyond their dtype.
"""

import gguf

from ..contract.placement import WELL_KNOWN

_AOS = WELL_KNOWN["BLOCK_AOS"]
_K4 = WELL_KNOWN["PACK_K4_12B"]


class GgmlRow:
    __slots__ = ("name", "grade", "placement", "reason")

    def __init__(self, name, grade=None, placement=None, reason=None):
        self.name, self.grade, self.placement, self.reason = name, grade, placement, reason

    @property
    def expressible(self):
        return self.grade is not None

    @property
    def label(self):
        """What grade drift clusters on: the grade, or the block type by name."""
        return self.grade if self.grade else "ggml:" + self.name


def _implicit_zp(z):
    return ("the zero point is the constant %d, implied by the block type and never stored; "
            "v1 stores a zero point in a plane whenever it has one" % z)


_AFFINE_MIN = ("x = d*q + m adds a stored minimum; neither zps=shared (S*(e-z)) nor zps=l1 ((S*e)-Z) "
               "is that law at level 0")
_CODEBOOK = "a codebook (lookup-table) format; v1 has no codebook element class"
_TERNARY = "ternary digits packed several to a byte in radix 3; v1 has no fractional-width element"


def _split_high(bits):
    return ("%d-bit elements are split into a nibble plane and a separate high-bit plane, a layout "
            "no v1 placement registers" % bits)


ROWS = {r.name: r for r in (
    GgmlRow("Q4_0", reason=_implicit_zp(8)),
    GgmlRow("Q4_1", reason=_AFFINE_MIN),
    GgmlRow("Q5_0", reason=_split_high(5) + "; " + _implicit_zp(16)),
    GgmlRow("Q5_1", reason=_split_high(5) + "; " + _AFFINE_MIN),
    GgmlRow("Q8_0", "grit1(e=s8,k0=32,s0=binary16,esr=ratiomaxabs)", _AOS),
    GgmlRow("Q8_1", reason="each block caches a precomputed sum beside its scale; v1 has no plane for it"),
    GgmlRow("Q2_K", reason="2-bit elements with quantized sub-scales and quantized sub-minima (affine minimum)"),
    GgmlRow("Q3_K", reason=_split_high(3) + "; " + _implicit_zp(4)),
    GgmlRow("Q4_K", "grit1(e=u4,k0=32,s0=u6,k1=8,s1=binary16,zp=u6,zps=l1,esr=affineminmax)", _K4),
    GgmlRow("Q5_K", reason=_split_high(5) + " (its 12-byte sub-scale pack is Q4_K's)"),
    GgmlRow("Q6_K", reason="6-bit elements split into low-nibble and high-bit planes with int8 sub-scales; "
            + _implicit_zp(32)),
    GgmlRow("Q8_K", reason="an activation block with a per-16 partial-sum sidecar"),
    GgmlRow("IQ1_S", reason=_CODEBOOK), GgmlRow("IQ1_M", reason=_CODEBOOK),
    GgmlRow("IQ2_XXS", reason=_CODEBOOK), GgmlRow("IQ2_XS", reason=_CODEBOOK), GgmlRow("IQ2_S", reason=_CODEBOOK),
    GgmlRow("IQ3_XXS", reason=_CODEBOOK), GgmlRow("IQ3_S", reason=_CODEBOOK),
    GgmlRow("IQ4_NL", reason=_CODEBOOK), GgmlRow("IQ4_XS", reason=_CODEBOOK),
    GgmlRow("TQ1_0", reason=_TERNARY), GgmlRow("TQ2_0", reason="2-bit ternary codes {0,1,2} meaning {-1,0,+1}: "
                                                + _implicit_zp(1)),
    GgmlRow("MXFP4", "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)", _AOS),
    GgmlRow("NVFP4", reason="64-element blocks lead with four unsigned-E4M3 sub-scales whose code 0x7F decodes "
            "to 0 (v1 e4m3 is signed, 0x7F is NaN), and no v1 placement registers that block"),
    GgmlRow("Q1_0", reason="1-bit elements; the v1 element ladder starts at 2 bits"),
)}

# gguf-py's table: type id -> (name, elements per block, bytes per block)
TYPES = {int(t): (t.name, bs, ts) for t, (bs, ts) in gguf.GGML_QUANT_SIZES.items()}


def type_info(type_id):
    return TYPES.get(int(type_id))


# llama_ftype names whose dominant block type is not the name with its size suffix removed.
_FTYPE_SPECIAL = {"MOSTLY_IQ3_XS": "IQ3_S", "MOSTLY_IQ3_M": "IQ3_S", "MOSTLY_IQ2_M": "IQ2_S",
                  "MOSTLY_Q4_1_SOME_F16": "Q4_1", "MOSTLY_MXFP4_MOE": "MXFP4", "ALL_F32": "F32",
                  "GUESSED": None}
_TYPE_NAMES = {name for name, _, _ in TYPES.values()}


def ftype(value):
    """``(name, expected ggml type name or None)`` for a general.file_type value, or None."""
    try:
        name = gguf.LlamaFileType(int(value)).name
    except ValueError:
        # Retired from gguf-py's enum but still in old files.
        return ("MOSTLY_Q4_1_SOME_F16", "Q4_1") if int(value) == 4 else None
    if name in _FTYPE_SPECIAL:
        return name, _FTYPE_SPECIAL[name]
    stem = name[len("MOSTLY_"):] if name.startswith("MOSTLY_") else name
    if stem in _TYPE_NAMES:
        return name, stem
    for suffix in ("_S", "_M", "_L", "_XS"):
        if stem.endswith(suffix) and stem[:-len(suffix)] in _TYPE_NAMES:
            return name, stem[:-len(suffix)]
    return name, None
