"""GGUF headers through the official ``gguf`` package (gguf-py), bounded.

gguf-py's ``GGUFReader`` trusts the counts and lengths it reads: a huge
array length in a short file makes it loop without advancing, and a tensor
whose bytes are missing makes it raise while building its data view. So a
walk with exact arithmetic first proves every count and length fits in the
bytes that are there (and under fixed ceilings), and only then does
``GGUFReader`` read the values. The tensor data views are not built (the
header alone): ``--deep`` streams the bytes separately.
"""

import os
import struct

import numpy as np

from .errors import Unparseable

GGUF_MAGIC = b"GGUF"
MAX_KV = 1 << 20
MAX_TENSORS = 1 << 22
MAX_ARRAY_ELEMENTS = 1 << 22     # all KV arrays together: gguf-py keeps one numpy view per element
MAX_STRING = 1 << 26
MAX_DIMS = 4                      # GGML_MAX_DIMS
HEAD_CAP = 256 << 20              # the walk reads at most this much of the file

# GGUF value types: id -> fixed size (None: string 8, array 9)
_FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9


class GgufTensor:
    __slots__ = ("name", "dims", "ggml_type", "offset")

    def __init__(self, name, dims, ggml_type, offset):
        self.name, self.dims, self.ggml_type, self.offset = name, dims, ggml_type, offset

    @property
    def shape(self):
        """PyTorch order (outermost first): GGUF lists ne[0], the contiguous axis, first."""
        return tuple(reversed(self.dims))

    @property
    def numel(self):
        n = 1
        for d in self.dims:
            n *= d
        return n


class GgufHeader:
    __slots__ = ("path", "version", "kv", "tensors", "data_offset", "alignment", "file_size")

    def __init__(self, path, version, kv, tensors, data_offset, alignment, file_size):
        self.path, self.version, self.kv, self.tensors = path, version, kv, tensors
        self.data_offset, self.alignment, self.file_size = data_offset, alignment, file_size

    @property
    def data_span(self):
        return max(self.file_size - self.data_offset, 0)


class _Walk:
    """Exact bounds walk over the header bytes; values are not decoded."""

    def __init__(self, fh, file_size):
        self.fh, self.file_size = fh, file_size
        self.buf, self.off = bytearray(), 0
        self.array_elements = 0

    def need(self, n, what):
        """Make ``n`` bytes at the cursor available, reading more of the file (doubling) as needed."""
        end = self.off + n
        if end <= len(self.buf):
            return
        if end > self.file_size:
            raise Unparseable("header_truncated", "%s needs %d bytes at offset %d; the file has %d"
                              % (what, n, self.off, self.file_size))
        if end > HEAD_CAP:
            raise Unparseable("header_too_large", "the GGUF header is larger than %d bytes" % HEAD_CAP)
        want = min(max(end, 2 * len(self.buf), 1 << 20), self.file_size, HEAD_CAP)
        self.fh.seek(len(self.buf))
        self.buf += self.fh.read(want - len(self.buf))
        if end > len(self.buf):
            raise Unparseable("header_truncated", "%s: the file ended while reading" % what)

    def u32(self, what):
        self.need(4, what)
        v = struct.unpack_from("<I", self.buf, self.off)[0]
        self.off += 4
        return v

    def u64(self, what):
        self.need(8, what)
        v = struct.unpack_from("<Q", self.buf, self.off)[0]
        self.off += 8
        return v

    def string(self, what):
        n = self.u64(what + " length")
        if n > MAX_STRING:
            raise Unparseable("huge_length", "%s length %d exceeds %d" % (what, n, MAX_STRING))
        self.need(n, what)
        s = bytes(self.buf[self.off:self.off + n]) if n <= 4096 else b""
        self.off += n
        return s

    def value(self, vtype, what, depth=0):
        if vtype in _FIXED:
            self.need(_FIXED[vtype], what)
            self.off += _FIXED[vtype]
        elif vtype == _STRING:
            self.string(what)
        elif vtype == _ARRAY:
            if depth:
                raise Unparseable("bad_value_type", "%s: nested arrays are not read" % what)
            inner = self.u32(what + " element type")
            count = self.u64(what + " count")
            self.array_elements += count
            if self.array_elements > MAX_ARRAY_ELEMENTS:
                raise Unparseable("huge_count", "%s: %d array elements in all exceed %d"
                                  % (what, self.array_elements, MAX_ARRAY_ELEMENTS))
            if inner in _FIXED:
                self.need(count * _FIXED[inner], what)
                self.off += count * _FIXED[inner]
            elif inner == _STRING:
                if count * 8 > len(self.buf) - self.off:
                    self.need(count * 8, what)
                for _ in range(count):
                    self.string(what)
            else:
                raise Unparseable("bad_value_type", "%s: array element type %d" % (what, inner))
        else:
            raise Unparseable("bad_value_type", "%s: value type %d is not a GGUF type" % (what, vtype))


def _walk(path, size):
    with open(path, "rb") as fh:
        return _walk_open(fh, size)


