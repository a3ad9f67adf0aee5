"""``GritConfig``: the ``quantization_config`` of a GRIT model folder (quant_method "grit")."""

import re

from transformers.utils.quantization_config import QuantizationConfigMixin

from ...checkpoint.format import VERIFY_LEVELS
from ...nn.linear import check_activations
from ...quantization import auto
from ...quantization.profile import CANDIDATES, DEFAULT_BUDGET_DB

QUANT_METHOD = "grit"
VERSION = "0.1.0"  # torch_grit.__version__ (the root imports this layer, not the reverse)


def version_tuple(text):
    m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)(.*)", str(text))
    if not m:
        raise ValueError("a torch_grit version is MAJOR.MINOR.PATCH; found %r" % (text,))
    return tuple(int(m.group(i)) for i in (1, 2, 3))


class GritConfig(QuantizationConfigMixin):
    """How a model is (or is to be) packed with torch_grit, as transformers sees it.

    In ``from_pretrained(SRC, quantization_config=GritConfig(grade=...))`` it
    quantizes a float model while loading, exactly as ``torch_grit.quantize_``
    would (``grade`` a reference name, a canonical grade string or ``"auto"``
    with ``budget_db`` and ``candidates``; ``modules_to_not_convert``: module
    names or prefixes left exact). Stored in a folder's config.json it says the
    weights are GRIT packed; then ``from_pretrained(DST)`` builds the packed
    model, and ``GritConfig(verify="digest")`` passed to it is a loading
    attribute: every plane's digest is read and checked too (default
    ``"structure"``: level 1, the descriptors against the planes).
    ``torch_grit_version`` is the version that wrote the folder; an older
    torch_grit refuses to load it.

    ``activations``: ``None`` (float activations), ``"s8"`` (every packed
    linear layer packs its input rows to int8 blocks: the s8 activation law,
    ``GritLinear.set_activations_``), ``"bf16"`` (the bf16 activation law, the
    training mode) or ``"float"``. Quantizing while loading, it is
    ``quantize_``'s ``activations``. In a folder's config.json, ``"s8"`` or
    ``"bf16"`` says every packed layer runs that law. Passed to
    ``from_pretrained`` of a GRIT folder it is a loading attribute: ``"s8"``,
    ``"bf16"`` or ``"float"`` sets that mode on every packed layer; ``None`` keeps the
    modes the folder records (its config.json, and per layer its weights'
    metadata).
    """

    def __init__(self, grade=None, budget_db=None, candidates=None, modules_to_not_convert=None,
                 verify="structure", torch_grit_version=VERSION, activations=None, **kwargs):
        self.quant_method = QUANT_METHOD
        self.grade = grade
        self.budget_db = budget_db
        self.candidates = list(candidates) if candidates is not None else None
        self.modules_to_not_convert = list(modules_to_not_convert or [])
        self.verify = verify
        self.torch_grit_version = torch_grit_version
        self.activations = activations
        self.post_init()

    def post_init(self):
        if self.verify not in VERIFY_LEVELS:
            raise ValueError("GritConfig: verify is one of %s; found %r" % (VERIFY_LEVELS, self.verify))
        version_tuple(self.torch_grit_version)
        if self.activations is not None:
            try:
                check_activations(self.activations)
            except ValueError as e:
                raise ValueError("GritConfig: %s" % e) from None
        if self.grade is not None and not isinstance(self.grade, str):
            raise TypeError("GritConfig: grade is a string (a reference name such as \"MXFP4\", a "
                            "canonical grade string or \"auto\"); found %s" % type(self.grade).__name__)
        if self.grade is not None and not auto.is_auto(self.grade) and (
                self.budget_db is not None or self.candidates is not None):
            raise ValueError("GritConfig: budget_db and candidates go with grade=\"auto\"; "
                             "found grade=%r" % self.grade)

    @property
    def is_auto(self):
        return self.grade is not None and auto.is_auto(self.grade)

    def quantize_args(self):
        """(grade, budget_db, candidates) for quantize_."""
        budget = DEFAULT_BUDGET_DB if self.budget_db is None else self.budget_db
        return self.grade, budget, tuple(self.candidates) if self.candidates else CANDIDATES

    def get_loading_attributes(self):
        # activations only when said: None must not erase a folder's recorded mode
        out = {"verify": self.verify}
        if self.activations is not None:
            out["activations"] = self.activations
        return out

    def to_dict(self):
        out = {"quant_method": self.quant_method, "grade": self.grade,
               "modules_to_not_convert": list(self.modules_to_not_convert),
               "torch_grit_version": self.torch_grit_version}
        if self.activations is not None:  # absent: float activations (folders written before it stay the same)
            out["activations"] = self.activations
        if self.is_auto:
            grade, budget, candidates = self.quantize_args()
            out["budget_db"] = budget
            out["candidates"] = list(candidates)
        return out

    def to_diff_dict(self):
        return self.to_dict()


__all__ = ["GritConfig", "QUANT_METHOD", "VERSION", "version_tuple"]
