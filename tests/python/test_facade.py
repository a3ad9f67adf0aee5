"""The Python API's own behaviour: constants, parsing, errors, pickling."""

import pickle
import struct

import grit
import numpy as np
import pytest
import torch

import torch_grit
from torch_grit import (
    Descriptor, Grade, GradeError, GritCheckError, Placement, check, decode_planes, digest,
    encode_planes, placement_name,
)
from torch_grit.contract import placement as placement_mod

from grit_cases import REF_NAMES, rng_for

MX = "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)"


# --- Grade ------------------------------------------------------------------

def test_grade_constants():
    for name in REF_NAMES:
        g = getattr(Grade, name)
        assert isinstance(g, Grade)
        assert g.name == "GRADE_" + name
        assert g.canonical == str(g) == grit.GRADE_REGISTRY["GRADE_" + name]
        assert repr(g) == "Grade(%r, GRADE_%s)" % (g.canonical, name)
        assert g.esr == g.fields["esr"]
    assert len({getattr(Grade, n) for n in REF_NAMES}) == 6


@pytest.mark.parametrize("spec", ["MXFP4", "mxfp4", "GRADE_MXFP4", "grade_MxFp4", "  MXFP4 ", MX,
                                  "GRIT1( E = FP4 , K0 = 032 , S0 = UE8M0 , ESR = OCP-MX )",
                                  "grit1(esr=floor,s0=e8m0fnu,k0=32,e=float4_e2m1fn)"])
def test_parse_by_name_alias_and_string(spec):
    g = Grade.parse(spec)
    assert g == Grade.MXFP4 and g.canonical == MX and g.id == grit.grade_id_of(MX)
    assert Grade.parse(g) is g
    # The constructor is the same parser (what repr() shows a user).
    assert Grade(spec) == g and Grade(g) == g and Grade(spec).id == g.id


def test_parse_refuses_non_strings():
    for bad in (None, 4, b"MXFP4", grit.GRADE_MXFP4.encode()):
        with pytest.raises(TypeError):
            Grade.parse(bad)
        with pytest.raises(TypeError):
            Grade(bad)
    with pytest.raises(GradeError, match="MXFP9"):
        Grade("MXFP9")


def test_equality_and_hash():
    a = Grade.parse("grit1(e=fp4,k0=32,s0=ue8m0,esr=floor)")
    assert a == Grade.MXFP4 and hash(a) == hash(Grade.MXFP4) == hash(MX)
    assert a == MX and a == "MXFP4" and a == "grit1(k0=32,e=e2m1,s0=e8m0,esr=exp2floor)"
    assert a != Grade.MXFP4_RNE and a != "NVF4"
    assert a != "not a grade" and a != 3 and a != None  # noqa: E711 (no exception)
    assert {a, Grade.MXFP4, Grade.parse(MX)} == {Grade.MXFP4}
    assert len({Grade.parse(n) for n in REF_NAMES + ("mxfp4", "GRADE_NVF4")}) == 6


def test_grade_properties():
    q = Grade.Q4KS
    assert q.plane_bytes(512) == [256, 16, 8, 16]
    assert q.fields["zps"] == "l1" and q.fields["k1"] == "8"
    assert q.projection == grit.decode_projection(q.canonical)
    assert Grade.MXFP4.projection == Grade.MXFP4_RNE.projection
    with pytest.raises(ValueError):
        q.plane_bytes(100)
    custom = Grade.parse("grit1(e=u4,k0=64,s0=binary16,esr=affine)")
    assert custom.name is None and repr(custom) == "Grade(%r)" % custom.canonical


