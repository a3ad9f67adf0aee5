"""Seeded case generators shared by the oracle tests.

The alias tables and key domains are read from the oracle package at run
time, so the spellings exercised here are exactly the ones the reference
accepts (minus the documented deliberate differences).
"""

import random

import grit
import grit.grade as ograde

# Reference grade short names, as torch_grit spells them; the oracle's
# codec and registry use "GRADE_" + name.
REF_NAMES = ("MXFP4", "Q4KS", "NVF4", "I8S24", "MXFP4_RNE", "NVF4_RTZ")

FORMATS = ("e2m1", "e4m3", "e8m0", "binary16", "binary32", "u2", "u4", "u6", "u8", "s4", "s8")
ELEM_FORMATS = ("e2m1", "e4m3", "e8m0", "binary16", "u2", "u4", "u6", "u8", "s4", "s8")

# Spellings we refuse on purpose although the oracle maps them (deliberate
# difference 2: int2 -> s2 is not a v1 format).
OUR_REFUSED_ALIASES = {"int2"}

# canonical format -> every spelling the oracle maps to it
FMT_SPELLINGS = {f: [f] for f in FORMATS}
for _alias, _target in ograde.FMT_ALIASES.items():
    if _target in FMT_SPELLINGS and _alias not in OUR_REFUSED_ALIASES:
        FMT_SPELLINGS[_target].append(_alias)

# enum domain -> canonical value -> spellings
ENUM_SPELLINGS = {}
for _dom, _table in ograde.ENUM_ALIASES.items():
    rows = ENUM_SPELLINGS.setdefault(_dom, {})
    for _alias, _target in _table.items():
        rows.setdefault(_target, []).append(_alias)

KEY_DOMAIN = dict(ograde.KEY_DOMAIN)
OPTIONAL_ENUM_KEYS = ("ct", "po", "er", "es", "esn", "dr", "ds", "dt", "ao", "ap", "ab", "ai", "an")

