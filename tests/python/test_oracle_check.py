"""The boundary check against the oracle: the same verdict on the same input.

Our check takes an optional claimed grade. Without one (a descriptor read
from bytes whose grade_id is not a reference grade) it knows only the six
reference grades, exactly like the oracle, and must say GradeUnknown as the
oracle does (deliberate difference 5). With a claimed grade we compare
against the oracle after registering that grade in the oracle's tables.
"""

import collections

import grit
import numpy as np
import pytest
import torch

from torch_grit import Descriptor, Grade, digest

from grit_cases import (
    REF_NAMES, canonical_tokens_string, oracle_plane_bytes, oracle_verdict, our_verdict,
    random_grade_fields, random_placement, random_shape, rng_for,
)

BLOCK = {"MXFP4": 32, "MXFP4_RNE": 32, "Q4KS": 256, "NVF4": 16, "NVF4_RTZ": 16, "I8S24": 32}
STATUSES = {"Ok", "SizeMismatch", "GradeUnknown", "PlacementUnknown"}


def _ref_desc(name, group_axis):
    return grit.desc_for_grade("GRADE_" + name, group_axis=group_axis)


@pytest.mark.parametrize("name", REF_NAMES)
def test_reference_grades_correct_lengths_are_ok(name):
    for shape in [(BLOCK[name],), (3, 2 * BLOCK[name]), (2, 0, 1024), (0,), (5, 1, 4096)]:
        ours = Descriptor(getattr(Grade, name), shape)
        ref = _ref_desc(name, len(shape) - 1)
        lengths = oracle_plane_bytes(ref, shape)
        assert ours.expected_plane_bytes() == lengths
        assert oracle_verdict(ref, shape, lengths) == "Ok"
        assert our_verdict(ours, lengths) == "Ok"
        # Buffers of those lengths, as bytes, numpy and torch: still Ok.
        planes = [bytes(n) for n in lengths]
        assert our_verdict(ours, planes) == "Ok"
        assert our_verdict(ours, [np.zeros(n, np.uint8) for n in lengths]) == "Ok"
        assert our_verdict(ours, [torch.zeros(n, dtype=torch.uint8) for n in lengths]) == "Ok"


def _corrupt(rng, raw):
    raw = bytearray(raw)
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        j = rng.randrange(64)
        raw[j] ^= rng.randint(1, 255) if rng.random() < 0.6 else 1 << rng.randrange(8)
    return bytes(raw)


def _shape_for(rng, name):
    shape = random_shape(rng, max_rank=4, allow_negative=True)
    if shape and rng.random() < 0.5:  # often a legal group axis extent
        shape = shape[:-1] + (BLOCK[name] * rng.choice([1, 2, 3, 8, 16]),)
    return shape


def _lengths_for(rng, desc_bytes, shape):
    lengths = oracle_plane_bytes(desc_bytes, shape)
    if lengths is None:
        return [rng.randint(0, 300) for _ in range(4)]
    r = rng.random()
    if r < 0.25:
        k = rng.randrange(4)
        lengths[k] = max(0, lengths[k] + rng.choice([-1, 1, 2, -16, 4096]))
    elif r < 0.35:
        rng.shuffle(lengths)
    return lengths


def test_random_corruptions_give_the_oracle_verdict():
    rng = rng_for("check", "corrupt")
    seen = collections.Counter()
    for _ in range(8000):
        name = rng.choice(REF_NAMES)
        shape = _shape_for(rng, name)
        axis = rng.choice([len(shape) - 1, 0, rng.randint(-3, 5)])
        raw = _ref_desc(name, axis).pack()
        if rng.random() < 0.75:
            raw = _corrupt(rng, raw)
        lengths = _lengths_for(rng, raw, shape)
        want = oracle_verdict(raw, shape, lengths)
        ours = Descriptor.from_bytes(raw, shape)
        assert our_verdict(ours, lengths) == want, (name, raw.hex(), shape, lengths)
        seen[want] += 1
    assert set(seen) == STATUSES and min(seen.values()) > 100, seen


@pytest.mark.parametrize("name", REF_NAMES)
def test_every_single_byte_flip(name):
    shape = (2, 4 * BLOCK[name])
    good = _ref_desc(name, 1).pack()
    lengths = oracle_plane_bytes(good, shape)
    seen = set()
    for offset in range(64):
        for mask in (0x01, 0x02, 0x10, 0x80, 0xFF, 0x5A):
            raw = bytearray(good)
            raw[offset] ^= mask
            raw = bytes(raw)
            want = oracle_verdict(raw, shape, lengths)
            assert our_verdict(Descriptor.from_bytes(raw, shape), lengths) == want, (offset, mask)
            seen.add(want)
    assert "GradeUnknown" in seen and "Ok" in seen  # the note bytes flip harmlessly


