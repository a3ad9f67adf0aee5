"""Each finding class fires on its fixture; clean fixtures give exit 0 and no finding."""

import pytest

from torch_grit.scan import FINDING_CLASSES, scan_paths

from conftest import CLEAN


def classes(report):
    return {(f.cls, f.severity) for f in report.findings}


@pytest.mark.parametrize("name", CLEAN)
def test_clean_fixtures_have_no_finding(fx, name):
    for deep in (False, True):
        r = scan_paths([fx[name]], deep=deep)
        assert r.findings == [] and r.exit_code() == 0 and r.exit_code("simple") == 0, r.findings
        assert r.parsed_files == 1 and r.records


@pytest.mark.parametrize("name", ["ours_MXFP4", "ours_NVF4", "ours_Q4KS", "ours_I8S24", "gguf_declared"])
def test_declared_descriptors_are_read_and_judged(fx, name):
    r = scan_paths([fx[name]], deep=True)
    declared = [x for x in r.records if x.source == "declared"]
    assert declared and all(x.gid and x.grade and x.expressible for x in declared)
    assert r.files[0]["deep_bytes"] > 0   # --deep streamed the planes through the level-2 check


# (fixture, class, severity, what the finding must say)
FIRES = [
    ("gguf_wrong_group", "size", "violation", "requires"),                   # wrong group size (declared k0=64)
    ("ours_wrong_group", "size", "violation", "scale0"),                     # wrong group size (our checkpoint)
    ("ours_forgotten_padding", "size", "violation", "aux"),                  # zp plane packed, CT_PAD8 forgotten
    ("ours_dense_sparse", "size", "violation", "data"),                      # 2:4 planes declared dense
    ("ours_truncated", "truncated", "violation", "ends early"),
    ("gguf_truncated", "truncated", "violation", "ends early"),
    ("gguf_blocking", "blocking", "violation", "not a multiple"),
    ("gptq_bad_qzeros", "family_layout", "violation", "qzeros"),
    ("gptq_group_mismatch", "group_size_mismatch", "violation", "group_size 64"),
    ("gguf_file_type", "file_type_mismatch", "disagreement", "MOSTLY_Q4_0"),
    ("gptq_v1", "zp_convention_ambiguous", "disagreement", "zpc=minus1"),
    ("awq", "zp_convention_ambiguous", "disagreement", "zpc=asis"),
    ("gptq_v2", "zp_convention_ambiguous", "warning", "checkpoint_format"),
    ("gguf_drift", "grade_drift", "disagreement", "ffn_down.weight"),
    ("ct_drift", "grade_drift", "disagreement", "mlp.down_proj.weight"),
    ("gguf_inferred", "inferred", "warning", "Q4_K"),
    ("gguf_inexpressible", "inferred_inexpressible", "warning", "codebook"),
    ("gguf_inexpressible", "inferred_inexpressible", "warning", "constant 8"),
    ("gptq_v1", "inferred_inexpressible", "warning", "dense 4-bit"),
    ("awq", "inferred_inexpressible", "warning", "(0, 2, 4, 6, 1, 3, 5, 7)"),
    ("gptq_act_order", "inferred_inexpressible", "warning", "act-order"),
    ("ct_w4a16", "inferred_inexpressible", "warning", "offset binary"),
    ("ct_nvfp4", "inferred_inexpressible", "warning", "divisor"),
    ("ct_fp8", "inferred_inexpressible", "warning", "whole tensor"),
    ("ct_fnuz", "inferred_inexpressible", "warning", "FNUZ"),
    ("ct_marlin24", "inferred_inexpressible", "warning", "Marlin's kernel layout"),
    ("bnb_nf4", "inferred_inexpressible", "warning", "NF4 is a codebook"),
    ("ct_w4a16", "format_inferred", "warning", "compressed-tensors"),
    ("gptq_v1", "format_inferred", "warning", "GPTQ"),
    ("gguf_wrong_group", "unknown_grade", "warning", "grade_id"),
    ("ct_partial", "partial_quantisation", "warning", "layers.1.mlp.down_proj.weight"),
]