GRADE_ERRORS = [
    # (text, code, token); the position is where the token starts
    ("grit2(e=e2m1)", "malformed", "grit2(e=e2m1)"),
    (MX[:-1] + ",k0)", "malformed", "k0"),
    (MX[:-1] + ",zz=1)", "unknown_key", "zz"),
    (MX[:-1] + ",K0=16)", "duplicate_key", "k0"),
    ("grit1(e=e2m1,k0=32,s0=e8m0)", "missing_key", "esr"),
    ("grit1(e=foo,k0=32,s0=e8m0,esr=floor)", "unknown_token", "foo"),
    ("grit1(e=e2m1,k0=32,s0=e8m0,esr=floor,ao=pairwise0)", "unknown_token", "pairwise0"),
    ("grit1(e=e4m3fnuz,k0=32,s0=e8m0,esr=floor)", "not_an_alias", "e4m3fnuz"),
    ("grit1(e=u4,k0=32,s0=b16,esr=floor)", "not_an_alias", "b16"),
    ("grit1(e=nf4,k0=32,s0=e8m0,esr=floor)", "inexpressible", "nf4"),
    ("grit1(e=iq4_xs,k0=32,s0=e8m0,esr=floor)", "inexpressible", "iq4_xs"),
    ("grit1(e=e2m1,k0=70000,s0=e8m0,esr=floor)", "out_of_range", "70000"),
    ("grit1(e=s8,k0=32,s0=binary16,sp=4:4:u2:asclsb,esr=ratio)", "out_of_range", "4:4:u2:asclsb"),
    ("grit1(e=e2m1,k0=3x,s0=e8m0,esr=floor)", "malformed", "3x"),
    ("grit1(e=é,k0=32)", "malformed", "é"),
]


@pytest.mark.parametrize("text,code,token", GRADE_ERRORS)
def test_grade_error_attributes(text, code, token):
    with pytest.raises(GradeError) as exc:
        Grade.parse(text)
    err = exc.value
    assert isinstance(err, ValueError)
    assert (err.code, err.token) == (code, token)
    if code != "missing_key":
        assert err.position >= 0
        if err.position > 0:
            assert text[err.position:].lower().startswith(token.lower())
    assert repr(text) in str(err)
    # The oracle refuses all of these too, at the latest when it packs the
    # descriptor (k0 > 65535 is deliberate difference 1: it fails in struct).
    with pytest.raises((grit.GradeError, struct.error)):
        grit.desc_from_grade_string(grit.canonicalize(text)).pack()


@pytest.mark.parametrize("text,token", [
    (MX[:-1] + ",k1=4)", "k1"),
    (MX[:-1] + ",s1=binary32)", "s1"),
    (MX[:-1] + ",zpc=minus1)", "zpc"),
    (MX[:-1] + ",zp=u4,zps=l1)", "zps"),
])
def test_grade_error_inconsistent(text, token):
    with pytest.raises(GradeError) as exc:
        Grade.parse(text)
    assert (exc.value.code, exc.value.token) == ("inconsistent", token)
    with pytest.raises(grit.GradeError):
        grit.canonicalize(text)


# --- Descriptor ---------------------------------------------------------------

def test_descriptor_defaults_and_fields():
    d = Descriptor("Q4KS", (3, 512))
    assert d.group_axis == 1 and d.k0 == 32 and d.k1 == 8 and d.n_levels == 2
    assert d.grade == Grade.Q4KS and d.shape == (3, 512)
    assert d.placement == Placement(placement_mod.ROW_MAJOR, placement_mod.ROW_MAJOR,
                                    placement_mod.ROW_MAJOR)
    assert d.fields["grade_id"] == Grade.Q4KS.id
    assert Descriptor("MXFP4", ()).group_axis == 0
    assert Descriptor("MXFP4", [64], group_axis=0).shape == (64,)
    with pytest.raises(AttributeError):
        d.no_such_field
    with pytest.raises(TypeError):
        d.replace(no_such_field=1)


def test_from_bytes_to_bytes_round_trip():
    rng = rng_for("facade", "bytes")
    for name in REF_NAMES:
        d = Descriptor(name, (2, 256), note=rng.getrandbits(32))
        raw = d.to_bytes()
        assert isinstance(raw, bytes) and len(raw) == 64
        back = Descriptor.from_bytes(raw, (2, 256))
        assert back == d and back.grade == d.grade and back.gid == d.gid
        assert Descriptor.from_bytes(bytearray(raw), (2, 256)).to_bytes() == raw
        assert Descriptor.from_bytes(memoryview(raw), [2, 256]) == d
    for _ in range(50):
        raw = bytes(rng.getrandbits(8) for _ in range(64))
        assert Descriptor.from_bytes(raw).to_bytes() == raw
    for bad in (b"", bytes(63), bytes(65)):
        with pytest.raises(ValueError):
            Descriptor.from_bytes(bad)


