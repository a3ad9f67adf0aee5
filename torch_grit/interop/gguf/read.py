"""Import a GGUF file: ggml tensors as checked GritTensors and plain tensors.

The header goes through the scanner's bounded walk and gguf-py's reader
(``torch_grit.scan.gguf_header``); every tensor is then planned from the
header alone (type, blocking, byte range, declared descriptor, or the reason
it cannot be imported) before any tensor data is read, so a bad file fails
before anything is returned or written. Data are read from a memory map of
the file, one tensor at a time.
"""

from collections import OrderedDict

import numpy as np
import torch

from ...checkpoint.format import Plain, packed_unit
from ...checkpoint.safetensors_io import TORCH_TO_ST, CheckpointError
from ...contract.descriptor import Descriptor
from ...contract.grade import resolve_grade
from ...scan import ggml
from ...scan.declared import parse_hex
from ...scan.errors import Unparseable
from ...scan.gguf_header import read_header
from ...scan.gguf_scan import check_layout
from ...tensor.grit_tensor import GritTensor, fit_error, quantize
from ...contract import ggml_blocks as blocks

# ggml carrier types stored as plain tensors, by gguf-py's type name.
PLAIN = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64,
         "I8": torch.int8, "I16": torch.int16, "I32": torch.int32, "I64": torch.int64}
# numpy has no bfloat16: its bytes travel as int16 and are viewed as bfloat16 in torch.
_NUMPY = {"F32": np.float32, "F16": np.float16, "BF16": np.int16, "F64": np.float64,
          "I8": np.int8, "I16": np.int16, "I32": np.int32, "I64": np.int64}


class TensorPlan:
    """How one GGUF tensor becomes a torch tensor, decided from the header.

    ``kind``: "plain" (a carrier type, copied), "packed" (a block type GRIT
    names, repacked into planes), or "requantize" (decoded by
    ``gguf.quants.dequantize`` and packed to ``grade`` by torch_grit's encoder).
    """

    __slots__ = ("name", "kind", "ggml_type", "type_id", "shape", "begin", "nbytes", "grade", "declared")

    def __init__(self, name, kind, ggml_type, type_id, shape, begin, nbytes, grade=None, declared=False):
        self.name, self.kind, self.ggml_type, self.type_id = name, kind, ggml_type, type_id
        self.shape, self.begin, self.nbytes = shape, begin, nbytes
        self.grade, self.declared = grade, declared

    def unit(self):
        """The checkpoint unit this tensor is written as (torch_grit.checkpoint.format)."""
        if self.kind == "plain":
            return Plain(self.name, TORCH_TO_ST[PLAIN[self.ggml_type]], self.shape)
        return packed_unit(self.name, self.grade, self.shape, torch.float32)


