"""A bounded safetensors header reader: the 8-byte length, the JSON header,
nothing else. Fixed check order, exact integer arithmetic, one reason code
per failure. The data section is never read here (``--deep`` streams it).

What this reader refuses (``Unparseable``) is what stock safetensors refuses
at the header: a length that does not fit, bytes that are not a UTF-8 JSON
object, entries without a known dtype, a shape or a pair of offsets, and
offsets that do not tile the data section from 0 without holes or overlaps.
What it accepts but the scanner reports (a tensor whose bytes run past the end
of the file, a byte range that disagrees with dtype x shape) are findings
about the bytes, not parse failures.
"""

import json
import os
import struct

from .errors import Unparseable

# safetensors' own ceiling on the header (MAX_HEADER_SIZE in the Rust crate).
MAX_HEADER_BYTES = 100_000_000
MAX_RANK = 64

# dtype -> bits per element, as the safetensors format defines them.
DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
    "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8,
    "U16": 16, "I16": 16, "F16": 16, "BF16": 16,
    "U32": 32, "I32": 32, "F32": 32,
    "U64": 64, "I64": 64, "F64": 64, "C64": 64,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}


class StEntry:
    __slots__ = ("name", "dtype", "shape", "begin", "end")

    def __init__(self, name, dtype, shape, begin, end):
        self.name, self.dtype, self.shape, self.begin, self.end = name, dtype, shape, begin, end

    @property
    def nbytes(self):
        return self.end - self.begin

    @property
    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def dtype_bytes(self):
        """Bytes dtype x shape requires (rounded up for sub-byte dtypes)."""
        return (self.numel * DTYPE_BITS[self.dtype] + 7) // 8


class StHeader:
    __slots__ = ("path", "entries", "metadata", "data_start", "file_size")

    def __init__(self, path, entries, metadata, data_start, file_size):
        self.path, self.entries, self.metadata = path, entries, metadata
        self.data_start, self.file_size = data_start, file_size

    @property
    def data_span(self):
        return self.file_size - self.data_start

    def by_name(self):
        return {e.name: e for e in self.entries}


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _dims_ok(shape):
    for d in shape:
        if type(d) is not int or d < 0:   # bool is not int here: type(), not isinstance()
            return False
    return True


def _refuse_duplicates(pairs):
    """JSON readers disagree on a repeated key (first or last wins), so the header is refused."""
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise Unparseable("duplicate_key", "the header names %r twice" % key[:200])
        obj[key] = value
    return obj


def read_header(path):
    """Parse the header of ``path``; raise ``Unparseable`` with a reason."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise Unparseable("header_truncated", "a safetensors file starts with an 8-byte header "
                                  "length; the file has %d bytes" % size)
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER_BYTES:
                raise Unparseable("header_too_large", "header length %d exceeds safetensors' limit of %d bytes"
                                  % (n, MAX_HEADER_BYTES))
            if n + 8 > size:
                raise Unparseable("header_truncated", "header length %d runs past the end of the %d-byte file"
                                  % (n, size))
            blob = fh.read(n)
    except OSError as exc:
        raise Unparseable("unreadable", str(exc)) from None
    if len(blob) != n:
        raise Unparseable("header_truncated", "read %d of %d header bytes" % (len(blob), n))
    if not blob.startswith(b"{"):
        raise Unparseable("header_not_json", "the header must be a JSON object starting with '{', found %r"
                          % blob[:8])
    try:
        header = json.loads(blob.decode("utf-8"), object_pairs_hook=_refuse_duplicates)
    except UnicodeDecodeError as exc:
        raise Unparseable("header_not_utf8", "header byte %d is not UTF-8" % exc.start) from None
    except (ValueError, RecursionError) as exc:
        raise Unparseable("header_not_json", "the header is not JSON: %s" % str(exc)[:200]) from None
    if not isinstance(header, dict):
        raise Unparseable("header_not_json", "the header is JSON but not an object")

    metadata = header.get("__metadata__", {})
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise Unparseable("bad_metadata", "__metadata__ must map strings to strings")

    entries = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(info, dict):
            raise Unparseable("bad_entry", "%s: a tensor entry is an object, found %s" % (name, type(info).__name__))
        dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if not isinstance(dtype, str) or dtype not in DTYPE_BITS:  # a list or object is unhashable
            raise Unparseable("bad_dtype", "%s: dtype %r is not a safetensors dtype" % (name, dtype))
        if not isinstance(shape, list) or len(shape) > MAX_RANK or not _dims_ok(shape):
            raise Unparseable("bad_shape", "%s: shape must be a list of at most %d non-negative integers, found %r"
                              % (name, MAX_RANK, shape if not isinstance(shape, list) else shape[:MAX_RANK + 1]))
        if (not isinstance(offsets, list) or len(offsets) != 2 or not all(_is_int(o) for o in offsets)
                or not 0 <= offsets[0] <= offsets[1]):
            raise Unparseable("bad_offsets", "%s: data_offsets must be [begin, end] with 0 <= begin <= end, found %r"
                              % (name, offsets))
        entries.append(StEntry(name, dtype, tuple(shape), offsets[0], offsets[1]))

    # Offsets tile [0, last_end) in order, with no hole and no overlap.
    expected = 0
    for e in sorted(entries, key=lambda e: (e.begin, e.end)):
        if e.begin != expected:
            what = "overlaps the previous tensor" if e.begin < expected else "leaves a hole before it"
            raise Unparseable("bad_offsets", "%s: data_offsets begin at %d, expected %d (%s)"
                              % (e.name, e.begin, expected, what))
        expected = e.end
    return StHeader(path, entries, metadata, 8 + n, size)
