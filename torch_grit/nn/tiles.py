"""``tile_(model)`` / ``untile_(model)``: a model's GritLinear weights in the CPU tile layout.

The tile layout (``GritTensor.tile``) holds the same bytes with each 16-row
tile's 32-bit words one vector apart, so the CPU kernels read them without
transposing: the same bits, batch 1 MXFP4 1.26-1.86x faster on the machine
the README names. It is a kernel layout, not a GRIT placement: saves,
``state_dict`` and ``dequantize`` see GRIT's planes.
"""

from torch import nn

from .linear import GritLinear


def _apply(model, take, act):
    """act(layer) for every GritLinear of ``model`` whose weight ``take`` accepts; their names."""
    if not isinstance(model, nn.Module):
        raise TypeError("expected an nn.Module; found %s" % type(model).__name__)
    done = []
    for name, layer in model.named_modules():
        if isinstance(layer, GritLinear) and take(layer.packed_weight):
            act(layer)
            done.append(name)
    return done


def tile_(model):
    """Tile every GritLinear weight of ``model`` that can be (``GritTensor.can_tile``: on CPU,
    every grade with a fast CPU decoder), in place. Returns the names of the layers tiled now
    or before; the others (other grades or devices) keep their planes."""
    return _apply(model, lambda w: w.can_tile, GritLinear.tile_)


def untile_(model):
    """Give every tiled GritLinear weight of ``model`` GRIT's planes back, in place.
    Returns the names of the layers untiled."""
    return _apply(model, lambda w: w.tiled, GritLinear.untile_)
