"""One tensor as the scan saw it, and the helpers that name its role."""

import re

from .. import _C

_LAYER_KEYS = {"layers", "layer", "blk", "h", "block", "blocks"}


def role_of(name):
    """The logical role: the name with its layer prefix removed.

    ``model.layers.31.mlp.down_proj.weight`` and ``blk.7.ffn_down.weight``
    become ``mlp.down_proj.weight`` and ``ffn_down.weight``: the same operand
    in every layer, which is where two grades mean a half-done conversion.
    """
    parts = name.split(".")
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] in _LAYER_KEYS and parts[i + 1].isdigit():
            rest = parts[i + 2:]
            return ".".join(p for p in rest if not p.isdigit()) or name
    return ".".join(p for p in parts if not p.isdigit()) or name


def fingerprint_gid(desc, shape):
    """A gid for a descriptor whose grade_id this build cannot spell.

    GRIT hashes the canonical grade string into the gid; without it, the
    64-bit grade_id stands in, so two files carrying the same unknown grade
    still compare equal. Comparable only with other fingerprints.
    """
    token = "grit1!unregistered:0x%016x" % desc.grade_id
    return _C.crockford32(_C.gid(desc._d, token, [int(d) for d in shape]))


class TensorRecord:
    __slots__ = ("path", "name", "container", "shape", "dtype", "nbytes", "source", "family", "grade",
                 "label", "expressible", "desc", "gid", "gid_basis", "quantised", "logical_shape", "reason", "logical_name")

    def __init__(self, path, name, container, shape, dtype, nbytes):
        self.path, self.name, self.container = path, name, container
        self.shape, self.dtype, self.nbytes = tuple(shape), dtype, nbytes
        self.source = None          # "declared" | "inferred" | None
        self.family = None          # "gguf/Q8_0", "gptq", "compressed-tensors/pack-quantized", ...
        self.grade = None           # canonical grade string when one names the contract
        self.label = None           # what grade drift clusters on (grade, or a family label)
        self.expressible = None     # False: recognised, but v1 cannot name these bytes
        self.desc = None            # torch_grit.Descriptor (declared, or inferred over the logical shape)
        self.gid = None
        self.gid_basis = None
        self.quantised = False
        self.logical_shape = None
        self.reason = None          # why not expressible
        self.logical_name = None    # the weight a packed family entry stands for (prefix + ".weight")

    @property
    def role(self):
        return role_of(self.logical_name or self.name)

    def to_json(self):
        d = self.desc
        return {
            "path": self.path, "name": self.name, "container": self.container,
            "shape": list(self.shape), "dtype": self.dtype, "nbytes": self.nbytes,
            "source": self.source, "family": self.family, "grade": self.grade, "label": self.label,
            "expressible": self.expressible, "reason": self.reason,
            "logical_shape": list(self.logical_shape) if self.logical_shape is not None else None,
            "desc_hex": d.to_bytes().hex() if d is not None else None,
            "placement": [_C.placement_name(w) for w in d.placement] if d is not None else None,
            "gid": self.gid, "gid_basis": self.gid_basis, "role": self.role, "quantised": self.quantised,
        }


def leaf_split(name):
    """``("model.layers.0.mlp.down_proj", "qweight")``."""
    if "." not in name:
        return "", name
    return tuple(name.rsplit(".", 1))


def target_matches(target, prefix):
    """A compressed-tensors / transformers target or ignore entry against a module name."""
    if target.startswith("re:"):
        try:
            return re.match(target[3:], prefix) is not None
        except re.error:
            return False
    return prefix == target or prefix.endswith("." + target)


def is_class_target(target):
    """``Linear``, ``Embedding``: a module class, which header names cannot show."""
    return not target.startswith("re:") and "." not in target and target[:1].isupper()
