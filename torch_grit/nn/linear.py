"""``GritLinear``: ``nn.Linear`` with a packed, frozen GRIT weight."""

from typing import List

import torch
import torch.nn.functional as F
from torch import nn

try:
    from torch.distributed.tensor import DTensor  # a tensor-parallel weight (parallelize_module)
except ImportError:  # a torch built without torch.distributed: no weight is ever one
    class DTensor:  # noqa: D101
        pass

from .. import ops
from ..contract.grade import resolve_grade
from ..contract.codec import s8_law
from ..contract.int4_groups import Int4Groups
from ..tensor.grit_tensor import GritTensor, quantize
from ..tensor.ordered import ordered_rowwise_linear

ACTIVATION_MODES = ("s8", "bf16")


def check_activations(activations):
    """None (or "float") -> None; "s8" or "bf16" -> itself; anything else: ValueError naming the
    choices."""
    if activations is None or activations == "float":
        return None
    if activations in ACTIVATION_MODES:
        return activations
    raise ValueError("activations is None (float), 'float', 's8' or 'bf16'; found %r" % (activations,))


def check_bf16_grade(name, grade, label=None):
    """ValueError naming ``name`` and its grade when ``grade`` (a Grade or Int4Groups) has no
    bf16 activation law: INT4G, whose planes are not GRIT planes."""
    if isinstance(grade, Int4Groups):
        raise ValueError("%s: activations='bf16' is not available for its grade %s: its planes are not GRIT "
                         "planes; quantize to S4_G%d (signed int4, binary16 scales) instead"
                         % (name, label or grade.name, grade.group))


def check_s8_law(name, canonical, label=None):
    """ValueError naming ``name``, its grade (``label``, else the canonical string) and the reason
    when the grade ``canonical`` has no s8 activation law."""
    try:
        s8_law(canonical)
    except ValueError as e:
        raise ValueError("%s: activations='s8' is not available for its grade %s: %s"
                         % (name, label or canonical, e)) from None


class InputPermError(ValueError):
    """An input permutation that is not one: ``expected`` and ``found`` say how."""

    def __init__(self, message, expected=None, found=None):
        super().__init__(message)
        self.expected, self.found = expected, found


def check_input_perm(perm, in_features, name="input_perm"):
    """``perm`` is an int64 [in_features] tensor holding each of 0..in_features-1 once, or
    InputPermError naming ``name``, what was expected and what was found. A tensor on the meta
    device is checked by dtype and shape only (it has no values yet)."""
    if not isinstance(perm, torch.Tensor):
        raise InputPermError("%s is a %s; an int64 tensor is needed" % (name, type(perm).__name__),
                             "int64 tensor", type(perm).__name__)
    if perm.dtype != torch.int64:
        raise InputPermError("%s is %s; an input permutation is int64" % (name, perm.dtype), "int64",
                             str(perm.dtype).replace("torch.", ""))
    if tuple(perm.shape) != (in_features,):
        raise InputPermError("%s has shape %s; the layer has %d inputs, so [%d] is needed"
                             % (name, list(perm.shape), in_features, in_features), [in_features],
                             list(perm.shape))
    if perm.device.type == "meta":
        return
    p = perm.detach().cpu()
    bad = ((p < 0) | (p >= in_features)).nonzero()
    if len(bad):
        i = int(bad[0])
        raise InputPermError("%s[%d] = %d is not an input index (0..%d)" % (name, i, int(p[i]), in_features - 1),
                             "0..%d" % (in_features - 1), int(p[i]))
    counts = torch.bincount(p, minlength=in_features)
    if not bool((counts == 1).all()):
        twice, missing = int((counts > 1).nonzero()[0]), int((counts == 0).nonzero()[0])
        raise InputPermError("%s is not a permutation: input %d appears %d times and input %d not at all"
                             % (name, twice, int(counts[twice]), missing),
                             "each of 0..%d once" % (in_features - 1),
                             "%d x%d, %d missing" % (twice, int(counts[twice]), missing))