class GgufImport:
    """A GGUF file whose header passed every check: ``plans`` (one per tensor,
    in file order), ``kv`` (the metadata gguf-py decoded; string arrays such
    as vocabularies are left out), and ``read(plan)``."""

    def __init__(self, path, header, plans):
        self.path, self.header, self.plans = path, header, plans
        self.kv = header.kv
        self._map = None

    def _bytes(self, plan):
        if self._map is None:
            self._map = np.memmap(self.path, dtype=np.uint8, mode="r")
        start = self.header.data_offset + plan.begin
        return self._map[start:start + plan.nbytes]

    def read(self, plan):
        """The tensor of ``plan``: a plain tensor, a GritTensor, or for "requantize"
        ``(GritTensor, error)`` where error is {sqnr_db, max_abs_err} against the
        decoded source."""
        raw = self._bytes(plan)
        try:
            if plan.kind == "plain":
                t = torch.from_numpy(np.array(raw).view(_NUMPY[plan.ggml_type]))
                return t.view(PLAIN[plan.ggml_type]).reshape(plan.shape)
            if plan.kind == "packed":
                bt = blocks.TYPES[plan.ggml_type]
                n = plan.nbytes // bt.nbytes
                planes = blocks.to_planes(plan.ggml_type, np.asarray(raw).reshape(n, bt.nbytes),
                                          ggml_zero=not plan.declared)
                planes = [torch.from_numpy(p if p.flags.writeable else p.copy()) for p in planes]
                return GritTensor.from_planes(planes, plan.grade, plan.shape, torch.float32, name=plan.name)
            return self._requantize(plan, raw)
        except blocks.BlockError as e:
            bt = blocks.TYPES[plan.ggml_type]
            per_row = plan.shape[-1] // bt.block
            row, col = divmod(e.block, per_row)
            raise CheckpointError("%s (row %d, columns %d..%d)" % (e, row, col * bt.block, (col + 1) * bt.block - 1),
                                  self.path, plan.name, field=e.field) from None

    def _requantize(self, plan, raw):
        import gguf

        from .error import weight_error

        rows = int(np.prod(plan.shape[:-1]))
        src = gguf.quants.dequantize(np.asarray(raw).reshape(rows, -1), gguf.GGMLQuantizationType(plan.type_id))
        w = torch.from_numpy(np.ascontiguousarray(src, dtype=np.float32)).reshape(plan.shape)
        packed = quantize(w, plan.grade, name=plan.name)
        return packed, weight_error(w, packed.dequantize())

    def close(self):
        self._map = None


def _fail(path, message, tensor=None, field=None, expected=None, found=None):
    raise CheckpointError(message, path, tensor, field=field, expected=expected, found=found)


def open_gguf(path, requantize=None):
    """Read and check the header of a GGUF file; read no tensor data.

    ``requantize`` (a grade, or None): what every tensor of a block type GRIT
    v1 cannot name is packed to; without it such a tensor is refused naming
    the reason. Raises CheckpointError naming the tensor and the field.
    """
    path = str(path)
    try:
        header = read_header(path)
        check_layout(header)   # tensors whose bytes overlap
    except Unparseable as e:
        _fail(path, "not a readable GGUF file: %s" % e.detail, field=e.reason)
    target = resolve_grade(requantize) if requantize is not None else None
    names = {t.name for t in header.tensors}
    for key in header.kv:
        if key.startswith("grit.desc.") and key[len("grit.desc."):] not in names:
            _fail(path, "%s declares a descriptor for a tensor the file does not hold" % key, field=key)
    plans = [_plan(path, header, t, target) for t in header.tensors]
    return GgufImport(path, header, plans)


