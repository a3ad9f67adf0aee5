"""The safetensors container: read strictly, written deterministically and atomically.

Reading: ``read_header`` parses the 8-byte length, the JSON header and the
offset table in a fixed order with exact integer arithmetic, and names the
entry, the field, what was expected and what was found (safetensors' own
parser says "invalid shape, data type, or offset for tensor"). Stock
safetensors opens every file this module accepts and writes; the tests check
both directions.

Writing: the file is written here rather than by ``safetensors.torch.save_file``
because that function (0.8.0) cannot give the three things a checkpoint needs:

- determinism: it serialises ``__metadata__`` from a Rust HashMap, so the key
  order, and with it the bytes, differs from one process to the next as soon as
  there are two metadata keys (measured: four runs, four different files);
- streaming: it takes every tensor at once, so converting a checkpoint larger
  than memory is impossible; here the header is computed from shapes alone and
  each entry is written at its offset when its bytes exist;
- atomicity: it writes in place; here a temporary file in the target folder is
  fsynced, renamed over the target and the folder fsynced.

The layout follows safetensors' own writer: entries sorted by alignment (widest
element first), then by name, so every offset is a multiple of its element size
once the header is padded (with spaces) to a multiple of 8 bytes.
"""

import json
import os
import struct
from dataclasses import dataclass

import torch

MAX_HEADER_BYTES = 100_000_000  # safetensors refuses larger headers

# safetensors dtype name -> (bits per element, torch dtype or None)
DTYPES = {
    "BOOL": (8, torch.bool), "U8": (8, torch.uint8), "I8": (8, torch.int8),
    "F8_E4M3": (8, torch.float8_e4m3fn), "F8_E5M2": (8, torch.float8_e5m2),
    "F8_E4M3FNUZ": (8, getattr(torch, "float8_e4m3fnuz", None)),
    "F8_E5M2FNUZ": (8, getattr(torch, "float8_e5m2fnuz", None)),
    "F8_E8M0": (8, getattr(torch, "float8_e8m0fnu", None)),
    "F4": (4, None), "F6_E2M3": (6, None), "F6_E3M2": (6, None),
    "U16": (16, torch.uint16), "I16": (16, torch.int16), "F16": (16, torch.float16),
    "BF16": (16, torch.bfloat16), "U32": (32, torch.uint32), "I32": (32, torch.int32),
    "F32": (32, torch.float32), "U64": (64, torch.uint64), "I64": (64, torch.int64),
    "F64": (64, torch.float64), "C64": (64, torch.complex64),
}
TORCH_TO_ST = {t: name for name, (_, t) in DTYPES.items() if t is not None}


class CheckpointError(ValueError):
    """A checkpoint file or folder is not what its header says it is.

    ``path`` is the file, ``tensor`` the entry when one is at fault, ``field``
    the header field or rule, ``expected`` and ``found`` the two sides.
    Nothing has been loaded or modified when this is raised.
    """

    def __init__(self, message, path=None, tensor=None, field=None, expected=None, found=None):
        where = str(path) if path is not None else ""
        if tensor is not None:
            where += "%s%r" % (": " if where else "", tensor)
        super().__init__("%s: %s" % (where, message) if where else message)
        self.path = path
        self.tensor = tensor
        self.field = field
        self.expected = expected
        self.found = found


@dataclass(frozen=True)
class Entry:
    """One tensor entry of a safetensors header; offsets are relative to the data section."""
    name: str
    dtype: str
    shape: tuple
    begin: int
    end: int

    @property
    def nbytes(self):
        return self.end - self.begin


@dataclass
class Header:
    path: str
    entries: dict       # name -> Entry, in offset order
    metadata: dict      # str -> str
    data_start: int     # file offset of the data section
    file_size: int


def entry_nbytes(dtype, shape):
    """Bytes an entry of ``dtype`` and ``shape`` holds, or None if not a whole number."""
    bits = DTYPES[dtype][0]
    numel = 1
    for s in shape:
        numel *= s
    total = numel * bits
    return total // 8 if total % 8 == 0 else None


