"""On the same fixtures, our findings agree with grit-datatype 1.1.0's scanner
(grit.scan) class for class, except where this table names the difference.

Each entry: fixture -> (classes only we report, classes only the oracle reports, why).
A class is (finding class, severity); the oracle's ``kind`` names are ours.
"""

import pytest

from grit.scan import scan_paths as oracle_scan
from torch_grit.scan import scan_paths

from conftest import BUILDERS

_V = "violation"
_D = "disagreement"
_W = "warning"
_DENSE_ZP = ("we report GPTQ/AWQ's dense-nibble zero-point planes as inferred_inexpressible (GRIT's own "
             "coverage note); the oracle infers the grade and stops there")
DIFFERENCES = {
    "gguf_declared": (set(), {("unknown_grade", _W)},
                      "we know the grades the ggml table names (Q8_0's); the oracle knows the six reference grades"),
    "gguf_blocking": ({("blocking", _V)}, {("inferred", _W), ("truncated", _V)},
                      "ggml needs each row (ne[0]) to be whole blocks; the oracle checks the element count only, "
                      "infers the tensor and then finds its bytes short"),
    "ours_wrong_group": ({("size", _V)}, set(),
                         "the oracle reads a descriptor only from an entry of the same name; torch_grit.save keys it "
                         "by the logical name with planes as W.grit.* entries, which the oracle does not see"),
    "ours_dense_sparse": ({("size", _V)}, set(), "as ours_wrong_group"),
    "ours_forgotten_padding": ({("size", _V)}, set(), "as ours_wrong_group"),
    "gptq_v1": ({("inferred_inexpressible", _W)}, set(), _DENSE_ZP),
    "awq": ({("inferred_inexpressible", _W)}, set(), _DENSE_ZP),
    "gptq_act_order": ({("inferred_inexpressible", _W)}, set(), _DENSE_ZP + "; and act-order (desc_act)"),
    "gptq_act_order_hidden": ({("inferred_inexpressible", _W)}, set(), _DENSE_ZP),
    "gptq_v2": ({("inferred_inexpressible", _W), ("zp_convention_ambiguous", _W)},
                {("zp_convention_ambiguous", _D)},
                "we read checkpoint_format=gptq_v2 (zpc=asis, stated in config.json: a warning); the oracle "
                "assumes v1 and calls the convention undeclared. " + _DENSE_ZP),
    "gptq_group_mismatch": ({("inferred_inexpressible", _W), ("group_size_mismatch", _V)}, set(),
                            "we compare config.json's group_size with the scale planes; " + _DENSE_ZP),
    "gptq_bad_qzeros": ({("family_layout", _V)}, {("format_inferred", _W), ("zp_convention_ambiguous", _D)},
                        "we check every module against the GPTQ shape equations and infer nothing from a module "
                        "that breaks them; the oracle infers from the first module it can read"),
    "ct_w4a16": ({("inferred_inexpressible", _W)}, {("partial_quantisation", _W)},
                 "pack-quantized stores offset-binary codes (q + 8), which v1 cannot name; and we honour "
                 "config.json's ignore list (lm_head), which the oracle does not read"),
    "ct_nvfp4": ({("inferred_inexpressible", _W)}, {("partial_quantisation", _W)},
                 "the NVFP4 global scale is stored as a divisor; and the ignore list, as ct_w4a16"),
    "ct_mxfp4": (set(), {("partial_quantisation", _W)}, "the ignore list, as ct_w4a16"),
    "ct_drift": ({("grade_drift", _D), ("grade_drift", _W)}, {("partial_quantisation", _W)},
                 "we infer each module by its own config group (the oracle takes one group size for the "
                 "file, so it cannot see the drift); and the ignore list"),
    "ct_w8a8": ({("format_inferred", _W)}, set(), "the oracle reads only weight_packed compressed-tensors"),
    "ct_fp8": ({("format_inferred", _W), ("inferred_inexpressible", _W)}, set(),
               "the oracle reads only weight_packed compressed-tensors; per-tensor FP8 scales are inexpressible"),
    "ct_fnuz": ({("format_inferred", _W), ("inferred_inexpressible", _W)}, set(),
                "the oracle reads only weight_packed compressed-tensors; FNUZ FP8 is inexpressible"),
    "ct_marlin24": ({("format_inferred", _W), ("inferred_inexpressible", _W)}, set(),
                    "the oracle reads only weight_packed compressed-tensors and does not know marlin-24's "
                    "scale_packed/meta layout; we name it inexpressible"),
    "ct_partial": ({("format_inferred", _W), ("partial_quantisation", _W)}, set(),
                   "the oracle reads only weight_packed compressed-tensors"),
    "bnb_nf4": ({("inferred_inexpressible", _W)}, set(), "the oracle does not recognise bitsandbytes NF4"),
}


def _classes(findings, key):
    return {(getattr(f, key), f.severity) for f in findings}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_findings_agree_with_the_oracle(fx, name):
    path = fx[name]
    ours, theirs = scan_paths([path]), oracle_scan([path])
    ours_c, theirs_c = _classes(ours.findings, "cls"), _classes(theirs.findings, "kind")
    only_ours, only_theirs, why = DIFFERENCES.get(name, (set(), set(), "no difference"))
    assert (ours_c - theirs_c, theirs_c - ours_c) == (only_ours, only_theirs), why
    if not only_ours and not only_theirs:
        assert ours.exit_code() == theirs.exit_code()
        assert ours.exit_code("simple") == theirs.exit_code("simple")


def test_gguf_per_tensor_findings_agree(fx):
    # Where both read the same tensors, they name the same ones.
    for name in ("gguf_file_type", "gguf_drift", "gguf_inexpressible", "gguf_inferred", "gguf_truncated"):
        path = fx[name]
        ours = {(f.cls, f.tensor) for f in scan_paths([path]).findings if f.tensor and f.cls != "grade_drift"}
        theirs = {(f.kind, f.where.split("::", 1)[1]) for f in oracle_scan([path]).findings if "::" in f.where
                  and f.kind != "grade_drift"}
        assert ours == theirs, name