def _plan(path, header, t, target):
    info = ggml.type_info(t.ggml_type)
    if info is None:
        _fail(path, "ggml type %d is not one gguf-py knows" % t.ggml_type, t.name, field="ggml_type",
              found=t.ggml_type)
    tname, block, type_size = info
    shape = tuple(int(s) for s in t.shape) or (1,)
    ne0 = t.dims[0] if t.dims else 1
    extent = 1
    for d in shape:
        extent *= max(d, 1)
    if extent >= 1 << 63:  # torch sizes are signed 64-bit; an empty tensor's other dimensions count too
        _fail(path, "%s shape %s: its dimensions multiply past 2^63, more than a tensor can index"
              % (tname, list(shape)), t.name, field="shape", found=list(shape))
    if ne0 % block:
        _fail(path, "%s rows of %d elements are not a multiple of its %d-element block" % (tname, ne0, block),
              t.name, field="shape", expected=block, found=ne0)
    nbytes = t.numel // block * type_size
    if t.offset + nbytes > header.data_span:
        _fail(path, "%s needs bytes [%d, %d) of the data section, which has %d: the file is truncated"
              % (tname, t.offset, t.offset + nbytes, header.data_span), t.name, field="data_length",
              expected=t.offset + nbytes, found=header.data_span)
    declared = header.kv.get("grit.desc." + t.name)
    if tname in PLAIN:
        if declared is not None:
            _fail(path, "grit.desc.%s declares a GRIT descriptor, but the tensor is a plain %s" % (t.name, tname),
                  t.name, field="grit.desc")
        return TensorPlan(t.name, "plain", tname, t.ggml_type, shape, t.offset, nbytes)
    bt = blocks.TYPES.get(tname)
    if t.numel == 0:
        _fail(path, "a %s tensor of shape %s holds no elements; a packed weight has at least one block"
              % (tname, list(shape)), t.name, field="shape", found=list(shape))
    if len(shape) != 2:
        _fail(path, "a %s tensor of shape %s: torch_grit imports 2-D quantized weights [out, in] (GritTensor "
              "is 2-D); this one is not imported" % (tname, list(shape)), t.name, field="rank", found=list(shape))
    if bt is not None:
        if declared is not None:
            _check_declared(path, t.name, declared, bt, shape)
        return TensorPlan(t.name, "packed", tname, t.ggml_type, shape, t.offset, nbytes, bt.grade,
                          declared=declared is not None)
    reason = _inexpressible(tname)
    if target is None:
        _fail(path, "ggml %s cannot be imported as it is: %s. Pass requantize=GRADE (torch-grit import "
              "--requantize GRADE) to decode it with gguf.quants.dequantize and pack it again, with the "
              "error reported" % (tname, reason), t.name, field="ggml_type", found=tname)
    if not _can_dequantize(t.ggml_type):
        _fail(path, "ggml %s: gguf-py has no decoder for it, so it cannot be requantized either" % tname,
              t.name, field="ggml_type", found=tname)
    misfit = fit_error(shape, target, t.name)
    if misfit:
        _fail(path, "requantize=%s: %s" % (target.canonical, misfit), t.name, field="requantize")
    return TensorPlan(t.name, "requantize", tname, t.ggml_type, shape, t.offset, nbytes, target.canonical)


def _inexpressible(tname):
    if tname == "Q4_0":
        return ("its code minus 8 is a two's-complement nibble and its binary16 scale could be kept, but ggml "
                "derives that scale as the signed extreme over -8, a rule GRIT v1 has no esr for (exp2*maxabs, "
                "ratiomaxabs and affineminmax are the ones it names), and a descriptor must state one")
    row = ggml.ROWS.get(tname)
    return row.reason if row is not None and row.reason else "GRIT v1 has no grade for it"


def _can_dequantize(type_id):
    import gguf

    try:
        qtype = gguf.GGMLQuantizationType(type_id)
    except ValueError:
        return False
    return qtype in gguf.quants._type_traits


def _check_declared(path, name, text, bt, shape):
    try:
        raw = parse_hex(text)
    except ValueError as e:
        _fail(path, "grit.desc.%s is unusable: %s" % (name, e), name, field="grit.desc")
    want = bt.descriptor(shape)
    if raw != want.to_bytes():
        found = Descriptor.from_bytes(raw, want.shape)
        _fail(path, "grit.desc.%s is not the descriptor of ggml %s blocks (%s in %s); field by field:\n%s"
              % (name, bt.name, bt.grade, want.placement, found.explain(want)), name, field="grit.desc")


def load_gguf(path, requantize=None, report=None):
    """Every tensor of a GGUF file, by its GGUF name: GritTensors for the block
    types GRIT names (and for the requantized ones), plain tensors for the rest.
    ``report``, a list, receives one dict per requantized tensor."""
    imp = open_gguf(path, requantize)
    state = {}
    try:
        for plan in imp.plans:
            t = imp.read(plan)
            if plan.kind == "requantize":
                t, err = t
                if report is not None:
                    report.append(dict(tensor=plan.name, ggml_type=plan.ggml_type, grade=plan.grade, **err))
            state[plan.name] = t
    finally:
        imp.close()
    return OrderedDict((k, state[k]) for k in sorted(state))
