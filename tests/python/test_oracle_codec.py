"""Encode and decode against the oracle, bit for bit.

Conformance vectors: grit-datatype 1.1.0 ships none. Its wheel holds only
the Python modules of package `grit`, the dist-info and the grit-scan
script (see test_package_ships_no_conformance_vectors, which fails if a
future pin starts shipping data files, so they get wired in here). What
stands in for vectors below is the oracle's own encode/decode on seeded
inputs.

Deliberate difference 4: GRADE_NVF4_RTZ. Our encoder applies the grade's
er=rtz to the element codes; the oracle's encoder ignores er and uses its
NVF4 (rne) encoder. For that grade we check the scales against the
oracle, the element codes against an independent rtz projection, and the
decode against the oracle, not byte equality of the data plane.
"""

import importlib.metadata
import math
import struct

import grit
import numpy as np
import pytest
import torch

from torch_grit import Grade, decode_planes, encode_planes

from grit_cases import REF_NAMES, rng_for

BLOCK = {"MXFP4": 32, "MXFP4_RNE": 32, "Q4KS": 256, "NVF4": 16, "NVF4_RTZ": 16, "I8S24": 32}
F32_MAX = float(np.finfo(np.float32).max)
SPECIALS = [0.0, -0.0, 1e-45, -1e-45, 1.1754942e-38, -5.9e-39, 3e-40, F32_MAX, -F32_MAX, 3e38,
            65504.0, 65520.0, 6.0, -6.0, 0.25, 448.0, 127.0]
TIES = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0, 7.0, 12.0, 1.4142135, 1.4142137, 126.5,
        127.5, 0.5, 1.5, 63.5]