def test_unknown_grade_id():
    raw = Descriptor("grit1(e=u4,k0=64,s0=binary16,esr=affine)", (64,)).to_bytes()
    d = Descriptor.from_bytes(raw, (64,))
    assert d.grade is None and "grade_id=0x" in repr(d)
    with pytest.raises(ValueError):
        d.gid_bytes
    claimed = Descriptor.from_bytes(raw, (64,), grade="grit1(e=u4,k0=64,s0=f16,esr=minmax)")
    assert claimed.gid_bytes == grit.gid_of(raw, claimed.grade.canonical, (64,))


def test_replace_and_equality():
    d = Descriptor("NVF4", (4, 64))
    e = d.replace(k0=32, note=5)
    assert (e.k0, e.note, d.k0, d.note) == (32, 5, 16, 0)
    assert e != d and d.replace() == d and hash(d.replace()) == hash(d)
    assert d.replace(shape=(64, 4)) != d
    assert d != d.to_bytes()


def test_explain():
    a = Descriptor("MXFP4", (4, 64))
    assert "byte-identical" in a.explain(a)
    b = a.replace(k0=16, note=3, placement_scale=placement_mod.COL_MAJOR)
    text = a.explain(b)
    lines = text.splitlines()
    assert lines[0].startswith("field")
    assert [ln.split()[0] for ln in lines[1:]] == ["k0", "note", "placement_scale"]
    assert "COL_MAJOR" in text and "ROW_MAJOR" in text
    assert "shape" in a.explain(a.replace(shape=(64, 4)))
    c = Descriptor("MXFP4_RNE", (4, 64))
    assert "GRADE_MXFP4_RNE" in a.explain(c) and "GRADE_MXFP4" in a.explain(c)


def test_expected_plane_bytes_and_its_errors():
    d = Descriptor("I8S24", (2, 64))
    assert d.expected_plane_bytes() == [64, 8, 0, 16]
    with pytest.raises(GritCheckError) as exc:
        Descriptor("I8S24", (2, 60)).expected_plane_bytes()
    assert exc.value.status == "SizeMismatch" and exc.value.field == "k0"
    assert (exc.value.expected, exc.value.found) == (32, 60)


def test_pickle_grade_and_descriptor():
    for name in REF_NAMES:
        g = getattr(Grade, name)
        assert pickle.loads(pickle.dumps(g)) == g
        d = Descriptor(g, (8, 256), note=9)
        back = pickle.loads(pickle.dumps(d))
        assert back == d and back.grade == g and back.gid == d.gid and back.note == 9
    custom = Grade.parse("grit1(e=s4,k0=128,s0=binary16,zp=u4,esr=affine)")
    assert pickle.loads(pickle.dumps(custom)) == custom
    d = Descriptor(custom, (128,))
    assert pickle.loads(pickle.dumps(d)).gid == d.gid
    unknown = Descriptor.from_bytes(d.to_bytes(), (128,))
    back = pickle.loads(pickle.dumps(unknown))
    assert back == unknown and back.grade is None


# --- placement ----------------------------------------------------------------

def test_placement_namedtuple_and_names():
    p = Placement(placement_mod.ROW_MAJOR, placement_mod.COL_MAJOR, 0)
    data, scale, meta = p
    assert (data, scale, meta) == (p.data, p.scale, p.meta) == (grit.P_ROW_MAJOR, grit.P_COL_MAJOR, 0)
    assert isinstance(p, tuple) and p._replace(meta=1).meta == 1
    assert repr(p) == "Placement(data=ROW_MAJOR, scale=COL_MAJOR, meta=PLACEMENT_UNSPECIFIED)"
    for word, name in grit.WELL_KNOWN_PLACEMENTS.items():
        assert getattr(placement_mod, name.upper()) == word
        assert placement_name(word) == name
    rng = rng_for("facade", "placement")
    words = [0, 2 ** 64 - 1] + [rng.getrandbits(4) << 60 | rng.getrandbits(60) for _ in range(200)]
    for w in words:
        assert placement_name(w) == grit.placement_name(w)


# --- check ----------------------------------------------------------------------