def alignment(dtype):
    return max(DTYPES[dtype][0] // 8, 1)


def _no_duplicates(path):
    def hook(pairs):
        seen = {}
        for key, value in pairs:
            if key in seen:
                raise CheckpointError("the header names %r twice; JSON readers keep one of the two "
                                      "silently, so the file is refused" % key, path,
                                      field="duplicate_key", found=key)
            seen[key] = value
        return seen
    return hook


def parse_json_object(text, path, what):
    """A JSON object whose keys are all distinct (duplicates raise CheckpointError)."""
    try:
        obj = json.loads(text, object_pairs_hook=_no_duplicates(path))
    except CheckpointError as e:
        raise CheckpointError("%s: %s" % (what, e.args[0].split(": ", 1)[-1]), path,
                              field=e.field, found=e.found) from None
    except (ValueError, RecursionError) as e:  # RecursionError: nesting deeper than the C stack allows
        raise CheckpointError("%s is not valid JSON: %s" % (what, e), path, field="json") from None
    if not isinstance(obj, dict):
        raise CheckpointError("%s must be a JSON object; found %s" % (what, type(obj).__name__),
                              path, field="json")
    return obj


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def read_header(path):
    """Parse and validate a safetensors file's header and offset table.

    Order: file length, header length, UTF-8, JSON object with distinct keys,
    ``__metadata__`` (strings only), each entry (dtype, shape, offsets, byte
    count), then the offsets tiling the data section with no hole or overlap.
    """
    path = str(path)
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise CheckpointError("the file is %d bytes long; a safetensors file starts with an "
                                      "8-byte header length" % size, path, field="header_length",
                                      expected=">= 8 bytes", found=size)
            (n,) = struct.unpack("<Q", head)
            if n < 2 or n > MAX_HEADER_BYTES or 8 + n > size:
                raise CheckpointError(
                    "header length %d does not fit: the file is %d bytes and the header must be "
                    "2..%d bytes inside it (a truncated file or not a safetensors file)"
                    % (n, size, MAX_HEADER_BYTES), path, field="header_length",
                    expected="<= %d" % (size - 8), found=n)
            raw = f.read(n)
    except OSError as e:
        raise CheckpointError("cannot read: %s" % e.strerror, path, field="io") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CheckpointError("the header is not UTF-8 (byte %d)" % e.start, path,
                              field="header") from None
    if not text.startswith("{"):
        raise CheckpointError("the header does not start with '{'", path, field="header")
    top = parse_json_object(text, path, "the header")

    metadata = top.pop("__metadata__", None)
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise CheckpointError("__metadata__ must map strings to strings (stock safetensors refuses "
                              "anything else)", path, field="__metadata__")

    data_len = size - 8 - n
    entries = []
    for name, info in top.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise CheckpointError("an entry is an object with exactly dtype, shape and data_offsets; "
                                  "found %r" % (info,), path, name, field="entry")
        dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if not isinstance(dtype, str) or dtype not in DTYPES:  # a list or object is unhashable
            raise CheckpointError("unknown dtype %r" % (dtype,), path, name, field="dtype",
                                  expected=sorted(DTYPES), found=dtype)
        if not isinstance(shape, list) or not all(_is_int(s) and s >= 0 for s in shape):
            raise CheckpointError("shape must be a list of non-negative integers; found %r"
                                  % (shape,), path, name, field="shape", found=shape)
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(_is_int(o) for o in offsets) or not 0 <= offsets[0] <= offsets[1]):
            raise CheckpointError("data_offsets must be [begin, end] with 0 <= begin <= end; "
                                  "found %r" % (offsets,), path, name, field="data_offsets",
                                  found=offsets)
        numel = 1
        for s in shape:  # stock safetensors multiplies in 64 bits and refuses an overflow
            numel *= s
            if numel >= 1 << 64:
                raise CheckpointError("the shape's element count overflows 64 bits", path, name,
                                      field="shape", expected="< 2**64 elements",
                                      found="%d dims" % len(shape))
        want = entry_nbytes(dtype, shape)
        if want != offsets[1] - offsets[0]:
            raise CheckpointError("dtype %s shape %s needs %s bytes; data_offsets %r give %d"
                                  % (dtype, shape, want, offsets, offsets[1] - offsets[0]),
                                  path, name, field="data_offsets", expected=want,
                                  found=offsets[1] - offsets[0])
        entries.append(Entry(name, dtype, tuple(shape), offsets[0], offsets[1]))

    entries.sort(key=lambda e: (e.begin, e.end))
    cursor = 0
    for e in entries:
        if e.begin != cursor:
            what = "a hole" if e.begin > cursor else "an overlap"
            raise CheckpointError("data_offsets leave %s: this entry begins at %d, the previous one "
                                  "ends at %d (the offsets must tile the data section)"
                                  % (what, e.begin, cursor), path, e.name, field="data_offsets",
                                  expected=cursor, found=e.begin)
        cursor = e.end
    if cursor != data_len:
        what = "truncated" if cursor > data_len else "has trailing bytes"
        raise CheckpointError("the file is %s: its entries need %d data bytes, the file holds %d "
                              "after the header" % (what, cursor, data_len), path,
                              field="data_length", expected=cursor, found=data_len)
    return Header(path, {e.name: e for e in entries}, metadata, 8 + n, size)