@pytest.mark.parametrize("name", REF_NAMES)
def test_random_shapes_and_wrong_lengths(name):
    rng = rng_for("check", "shapes", name)
    grade = getattr(Grade, name)
    seen = collections.Counter()
    for _ in range(400):
        shape = _shape_for(rng, name)
        axis = rng.choice([len(shape) - 1, len(shape) - 1, 0, rng.randint(-2, 6)])
        ref = _ref_desc(name, axis)
        ours = Descriptor(grade, shape, group_axis=axis)
        assert ours.to_bytes() == ref.pack()
        lengths = _lengths_for(rng, ref.pack(), shape)
        want = oracle_verdict(ref, shape, lengths)
        assert our_verdict(ours, lengths) == want, (shape, axis, lengths)
        seen[want] += 1
    assert seen["Ok"] > 20 and seen["SizeMismatch"] > 20


def test_claimed_grades_against_the_oracle_with_that_grade_registered(register_oracle_grade):
    rng = rng_for("check", "claimed")
    seen = collections.Counter()
    for _ in range(1500):
        fields = random_grade_fields(rng)
        grade = Grade.parse(canonical_tokens_string(fields))
        register_oracle_grade(grade.canonical)
        shape = random_shape(rng, max_rank=3, allow_negative=True)
        if shape and rng.random() < 0.6:
            k = (int(fields["k0"]) or 1) * rng.choice([1, 2, 4, 8, 12, 32])
            shape = shape[:-1] + (k,)
        placement = None
        if rng.random() < 0.3:
            placement = tuple(random_placement(rng) for _ in range(3))
        ours = Descriptor(grade, shape, placement=placement)
        raw = ours.to_bytes()
        if rng.random() < 0.3:  # corrupt anything but grade_id: the claim stands
            raw = bytearray(raw)
            raw[rng.randrange(56)] ^= rng.randint(1, 255)
            raw = bytes(raw)
            ours = Descriptor.from_bytes(raw, shape, grade=grade)
        lengths = _lengths_for(rng, raw, shape)
        want = oracle_verdict(raw, shape, lengths)
        assert our_verdict(ours, lengths) == want, (grade.canonical, shape, lengths, raw.hex())
        seen[want] += 1
    assert set(seen) == STATUSES and min(seen.values()) > 50, seen


def test_unknown_grade_without_a_claim_is_grade_unknown():
    # Deliberate difference 5: with no claimed grade our check knows the six
    # reference grades only, as the oracle does.
    rng = rng_for("check", "unknown")
    for _ in range(300):
        grade = Grade.parse(canonical_tokens_string(random_grade_fields(rng)))
        if grade.id in grit.GRADE_BY_ID:  # the generator can hit a reference grade
            continue
        shape = random_shape(rng, max_rank=3)
        claimed = Descriptor(grade, shape)
        lengths = oracle_plane_bytes(claimed.to_bytes(), shape) or [0, 0, 0, 0]
        unclaimed = Descriptor.from_bytes(claimed.to_bytes(), shape)
        assert unclaimed.grade is None
        assert oracle_verdict(claimed.to_bytes(), shape, lengths) == "GradeUnknown"
        assert our_verdict(unclaimed, lengths) == "GradeUnknown"


# --- level 2 ----------------------------------------------------------------

def _i8s24_planes(rng, n):
    vals = [rng.gauss(0, 3) for _ in range(n)]
    return [bytes(p) for p in grit.encode("GRADE_I8S24", vals)]


