"""``GritLinear``: ``nn.Linear`` with a packed, frozen GRIT weight."""

import torch
import torch.nn.functional as F
from torch import nn

from .grade import Grade
from .tensor import GritTensor, quantize


class GritLinear(nn.Module):
    """A drop-in for ``nn.Linear`` whose weight is a GritTensor.

    The weight is an ``nn.Parameter(requires_grad=False)`` (as torchao does):
    it moves with ``.to()``, lands in ``state_dict()`` and is skipped by
    optimizers. The bias stays a float Parameter and trains as usual, so do
    adapters added around the layer (gradients flow to the input).

    ``GritLinear(in, out, grade=...)`` (nn.Linear's arguments plus a required
    keyword ``grade``) builds a layer holding the packing of a zero weight,
    ready for ``load_state_dict``; ``GritLinear.from_linear`` packs an
    existing ``nn.Linear``.
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None, *, grade):
        if not isinstance(bias, bool):
            raise TypeError("bias is True or False; found %s" % type(bias).__name__)
        super().__init__()
        dtype = dtype or torch.get_default_dtype()
        zeros = torch.zeros(out_features, in_features, device=device, dtype=dtype)
        # A real packing (not empty planes) so the placeholder is valid bytes under its grade.
        self._set_weight(quantize(zeros, grade))
        self.register_parameter(
            "bias", nn.Parameter(torch.zeros(out_features, device=device, dtype=dtype))
            if bias else None)

    def _set_weight(self, weight):
        self.in_features = weight.logical_shape[1]
        self.out_features = weight.logical_shape[0]
        self.weight = nn.Parameter(weight, requires_grad=False)

    @classmethod
    def from_linear(cls, linear, grade, name="weight"):
        """Pack ``linear``'s weight to ``grade``; the bias is copied as a float Parameter."""
        if not isinstance(linear, nn.Linear):
            raise TypeError("from_linear takes an nn.Linear; found %s" % type(linear).__name__)
        weight = quantize(linear.weight.detach(), Grade.parse(grade), name=name)
        return cls.from_packed(weight, linear.bias)

    @classmethod
    def from_packed(cls, weight, bias=None):
        """A layer around an existing GritTensor; a float ``bias`` is copied (requires_grad kept)."""
        if not isinstance(weight, GritTensor) or weight.transposed:
            raise TypeError("from_packed takes a GritTensor [out_features, in_features]; found %r"
                            % (weight,))
        layer = cls.__new__(cls)
        nn.Module.__init__(layer)
        layer._set_weight(weight)
        layer.register_parameter("bias", None)
        if bias is not None:
            if tuple(bias.shape) != (layer.out_features,):
                raise ValueError("bias of shape %s does not fit out_features=%d"
                                 % (tuple(bias.shape), layer.out_features))
            layer.bias = nn.Parameter(bias.detach().clone(), requires_grad=bias.requires_grad)
        return layer

    @property
    def grade(self):
        return self.weight.grade

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self):
        grade = self.weight.grade
        return "in_features=%d, out_features=%d, bias=%s, grade=%s" % (
            self.in_features, self.out_features, self.bias is not None,
            grade.name or grade.canonical)


__all__ = ["GritLinear"]
