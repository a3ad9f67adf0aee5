"""``GritTensor``: a packed GRIT weight that PyTorch can move, save and compile.

The wrapper has the logical shape and dtype of the weight; its bytes are the
four planes (uint8). Every op PyTorch may apply is either claimed here (moves,
copies, the transposed-weight marker), claimed in ``linear.py`` (matmuls that
contract over the group axis), or refused naming the op: a silent dequantize
would hide a full-size float copy behind an innocent-looking call.
"""

import hashlib

import torch

from .. import _C, ops
from ..contract.check import check
from ..contract.descriptor import Descriptor
from ..contract.errors import GradeError, GroupAxisError
from ..contract.grade import Grade, resolve_grade
from ..contract.grade_names import grade_for
from ..contract.int4_groups import Int4Groups
from ..contract.placement import Placement
from .dispatch import _DISPATCH, _FUNCTION, aten, implements, unsupported

LOGICAL_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


class GritTensor(torch.Tensor):
    """A weight ``[out_features, in_features]`` packed to a GRIT grade.

    Groups run along the last axis (``in_features``). ``.t()`` gives a marker
    view that ``x @ W.t()``, ``torch.mm`` and ``torch.addmm`` consume as the
    linear layer ``x @ W^T``; a product that would need groups along the other
    axis is refused (changing the group axis is requantization, not a view).

    The grade may also be seed 001's ``"INT4G<g>"`` (``Grade.int4_groups(g)``):
    then ``planes`` are ``[codes, scales, empty, empty]``, the packed code bytes
    and the binary64 scales as raw little-endian bytes (``planes[1].view(
    torch.float64)`` gives them as numbers); it has no GRIT descriptor or
    placement, and ``torch_grit.save`` refuses it, saying why.

    On CPU a 4-bit weight (MXFP4, NVF4 and their siblings) may be held in
    the CPU tile layout (``tile()``, ``torch_grit.tile_(model)``): the same
    bytes with each 16-row tile's 32-bit words one vector apart, which the
    kernels read without transposing (batch 1 MXFP4 1.26-1.86x faster in
    the README's bench runs). It is a kernel layout, not a GRIT placement:
    ``planes``, ``descriptor``, ``dequantize`` and every save see GRIT's
    planes (untiled on the fly), and ``stored_planes`` are the bytes as held.
    """

    # Declared once: flatten/unflatten, repr and every derived copy read these.
    PLANE_NAMES = ("data_plane", "scale0_plane", "scale1_plane", "aux_plane")
    ATTRIBUTE_NAMES = ("grade_canonical", "placement_words", "logical_shape", "logical_dtype",
                       "transposed", "tiled")
    # The tensor's name where one was given (quantize_, load: "fc1.weight"), for messages such as
    # a tensor-parallel plan's refusal; not part of the bytes, the flattening or the descriptor.
    grit_name = None

    @staticmethod
    def __new__(cls, data_plane, scale0_plane, scale1_plane, aux_plane, grade_canonical,
                placement_words, logical_shape, logical_dtype, transposed=False, tiled=False):
        rows, cols = logical_shape
        size, stride = ((cols, rows), (1, cols)) if transposed else ((rows, cols), (cols, 1))
        return torch.Tensor._make_wrapper_subclass(cls, size, strides=stride, dtype=logical_dtype,
                                                   device=data_plane.device, requires_grad=False)

    def __init__(self, data_plane, scale0_plane, scale1_plane, aux_plane, grade_canonical,
                 placement_words, logical_shape, logical_dtype, transposed=False, tiled=False):
        self.data_plane = data_plane
        self.scale0_plane = scale0_plane
        self.scale1_plane = scale1_plane
        self.aux_plane = aux_plane
        self.grade_canonical = grade_canonical
        self.placement_words = tuple(placement_words)
        self.logical_shape = tuple(logical_shape)
        self.logical_dtype = logical_dtype
        self.transposed = bool(transposed)
        self.tiled = bool(tiled)  # data and scale0 in the CPU tile layout (tile())

    # -- construction with the contract's checks ---------------------------------

    @classmethod
    def from_planes(cls, planes, grade, shape, dtype=torch.float32, placement=None, name=None):
        """Wrap existing planes after a level-1 check against the descriptor.

        ``placement`` must be the grade's canonical one: the kernels read no
        other layout yet, and reading bytes under a placement they were not
        written in would decode garbage.
        """
        label = name or "GritTensor"
        try:
            grade = resolve_grade(grade)
        except GradeError as e:
            raise GradeError("%s: %s" % (label, e), e.code, e.token, e.position) from None
        except TypeError as e:
            raise TypeError("%s: %s" % (label, e)) from None
        shape = tuple(int(s) for s in shape)
        if len(shape) != 2:
            raise ValueError("%s: a GritTensor is a 2-D weight [out_features, in_features]; found "
                             "shape %s" % (label, shape))
        if dtype not in LOGICAL_DTYPES:
            raise TypeError("%s: the logical dtype must be one of %s; found %s"
                            % (label, _dtype_names(), dtype))
        planes = list(planes)
        if len(planes) != 4:
            raise ValueError("%s: expected four planes [data, scale0, scale1, aux]; found %d"
                             % (label, len(planes)))
        device = next((p.device for p in planes if isinstance(p, torch.Tensor)),
                      torch.device("cpu"))
        planes = [torch.empty(0, dtype=torch.uint8, device=device) if p is None else p
                  for p in planes]  # an absent plane is an empty one
        for i, p in enumerate(planes):
            if not isinstance(p, torch.Tensor) or p.dtype != torch.uint8 or p.dim() != 1:
                raise TypeError("%s: plane %d must be a 1-D uint8 tensor; found %s"
                                % (label, i, _describe(p)))
            if p.device != device:
                raise ValueError("%s: plane %d is on %s, plane 0 on %s; planes share one device"
                                 % (label, i, p.device, device))
        if isinstance(grade, Int4Groups):
            return cls._from_int4g_planes(planes, grade, shape, dtype, placement, label)
        desc = Descriptor(grade, shape)
        if placement is not None and tuple(placement) != tuple(desc.placement):
            raise ValueError("%s: placement %s is not the canonical %r for %s; the packed kernels "
                             "read the canonical layout only (repack first)"
                             % (label, _placement_text(placement), desc.placement, grade.canonical))
        check(desc, planes, tensor=label)
        out = cls(*planes, grade.canonical, tuple(desc.placement), shape, dtype)
        out.grit_name = name
        return out

    @classmethod
    def _from_int4g_planes(cls, planes, grade, shape, dtype, placement, label):
        """INT4G: no descriptor to check against, so the core reader validates the bytes."""
        if placement is not None and tuple(placement) != ():
            raise ValueError("%s: %s has no GRIT placement (found %r); pass placement=None"
                             % (label, grade.name, placement))
        try:
            torch.ops.grit.check(*planes, grade.canonical, list(shape))
        except (TypeError, ValueError) as e:
            raise type(e)("%s: %s" % (label, e)) from None
        out = cls(*planes, grade.canonical, (), shape, dtype)
        out.grit_name = None if label == "GritTensor" else label
        return out

    # -- what a GritTensor is, in the contract's words ----------------------------

    @property
    def grade(self):
        """A ``Grade``, or an ``Int4Groups`` for seed 001's "INT4G<g>"."""
        return resolve_grade(self.grade_canonical)

    @property
    def is_int4_groups(self):
        return not self.placement_words and isinstance(self.grade, Int4Groups)

    def _no_grit(self, what):
        g = self.grade
        return ValueError("a GritTensor of grade %s has no GRIT %s: %s"
                          % (g.name, what, g.grit_inexpressible))

    @property
    def placement(self):
        if self.is_int4_groups:
            raise self._no_grit("placement")
        return Placement(*self.placement_words)

    @property
    def descriptor(self):
        """The descriptor of the stored weight (groups along its last axis).

        ValueError for INT4G, which GRIT v1 cannot describe (the message says why).
        """
        if self.is_int4_groups:
            raise self._no_grit("descriptor")
        return Descriptor(self.grade_canonical, self.logical_shape, placement=self.placement_words)

    @property
    def planes(self):
        """``[data, scale0, scale1, aux]``, GRIT's planes as 1-D uint8 tensors. For
        INT4G: ``[codes, scales, empty, empty]`` with the binary64 scales as raw
        bytes. A tiled tensor returns new untiled data and scale0 tensors."""
        stored = self.stored_planes
        if not self.tiled:
            return stored
        return ops.untile_nibbles(stored, self.grade_canonical, self.logical_shape)

    @property
    def stored_planes(self):
        """The planes as held: ``planes``, or for a tiled tensor its tiled data and scale0."""
        return [getattr(self, n) for n in self.PLANE_NAMES]

    @property
    def nbytes_packed(self):
        """Bytes of GRIT's planes (a tiled tensor holds a little padding beyond them)."""
        if self.tiled:
            return sum(self.descriptor.expected_plane_bytes())
        return sum(p.numel() for p in self.stored_planes)

    @property
    def can_tile(self):
        """Whether ``tile()`` takes this weight: on CPU, a grade with a fast CPU decoder
        (MXFP4, NVF4, Q4KS, ggml Q8_0's, GPTQ/AWQ's U4Z, the S4 / S8 groups and their
        siblings; I8S24 when every quad names two distinct positions)."""
        if self.tiled:
            return True
        if self.device.type != "cpu" or self.is_int4_groups:
            return False
        kind = _C.cpu_fast_kind(self.grade._native)
        if kind == "int8_sparse24":  # the C++ tile op's own check
            return _C.cpu_sparse_quads_regular(self.aux_plane.contiguous().numpy())
        return kind != "reference"

    def tile(self):
        """This weight in the CPU tile layout (``self`` if it already is).

        For the grades with a fast CPU decoder (``can_tile``), on CPU; other grades,
        INT4G and other devices are refused (ValueError) with the reason.
        The linear ops give the same bits either way; moving a tiled tensor off the
        CPU untiles it.
        """
        if self.tiled:
            return self
        if self.device.type != "cpu":
            raise ValueError("tile(): the tile layout is a CPU kernel layout; this GritTensor is on "
                             "%s (its kernels there read the planes as they are)" % self.device)
        if self.is_int4_groups:
            raise ValueError("tile(): grade %s (seed 001 int4 groups) has no tile layout; it stays "
                             "as it is" % self.grade.name)
        tiled = ops.tile_nibbles(self.stored_planes, self.grade_canonical, self.logical_shape)
        return self._with_planes(tiled, tiled=True)

    def untile(self):
        """This weight with GRIT's row-major planes (``self`` if not tiled)."""
        if not self.tiled:
            return self
        return self._with_planes(self.planes, tiled=False)

    def dequantize(self):
        """The weight as a plain tensor, by the contract's decode."""
        if self.tiled:  # decoded from the tiles in place: no untiled copy
            w = torch.ops.grit.dequantize_tiled(*self.stored_planes, self.grade_canonical,
                                                list(self.logical_shape), self.logical_dtype)
        else:
            w = torch.ops.grit.dequantize(*self.planes, self.grade_canonical, list(self.logical_shape),
                                          self.logical_dtype)
        return w.t() if self.transposed else w

    def _derive(self, plane_fn=None, **changes):
        """A GritTensor over the stored planes (each through plane_fn) with attributes changed."""
        return self._with_planes([plane_fn(p) if plane_fn else p for p in self.stored_planes],
                                 **changes)

    def _with_planes(self, planes, **changes):
        attrs = [changes.get(n, getattr(self, n)) for n in self.ATTRIBUTE_NAMES]
        out = GritTensor(*planes, *attrs)
        out.grit_name = self.grit_name
        return out

    def __repr__(self):
        grade = self.grade
        if isinstance(grade, Int4Groups):
            return "GritTensor(grade=%s (seed 001 int4 groups, no GRIT descriptor), shape=%s%s, " \
                "dtype=%s, device=%s)" % (grade.name, tuple(self.shape),
                                          ", transposed view" if self.transposed else "",
                                          self.dtype, self.device)
        name = " (%s)" % grade.name if grade.name else ""
        return "GritTensor(grade=%s%s, gid=%s, shape=%s%s, dtype=%s, device=%s, placement=%r%s)" % (
            self.grade_canonical, name, self.descriptor.gid, tuple(self.shape),
            ", transposed view" if self.transposed else "", self.dtype, self.device,
            self.placement, ", CPU tile layout" if self.tiled else "")

    # -- pickle and torch.load ----------------------------------------------------

    def __setstate__(self, state):
        """torch.load and pickle rebuild the wrapper from the file's size, dtype and
        device, then hand its attributes here: they get from_planes' checks (the
        level-1 check against the descriptor) before the tensor exists, so a file
        whose planes disagree with its grade fails the whole load instead of
        handing out a weight that fails at its first use."""
        label = "GritTensor (unpickled)"
        if isinstance(state, tuple) and len(state) == 2:
            state = dict(state[0] or {}, **(state[1] or {}))
        names = self.PLANE_NAMES + self.ATTRIBUTE_NAMES
        if not isinstance(state, dict) or not set(names) <= set(state):
            found = sorted(state) if isinstance(state, dict) else type(state).__name__
            raise ValueError("%s: expected the attributes %s; found %s" % (label, sorted(names), found))
        for name, value in state.items():  # others are torch's own (_is_param ...), set as torch would
            setattr(self, name, value)
        for name in ("transposed", "tiled"):
            if not isinstance(state[name], bool):
                raise TypeError("%s: %s must be a bool; found %s" % (label, name, _describe(state[name])))
        words = state["placement_words"]
        if not isinstance(words, tuple) or not isinstance(state["logical_shape"], tuple):
            raise TypeError("%s: placement_words and logical_shape must be tuples; found %s and %s"
                            % (label, _describe(words), _describe(state["logical_shape"])))
        try:  # a tiled tensor's planes untile here, which checks the tiles' lengths
            planes = self.planes
        except (TypeError, ValueError, RuntimeError) as e:
            raise ValueError("%s: its tiled planes do not untile: %s" % (label, e)) from None
        # placement=words: from_planes refuses any but the grade's canonical one (none for INT4G).
        rebuilt = GritTensor.from_planes(planes, self.grade_canonical, self.logical_shape,
                                         self.logical_dtype, placement=words, name=label)
        rows, cols = rebuilt.logical_shape
        want = ((cols, rows) if self.transposed else (rows, cols), rebuilt.dtype, rebuilt.device)
        have = (tuple(self.shape), self.dtype, self.device)
        if have != want:
            raise ValueError("%s: the wrapper is %s %s on %s but its planes and attributes say %s %s on %s"
                             % ((label,) + have + want))

    # -- the subclass protocol -----------------------------------------------------

    def _stable_hash_for_caching(self):
        # Metadata only, never the bytes: it is all a compiled graph specialises on.
        key = (self.__tensor_flatten__()[1], self.requires_grad,
               [(tuple(p.shape), p.stride(), str(p.dtype), str(p.device)) for p in self.stored_planes])
        return hashlib.blake2b(repr(key).encode(), digest_size=16).hexdigest()

    def __tensor_flatten__(self):
        return list(self.PLANE_NAMES), tuple(getattr(self, n) for n in self.ATTRIBUTE_NAMES)

    @classmethod
    def __tensor_unflatten__(cls, inner_tensors, ctx, outer_size, outer_stride):
        return cls(*(inner_tensors[n] for n in cls.PLANE_NAMES), *ctx)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        impl = _FUNCTION.get(func)
        if impl is not None:
            return impl(func, args, kwargs)
        # No re-wrapping of results (Tensor's default would as_subclass them).
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        impl = _DISPATCH.get(func)
        if impl is None:
            raise unsupported(func)
        return impl(func, args, kwargs or {})


