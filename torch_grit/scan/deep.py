"""--deep: stream the planned byte ranges and check their content.

Declared descriptors get the core's level-2 check (sparsity metadata order,
and the plane digest when the file records one) on their planes. GPTQ g_idx
tensors are read to tell act-order from contiguous grouping; GPTQ/AWQ
zero-point planes are summarised as evidence (which codes occur), which is
all bytes can say about a convention. The bytes are read through a read-only
memory map in file order: no copy, and memory stays the page cache's.

A plan item is ``(kind, record, ranges, extra)``: ``ranges`` lists
``(absolute offset, length)`` or None (an absent plane) in plane order.
"""

import os

import numpy as np

from ..contract import ggml_blocks
from ..contract.check import check
from ..contract.errors import GritCheckError

def run(report, path, plan):
    """Check every planned range through one read-only map of the file; returns the bytes checked."""
    import mmap

    streamed = 0
    plan = sorted(plan, key=lambda item: min((r[0] for r in item[2] if r), default=0))
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            return 0
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            whole = np.frombuffer(mm, dtype=np.uint8)
            try:
                for kind, rec, ranges, extra in plan:
                    pieces, short = [], False
                    for r in ranges:
                        if r is None:
                            pieces.append(None)
                            continue
                        if r[0] + r[1] > size:
                            report.add("truncated", path, "--deep: bytes [%d, %d) are past the end of the file"
                                       % (r[0], r[0] + r[1]), tensor=rec.name)
                            short = True
                            break
                        pieces.append(whole[r[0]:r[0] + r[1]])
                        streamed += r[1]
                    if not short:
                        _CHECKS[kind](report, rec, pieces, extra)
                    del pieces
            finally:
                del whole
    return streamed


def _declared(report, rec, pieces, extra):
    expected, digest = extra
    if expected is not None:   # one entry holding the four planes in order
        whole, pieces, off = pieces[0], [], 0
        for n in expected:
            pieces.append(whole[off:off + n] if n else None)
            off += n
    try:
        check(rec.desc, pieces, level=2, digest=digest, tensor=rec.name)
    except GritCheckError as exc:
        report.add("check_level2", rec.path, str(exc), tensor=rec.name,
                   data={"status": exc.status, "field": exc.field, "plane": exc.plane,
                         "expected": exc.expected, "found": exc.found})


def _declared_blocks(report, rec, pieces, bt):
    """A declared tensor held as ggml blocks (BLOCK_AOS, PACK_K4_12B): its planes, moved out."""
    whole = pieces[0]
    if whole.size % bt.nbytes:
        return   # the size finding already says so
    planes = ggml_blocks.to_planes(bt.name, whole.reshape(-1, bt.nbytes), ggml_zero=False, refuse=False)
    _declared(report, rec, planes, (None, None))


def _g_idx(report, rec, pieces, k0):
    g = pieces[0].view("<i4")
    if np.array_equal(g, np.arange(g.size, dtype=np.int64) // k0):
        return
    reason = ("act-order: g_idx maps inputs to groups out of order (read from the bytes), which v1's "
              "contiguous groups cannot carry")
    rec.expressible = False
    rec.reason = (rec.reason + "; " if rec.reason else "") + reason
    report.add("inferred_inexpressible", rec.path, reason, tensor=rec.name,
               data={"family": rec.family, "act_order": True, "source": "g_idx bytes"})


def _qzeros(report, rec, pieces, extra):
    bits, zpc = extra
    if bits not in (2, 4, 8):
        return
    words = pieces[0].view("<u4")
    mask = (1 << bits) - 1
    hist = np.zeros(1 << bits, dtype=np.int64)
    for i in range(32 // bits):
        hist += np.bincount(((words >> (bits * i)) & mask).astype(np.int64), minlength=1 << bits)
    for f in report.findings:
        if f.cls == "zp_convention_ambiguous" and f.path == rec.path:
            ev = f.data.setdefault("deep_evidence", {"code_histogram": [0] * (1 << bits)})
            ev["code_histogram"] = [a + int(b) for a, b in zip(ev["code_histogram"], hist)]
            used = [i for i, c in enumerate(ev["code_histogram"]) if c]
            half = 1 << (bits - 1)
            ev["single_code"] = used[0] if len(used) == 1 else None
            ev["note"] = ("a symmetric quantizer stores %d under zpc=asis and %d under zpc=minus1: one code "
                          "throughout is evidence, not proof" % (half, half - 1))


_CHECKS = {"declared": _declared, "declared_blocks": _declared_blocks, "g_idx": _g_idx, "qzeros": _qzeros}