def test_level2_digest_and_sparsity_order_i8s24():
    rng = rng_for("check", "level2")
    n = 256
    shape = (2, n // 2)
    ours = Descriptor(Grade.I8S24, shape)
    ref = _ref_desc("I8S24", 1)
    planes = _i8s24_planes(rng, n)
    lengths = [len(p) for p in planes]
    good = grit.digest_of(planes)
    assert digest(planes) == good

    def both(ps, dig):
        want = oracle_verdict(ref, shape, [len(p) for p in ps], level=2, planes=ps, digest=dig)
        got = our_verdict(ours, ps, level=2, digest=dig)
        assert got == want
        return got

    assert both(planes, good) == "Ok"
    assert both(planes, None) == "Ok"
    assert our_verdict(ours, planes, level=2, digest=good.hex()) == "Ok"
    # A flipped data byte: the digest no longer matches (level 1 still passes).
    bad = list(planes)
    bad[0] = bytes([planes[0][0] ^ 1]) + planes[0][1:]
    assert both(bad, good) == "DigestMismatch"
    assert our_verdict(ours, bad, level=1, digest=good) == "Ok"
    # Non-ascending metadata: indices (3, 1), (2, 2), (1, 0) in the first quad.
    for first in (3 | 1 << 2, 2 | 2 << 2, 1 | 0 << 2):
        meta = bytes([(planes[3][0] & 0xF0) | first]) + planes[3][1:]
        assert both(planes[:3] + [meta], None) == "DigestMismatch"
        # The digest is looked at first, then the order.
        assert both(planes[:3] + [meta], grit.digest_of(planes[:3] + [meta])) == "DigestMismatch"
    # Wrong lengths are a size mismatch before any content is read.
    assert both(planes[:3] + [planes[3][:-1]], good) == "SizeMismatch"
    # Random metadata bytes.
    seen = collections.Counter()
    for _ in range(300):
        meta = bytes(rng.getrandbits(8) if rng.random() < 0.3 else b for b in planes[3])
        seen[both(planes[:3] + [meta], None)] += 1
    assert seen["Ok"] > 0 and seen["DigestMismatch"] > 0


def test_level2_sparsity_order_for_other_sparse_grades(register_oracle_grade):
    rng = rng_for("check", "level2-sparse")
    seen = collections.Counter()
    for _ in range(300):
        m = rng.randint(2, 32)
        n = rng.randint(1, m - 1)
        meta_fmt = rng.choice(["u2", "u4"])
        text = "grit1(e=%s,k0=%d,s0=binary16,sp=%d:%d:%s:%s,esr=ratiomaxabs)" % (
            rng.choice(["s8", "s4", "u2", "e2m1"]), m, n, m, meta_fmt,
            rng.choice(["asclsb", "asclsb", "unord"]))
        grade = Grade.parse(text)
        register_oracle_grade(grade.canonical)
        shape = (rng.randint(0, 3), m * rng.randint(1, 4))
        ours = Descriptor(grade, shape)
        lengths = ours.expected_plane_bytes()
        planes = [bytes(rng.getrandbits(8) for _ in range(k)) for k in lengths]
        if rng.random() < 0.5 and lengths[3]:  # ascending indices, mostly valid
            bits = 2 if meta_fmt == "u2" else 4
            quads = [sorted(rng.sample(range(min(m, 1 << bits)), min(n, 1 << bits)))
                     for _ in range(shape[0] * shape[1] // m)]
            if all(len(q) == n for q in quads):
                planes[3] = grit.codec.meta_pack(quads, sp_n=n, bits=bits)
        want = oracle_verdict(ours.to_bytes(), shape, lengths, level=2, planes=planes)
        assert our_verdict(ours, planes, level=2) == want, (text, shape, planes[3].hex())
        seen[want] += 1
    assert seen["Ok"] > 20 and seen["DigestMismatch"] > 20


@pytest.mark.parametrize("name", ["MXFP4", "Q4KS", "NVF4"])
def test_level2_digest_dense(name):
    rng = rng_for("check", "dense", name)
    n = BLOCK[name] * 4
    planes = [bytes(p) for p in grit.encode("GRADE_" + name, [rng.uniform(-4, 4) for _ in range(n)])]
    shape = (n,)
    ours = Descriptor(getattr(Grade, name), shape)
    ref = _ref_desc(name, 0)
    good = grit.digest_of(planes)
    lengths = [len(p) for p in planes]
    for dig in (good, bytes(16), good[:-1] + bytes([good[-1] ^ 1]), None):
        want = oracle_verdict(ref, shape, lengths, level=2, planes=planes, digest=dig)
        assert our_verdict(ours, planes, level=2, digest=dig) == want


def test_digest_matches_oracle():
    rng = rng_for("check", "digest")
    for _ in range(200):
        count = rng.randint(0, 4)
        planes = [bytes(rng.getrandbits(8) for _ in range(rng.choice([0, 1, 7, 64, 300])))
                  for _ in range(count)]
        want = grit.digest_of(planes + [b""] * (4 - count))
        assert digest(planes) == want
        assert digest([np.frombuffer(p, np.uint8) for p in planes]) == want
        assert digest([torch.frombuffer(bytearray(p), dtype=torch.uint8) if p else None
                       for p in planes]) == want
    # An absent plane still contributes its zero length: "two planes" and
    # "three planes, the third empty" are the same four-plane digest, but
    # moving bytes between planes changes it.
    assert digest([b"ab", b"c"]) != digest([b"a", b"bc"])