def _dtype_names():
    return ", ".join(str(d) for d in LOGICAL_DTYPES)


def _placement_text(words):
    words = tuple(words)
    if len(words) == 3 and all(isinstance(w, int) and 0 <= w < 2 ** 64 for w in words):
        return repr(Placement(*words))
    return repr(words)


def _describe(p):
    if isinstance(p, torch.Tensor):
        return "%s tensor of shape %s" % (p.dtype, tuple(p.shape))
    return type(p).__name__


# -- moves, copies and views: derived from the declared names ------------------------

@implements([aten.detach.default, aten.alias.default])
def _detach(func, args, kwargs):
    return args[0]._derive()


@implements([aten.clone.default])
def _clone(func, args, kwargs):
    self = args[0]
    if self.transposed and kwargs.get("memory_format") == torch.contiguous_format:
        raise GroupAxisError("contiguous() on the transposed view of a GritTensor %s would store "
                             "W^T row-major with groups along out_features: that is "
                             "requantization, not a copy (GRIT law); call .dequantize() first"
                             % (tuple(self.logical_shape),))
    return self._derive(lambda p: p.clone())


@implements([aten._to_copy.default])
def _to_copy(func, args, kwargs):
    self = args[0]
    dtype = kwargs.get("dtype") or self.dtype
    if dtype not in LOGICAL_DTYPES:
        raise TypeError("GritTensor cannot become %s: its logical dtype is one of %s (the packed "
                        "bytes stay as they are); call .dequantize().to(%s) for a float copy"
                        % (dtype, _dtype_names(), dtype))
    layout = kwargs.get("layout")
    if layout not in (None, torch.strided):
        raise TypeError("GritTensor cannot change layout to %s" % layout)
    device = torch.device(kwargs.get("device") or self.device)
    non_blocking = kwargs.get("non_blocking", False)
    if self.tiled and device.type != "cpu":
        self = self.untile()  # the tile layout is the CPU kernels'; other devices read planes
    # The bytes move untouched; a dtype change only changes what dequantize returns.
    return self._derive(lambda p: p.to(device=device, non_blocking=non_blocking, copy=True),
                        logical_dtype=dtype)