WHITESPACE = (" ", "\t", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x1f")

# Placement words: the well-known set, unspecified, the two open classes
# (local hash, opaque) and reserved classes (including an unknown payload
# in the well-known class).
WELL_KNOWN = tuple(grit.WELL_KNOWN_PLACEMENTS)


def random_placement(rng):
    r = rng.random()
    if r < 0.35:
        return rng.choice(WELL_KNOWN)
    if r < 0.5:
        return 0
    if r < 0.65:
        return (0x8 << 60) | rng.getrandbits(60)
    if r < 0.8:
        return (0xF << 60) | rng.getrandbits(60)
    if r < 0.9:
        cls = rng.choice([c for c in range(16) if c not in (0x1, 0x8, 0xF)])
        return (cls << 60) | rng.getrandbits(60)
    return (0x1 << 60) | rng.choice([0, 6, 0x10, 0x13, 0x21, rng.getrandbits(60)])


def _small_int(rng):
    r = rng.random()
    if r < 0.5:
        return rng.choice([0, 1, 2, 4, 8, 16, 32, 64, 128, 256])
    if r < 0.9:
        return rng.randint(0, 300)
    return rng.randint(0, 65535)


def _enum_value(rng, key):
    dom = KEY_DOMAIN[key]
    if dom == "fmt":
        return rng.choice(FORMATS)
    if dom == "order" and rng.random() < 0.3:
        return "pairwise%d" % rng.choice([1, 2, 8, 32, rng.randint(1, 10 ** 6)])
    if dom == "scalerule" and rng.random() < 0.15:
        return "custom:" + "".join(rng.choice("abcxyz019_:.") for _ in range(rng.randint(0, 8)))
    return rng.choice(sorted(ENUM_SPELLINGS[dom]))


def random_grade_fields(rng):
    """A valid grade as {key: canonical token}."""
    f = {
        "e": rng.choice(ELEM_FORMATS),
        "k0": str(_small_int(rng)),
        "s0": rng.choice(FORMATS),
        "esr": _enum_value(rng, "esr"),
    }
    has_l1 = rng.random() < 0.4
    if has_l1:
        f["k1"] = str(_small_int(rng))
        f["s1"] = rng.choice(FORMATS)
    r = rng.random()
    if r < 0.3:  # zero point (never together with sp: SPARSE|HAS_ZP is reserved)
        f["zp"] = rng.choice(FORMATS)
        if rng.random() < 0.6:
            f["zpc"] = rng.choice(["asis", "minus1"])
        if rng.random() < 0.6:
            f["zps"] = rng.choice(["shared", "l1"] if has_l1 else ["shared"])
    elif r < 0.55:
        m = rng.randint(2, 32)
        n = rng.randint(1, m - 1)
        f["sp"] = "%d:%d:%s:%s" % (n, m, rng.choice(["u2", "u4"]), rng.choice(["asclsb", "unord"]))
    for key in OPTIONAL_ENUM_KEYS:
        if rng.random() < 0.3:
            f[key] = _enum_value(rng, key)
    return f


def _case(rng, s):
    r = rng.random()
    if r < 0.4:
        return s
    if r < 0.6:
        return s.upper()
    return "".join(c.upper() if rng.random() < 0.5 else c for c in s)


def _spell_value(rng, key, token):
    dom = KEY_DOMAIN[key]
    if dom == "fmt":
        return rng.choice(FMT_SPELLINGS[token])
    if dom == "int":
        return "0" * rng.choice([0, 0, 0, 1, 3]) + token
    if dom == "sp":
        n, m, meta, order = token.split(":")
        return ":".join([
            "0" * rng.choice([0, 0, 1]) + n,
            "0" * rng.choice([0, 0, 2]) + m,
            rng.choice(FMT_SPELLINGS[meta]),
            rng.choice(ENUM_SPELLINGS["metaorder"][order]),
        ])
    if token.startswith("pairwise"):
        return "pairwise" + "_" * rng.choice([0, 0, 1, 2]) + "0" * rng.choice([0, 0, 1]) + token[8:]
    if token.startswith("custom:"):
        return token
    spelled = rng.choice(ENUM_SPELLINGS[dom][token])
    if rng.random() < 0.2:  # '-' is ignored inside enum tokens
        i = rng.randint(0, len(spelled))
        spelled = spelled[:i] + "-" + spelled[i:]
    return spelled


def _sprinkle_ws(rng, s):
    if rng.random() < 0.5:
        return s
    out = []
    for c in s:
        if rng.random() < 0.08:
            out.append("".join(rng.choice(WHITESPACE) for _ in range(rng.randint(1, 3))))
        out.append(c)
    if rng.random() < 0.5:
        out.append(rng.choice(WHITESPACE))
    return "".join(out)


def spell(rng, fields):
    """Some accepted spelling of a grade: aliases, case, key order, whitespace."""
    keys = list(fields)
    rng.shuffle(keys)
    items = ["%s=%s" % (_case(rng, k), _case(rng, _spell_value(rng, k, fields[k]))) for k in keys]
    return _sprinkle_ws(rng, _case(rng, "grit1") + "(" + ",".join(items) + ")")


def canonical_tokens_string(fields):
    """The plain (non-canonical order) string of a field dict."""
    return "grit1(" + ",".join("%s=%s" % kv for kv in fields.items()) + ")"


def random_shape(rng, max_rank=4, allow_negative=False):
    rank = rng.randint(0, max_rank)
    dims = []
    for _ in range(rank):
        r = rng.random()
        if r < 0.1:
            dims.append(0)
        elif r < 0.5:
            dims.append(rng.choice([1, 2, 3, 4, 16, 32, 64, 96, 128, 256, 512]))
        elif allow_negative and r < 0.55:
            dims.append(-rng.randint(1, 64))
        else:
            dims.append(rng.randint(1, 1000))
    return tuple(dims)


def rng_for(*seed_parts):
    return random.Random("|".join(str(p) for p in seed_parts))


# --- check verdicts -------------------------------------------------------

_ORACLE_STATUS = {0: "Ok", 1: "SizeMismatch", 2: "GradeUnknown", 3: "PlacementUnknown",
                  4: "DigestMismatch"}


def oracle_verdict(desc, shape, lengths, level=1, planes=None, digest=None):
    """The oracle's status name for a descriptor (GritDesc or 64 bytes)."""
    if isinstance(desc, (bytes, bytearray)):
        desc = grit.GritDesc.unpack(bytes(desc))
    kw = {}
    if planes is not None:
        kw["planes"] = [bytes(p) for p in planes]
    if digest is not None:
        kw["expected_digest"] = digest
    result = grit.grit_check_status(desc, shape=tuple(shape), plane_bytes=list(lengths),
                                    level=level, **kw)
    return _ORACLE_STATUS[int(result.status)]


def our_verdict(desc, planes_or_lengths, level=1, digest=None):
    """Our status name: "Ok" or the GritCheckError status."""
    import torch_grit

    try:
        torch_grit.check(desc, planes_or_lengths, level=level, digest=digest)
    except torch_grit.GritCheckError as err:
        return err.status
    return "Ok"


def oracle_plane_bytes(desc, shape):
    """The oracle's four expected plane lengths, or None if it refuses the shape."""
    from grit.check import _SizeErr, expected_plane_bytes

    if isinstance(desc, (bytes, bytearray)):
        desc = grit.GritDesc.unpack(bytes(desc))
    try:
        return list(expected_plane_bytes(desc, tuple(shape))["bytes"])
    except _SizeErr:
        return None