@pytest.mark.parametrize("name,cls,severity,text", FIRES)
def test_finding_fires(fx, name, cls, severity, text):
    r = scan_paths([fx[name]])
    hits = [f for f in r.findings if f.cls == cls and f.severity == severity]
    assert hits, (cls, severity, sorted(classes(r)))
    assert any(text in f.message for f in hits), [f.message for f in hits]
    assert r.exit_code() == {"violation": 1, "disagreement": 2, "warning": 3}[
        min((f.severity for f in r.findings), key=("violation", "disagreement", "warning").index)]


def test_every_finding_class_is_exercised():
    # The classes without a fixture here are covered elsewhere: cross-file (gid_mismatch), --deep
    # (check_level2), multi-input (unparseable), and the ones listed with the reason they have none.
    elsewhere = {"gid_mismatch", "check_level2", "unparseable", "bad_descriptor", "check", "assumed",
                 "escape_hatch_exposure", "trailing_bytes", "file_type_unknown", "unknown_ggml_type"}
    assert set(FINDING_CLASSES) == {c for _, c, _, _ in FIRES} | elsewhere


def test_inferred_contracts_are_labelled_inferred(fx):
    r = scan_paths([fx["gguf_inferred"], fx["ct_mxfp4"], fx["ct_w8a8"]])
    quantised = [x for x in r.records if x.quantised]
    assert quantised and all(x.source == "inferred" for x in quantised)
    mx = [x for x in r.records if x.family == "compressed-tensors/mxfp4-pack-quantized"]
    assert mx and all(x.grade == "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2floormaxabs)" and x.gid for x in mx)
    w8 = [x for x in r.records if x.family == "compressed-tensors/int-quantized"]
    assert w8 and all(x.grade == "grit1(e=s8,k0=256,s0=binary32,esr=ratiomaxabs)" for x in w8)


def test_inexpressible_is_never_given_a_descriptor_of_its_bytes(fx):
    r = scan_paths([fx["gguf_inexpressible"], fx["ct_nvfp4"], fx["bnb_nf4"]])
    inexpressible = [x for x in r.records if x.expressible is False]
    assert inexpressible and all(x.desc is None and x.gid is None and x.reason for x in inexpressible)


def test_gid_mismatch_across_files_with_explain_diff(fx):
    r = scan_paths([fx["gptq_v1"], fx["awq"]])
    hits = r.by_class("gid_mismatch")
    assert len(hits) == 4 and all(f.severity == "disagreement" for f in hits)
    diff = hits[0].data["explain"]
    assert "flags" in diff and "ZP_MINUS1" in diff and "grade_id" in diff
    assert "k0" not in diff   # same group size: the convention is the whole difference


def test_gid_mismatch_between_two_of_our_checkpoints(fx):
    r = scan_paths([fx["ours_MXFP4"], fx["ours_NVF4"]])
    hits = r.by_class("gid_mismatch")
    assert hits and all("elem" not in f.data["explain"] or "scale0" in f.data["explain"] for f in hits)
    assert r.exit_code() == 2


def test_deep_reads_act_order_from_g_idx(fx):
    shallow = scan_paths([fx["gptq_act_order_hidden"]])
    assert not any("act-order" in f.message for f in shallow.findings)   # config says desc_act=false
    deep = scan_paths([fx["gptq_act_order_hidden"]], deep=True)
    hits = [f for f in deep.findings if f.cls == "inferred_inexpressible" and f.data.get("act_order")]
    assert len(hits) == 4 and all(f.data["source"] == "g_idx bytes" for f in hits)