class GritLinear(nn.Linear):
    """An ``nn.Linear`` whose weight is a GritTensor.

    A subclass of ``nn.Linear``, so that what asks ``isinstance(m, nn.Linear)``
    (PEFT's LoRA dispatch, torch's tensor-parallel styles, Hugging Face's
    init and loading code) takes it for the linear layer it is. It never
    allocates nn.Linear's float weight.

    The weight is an ``nn.Parameter(requires_grad=False)`` (as torchao does):
    it moves with ``.to()``, lands in ``state_dict()`` and is skipped by
    optimizers. The bias stays a float Parameter and trains as usual, so do
    adapters added around the layer (gradients flow to the input).

    ``GritLinear(in, out, grade=...)`` (nn.Linear's arguments plus a required
    keyword ``grade``) builds a layer holding the packing of a zero weight,
    ready for ``load_state_dict``; ``GritLinear.from_linear`` packs an
    existing ``nn.Linear``.

    ``activations``: ``None`` (float activations, the default), ``"s8"``:
    every row of ``x`` packed to int8 blocks and multiplied by the s8
    activation law (``torch_grit.ops.packed_linear_s8``, CPU), W4A8 / W8A8,
    the backward straight through (the float weight's transpose); or
    ``"bf16"``: ``x`` and the decoded weight rounded to bfloat16 and summed in
    an AMX tile multiply's order (``torch_grit.ops.packed_linear_bf16``,
    CPU), forward and backward at bfloat16 GEMM speed on a CPU with AMX: the
    training mode for large batches. Set it at construction, with
    ``set_activations_``, ``quantize_(..., activations=...)`` or
    ``torch_grit.load(..., activations=...)``; ``torch_grit.save`` records
    it so a reloaded model runs the same way.

    ``input_perm``: ``None`` (the default) or an int64 [in_features] buffer
    ``p``, a permutation of the inputs: the layer computes
    ``F.linear(x[..., p], W', b)`` where ``W'`` is the packed weight, so that
    ``W'`` can hold a weight whose quantization groups were contiguous only
    after permuting its columns (GPTQ act-order, ``W' = W[:, p]``). The
    product equals ``x @ W^T + b``; ``weight.dequantize()`` is ``W'`` as
    stored, ``unpermuted_weight()`` is ``W``. Only the GPTQ import and the
    loaders set it (``set_input_perm_``); ``from_linear`` and ``quantize_``
    never do. ``state_dict`` and ``torch_grit.save`` hold it as the int64
    tensor ``<layer>.input_perm``.
    """

    activations = None  # the class default: float activations

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None, *, grade,
                 activations=None):
        if not isinstance(bias, bool):
            raise TypeError("bias is True or False; found %s" % type(bias).__name__)
        nn.Module.__init__(self)  # not nn.Linear.__init__: it would allocate a float weight
        dtype = dtype or torch.get_default_dtype()
        zeros = torch.zeros(out_features, in_features, device=device, dtype=dtype)
        # A real packing (not empty planes) so the placeholder is valid bytes under its grade.
        self._set_weight(quantize(zeros, grade))
        self.register_parameter(
            "bias", nn.Parameter(torch.zeros(out_features, device=device, dtype=dtype))
            if bias else None)
        self.register_buffer("input_perm", None)
        self.set_activations_(activations)

    def set_activations_(self, activations, name=None):
        """Choose how ``x`` enters the product: ``None``/``"float"``, ``"s8"`` or ``"bf16"``;
        returns self.

        ``"s8"`` is refused (ValueError naming the layer, its grade and the
        reason) for a grade without an s8 law, ``"bf16"`` for INT4G; either
        untiles a tiled weight (their kernels read GRIT's row-major planes).
        """
        mode = check_activations(activations)
        if mode is not None:
            w = self.packed_weight
            label = name or w.grit_name or "GritLinear"
            if w is not self.weight:
                raise ValueError("%s: activations=%r runs on a whole packed weight, and this layer's is "
                                 "a tensor-parallel shard (DTensor), which runs float activations only"
                                 % (label, mode))
            if mode == "s8":
                check_s8_law(label, w.grade_canonical, w.grade.name)
            else:
                check_bf16_grade(label, w.grade)
            if self.weight.tiled:
                self.untile_()
        self.activations = mode
        return self

    def set_input_perm_(self, perm, name=None):
        """Set (a checked int64 permutation of the inputs, moved to the weight's device) or
        clear (``None``) the input permutation; returns self. InputPermError (a ValueError)
        naming the layer when ``perm`` is not a permutation of 0..in_features-1."""
        label = "%s.input_perm" % (name or self.packed_weight.grit_name or "GritLinear")
        if perm is None:
            self.input_perm = None
            return self
        if isinstance(self.weight, DTensor):
            raise ValueError("%s: an input permutation runs on a whole packed weight, and this layer's is "
                             "a tensor-parallel shard (DTensor); tensor parallelism does not take layers "
                             "with an input permutation (GPTQ act-order)" % label)
        check_input_perm(perm, self.in_features, label)
        self.input_perm = perm.detach().to(self.weight.device)
        return self

    def unpermuted_weight(self, dtype=None):
        """The float weight W this layer multiplies ``x`` by (``x @ W^T``), [out, in].

        ``weight.dequantize()`` with its columns scattered back through
        ``input_perm`` (``W[:, p] = W'``); the dequantized weight itself when
        the layer has no permutation. ``dtype``: the weight's logical dtype
        by default.
        """
        w = self.packed_weight.dequantize()
        if dtype is not None:
            w = w.to(dtype)
        perm = getattr(self, "input_perm", None)
        if perm is None:
            return w
        out = torch.empty_like(w)
        out[:, perm.to(w.device)] = w
        return out

    def _set_weight(self, weight):
        self.in_features = weight.logical_shape[1]
        self.out_features = weight.logical_shape[0]
        self.weight = nn.Parameter(weight, requires_grad=False)

    @classmethod
    def from_linear(cls, linear, grade, name="weight", activations=None):
        """Pack ``linear``'s weight to ``grade``; the bias is copied as a float Parameter."""
        if not isinstance(linear, nn.Linear) or isinstance(linear, GritLinear):
            raise TypeError("from_linear takes a float nn.Linear; found %s" % type(linear).__name__)
        check_activations(activations)
        weight = quantize(linear.weight.detach(), resolve_grade(grade), name=name)
        return cls.from_packed(weight, linear.bias, activations=activations)

    @classmethod
    def from_packed(cls, weight, bias=None, activations=None, input_perm=None):
        """A layer around an existing GritTensor; a float ``bias`` is copied (requires_grad kept);
        ``input_perm``: the permutation of the inputs the packed weight's columns follow (checked,
        see the class doc)."""
        if not isinstance(weight, GritTensor) or weight.transposed:
            raise TypeError("from_packed takes a GritTensor [out_features, in_features]; found %r"
                            % (weight,))
        layer = cls.__new__(cls)
        nn.Module.__init__(layer)
        layer._set_weight(weight)
        layer.register_parameter("bias", None)
        layer.register_buffer("input_perm", None)
        if bias is not None:
            if tuple(bias.shape) != (layer.out_features,):
                raise ValueError("bias of shape %s does not fit out_features=%d"
                                 % (tuple(bias.shape), layer.out_features))
            layer.bias = nn.Parameter(bias.detach().clone(), requires_grad=bias.requires_grad)
        layer.activations = None
        layer.set_input_perm_(input_perm)
        return layer.set_activations_(activations)._tile_by_default()

    def _tile_by_default(self):
        """The CPU tile layout where it applies (a whole weight on CPU that ``can_tile``, float
        activations): the layer's default; ``untile_()`` undoes it. Returns self."""
        w = self.weight
        if isinstance(w, GritTensor) and not w.tiled and self.activations is None and w.can_tile:
            self.weight = nn.Parameter(w.tile(), requires_grad=False)
        return self

    @property
    def packed_weight(self):
        """The GritTensor this layer multiplies by: the weight, or under tensor parallelism
        (``parallelize_module``: the weight is a DTensor) this rank's shard of it."""
        w = self.weight
        return w.to_local() if isinstance(w, DTensor) else w

    @property
    def grade(self):
        return self.packed_weight.grade

    def reset_parameters(self):
        """Refused: the packed weight is data, not an initialization (nn.Linear's hook)."""
        raise TypeError("GritLinear holds a packed %s weight: it is loaded or quantized, never "
                        "re-initialized" % (self.grade.name or self.packed_weight.grade_canonical))

    def tile_(self):
        """Hold the weight in the CPU tile layout (``GritTensor.tile``), in place; returns self.

        The same bits from ``forward``, faster at batch 1 on CPU; ``state_dict``
        and every save still see GRIT's planes. The weight Parameter is replaced
        (it is frozen, so no optimizer state refers to it).
        """
        if getattr(self, "activations", None) is not None:
            raise ValueError("tile_(): this layer runs activations=%r, whose kernels read GRIT's "
                             "row-major planes; set_activations_(None) first" % self.activations)
        self._not_sharded("tile_()")
        self.weight = nn.Parameter(self.weight.tile(), requires_grad=False)
        return self

    def untile_(self):
        """Back to GRIT's row-major planes, in place; returns self."""
        self._not_sharded("untile_()")
        self.weight = nn.Parameter(self.weight.untile(), requires_grad=False)
        return self

    def _not_sharded(self, what):
        if isinstance(self.weight, DTensor):
            raise ValueError("%s: this layer's weight is a tensor-parallel shard (DTensor); choose the "
                             "layout before parallelize_module (each shard keeps it)" % what)

    def forward(self, x):
        # getattr: a layer pickled before input_perm existed has no such buffer
        if getattr(self, "input_perm", None) is not None:
            if isinstance(self.weight, DTensor):
                raise ValueError("this layer has an input permutation (input_perm, GPTQ act-order) and its "
                                 "weight is a tensor-parallel shard (DTensor): tensor parallelism does not "
                                 "take such layers; run it whole")
            x = x.index_select(-1, self.input_perm)
        if isinstance(self.weight, DTensor):
            if self.activations is not None:
                raise ValueError("activations=%r runs on a whole packed weight, and this layer's is a "
                                 "tensor-parallel shard (DTensor): a shard runs float activations only. Call "
                                 "set_activations_(None) on the layer (before or after parallelize_module)"
                                 % self.activations)
            if getattr(self, "grit_row_reduction", None) == "ordered":  # OrderedRowwiseParallel
                return ordered_rowwise_linear(x, self.weight, self.bias,
                                              "GritLinear %r" % (self.packed_weight.grit_name or ""))
            # DTensor's matmul would expand a non-contiguous 3-D x's weight operand (aten.expand),
            # which a packed weight refuses: hand it a contiguous x.
            return F.linear(x.contiguous(), self.weight, self.bias)
        if self.activations is not None and x.device.type not in ("cpu", "meta"):
            raise ValueError("activations=%r runs on CPU only, and this layer's input is on %s: call "
                             "set_activations_(None) on the layer to run the float path there"
                             % (self.activations, x.device))
        if self.activations == "s8":
            w = self.weight
            return torch.ops.grit.packed_linear_s8(x, *w.stored_planes, w.grade_canonical,
                                                   list(w.logical_shape), self.bias)
        if self.activations == "bf16":
            w = self.weight
            return torch.ops.grit.packed_linear_bf16(x, *w.stored_planes, w.grade_canonical,
                                                     list(w.logical_shape), self.bias)
        return F.linear(x, self.weight, self.bias)

    def __prepare_scriptable__(self):
        # TorchScript cannot see inside a tensor subclass: torch.jit.script
        # calls this hook and compiles the twin instead (sharing planes and bias).
        if isinstance(self.weight, DTensor):
            raise TypeError("torch.jit.script: this layer's weight is a tensor-parallel shard (DTensor), "
                            "which TorchScript cannot hold; script the model before parallelize_module")
        return ScriptableGritLinear(self)

    def extra_repr(self):
        grade = self.grade
        text = "in_features=%d, out_features=%d, bias=%s, grade=%s" % (
            self.in_features, self.out_features, self.bias is not None,
            grade.name or grade.canonical)
        if self.activations is not None:
            text += ", activations=%s" % self.activations
        if getattr(self, "input_perm", None) is not None:
            text += ", input_perm=[%d]" % self.input_perm.numel()
        if isinstance(self.weight, DTensor):
            text += ", tensor-parallel %s" % (self.weight.placements,)
            if getattr(self, "grit_row_reduction", None) == "ordered":
                text += ", ordered reduction"
        return text