def values(rng, name, n_blocks, specials=True, non_finite=True):
    """float32 inputs, block by block: each block has its own magnitude."""
    block = BLOCK[name]
    out = []
    for _ in range(n_blocks):
        kind = rng.random()
        exp = rng.randint(-140, 120) if name != "Q4KS" else rng.randint(-40, 60)
        scale = 2.0 ** exp
        for _ in range(block):
            r = rng.random()
            if kind < 0.08:
                v = rng.choice([0.0, -0.0])
            elif kind < 0.25:  # rounding ties of e2m1 / s8 / the exp2 scale rules
                v = rng.choice([-1.0, 1.0]) * rng.choice(TIES) * 2.0 ** (exp // 8)
            elif specials and r < 0.08:
                v = rng.choice(SPECIALS if name != "Q4KS" else SPECIALS[:7])
            elif non_finite and kind > 0.8 and r < 0.1:
                v = rng.choice([math.nan, math.inf, -math.inf])
            else:
                v = rng.gauss(0.0, 1.0) * scale
            out.append(v)
    with np.errstate(over="ignore"):
        return np.array(out, dtype=np.float64).astype(np.float32)


def oracle_bits(name, planes, n):
    return [int(h, 16) for h in grit.decode_bits("GRADE_" + name, [bytes(p) for p in planes], n)]


def our_bits(name, planes, n):
    return decode_planes(name, planes, n).view(np.uint32).tolist()


def test_package_ships_no_conformance_vectors():
    files = [str(f) for f in importlib.metadata.files("grit-datatype")]
    data = [f for f in files if not f.endswith((".py", ".pyc")) and ".dist-info/" not in f
            and not f.endswith("bin/grit-scan")]
    assert data == [], "grit-datatype now ships data files; wire its conformance vectors in: %r" % data


@pytest.mark.parametrize("name", [n for n in REF_NAMES if n != "NVF4_RTZ"])
def test_encode_matches_oracle_bytes(name):
    rng = rng_for("codec", "encode", name)
    cases = 30 if name == "Q4KS" else 120
    for case in range(cases):
        n_blocks = rng.choice([1, 1, 2, 3]) if name == "Q4KS" else rng.choice([1, 2, 3, 5, 8])
        vals = values(rng, name, n_blocks)
        want = [bytes(p) for p in grit.encode("GRADE_" + name, [float(v) for v in vals])]
        got = encode_planes(name, vals)
        assert [bytes(p) for p in got] == want, (name, case)
        n = len(vals)
        assert our_bits(name, want, n) == oracle_bits(name, want, n), (name, case)


@pytest.mark.parametrize("name", REF_NAMES)
def test_decode_of_oracle_planes_bit_for_bit(name):
    rng = rng_for("codec", "decode", name)
    enc_name = "NVF4" if name == "NVF4_RTZ" else name  # same decoder, same planes
    nan_seen = 0
    for case in range(10 if name == "Q4KS" else 25):
        n_blocks = rng.choice([1, 2]) if name == "Q4KS" else rng.choice([1, 2, 4, 6])
        vals = values(rng, enc_name, n_blocks)
        if case == 0:
            vals[rng.randrange(len(vals))] = rng.choice([math.nan, math.inf, -math.inf])
        planes = grit.encode("GRADE_" + enc_name, [float(v) for v in vals])
        n = len(vals)
        want = oracle_bits(name, planes, n)
        assert our_bits(name, planes, n) == want
        nan_seen += want.count(0x7FC00000)
    assert nan_seen > 0  # NaN positions (poisoned blocks) were compared too


@pytest.mark.parametrize("name", REF_NAMES)
def test_decode_of_random_bytes_bit_for_bit(name):
    # Random planes of the right lengths: NaN and Inf scales, odd codes,
    # duplicate or unordered sparsity indices, all decoded as the oracle does.
    rng = rng_for("codec", "random-bytes", name)
    grade = Grade.parse(name)
    for _ in range(60 if name == "Q4KS" else 200):
        n = BLOCK[name] * rng.choice([1, 2, 3]) if name != "NVF4" else 16 * rng.choice([1, 2, 5])
        n = max(n, 32 if name == "I8S24" else n)
        planes = [bytes(rng.getrandbits(8) for _ in range(k)) for k in grade.plane_bytes(n)]
        assert our_bits(name, planes, n) == oracle_bits(name, planes, n), [p.hex() for p in planes]


def test_decode_special_scales():
    # Scales that poison, overflow and underflow, and I8S24 metadata naming
    # the same index twice (the oracle keeps the set of named positions).
    n = 64
    data = bytes(range(0, 256, 8))  # 32 bytes: every e2m1 code, twice
    cases = {
        "MXFP4": [data, bytes([0xFF, 0xFE])],
        "MXFP4_RNE": [data, bytes([0x00, 0x7F])],
        "NVF4": [data, bytes([0x7F, 0xFF, 0x00, 0x80]), struct.pack("<I", 0x7F800000)],
        "NVF4_RTZ": [data, bytes([0x7E, 0x01, 0xF7, 0x08]), struct.pack("<I", 0x00000001)],
        "I8S24": [data, struct.pack("<HH", 0x7C00, 0x7E01), b"",
                  bytes([0b0101_0000, 0b1111_1111, 0b1110_0100, 0b0001_1011] * 2)],
    }
    for name, planes in cases.items():
        planes = list(planes) + [b""] * (4 - len(planes))
        assert [len(p) for p in planes] == Grade.parse(name).plane_bytes(n), name
        assert our_bits(name, planes, n) == oracle_bits(name, planes, n), name


def test_q4ks_special_super_blocks():
    d = [0x7C00, 0xFC00, 0x7E00, 0x0001, 0x3C00, 0x8000]
    for dd in d:
        for dm in d:
            planes = [bytes(range(128)), bytes(range(56, 64)), struct.pack("<HH", dd, dm),
                      bytes(range(0, 64, 8))]
            assert our_bits("Q4KS", planes, 256) == oracle_bits("Q4KS", planes, 256), (dd, dm)


def test_q4ks_overflowing_range_is_refused_by_both():
    rng = rng_for("codec", "q4ks-overflow")
    for _ in range(6):
        vals = values(rng, "Q4KS", 1, specials=False, non_finite=False)
        sub = 32 * rng.randrange(8)  # hi - lo of one sub-block overflows binary32
        vals[sub + rng.randrange(16)] = F32_MAX
        vals[sub + 16 + rng.randrange(16)] = -F32_MAX
        with pytest.raises(ValueError):
            grit.encode("GRADE_Q4KS", [float(v) for v in vals])
        with pytest.raises(ValueError):
            encode_planes("Q4KS", vals)


@pytest.mark.parametrize("name", REF_NAMES)
def test_counts_that_are_not_a_block_multiple_are_refused_by_both(name):
    n = BLOCK[name] + (8 if BLOCK[name] > 16 else 4)
    vals = np.ones(n, np.float32)
    with pytest.raises(ValueError):
        grit.encode("GRADE_" + name, [1.0] * n)
    with pytest.raises(ValueError):
        encode_planes(name, vals)


def test_encode_takes_numpy_torch_and_lists_alike():
    rng = rng_for("codec", "inputs")
    vals = values(rng, "MXFP4", 2)
    want = encode_planes(Grade.MXFP4, vals)
    assert encode_planes("MXFP4", torch.from_numpy(vals.copy())) == want
    assert encode_planes("GRADE_MXFP4", [float(v) for v in vals]) == want
    assert encode_planes(Grade.MXFP4.canonical, vals.astype(np.float64)) == want


# --- deliberate difference 4: NVF4_RTZ --------------------------------------

_E2M1_MAGS, _E2M1_CODES = grit.fmt.fmt_ladder(grit.FMT_E2M1)


def _rtz_e2m1(x):
    a = abs(x)
    i = max(k for k, m in enumerate(_E2M1_MAGS) if m <= a)
    return _E2M1_CODES[i] | (0x8 if math.copysign(1.0, x) < 0 else 0)


def test_nvf4_rtz_encoder_truncates_element_codes():
    rng = rng_for("codec", "nvf4-rtz")
    differs = 0
    for _ in range(30):
        vals = values(rng, "NVF4", rng.choice([1, 2, 4, 8]))
        n = len(vals)
        ref = grit.encode("GRADE_NVF4_RTZ", [float(v) for v in vals])  # = its NVF4 encoder
        ours = encode_planes("NVF4_RTZ", vals)
        # Scales are the grade's, not er's business: identical to the oracle.
        assert bytes(ours[1]) == bytes(ref[1]) and bytes(ours[2]) == bytes(ref[2])
        assert bytes(ours[3]) == b""
        # Every element code is the rtz projection of v / S.
        s_t = np.frombuffer(bytes(ours[2]), np.float32)[0]
        codes = grit.unpack_nibbles_lsb(bytes(ours[0]), n)
        for i in range(n):
            bs = ours[1][i // 16]
            if bs == 0x7F:  # poisoned block: codes stay 0
                assert codes[i] == 0
                continue
            s = np.float32(s_t * np.float32(grit.fmt_decode(grit.FMT_E4M3, bs)))
            x = math.copysign(0.0, vals[i]) if s == 0 else float(vals[i] / s)
            assert codes[i] == _rtz_e2m1(x), (i, vals[i], s)
        # Same decoder as the oracle; never larger in magnitude than rne.
        got = decode_planes("NVF4_RTZ", ours, n)
        assert got.view(np.uint32).tolist() == oracle_bits("NVF4_RTZ", ours, n)
        rne = decode_planes("NVF4", ref, n)
        finite = np.isfinite(rne)
        assert np.all(np.abs(got[finite]) <= np.abs(rne[finite]))
        differs += bytes(ours[0]) != bytes(ref[0])
    assert differs > 0  # rtz is not a no-op on these inputs