@implements([aten.empty_like.default])
def _empty_like(func, args, kwargs):
    # Uninitialised planes of the same grade, as torch.empty_like gives: the
    # meta-device path (Module.to_empty, then load_state_dict) needs it.
    self = args[0]
    dtype = kwargs.get("dtype") or self.dtype
    if dtype not in LOGICAL_DTYPES:
        raise TypeError("empty_like(GritTensor) keeps a float logical dtype (%s); found %s"
                        % (_dtype_names(), dtype))
    device = kwargs.get("device") or self.device
    return self._derive(lambda p: torch.empty_like(p, device=device), logical_dtype=dtype)


@implements([aten.copy_.default])
def _copy_(func, args, kwargs):
    dst, src = args[0], args[1]
    if not isinstance(src, GritTensor) or not isinstance(dst, GritTensor):
        raise TypeError("copy_ into a GritTensor takes a GritTensor of the same grade; found %s. "
                        "Copying float values in would be quantization: use torch_grit.quantize"
                        % type(src).__name__)
    for attr, what in (("grade_canonical", "grade"), ("logical_shape", "shape"),
                       ("placement_words", "placement"), ("transposed", "transposed")):
        if getattr(dst, attr) != getattr(src, attr):
            raise ValueError("copy_ between GritTensors needs an equal %s: destination has %r, "
                             "source has %r; copying the bytes would reinterpret them (build the "
                             "destination like the source, e.g. GritLinear(..., grade=...))"
                             % (what, getattr(dst, attr), getattr(src, attr)))
    if dst.tiled and not src.tiled:  # the same GRIT bytes, held in the other layout
        src = (src if src.device == dst.device else src.to(dst.device)).tile()
    elif src.tiled and not dst.tiled:
        src = src.untile()
    for d, s in zip(dst.stored_planes, src.stored_planes):
        d.copy_(s)
    return dst