def test_check_takes_bytes_numpy_torch_and_lengths():
    d = Descriptor("Q4KS", (2, 512))
    lens = d.expected_plane_bytes()
    check(d, lens)
    check(d, [bytes(n) for n in lens])
    check(d, [np.zeros(n, np.uint8) for n in lens])
    check(d, [torch.zeros(n, dtype=torch.uint8) for n in lens])
    # Any dtype or shape: byte length is what counts.
    check(d, [torch.zeros(lens[0] // 4, dtype=torch.float32), torch.zeros(2, lens[1] // 2, dtype=torch.uint8),
              np.zeros(lens[2] // 2, np.uint16), memoryview(bytes(lens[3]))])
    planes = encode_planes("Q4KS", np.linspace(-3, 5, 1024, dtype=np.float32))
    tensors = [torch.frombuffer(bytearray(p), dtype=torch.uint8) for p in planes]
    check(d, tensors, level=2, digest=digest(planes))
    check(d, [np.frombuffer(p, np.uint8) for p in planes], level=2, digest=digest(planes).hex())
    with pytest.raises(ValueError):
        check(d, lens + [0])
    with pytest.raises(TypeError):
        check(d.to_bytes(), lens)
    with pytest.raises(TypeError):
        check(d, lens, level=2)


def test_check_error_attributes():
    d = Descriptor("MXFP4", (4, 64))
    lens = d.expected_plane_bytes()  # [128, 8, 0, 0]
    with pytest.raises(GritCheckError) as exc:
        check(d, [torch.zeros(128, dtype=torch.uint8), np.zeros(7, np.uint8)], tensor="model.layers.0.w")
    e = exc.value
    assert isinstance(e, ValueError)
    assert (e.status, e.field, e.expected, e.found, e.plane) == ("SizeMismatch", "plane_bytes", 8, 7, 1)
    assert e.tensor == "model.layers.0.w" and str(e).startswith("model.layers.0.w: ")
    assert "scale0" in str(e) and "8" in str(e) and "7" in str(e)

    with pytest.raises(GritCheckError) as exc:
        check(d.replace(magic=0x12345678), lens)
    e = exc.value
    assert (e.status, e.field, e.expected, e.found, e.plane, e.tensor) == \
        ("GradeUnknown", "magic", grit.GRIT_MAGIC, 0x12345678, None, None)

    with pytest.raises(GritCheckError) as exc:
        check(d.replace(k0=16), lens, tensor="w")
    assert (exc.value.status, exc.value.field, exc.value.expected, exc.value.found) == \
        ("GradeUnknown", "k0", 32, 16)

    reserved = 0x3000000000000007
    with pytest.raises(GritCheckError) as exc:
        check(d.replace(placement_scale=reserved), lens)
    assert (exc.value.status, exc.value.field, exc.value.found) == \
        ("PlacementUnknown", "placement_scale", reserved)
    assert grit.placement_name(reserved) in str(exc.value)

    with pytest.raises(GritCheckError) as exc:
        check(d, [bytes(n) for n in lens], level=2, digest=bytes(16), tensor="blk.3.ffn")
    assert (exc.value.status, exc.value.field) == ("DigestMismatch", "digest")
    assert "blk.3.ffn" in str(exc.value)

    s = Descriptor("I8S24", (32,))
    planes = [bytes(16), bytes(2), b"", bytes([0b0111]) + bytes(3)]  # quad 0 names (3, 1)
    with pytest.raises(GritCheckError) as exc:
        check(s, planes, level=2)
    assert (exc.value.status, exc.value.field, exc.value.plane) == ("DigestMismatch", "sp_order", 3)


# --- codec facade -------------------------------------------------------------------

def test_codec_errors():
    with pytest.raises(GradeError) as exc:
        encode_planes("grit1(e=u4,k0=32,s0=u8,k1=8,s1=binary16,esr=floor)", np.zeros(256, np.float32))
    assert exc.value.code == "inexpressible" and "two-level" in str(exc.value)
    with pytest.raises(ValueError):
        decode_planes("MXFP4", [b"", b""], 32)
    with pytest.raises(ValueError):
        encode_planes("MXFP4", np.zeros(33, np.float32))
    out = decode_planes("MXFP4", encode_planes("MXFP4", np.arange(64, dtype=np.float32)), 64)
    assert out.dtype == np.float32 and out.shape == (64,)


def test_cli_grades(capsys):
    from torch_grit.cli import main

    assert main(["grades", "--rows", "8", "--cols", "256"]) == 0
    out = capsys.readouterr().out
    for name in REF_NAMES:
        g = getattr(Grade, name)
        assert g.canonical in out and Descriptor(g, (8, 256)).gid in out
    assert torch_grit.__version__
