"""activations="s8" across the Hugging Face stack and the converter.

`torch-grit quantize --activations s8` records the mode (in each file's
metadata per layer and, for a model folder, as quantization_config's
"activations"); from_pretrained, torch_grit.load and save_pretrained carry it;
GritConfig(activations=...) quantizes on load in the mode or, passed to a GRIT
folder, sets it as a loading attribute. Every model compared here runs the same
bits as one packed in memory by quantize_(..., activations="s8").
"""

import json
import os

import pytest
import torch
from torch import nn

import torch_grit
from torch_grit.cli import main as cli_main
from torch_grit.nn import GritLinear

import checkpoint_cases as cc
import hf_cases as hc

transformers = pytest.importorskip("transformers")
from transformers import AutoModel, BertModel  # noqa: E402

transformers.logging.set_verbosity_error()
IDS = torch.tensor([[1, 5, 9, 17, 33, 2, 7, 11], [3, 4, 60, 61, 62, 63, 0, 0]])


@pytest.fixture(scope="module")
def bert_src(tmp_path_factory):
    return hc.float_folder(hc.tiny_bert(), tmp_path_factory.mktemp("bert") / "src")


@pytest.fixture(scope="module")
def s8_dst(bert_src, tmp_path_factory):
    return hc.convert(bert_src, tmp_path_factory.mktemp("bert") / "s8", "--activations", "s8")


def _hidden(model, ids=IDS):
    with torch.no_grad():
        return model(input_ids=ids).last_hidden_state


def _modes(model):
    return [m.activations for m in model.modules() if isinstance(m, GritLinear)]


def _quantization_config(folder):
    with open(os.path.join(folder, "config.json")) as f:
        return json.load(f)["quantization_config"]


def test_converted_folder_loads_in_the_s8_mode(bert_src, s8_dst):
    assert _quantization_config(s8_dst)["activations"] == "s8"
    model = AutoModel.from_pretrained(s8_dst)
    assert _modes(model) == ["s8"] * 13
    assert model.config.quantization_config.activations == "s8"
    reference = hc.quantized_copy(BertModel, bert_src, activations="s8")
    assert torch.equal(_hidden(model), _hidden(reference))
    # the s8 law, not the float path: the same packed weights give other bits with float x
    float_x = hc.quantized_copy(BertModel, bert_src)
    assert not torch.equal(_hidden(model), _hidden(float_x))
    # torch_grit.load(model=...) reads the per-layer record of the same file
    plain = hc.quantized_copy(BertModel, bert_src)
    torch_grit.load(os.path.join(s8_dst, "model.safetensors"), model=plain, strict=False)
    assert _modes(plain) == ["s8"] * 13
    assert torch.equal(_hidden(plain), _hidden(reference))


def test_a_float_folder_stays_float(bert_src, tmp_path):
    dst = hc.convert(bert_src, tmp_path / "dst")
    assert "activations" not in _quantization_config(dst)
    assert _modes(AutoModel.from_pretrained(dst)) == [None] * 13


def test_quantize_on_load_then_save_pretrained(bert_src, tmp_path):
    cfg = torch_grit.GritConfig(grade="MXFP4", activations="s8")
    model = AutoModel.from_pretrained(bert_src, quantization_config=cfg)
    reference = hc.quantized_copy(BertModel, bert_src, activations="s8")
    assert _modes(model) == ["s8"] * 13
    assert torch.equal(_hidden(model), _hidden(reference))
    model.save_pretrained(tmp_path / "out")
    assert _quantization_config(tmp_path / "out")["activations"] == "s8"
    back = AutoModel.from_pretrained(tmp_path / "out")
    assert _modes(back) == ["s8"] * 13
    assert torch.equal(_hidden(back), _hidden(model))


def test_the_loading_attribute_sets_or_clears_the_mode(bert_src, s8_dst, tmp_path):
    float_dst = hc.convert(bert_src, tmp_path / "float")
    on = AutoModel.from_pretrained(float_dst, quantization_config=torch_grit.GritConfig(activations="s8"))
    assert _modes(on) == ["s8"] * 13
    assert torch.equal(_hidden(on), _hidden(AutoModel.from_pretrained(s8_dst)))
    off = AutoModel.from_pretrained(s8_dst, quantization_config=torch_grit.GritConfig(activations="float"))
    assert _modes(off) == [None] * 13
    assert torch.equal(_hidden(off), _hidden(AutoModel.from_pretrained(float_dst)))
    # verify="digest" alone keeps the folder's own mode
    kept = AutoModel.from_pretrained(s8_dst, quantization_config=torch_grit.GritConfig(verify="digest"))
    assert _modes(kept) == ["s8"] * 13