def _marker_transpose(self):
    return self._derive(transposed=not self.transposed)


@implements([aten.t.default])
def _t(func, args, kwargs):
    return _marker_transpose(args[0])


@implements([aten.transpose.int])
def _transpose(func, args, kwargs):
    self, d0, d1 = args[0], args[1] % 2, args[2] % 2
    return self._derive() if d0 == d1 else _marker_transpose(self)


@implements([aten.permute.default])
def _permute(func, args, kwargs):
    dims = [d % 2 for d in args[1]]
    return _marker_transpose(args[0]) if dims == [1, 0] else args[0]._derive()


# -- factory ---------------------------------------------------------------------

def group_size(grade):
    """Weights per row that a grade's groups tile: k0, or k0*k1 with a second level."""
    grade = resolve_grade(grade)
    if isinstance(grade, Int4Groups):
        return grade.group
    k0 = int(grade.fields["k0"])
    k1 = int(grade.fields.get("k1") or 0)
    return k0 * k1 if k1 > 0 else k0


def fit_error(shape, grade, name="weight"):
    """Why ``shape`` cannot be packed to ``grade`` row by row, or None if it can."""
    grade = resolve_grade(grade)
    if len(shape) != 2:
        return ("%s: quantize takes a 2-D weight [out_features, in_features]; found shape %s"
                % (name, tuple(shape)))
    grade = grade_for(grade, shape)
    if isinstance(grade, Int4Groups):
        # Any row length: a row ends in a short group of its own.
        if min(shape) < 1:
            return ("%s: shape %s cannot be packed to %s: it packs non-empty matrices only"
                    % (name, tuple(shape), grade.name))
        return None
    size = group_size(grade)
    if size <= 0 or shape[1] % size:
        return ("%s: shape %s cannot be packed to %s: in_features=%d is not a multiple of its "
                "group size %d (groups run along the last axis and must not straddle rows); "
                "leave this tensor unquantized or pad in_features"
                % (name, tuple(shape), grade.canonical, shape[1], size))
    try:
        Descriptor(grade, shape).expected_plane_bytes()
    except ValueError as e:
        return "%s: shape %s cannot be packed to %s: %s" % (name, tuple(shape), grade.canonical, e)
    return None


