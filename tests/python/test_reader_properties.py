"""Property tests: the three Python-side header readers raise only their documented error.

- ``torch_grit.checkpoint.safetensors_io.read_header``: CheckpointError (a ValueError);
- ``torch_grit.scan.safetensors_header.read_header``: Unparseable;
- ``torch_grit.scan.gguf_header.read_header``: Unparseable.

Inputs: random bytes, random JSON-ish safetensors headers, and mutations of a
real torch_grit.save file and a real gguf.GGUFWriter file (byte flips, cuts,
splices, and integer fields overwritten with edge values at the offsets a walk
of the real file finds). Any other exception fails the test; returning a header
is fine. Fixed example counts (300 per random test, 800 per mutation test; 4000 each
ran clean once, 64 s), derandomize=True, database=None: the same inputs
every run, no state on disk.
"""

import json
import os
import struct
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torch_grit.checkpoint.safetensors_io import CheckpointError
from torch_grit.checkpoint.safetensors_io import read_header as io_read_header
from torch_grit.scan.errors import Unparseable
from torch_grit.scan.gguf_header import read_header as gguf_read_header
from torch_grit.scan.safetensors_header import read_header as scan_st_read_header

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus"))
import make_corpus  # noqa: E402

SETTINGS = settings(max_examples=300, derandomize=True, database=None, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
EDGE_U64 = [0, 1, 2, 7, 8, 31, 32, 33, 255, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 62, 2 ** 63 - 1,
            2 ** 63, 2 ** 64 - 32, 2 ** 64 - 1]
MUTATION_SETTINGS = settings(SETTINGS, max_examples=800)


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    folder = tmp_path_factory.mktemp("props")
    st_blob, _ = make_corpus._st_base(str(folder))
    gguf_blob = make_corpus._gguf_base(str(folder))
    return folder, st_blob, gguf_blob, make_corpus._gguf_map(gguf_blob)


def _check(folder, blob, readers):
    path = os.path.join(folder, "case.bin")
    with open(path, "wb") as f:
        f.write(blob)
    for read, allowed in readers:
        try:
            read(path)
        except allowed:
            pass


ST_READERS = [(io_read_header, CheckpointError), (scan_st_read_header, Unparseable)]
GGUF_READERS = [(gguf_read_header, Unparseable)]
ALL_READERS = ST_READERS + GGUF_READERS


@st.composite
def mutated(draw, blob, fields=()):
    b = bytearray(blob)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "cut", "splice", "u64", "u32", "insert"]
                                  if fields else ["flip", "cut", "splice", "u64", "insert"]))
        if not b:
            break
        i = draw(st.integers(0, len(b) - 1))
        if op == "flip":
            b[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "cut":
            del b[i:]
        elif op == "splice":
            j = draw(st.integers(i, len(b)))
            del b[i:j]
        elif op == "insert":
            b[i:i] = draw(st.binary(min_size=1, max_size=16))
        else:
            if fields and draw(st.booleans()):
                i = draw(st.sampled_from(fields))
            size = 8 if op == "u64" else 4
            v = draw(st.sampled_from(EDGE_U64) | st.integers(0, 2 ** 64 - 1)) % (1 << (8 * size))
            if i + size <= len(b):
                b[i:i + size] = v.to_bytes(size, "little")
    return bytes(b)


@SETTINGS
@given(blob=st.binary(max_size=512))
def test_random_bytes(bases, blob):
    _check(bases[0], blob, ALL_READERS)


@SETTINGS
@given(blob=st.binary(max_size=256))
def test_random_bytes_behind_a_magic(bases, blob):
    _check(bases[0], b"GGUF" + blob, GGUF_READERS)
    _check(bases[0], struct.pack("<Q", len(blob)) + blob, ST_READERS)


JSON = st.recursive(st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.floats()
                    | st.text(max_size=8),
                    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4),
                    max_leaves=12)
ENTRY = st.fixed_dictionaries({
    "dtype": st.sampled_from(["F32", "U8", "F16", "I64", "F4", "F6_E2M3", "BOOL", "X9"]) | JSON,
    "shape": st.lists(st.integers(-3, 2 ** 65), max_size=5) | JSON,
    "data_offsets": st.lists(st.integers(-3, 2 ** 65), min_size=0, max_size=3) | JSON,
})


@SETTINGS
@given(header=st.dictionaries(st.text(max_size=8), ENTRY | JSON, max_size=5),
       meta=st.none() | JSON, tail=st.binary(max_size=64))
def test_random_safetensors_headers(bases, header, meta, tail):
    if meta is not None:
        header["__metadata__"] = meta
    text = json.dumps(header).encode()
    _check(bases[0], struct.pack("<Q", len(text)) + text + tail, ST_READERS)


@MUTATION_SETTINGS
@given(data=st.data())
def test_mutated_torch_grit_files(bases, data):
    folder, st_blob, _, _ = bases
    _check(folder, data.draw(mutated(st_blob, fields=(0,))), ST_READERS)


@MUTATION_SETTINGS
@given(data=st.data())
def test_mutated_gguf_files(bases, data):
    folder, _, gguf_blob, m = bases
    fields = [m["version"], m["n_tensors"], m["n_kv"]]
    for kv in m["kv"]:
        fields += [kv["start"], kv["type"], kv["value"]] + ([kv["count"], kv["count"] - 4] if "count" in kv else [])
    for ti in m["infos"]:
        fields += [ti["start"], ti["n_dims"], ti["dims"], ti["dims"] + 8, ti["type"], ti["offset"]]
    _check(folder, data.draw(mutated(gguf_blob, fields=tuple(fields))), GGUF_READERS)