def test_a_mixture_of_modes_is_kept_per_layer(bert_src, tmp_path):
    model = hc.quantized_copy(BertModel, bert_src)
    model.encoder.layer[0].intermediate.dense.set_activations_("s8")
    model.pooler.dense.set_activations_("s8")
    torch_grit.save_pretrained(model, tmp_path / "mixed")
    assert "activations" not in _quantization_config(tmp_path / "mixed")  # not every layer
    back = AutoModel.from_pretrained(tmp_path / "mixed")
    assert _modes(back) == _modes(model)
    assert sorted(n for n, m in back.named_modules() if getattr(m, "activations", None) == "s8") == [
        "encoder.layer.0.intermediate.dense", "pooler.dense"]
    assert torch.equal(_hidden(back), _hidden(model))


def test_bad_activations_are_refused():
    with pytest.raises(ValueError, match="GritConfig: activations is None.*'s4'"):
        torch_grit.GritConfig(grade="MXFP4", activations="s4")


def test_a_grade_without_an_s8_law_is_refused_before_writing(bert_src, tmp_path, capsys):
    # MXFP8's e4m3 elements are no small integers times a power of two
    code = cli_main(["quantize", bert_src, str(tmp_path / "dst"), "--grade", "MXFP8",
                     "--activations", "s8"])
    assert code == 4
    err = capsys.readouterr().err
    assert "activations='s8' is not available for its grade" in err and ".weight" in err
    assert not os.path.exists(tmp_path / "dst" / "model.safetensors")
    assert not os.path.exists(tmp_path / "dst" / "config.json")


def test_plain_checkpoint_conversion_records_the_mode(tmp_path, capsys):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 96), nn.ReLU(), nn.Linear(96, 32), nn.Linear(32, 8))
    src = tmp_path / "src.safetensors"
    torch_grit.save(model, src)
    dst = tmp_path / "dst.safetensors"
    assert cli_main(["quantize", str(src), str(dst), "--grade", "MXFP4", "--activations", "s8",
                     "--json"]) == 0
    done = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert done["event"] == "done" and done["activations"] == "s8"
    meta = json.loads(cc.read_raw(str(dst))[0]["torch_grit"])
    assert meta["activations"] == {"0": "s8", "2": "s8", "3": "s8"}
    target = nn.Sequential(nn.Linear(64, 96), nn.ReLU(), nn.Linear(96, 32), nn.Linear(32, 8))
    torch_grit.quantize_(target, "MXFP4")
    torch_grit.load(dst, model=target)
    assert [getattr(m, "activations", "-") for m in target] == ["s8", "-", "s8", "s8"]
    torch_grit.quantize_(model, "MXFP4", activations="s8")  # the same packing, in memory
    x = torch.randn(4, 64)
    with torch.no_grad():
        assert torch.equal(target(x), model(x))
    assert cli_main(["inspect", str(dst)]) == 0
    assert "activations: s8 for 3 layer(s)" in capsys.readouterr().out


def test_the_bf16_law_through_the_converter_from_pretrained_and_save_pretrained(bert_src, tmp_path):
    dst = hc.convert(bert_src, tmp_path / "bf16", "--activations", "bf16")
    assert _quantization_config(dst)["activations"] == "bf16"
    model = AutoModel.from_pretrained(dst)
    assert _modes(model) == ["bf16"] * 13
    reference = hc.quantized_copy(BertModel, bert_src, activations="bf16")
    assert torch.equal(_hidden(model), _hidden(reference))
    cfg = torch_grit.GritConfig(grade="MXFP4", activations="bf16")
    on_load = AutoModel.from_pretrained(bert_src, quantization_config=cfg)
    assert _modes(on_load) == ["bf16"] * 13
    assert torch.equal(_hidden(on_load), _hidden(reference))
    on_load.save_pretrained(tmp_path / "out")
    assert _quantization_config(tmp_path / "out")["activations"] == "bf16"
    assert torch.equal(_hidden(AutoModel.from_pretrained(tmp_path / "out")), _hidden(reference))