class ScriptableGritLinear(nn.Module):
    """GritLinear as TorchScript compiles it: the same layer, no tensor subclass.

    ``torch.jit.script`` builds one for every GritLinear it meets (through
    ``GritLinear.__prepare_scriptable__``). Its planes are plain uint8
    buffers, the grade its canonical string and the shape an int list, so the
    forward is a ``grit::packed_linear`` call that a LibTorch program without
    Python runs once the grit ops library is loaded. It shares the planes and
    the bias Parameter with the GritLinear it was made from.

    TorchScript's protocol also swaps the twin into the scripted model's
    parent modules in place. The twin keeps GritLinear's outputs and its
    state_dict (``weight`` as a GritTensor, ``bias``), so saving or loading
    that model afterwards works as before.
    """

    __jit_unused_properties__ = ["weight"]

    in_features: int
    out_features: int
    grade: str
    shape: List[int]
    tiled: bool
    s8: bool
    bf16: bool
    permuted: bool

    def __init__(self, layer):
        if not isinstance(layer, GritLinear):
            raise TypeError("ScriptableGritLinear takes a GritLinear; found %s"
                            % type(layer).__name__)
        super().__init__()
        w = layer.weight
        self.in_features = layer.in_features
        self.out_features = layer.out_features
        self.grade = w.grade_canonical
        self.shape = [int(s) for s in w.logical_shape]
        self.tiled = w.tiled  # data and scale0 in the CPU tile layout
        self.s8 = layer.activations == "s8"  # the s8 activation law
        self.bf16 = layer.activations == "bf16"  # the bf16 activation law
        self._logical_dtype = w.logical_dtype
        # Not persistent: the state_dict holds them as one GritTensor ``weight``.
        for name, plane in zip(GritTensor.PLANE_NAMES, w.stored_planes):
            self.register_buffer(name, plane, persistent=False)
        self.register_parameter("bias", layer.bias)
        # The input permutation (GritLinear.input_perm): shared, and in the state_dict as there.
        self.permuted = getattr(layer, "input_perm", None) is not None
        if self.permuted:
            self.register_buffer("input_perm", layer.input_perm)
        else:
            self.register_buffer("input_perm", torch.zeros(0, dtype=torch.int64, device=w.device),
                                 persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.permuted:
            x = x.index_select(-1, self.input_perm)
        if self.s8:
            return torch.ops.grit.packed_linear_s8(x, self.data_plane, self.scale0_plane,
                                                   self.scale1_plane, self.aux_plane, self.grade,
                                                   self.shape, self.bias)
        if self.bf16:
            return torch.ops.grit.packed_linear_bf16(x, self.data_plane, self.scale0_plane,
                                                     self.scale1_plane, self.aux_plane, self.grade,
                                                     self.shape, self.bias)
        if self.tiled:
            return torch.ops.grit.packed_linear_tiled(x, self.data_plane, self.scale0_plane,
                                                      self.scale1_plane, self.aux_plane,
                                                      self.grade, self.shape, self.bias)
        return torch.ops.grit.packed_linear(x, self.data_plane, self.scale0_plane,
                                            self.scale1_plane, self.aux_plane, self.grade,
                                            self.shape, self.bias)

    @property
    def weight(self):
        """The planes as a GritTensor (checked against grade and shape; GRIT's
        row-major planes, untiled copies if this layer holds tiles)."""
        planes = [getattr(self, n) for n in GritTensor.PLANE_NAMES]
        if self.tiled:
            planes = ops.untile_nibbles(planes, self.grade, self.shape)
        return GritTensor.from_planes(planes, self.grade, self.shape, dtype=self._logical_dtype)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        destination[prefix + "weight"] = self.weight
        super()._save_to_state_dict(destination, prefix, keep_vars)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        key = prefix + "weight"
        src = state_dict.get(key)
        if src is None:
            missing_keys.append(key)
        elif (not isinstance(src, GritTensor) or src.transposed or src.grade_canonical != self.grade
              or list(src.logical_shape) != self.shape):
            found = (src.grade_canonical + " " + str(tuple(src.logical_shape))
                     if isinstance(src, GritTensor) else type(src).__name__)
            error_msgs.append(
                "%s: expected a GritTensor of grade %s and shape %s; found %s (copying other "
                "bytes in would reinterpret them)" % (key, self.grade, tuple(self.shape), found))
        else:
            src = src.tile() if self.tiled else src.untile()
            with torch.no_grad():
                for name, plane in zip(GritTensor.PLANE_NAMES, src.stored_planes):
                    getattr(self, name).copy_(plane)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)
        if key in unexpected_keys:
            unexpected_keys.remove(key)

    def extra_repr(self):
        grade = resolve_grade(self.grade)
        text = "in_features=%d, out_features=%d, bias=%s, grade=%s" % (
            self.in_features, self.out_features, self.bias is not None,
            grade.name or grade.canonical)
        if self.s8:
            text += ", activations=s8"
        if self.bf16:
            text += ", activations=bf16"
        if self.permuted:
            text += ", input_perm=[%d]" % self.input_perm.numel()
        return text


__all__ = ["GritLinear", "ScriptableGritLinear"]