def _walk_open(fh, size):
    w = _Walk(fh, size)
    head = fh.read(4)
    if head != GGUF_MAGIC:
        raise Unparseable("bad_magic", "a GGUF file starts with b'GGUF', found %r" % head)
    w.off = 4
    version = w.u32("version")
    if version not in (2, 3):
        raise Unparseable("bad_version", "GGUF version %d; gguf-py reads versions 2 and 3" % version)
    n_tensors = w.u64("tensor count")
    n_kv = w.u64("KV count")
    if n_tensors > MAX_TENSORS or n_kv > MAX_KV:
        raise Unparseable("huge_count", "%d tensors / %d KV entries exceed the ceilings %d / %d"
                          % (n_tensors, n_kv, MAX_TENSORS, MAX_KV))
    # Each KV takes at least 8+0+4+1 bytes and each tensor info 8+0+4+4+8.
    if n_kv * 13 + n_tensors * 24 > size - w.off:
        raise Unparseable("huge_count", "%d KV entries and %d tensors cannot fit in %d bytes"
                          % (n_kv, n_tensors, size - w.off))
    alignment = None
    for i in range(n_kv):
        key = w.string("KV %d key" % i)
        vtype = w.u32("KV %d type" % i)
        start = w.off
        w.value(vtype, "KV %r" % key[:64])
        if key == b"general.alignment":
            if vtype != 4:
                raise Unparseable("bad_alignment", "general.alignment must be a uint32, found type %d" % vtype)
            alignment = struct.unpack_from("<I", w.buf, start)[0]
    if alignment is not None and (alignment == 0 or alignment & (alignment - 1)):
        raise Unparseable("bad_alignment", "general.alignment %d is not a non-zero power of two" % alignment)
    for i in range(n_tensors):
        name = w.string("tensor %d name" % i)
        n_dims = w.u32("tensor %d rank" % i)
        if n_dims > MAX_DIMS:
            raise Unparseable("bad_rank", "tensor %r has %d dims; ggml has at most %d" % (name[:64], n_dims, MAX_DIMS))
        for _ in range(n_dims):
            if w.u64("tensor dims") >> 63:   # found by tests/fuzz/fuzz_gguf.py: the core takes int64 extents
                raise Unparseable("bad_dims", "tensor %r has a dimension of 2**63 or more; ggml's are int64"
                                  % name[:64])
        w.u32("tensor type")
        w.u64("tensor offset")
    return version, alignment or 32, w.off


def _reader_class():
    import gguf

    class HeaderReader(gguf.GGUFReader):
        """GGUFReader without the per-tensor data views (the header alone).

        Its file map is kept as a plain ndarray view of the same pages: slicing
        a np.memmap costs a subclass finalizer per slice, which dominated
        10,000-tensor headers."""

        @property
        def data(self):
            return self._data

        @data.setter
        def data(self, value):
            self._data = value.view(np.ndarray) if isinstance(value, np.memmap) else value

        def _build_tensors(self, start_offs, fields):
            self.tensor_fields = fields
            self.tensors = []

    return HeaderReader


def _field_value(field):
    import gguf

    main = field.types[0] if field.types else None
    if main == gguf.GGUFValueType.ARRAY:
        sub = field.types[-1] if len(field.types) > 1 else None
        if sub in (gguf.GGUFValueType.STRING, None):
            return None   # large string arrays (vocabularies) are not needed by the scan
        return field.contents()
    return field.contents()


def read_header(path):
    """Parse the GGUF header of ``path``; raise ``Unparseable`` with a reason."""
    try:
        size = os.path.getsize(path)
        version, alignment, header_end = _walk(path, size)
    except OSError as exc:
        raise Unparseable("unreadable", str(exc)) from None
    try:
        reader = _reader_class()(path, "r")
    except (ValueError, KeyError, IndexError, TypeError, OverflowError, UnicodeDecodeError) as exc:
        raise Unparseable("gguf_reader", "gguf-py refused the header: %s" % str(exc)[:300]) from None
    kv = {}
    for name, field in reader.fields.items():
        if name.startswith("GGUF."):
            continue
        try:
            kv[name] = _field_value(field)
        except (ValueError, UnicodeDecodeError, IndexError) as exc:
            raise Unparseable("bad_value", "KV %r does not decode: %s" % (name, exc)) from None
    tensors, seen = [], set()
    for field in reader.tensor_fields:
        _nlen, _ndata, _ndims, dims, raw_type, offset = field.parts
        if field.name in seen:
            raise Unparseable("duplicate_tensor", "tensor %r appears twice" % field.name)
        seen.add(field.name)
        t = GgufTensor(field.name, tuple(int(d) for d in dims), int(raw_type[0]), int(offset[0]))
        if t.offset % alignment:
            raise Unparseable("bad_alignment", "tensor %r data offset %d is not a multiple of the alignment %d"
                              % (t.name, t.offset, alignment))
        tensors.append(t)
    data_offset = int(reader.data_offset)
    if data_offset < header_end:
        raise Unparseable("gguf_reader", "gguf-py's data offset %d precedes the header end %d"
                          % (data_offset, header_end))
    return GgufHeader(path, version, kv, tensors, data_offset, alignment, size)
