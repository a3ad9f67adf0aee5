"""Scan one GGUF file: declared ``grit.desc.<tensor>`` descriptors, contracts
inferred from ggml block types, and general.file_type against the tensors."""

from .. import _C
from ..contract import ggml_blocks
from ..contract.descriptor import Descriptor
from . import ggml
from .declared import judge, parse_hex
from .errors import Unparseable
from .gguf_header import read_header
from .records import TensorRecord

# general.file_type is contradicted when the type it names holds less than
# this share of the bytes of the tensors it speaks for (llama.cpp: all but 1-D).
FTYPE_MAJORITY = 0.5


def scan_gguf(path, report, deep_plan):
    h = read_header(path)
    check_layout(h)
    histogram = {}
    for t in h.tensors:
        info = ggml.type_info(t.ggml_type)
        rec = TensorRecord(path, t.name, "gguf", t.shape, None, None)
        report.records.append(rec)
        if info is None:
            rec.dtype = "ggml_type_%d" % t.ggml_type
            report.add("unknown_ggml_type", path, "ggml type %d is not in gguf-py's table; its size cannot be "
                       "checked" % t.ggml_type, tensor=t.name, data={"ggml_type": t.ggml_type})
            continue
        tname, block, type_size = info
        rec.dtype = tname
        ne0 = t.dims[0] if t.dims else 1
        if ne0 % block:
            report.add("blocking", path, "%s rows hold %d elements, not a multiple of the %d-element block"
                       % (tname, ne0, block), tensor=t.name, data={"ggml_type": tname, "ne0": ne0, "block": block})
            continue
        nbytes = t.numel // block * type_size
        rec.nbytes = nbytes
        if t.offset + nbytes > h.data_span:
            report.add("truncated", path, "%s needs bytes [%d, %d) of the data section, which has %d: the file "
                       "ends early" % (tname, t.offset, t.offset + nbytes, h.data_span), tensor=t.name,
                       data={"begin": t.offset, "end": t.offset + nbytes, "data_span": h.data_span})
        if len(t.dims) > 1:
            slot = histogram.setdefault(tname, [0, 0])
            slot[0] += 1
            slot[1] += nbytes

        declared = h.kv.get("grit.desc." + t.name)
        if declared is not None:
            try:
                raw = parse_hex(declared)
            except ValueError as exc:
                report.add("bad_descriptor", path, "grit.desc.%s is unusable: %s" % (t.name, exc), tensor=t.name)
            else:
                expected = judge(report, rec, raw, nbytes, "gguf grit.desc", shape=t.dims)
                if deep_plan is not None and expected is not None and t.offset + nbytes <= h.data_span:
                    span = [(h.data_offset + t.offset, nbytes)]
                    bt = ggml_blocks.TYPES.get(tname)
                    if bt is not None and tuple(rec.desc.placement)[:2] == (bt.placement, bt.placement):
                        deep_plan.append(("declared_blocks", rec, span, bt))   # planes interleaved in blocks
                    else:
                        deep_plan.append(("declared", rec, span, (expected, None)))
                continue
        row = ggml.ROWS.get(tname)
        if row is None:
            continue
        rec.source, rec.family, rec.quantised, rec.label = "inferred", "gguf/" + tname, True, row.label
        rec.expressible = row.expressible
        if row.expressible:
            rec.grade = row.grade
            desc = Descriptor(row.grade, t.shape, placement=(row.placement, row.placement, None))
            rec.desc, rec.gid, rec.gid_basis = desc, desc.gid, "inferred from the ggml block type"
            report.add("inferred", path, "no GRIT descriptor; the %s block type is %s with placement %s "
                       "(inferred, not declared)" % (tname, row.grade, _C.placement_name(row.placement)),
                       tensor=t.name, data={"ggml_type": tname, "grade": row.grade,
                                            "placement": _C.placement_name(row.placement), "gid": rec.gid},
                       fix="write grit.desc.%s so the contract is declared, not guessed" % t.name)
        else:
            rec.reason = row.reason
            report.add("inferred_inexpressible", path, "no GRIT descriptor; the %s block type is recognised "
                       "but GRIT v1 cannot name it byte for byte: %s" % (tname, row.reason), tensor=t.name,
                       data={"ggml_type": tname, "label": row.label, "reason": row.reason})
    _file_type(report, path, h.kv, histogram)
    return h


def check_layout(h):
    """Tensor byte ranges must not overlap (gguf-py does not check)."""
    spans = []
    for t in h.tensors:
        info = ggml.type_info(t.ggml_type)
        if info is not None and t.dims and t.dims[0] % info[1] == 0:
            spans.append((t.offset, t.offset + t.numel // info[1] * info[2], t.name))
    spans.sort()
    for (b0, e0, n0), (b1, e1, n1) in zip(spans, spans[1:]):
        if b1 < e0:
            raise Unparseable("bad_offsets", "tensor %r bytes [%d, %d) overlap %r [%d, %d)"
                              % (n1, b1, e1, n0, b0, e0))


def _file_type(report, path, kv, histogram):
    raw = kv.get("general.file_type")
    if not isinstance(raw, int) or isinstance(raw, bool) or not histogram:
        return
    total = sum(b for _, b in histogram.values())
    table = {name: {"tensors": n, "bytes": b} for name, (n, b) in sorted(histogram.items())}
    known = ggml.ftype(raw)
    if known is None:
        report.add("file_type_unknown", path, "general.file_type = %d is not a llama_ftype gguf-py knows; the "
                   "claim cannot be checked" % raw, data={"file_type": raw, "histogram": table})
        return
    ftname, expected = known
    if expected is None or total == 0:
        return
    declared_bytes = histogram.get(expected, (0, 0))[1]
    share = declared_bytes / total
    if share >= FTYPE_MAJORITY:
        return
    dominant = max(histogram.items(), key=lambda kv_: kv_[1][1])[0]
    report.add("file_type_mismatch", path,
               "general.file_type = %d (%s) says the file is mostly %s, but %s holds %d of %d bytes of the "
               "tensors it speaks for (%.1f%%); most bytes are %s"
               % (raw, ftname, expected, expected, declared_bytes, total, 100 * share, dominant),
               fix="the declaration and the bytes disagree: re-export, or declare each tensor with grit.desc.*",
               data={"file_type": raw, "file_type_name": ftname, "declared_ggml_type": expected,
                     "declared_share": round(share, 6), "dominant_ggml_type": dominant,
                     "tensor_bytes": total, "histogram": table})