# -- writing -----------------------------------------------------------------------------

def layout(specs):
    """Order ``(name, dtype, shape)`` specs as written and give them offsets.

    Widest alignment first, then by name: deterministic, and every offset is a
    multiple of its element size.
    """
    ordered = sorted(specs, key=lambda s: (-alignment(s[1]), s[0]))
    out, cursor = [], 0
    for name, dtype, shape in ordered:
        nbytes = entry_nbytes(dtype, shape)
        if nbytes is None:
            raise ValueError("%r: dtype %s shape %s is not a whole number of bytes"
                             % (name, dtype, list(shape)))
        out.append(Entry(name, dtype, tuple(int(s) for s in shape), cursor, cursor + nbytes))
        cursor += nbytes
    return out


def render_header(entries, metadata):
    """The header bytes (length prefix included): metadata keys sorted, entries in offset order."""
    header = {}
    if metadata:
        header["__metadata__"] = {k: metadata[k] for k in sorted(metadata)}
    for e in entries:
        header[e.name] = {"dtype": e.dtype, "shape": list(e.shape),
                          "data_offsets": [e.begin, e.end]}
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    text += b" " * (-(8 + len(text)) % 8)
    return struct.pack("<Q", len(text)) + text


def pwrite_all(fd, data, offset):
    view = memoryview(data).cast("B")
    while view.nbytes:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def tensor_bytes(t):
    """A contiguous CPU tensor's bytes as a memoryview (no copy when it already is one)."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous().reshape(-1)
    if t.numel() == 0:
        return memoryview(b"")
    return memoryview(t.view(torch.uint8).numpy())


def read_entry(f, header, entry, scratch=None):
    """An entry's bytes as a uint8 tensor, read with pread (no mapping, no page-cache RSS).

    With ``scratch`` (a uint8 tensor at least that long) the bytes land in its
    front instead of a fresh allocation: a caller reading many tensors in turn
    reuses one buffer, so the heap does not grow by fragmentation.
    """
    if scratch is not None and scratch.numel() >= entry.nbytes:
        out = scratch[:entry.nbytes]
    else:
        out = torch.empty(entry.nbytes, dtype=torch.uint8)
    if entry.nbytes:
        view = memoryview(out.numpy())
        offset, got = header.data_start + entry.begin, 0
        while got < entry.nbytes:
            n = os.preadv(f.fileno(), [view[got:]], offset + got)
            if n <= 0:
                raise CheckpointError("the file ended while reading this entry (%d of %d bytes)"
                                      % (got, entry.nbytes), header.path, entry.name,
                                      field="data_length", expected=entry.nbytes, found=got)
            got += n
    return out


class AtomicFiles:
    """Temporary files next to their targets, committed together.

    ``open(target)`` returns a writable file object on a temporary file in the
    target's folder. ``commit()`` fsyncs every temporary file, renames each over
    its target (in the order opened) and fsyncs the folders. Leaving the
    ``with`` block by an exception removes the temporary files and leaves every
    target as it was. A process killed before ``commit`` leaves at most a
    ``.<name>.tmp-*`` file beside an untouched target.
    """

    def __init__(self):
        self._files = []  # (file object, temp path, target path)

    def open(self, target):
        target = os.path.abspath(str(target))
        folder, base = os.path.split(target)
        for attempt in range(100):
            tmp = os.path.join(folder, ".%s.tmp-%d-%d" % (base, os.getpid(), attempt))
            try:  # mode 0o666 less the umask, as open() gives a new file
                fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
                break
            except FileExistsError:
                continue
        else:
            raise OSError("cannot create a temporary file beside %s" % target)
        f = os.fdopen(fd, "r+b")
        self._files.append((f, tmp, target))
        return f

    def commit(self):
        for f, _, _ in self._files:
            f.flush()
            os.fsync(f.fileno())
            f.close()
        folders = []
        for _, tmp, target in self._files:
            os.replace(tmp, target)
            folder = os.path.dirname(target)
            if folder not in folders:
                folders.append(folder)
        self._files = []
        for folder in folders:
            fsync_dir(folder)

    def abort(self):
        for f, tmp, _ in self._files:
            f.close()
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        self._files = []

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.abort()  # after commit() there is nothing left to abort
        return False


def fsync_dir(folder):
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