def test_deep_zero_point_evidence(fx):
    r = scan_paths([fx["gptq_v1"]], deep=True)
    (f,) = r.by_class("zp_convention_ambiguous")
    hist = f.data["deep_evidence"]["code_histogram"]
    assert len(hist) == 16 and sum(hist) == 4 * 2 * 128   # 4 modules x 2 groups x 128 outputs


def test_deep_level2_refuses_a_bad_digest(fx, tmp_path):
    import json
    import writers as W

    def edit(meta):
        ours = json.loads(meta["torch_grit"])
        name = sorted(ours["tensors"])[0]
        ours["tensors"][name]["digest"] = "1" * 32
        meta["torch_grit"] = json.dumps(ours)
        return meta
    bad = W.rewrite(fx["ours_MXFP4"], edit_meta=edit, out=tmp_path / "bad_digest.safetensors")
    assert scan_paths([bad]).findings == []                 # level 1 reads no plane byte
    hits = scan_paths([bad], deep=True).by_class("check_level2")
    assert len(hits) == 1 and hits[0].data["status"] == "DigestMismatch"


def test_declared_form_errors(fx, tmp_path):
    import json
    import writers as W
    import torch_grit

    def edit(meta):
        d = json.loads(meta["__grit__"])
        first, last = sorted(d)[0], sorted(d)[-1]
        d[first] = "zz"                                   # not hex
        d["no.such.tensor"] = d[last]                     # names nothing
        desc = torch_grit.Descriptor.from_bytes(bytes.fromhex(d[last]))
        d[last] = desc.replace(note=0x301).to_bytes().hex()   # NOTE_ASSUMED, producer tag 3
        meta["__grit__"] = json.dumps(d)
        return meta
    path = W.rewrite(fx["ours_MXFP4"], edit_meta=edit, out=tmp_path / "errors.safetensors")
    r = scan_paths([path])
    bad = r.by_class("bad_descriptor")
    assert {f.tensor for f in bad} >= {"no.such.tensor"} and any("not hex" in f.message for f in bad)
    assert r.by_class("assumed") and r.by_class("escape_hatch_exposure")[0].data["producer_tag"] == 3


def test_declared_grade_disagreeing_with_its_record_is_a_check_violation(fx, tmp_path):
    import writers as W
    from conftest import TARGET

    path = W.rewrite(fx["ours_MXFP4"], edit_meta=lambda m: W.edit_grit(m, TARGET, grade="NVF4"),
                     out=tmp_path / "grade.safetensors")
    (f,) = scan_paths([path]).by_class("check")
    assert f.tensor == TARGET and f.data["status"] == "GradeUnknown"


def test_trailing_bytes_and_unknowns(fx, tmp_path):
    import shutil
    import writers as W

    path = tmp_path / "trailing.safetensors"
    shutil.copy(fx["plain"], path)
    with open(path, "ab") as f:
        f.write(b"\0" * 10)
    assert [f.cls for f in scan_paths([str(path)]).findings] == ["trailing_bytes"]
    g = W.write_gguf(tmp_path / "ft.gguf", [("blk.0.attn_q.weight", W.weights(1), "Q8_0")], file_type=77)
    assert "file_type_unknown" in {f.cls for f in scan_paths([g]).findings}
    # unknown_ggml_type is exercised in test_scan_malformed (a patched type id).


def test_role_scope_vs_artifact_scope_drift(fx):
    r = scan_paths([fx["gguf_drift"]])
    scopes = {f.data["scope"]: f.severity for f in r.by_class("grade_drift")}
    assert scopes == {"role": "disagreement", "artifact": "warning"}


def test_multiple_inputs_with_one_unparseable(fx, tmp_path):
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"\x01\x02")
    r = scan_paths([fx["plain"], str(junk)])
    assert r.exit_code() == 1 and r.by_class("unparseable")[0].data["reason"] == "header_truncated"
    assert scan_paths([str(junk)]).exit_code() == 4 and scan_paths([str(junk)]).exit_code("simple") == 2
