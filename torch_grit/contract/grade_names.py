"""Names for common grades beyond the reference four, so users need not write
canonical strings. Each name stands for one canonical GRIT grade (the general
encoder's rules, docs/numerics.md "Encoders for any grade"), except the
per-channel families, whose group is the whole row: their k0 is the weight's
in_features, chosen per layer.

    U4Z_G<k>     u4, binary16 scale and u4 zero point per k, affineminmax  (GPTQ/AWQ asymmetric)
    U4S_G<k>     u4 with the middle zero point 8, ratiomaxabs               (GPTQ symmetric)
    U8Z_G<k>     u8 with a u8 zero point, affineminmax
    S4_G<k>      s4, binary16 scale per k, ratiomaxabs                      (compressed-tensors int4)
    S8_G<k>      s8, binary16 scale per k, ratiomaxabs;  Q8_0 is S8_G32     (ggml's Q8_0)
    MXFP8        e4m3, e8m0 scale per 32, exp2floormaxabs                   (OCP MX E4M3)
    FP4_E4M3_G32 e2m1, one e4m3 scale per 32, ratiomaxabs
    S8_CHANNEL / S4_CHANNEL   one binary32 scale per row, ratiomaxabs
    U4Z_CHANNEL  one binary16 scale and u4 zero point per row, affineminmax

with k in 32, 64, 128.
"""

_GROUPS = (32, 64, 128)

NAMED = {}
for _k in _GROUPS:
    NAMED["U4Z_G%d" % _k] = "grit1(e=u4,k0=%d,s0=binary16,zp=u4,esr=affineminmax)" % _k
    NAMED["U4S_G%d" % _k] = "grit1(e=u4,k0=%d,s0=binary16,zp=u4,esr=ratiomaxabs)" % _k
    NAMED["U8Z_G%d" % _k] = "grit1(e=u8,k0=%d,s0=binary16,zp=u8,esr=affineminmax)" % _k
    NAMED["S4_G%d" % _k] = "grit1(e=s4,k0=%d,s0=binary16,esr=ratiomaxabs)" % _k
    NAMED["S8_G%d" % _k] = "grit1(e=s8,k0=%d,s0=binary16,esr=ratiomaxabs)" % _k
del _k
NAMED["Q8_0"] = NAMED["S8_G32"]
NAMED["MXFP8"] = "grit1(e=e4m3,k0=32,s0=e8m0,esr=exp2floormaxabs)"
NAMED["FP4_E4M3_G32"] = "grit1(e=e2m1,k0=32,s0=e4m3,esr=ratiomaxabs)"

_PER_CHANNEL = {
    "S8_CHANNEL": "grit1(e=s8,k0=%d,s0=binary32,esr=ratiomaxabs)",
    "S4_CHANNEL": "grit1(e=s4,k0=%d,s0=binary32,esr=ratiomaxabs)",
    "U4Z_CHANNEL": "grit1(e=u4,k0=%d,s0=binary16,zp=u4,esr=affineminmax)",
}


class PerChannel:
    """A grade family with one group per row: ``for_shape(shape)`` is the GRIT grade
    of a weight ``[out, in]`` (k0 = in). quantize, quantize_, GritLinear and
    ``torch-grit quantize --grade`` take the name and pick k0 per weight."""

    __slots__ = ("name", "_template")

    def __init__(self, name):
        self.name = name
        self._template = _PER_CHANNEL[name]

    @property
    def canonical(self):
        raise ValueError("%s has no single canonical grade: its k0 is each weight's in_features "
                         "(use for_shape, or write the grade with k0)" % self.name)

    def for_shape(self, shape):
        from .grade import Grade

        if len(shape) != 2 or shape[1] < 1:
            raise ValueError("%s packs 2-D weights [out, in] with in >= 1; found shape %s"
                             % (self.name, tuple(shape)))
        return Grade(self._template % shape[1])

    def policy(self):
        """The checkpoint's "grade_policy" record: each tensor's k0 is its in_features, so
        the scanner reads the mixture of group sizes as chosen, not as drift."""
        return {"grade": self.name, "rule": "torch_grit.per_channel",
                "template": self._template.replace("%d", "<in_features>")}

    def __eq__(self, other):
        return isinstance(other, PerChannel) and other.name == self.name

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return "PerChannel(%r)" % self.name


def named(text):
    """The canonical string a name stands for, or None."""
    return NAMED.get(text.strip().upper())


def per_channel(text):
    """The PerChannel family a name stands for, or None."""
    key = text.strip().upper()
    return PerChannel(key) if key in _PER_CHANNEL else None


def grade_for(grade, shape):
    """``grade`` itself, or for a PerChannel family the grade of a weight of ``shape``."""
    return grade.for_shape(shape) if isinstance(grade, PerChannel) else grade
