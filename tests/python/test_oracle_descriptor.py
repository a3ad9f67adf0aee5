"""Descriptors and gids against the oracle: 64 bytes, gid, Crockford form."""

import dataclasses

import grit
import pytest

from torch_grit import Descriptor, Grade

from grit_cases import (
    REF_NAMES, random_grade_fields, random_placement, random_shape, rng_for, spell,
)

SHAPES = [(32,), (4, 64), (3, 7, 256), (0, 32), (1, 1, 1, 512), ()]


@pytest.mark.parametrize("name", REF_NAMES)
@pytest.mark.parametrize("shape", SHAPES)
def test_reference_descriptors(name, shape):
    grade = getattr(Grade, name)
    axis = max(len(shape) - 1, 0)
    for note in (0, 1, 0x1234_5601):
        ours = Descriptor(grade, shape, note=note)
        ref = grit.desc_for_grade("GRADE_" + name, group_axis=axis, note=note)
        assert ours.to_bytes() == ref.pack()
        assert ours.fields == dataclasses.asdict(ref)
        assert ours.gid_bytes == grit.gid_of(ref, grade.canonical, shape)
        assert ours.gid == grit.gid_base32_of(ref, grade.canonical, shape)
        view = grit.GritView(ref, shape)
        assert ours.gid_bytes == view.compute_gid()
        assert grit.desc_matches_grade(ref, grade.canonical) == (True, [])
    # The note is not hashed; everything else in the frame is.
    assert Descriptor(grade, shape, note=7).gid_bytes == Descriptor(grade, shape).gid_bytes


def test_random_grade_placement_shape_descriptors():
    rng = rng_for("descriptor", "random")
    n_cases = 0
    for _ in range(800):
        text = spell(rng, random_grade_fields(rng))
        canonical = grit.canonicalize(text)
        grade = Grade.parse(text)
        shape = random_shape(rng, max_rank=6, allow_negative=True)
        pd, ps, pm = (random_placement(rng) for _ in range(3))
        axis = rng.choice([0, 1, max(len(shape) - 1, 0), -1, 32767, -32768,
                           rng.randint(-32768, 32767)])
        note = rng.choice([0, 1, rng.getrandbits(32)])
        ours = Descriptor(grade, shape, placement=(pd, ps, pm), group_axis=axis, note=note)
        ref = grit.desc_from_grade_string(canonical, group_axis=axis, note=note, placement_data=pd,
                                          placement_scale=ps, placement_meta=pm)
        raw = ref.pack()
        assert ours.to_bytes() == raw, (canonical, shape, axis)
        gid = grit.gid_of(ref, canonical, shape)
        assert ours.gid_bytes == gid, (canonical, shape)
        assert ours.gid == grit.crockford32(gid)
        assert grit.crockford32_decode(ours.gid) == gid
        assert tuple(ours.placement) == (pd, ps, pm)
        assert grit.desc_matches_grade(grit.GritDesc.unpack(ours.to_bytes()), canonical) == (True, [])
        # Read back from bytes with the grade it claims: same bytes, same gid.
        back = Descriptor.from_bytes(raw, shape, grade=text)
        assert back == ours and back.gid_bytes == gid
        assert back.fields == dataclasses.asdict(grit.GritDesc.unpack(raw))
        n_cases += 1
    assert n_cases >= 500


def test_gid_hashes_shape_and_frame_but_not_note():
    grade = Grade.MXFP4
    base = Descriptor(grade, (4, 64))
    ref = grit.desc_for_grade("GRADE_MXFP4", group_axis=1)
    gids = set()
    for shape in [(4, 64), (64, 4), (256,), (4, 64, 1), (1, 4, 64), (0, 64), (-4, 64)]:
        gid = base.replace(shape=shape).gid_bytes
        assert gid == grit.gid_of(ref, grade.canonical, shape)
        gids.add(gid)
    assert len(gids) == 7
    for offset in range(64):
        raw = bytearray(ref.pack())
        raw[offset] ^= 0x5A
        ours = Descriptor.from_bytes(bytes(raw), (4, 64), grade=grade)
        want = grit.gid_of(bytes(raw), grade.canonical, (4, 64))
        assert ours.gid_bytes == want
        assert (want == base.gid_bytes) == (28 <= offset < 32)


def test_from_bytes_round_trips_any_64_bytes():
    rng = rng_for("descriptor", "bytes")
    for _ in range(300):
        raw = bytes(rng.getrandbits(8) for _ in range(64))
        ours = Descriptor.from_bytes(raw, (8,))
        assert ours.to_bytes() == raw
        assert ours.fields == dataclasses.asdict(grit.GritDesc.unpack(raw))
        assert ours.grade is None  # a random grade_id names no reference grade