def quantize(w, grade, name="weight", *, tile=None):
    """Pack a 2-D float weight ``[out, in]`` to ``grade``; returns a GritTensor.

    On CPU a weight the tile layout holds (``can_tile``: every grade with a fast CPU decoder)
    comes back tiled, the kernels' fast layout (``tile=None``, the default); ``tile=False``
    keeps GRIT's row-major planes in memory, ``tile=True`` insists (ValueError if it cannot).
    Saves, ``state_dict``, ``planes``, ``dequantize`` and the descriptor see GRIT's planes
    either way.

    ``grade`` is a Grade, a canonical string, a reference name ("MXFP4") or
    another named grade ("U4Z_G128", "S8_CHANNEL": torch_grit.contract.grade_names).
    NaN and Inf are legal input: they poison their group as the contract says.
    ``"INT4G<g>"`` (seed 001's int4 row groups) refuses NaN and Inf instead.
    """
    grade = resolve_grade(grade)
    if isinstance(w, GritTensor):
        raise ValueError("%s is already a GritTensor (%s): quantizing a reconstruction again "
                         "compounds the error; start from the original float weight"
                         % (name, w.grade_canonical))
    if not isinstance(w, torch.Tensor):
        raise TypeError("%s: quantize takes a torch.Tensor; found %s" % (name, type(w).__name__))
    if w.dtype not in LOGICAL_DTYPES:
        raise TypeError("%s: quantize takes a %s tensor; found %s"
                        % (name, " / ".join(str(d) for d in LOGICAL_DTYPES), w.dtype))
    reason = fit_error(tuple(w.shape), grade, name)
    if reason:
        raise ValueError(reason)
    grade = grade_for(grade, tuple(w.shape))
    planes = torch.ops.grit.quantize(w.detach().contiguous(), grade.canonical)
    out = GritTensor.from_planes(planes, grade, tuple(w.shape), dtype=w.dtype, name=name)
    if tile or (tile is None and out.can_tile):
        out = out.tile()
    return out


# A pickle names a class by module and name, and torch.load(weights_only=True)
# allows it by that name: keep the name GritTensor has always had in files
# (torch_grit.tensor re-exports it), wherever the class is defined.
GritTensor.__module__ = "torch_grit.tensor"


def safe_globals():
    """What ``torch.load(weights_only=True)`` must allow to rebuild a GritTensor.

    Use ``torch.serialization.add_safe_globals(torch_grit.safe_globals())`` or
    ``with torch.serialization.safe_globals(torch_grit.safe_globals()):``. The
    state of a GritTensor is its planes plus strings, ints, a bool and a
    torch.dtype, all of which the weights-only unpickler already accepts.
    """
    return [GritTensor]

