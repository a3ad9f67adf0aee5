"""torch_grit in the Hugging Face stack: model folders, from_pretrained, save_pretrained,
quantize-on-load, the load guard, version and descriptor refusals."""

import filecmp
import json
import os
import subprocess
import sys

import pytest
import torch

import torch_grit
from torch_grit import GritCheckError, GritTensor
from torch_grit.nn import GritLinear

import checkpoint_cases as cc
import hf_cases as hc

transformers = pytest.importorskip("transformers")
from transformers import AutoModel, AutoModelForCausalLM, BertModel  # noqa: E402

transformers.logging.set_verbosity_error()
IDS = torch.tensor([[1, 5, 9, 17, 33, 2, 7, 11], [3, 4, 60, 61, 62, 63, 0, 0]])


@pytest.fixture(scope="module")
def bert_src(tmp_path_factory):
    return hc.float_folder(hc.tiny_bert(), tmp_path_factory.mktemp("bert") / "src")


@pytest.fixture(scope="module")
def bert_dst(bert_src, tmp_path_factory):
    return hc.convert(bert_src, tmp_path_factory.mktemp("bert") / "dst")


def _hidden(model, ids=IDS):
    with torch.no_grad():
        return model(input_ids=ids).last_hidden_state


def _packed_layers(model):
    return [m for m in model.modules() if isinstance(m, GritLinear)]


def test_import_does_not_import_transformers():
    code = "import sys, torch_grit; print('transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_grit_is_registered_with_transformers():
    from transformers.quantizers import auto
    from torch_grit.integrations.hf.quantizer import GritHfQuantizer
    from torch_grit.integrations.hf.register import register

    assert auto.AUTO_QUANTIZATION_CONFIG_MAPPING["grit"] is torch_grit.GritConfig
    assert auto.AUTO_QUANTIZER_MAPPING["grit"] is GritHfQuantizer
    register()  # a second registration (a re-import) is a no-op, not transformers' ValueError
    assert auto.AUTO_QUANTIZER_MAPPING["grit"] is GritHfQuantizer
    assert list(auto.LOADING_ATTRIBUTES_CONFIG_TYPES).count(torch_grit.GritConfig) == 1


def test_a_foreign_grit_registration_is_refused(monkeypatch):
    from transformers.quantizers import auto
    from torch_grit.integrations.hf.register import register

    class Other(transformers.utils.quantization_config.QuantizationConfigMixin):
        pass
    monkeypatch.setitem(auto.AUTO_QUANTIZATION_CONFIG_MAPPING, "grit", Other)
    with pytest.raises(RuntimeError, match="already has a quant_method 'grit'"):
        register()


def test_registered_when_transformers_is_imported_after_torch_grit():
    code = ("import torch_grit\nfrom transformers.quantizers.auto import AUTO_QUANTIZER_MAPPING\n"
            "print(AUTO_QUANTIZER_MAPPING['grit'].__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "GritHfQuantizer"
    assert "could not register" not in out.stderr


def test_converted_folder_stands_alone(tmp_path):
    src = hc.minilm_folder()
    dst = hc.convert(src, tmp_path / "dst")
    def files(root):
        return sorted(os.path.relpath(os.path.join(r, f), root)
                      for r, _, fs in os.walk(root) for f in fs)
    want = [f for f in files(src) if not f.endswith(".safetensors")]
    assert files(dst) == sorted(want + ["model.safetensors"])
    for f in want:
        if f not in ("config.json", "README.md"):
            assert filecmp.cmp(os.path.join(src, f), os.path.join(dst, f), shallow=False), f
    with open(os.path.join(src, "config.json")) as f:
        before = json.load(f)
    with open(os.path.join(dst, "config.json")) as f:
        after = json.load(f)
    q = after.pop("quantization_config")
    assert after == before
    assert q == {"quant_method": "grit", "grade": "MXFP4", "modules_to_not_convert": [],
                 "torch_grit_version": torch_grit.__version__}
    with open(os.path.join(dst, "README.md")) as f:
        card = f.read()
    assert "pip install 'torch_grit>=%s'" % torch_grit.__version__ in card
    # BERT's position_ids: a non-persistent buffer transformers 5 neither loads nor saves.
    names = cc.read_raw(os.path.join(dst, "model.safetensors"))[1]
    assert "embeddings.position_ids" in cc.read_raw(os.path.join(src, "model.safetensors"))[1]
    assert "embeddings.position_ids" not in names


def test_from_pretrained_builds_the_packed_model(bert_src, bert_dst):
    model = AutoModel.from_pretrained(bert_dst)
    layers = _packed_layers(model)
    assert len(layers) == 2 * 6 + 1  # q, k, v, attention out, intermediate, output; the pooler
    assert all(isinstance(m.weight, GritTensor) and m.weight.device.type == "cpu"
               and not m.weight.requires_grad for m in layers)
    assert not any(m.weight.tiled for m in layers)   # the planes as read (no copy); tile_(model) tiles
    assert isinstance(model.config.quantization_config, torch_grit.GritConfig)
    reference = hc.quantized_copy(BertModel, bert_src)
    assert torch.equal(_hidden(model), _hidden(reference))
    for (n, a), (_, b) in zip(sorted(model.state_dict().items()),
                              sorted(reference.state_dict().items())):
        if isinstance(a, GritTensor):
            assert all(torch.equal(p, q) for p, q in zip(a.planes, b.planes)), n


def test_save_pretrained_gives_the_converters_bytes(bert_src, bert_dst, tmp_path):
    model = AutoModel.from_pretrained(bert_dst)
    model.save_pretrained(tmp_path / "again")
    same = os.path.join(bert_dst, "model.safetensors")
    assert filecmp.cmp(same, tmp_path / "again" / "model.safetensors", shallow=False)
    # quantize_ in memory, then torch_grit.save_pretrained: the same file once more
    torch_grit.save_pretrained(hc.quantized_copy(BertModel, bert_src), tmp_path / "mem")
    assert filecmp.cmp(same, tmp_path / "mem" / "model.safetensors", shallow=False)
    back = AutoModel.from_pretrained(tmp_path / "mem")
    assert torch.equal(_hidden(back), _hidden(model))


def test_quantize_on_load_equals_quantize_(bert_src):
    for grade, kwargs in (("MXFP4", {}), ("auto", {"budget_db": 15.0})):
        cfg = torch_grit.GritConfig(grade=grade, **kwargs)
        model = AutoModel.from_pretrained(bert_src, quantization_config=cfg)
        reference = hc.quantized_copy(BertModel, bert_src, grade, **kwargs)
        assert _packed_layers(model) and torch.equal(_hidden(model), _hidden(reference)), grade
        assert [m.weight.tiled for m in _packed_layers(model)] == [m.weight.tiled for m in _packed_layers(reference)]
        grades = [m.weight.grade_canonical for m in _packed_layers(model)]
        assert grades == [m.weight.grade_canonical for m in _packed_layers(reference)]


def test_quantize_on_load_then_save_loads_back(bert_src, tmp_path):
    cfg = torch_grit.GritConfig(grade="NVF4", modules_to_not_convert=["pooler"])
    model = AutoModel.from_pretrained(bert_src, quantization_config=cfg)
    assert not isinstance(model.pooler.dense, GritLinear)
    model.save_pretrained(tmp_path / "out")
    with open(tmp_path / "out" / "config.json") as f:
        q = json.load(f)["quantization_config"]
    assert q["grade"] == "NVF4" and q["modules_to_not_convert"] == ["pooler"]
    back = AutoModel.from_pretrained(tmp_path / "out")
    assert torch.equal(_hidden(back), _hidden(model))
    assert not isinstance(back.pooler.dense, GritLinear)


def test_sharded_folder_loads(bert_src, tmp_path):
    dst = hc.convert(bert_src, tmp_path / "dst", "--max-shard-size", "40KB")
    assert os.path.exists(os.path.join(dst, "model.safetensors.index.json"))
    model = AutoModel.from_pretrained(dst)
    reference = hc.quantized_copy(BertModel, bert_src)
    assert torch.equal(_hidden(model), _hidden(reference))


def test_without_torch_grit_the_folder_fails_to_load(bert_dst):
    # transformers alone skips an unknown quant_method; the load guard makes the load fail.
    code = ("import sys\nfrom transformers import AutoModel\n"
            "try:\n    AutoModel.from_pretrained(sys.argv[1])\nexcept Exception as e:\n"
            "    print('refused', type(e).__name__, str(e)[:300]); sys.exit(0)\n"
            "print('loaded'); sys.exit(1)")
    out = subprocess.run([sys.executable, "-c", code, bert_dst], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "torch_grit" not in out.stdout  # it really ran without torch_grit
    assert "refused RuntimeError" in out.stdout and "ignore_mismatched_sizes" in out.stdout


def _edit_config(src, dst, edit):
    import shutil
    shutil.copytree(src, dst)
    with open(os.path.join(dst, "config.json")) as f:
        doc = json.load(f)
    edit(doc)
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(doc, f)
    return dst


def test_a_torch_grit_too_old_refuses_naming_both_versions(bert_dst, tmp_path):
    def newer(doc):
        doc["quantization_config"]["torch_grit_version"] = "9.0.0"
    dst = _edit_config(bert_dst, tmp_path / "newer", newer)
    with pytest.raises(ImportError) as err:
        AutoModel.from_pretrained(dst)
    assert "torch_grit 9.0.0" in str(err.value) and torch_grit.__version__ in str(err.value)


def _rewrite(dst, tmp_path, change):
    import shutil
    out = tmp_path / "bad"
    shutil.copytree(dst, out)
    path = os.path.join(out, "model.safetensors")
    meta, entries = cc.read_raw(path)
    meta, entries = change(meta, entries)
    cc.write_raw(path, meta, entries)
    return out


def test_a_descriptor_that_disagrees_fails_the_whole_load(bert_dst, tmp_path):
    name = "encoder.layer.1.intermediate.dense.weight"

    def wrong_grade(meta, entries):
        descriptors, records = cc.grit_meta(meta)
        nvf4 = torch_grit.Descriptor(torch_grit.Grade.parse("NVF4"), (128, 64))
        descriptors[name] = nvf4.to_bytes().hex()
        records["tensors"][name]["grade"] = torch_grit.Grade.parse("NVF4").canonical
        return cc.set_grit_meta(meta, descriptors, records), entries
    bad = _rewrite(bert_dst, tmp_path, wrong_grade)
    with pytest.raises(GritCheckError) as err:
        AutoModel.from_pretrained(bad)
    assert err.value.tensor == name and err.value.field


def test_verify_digest_reads_every_plane(bert_dst, tmp_path):
    name = "encoder.layer.0.output.dense.weight.grit.data"

    def flip(meta, entries):
        b = bytearray(entries[name]["bytes"])
        b[3] ^= 0x10
        entries[name]["bytes"] = bytes(b)
        return meta, entries
    bad = _rewrite(bert_dst, tmp_path, flip)
    AutoModel.from_pretrained(bad)  # level 1 reads no plane byte: the flip passes it
    with pytest.raises(GritCheckError) as err:
        AutoModel.from_pretrained(bad, quantization_config=torch_grit.GritConfig(verify="digest"))
    assert err.value.tensor == "encoder.layer.0.output.dense.weight"
    assert err.value.status == "DigestMismatch"


def test_a_bad_guard_is_refused(bert_dst, tmp_path):
    name = "encoder.layer.0.attention.self.query.weight"

    def reshape(meta, entries):
        entries[name]["shape"] = [64, 0]
        return meta, entries
    with pytest.raises(GritCheckError) as err:
        AutoModel.from_pretrained(_rewrite(bert_dst, tmp_path, reshape))
    assert err.value.tensor == name and err.value.field == "guard"


PEAK_RSS = r"""
import sys, torch, torch_grit
from transformers import AutoModel
def rss(field):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith(field + ":"))
ids = torch.tensor([[1, 2, 3, 4]])
with torch.no_grad():  # imports and first-call costs, outside the measured window
    AutoModel.from_pretrained(sys.argv[2])(input_ids=ids)
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # Linux: the peak resident set (VmHWM) restarts from the current one
before = rss("VmRSS")
model = AutoModel.from_pretrained(sys.argv[1])
with torch.no_grad():  # a forward touches every weight (mapped file pages count once touched)
    model(input_ids=ids)
print(rss("VmHWM") - before)
"""


def _load_growth(folder, warm):
    out = subprocess.run([sys.executable, "-c", PEAK_RSS, folder, warm], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip().splitlines()[-1])


def test_peak_memory_stays_near_the_packed_size(bert_src, tmp_path):
    big = hc.tiny_bert(hidden=1024, intermediate=4096, layers=2, heads=8)
    linear_float = sum(m.weight.numel() * 4 for m in big.modules()
                       if isinstance(m, torch.nn.Linear))
    src = hc.float_folder(big, tmp_path / "src")
    del big
    dst = hc.convert(src, tmp_path / "dst")
    packed = os.path.getsize(os.path.join(dst, "model.safetensors"))
    assert linear_float > 100e6 and packed < 0.15 * linear_float
    # Peak RSS over from_pretrained and one forward, beyond the process before it: the packed
    # folder adds about its own size; the float folder, its float weights (the yardstick that
    # shows the measurement sees a float weight when there is one).
    packed_growth, float_growth = _load_growth(dst, bert_src), _load_growth(src, bert_src)
    assert float_growth > 0.9 * linear_float, float_growth
    assert packed_growth < packed + 0.1 * linear_float, (packed_growth, packed)


def test_causal_lm_end_to_end(tmp_path):
    src = hc.float_folder(hc.tiny_llama(), tmp_path / "src")
    dst = hc.convert(src, tmp_path / "dst")
    assert os.path.exists(os.path.join(dst, "generation_config.json"))
    model = AutoModelForCausalLM.from_pretrained(dst)
    reference = hc.quantized_copy(AutoModelForCausalLM, src)
    prompt = torch.tensor([[10, 20, 30, 40]])
    kw = dict(max_new_tokens=12, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        a = model.generate(prompt, **kw)
        b = reference.generate(prompt, **kw)
    assert a.shape == (1, 16) and torch.equal(a, b)
    assert isinstance(model.lm_head, GritLinear)
    model.save_pretrained(tmp_path / "again")
    assert filecmp.cmp(os.path.join(dst, "model.safetensors"),
                       tmp_path / "again" / "model.safetensors", shallow=False)


def test_push_to_hub_is_refused_before_writing(bert_dst, tmp_path):
    model = AutoModel.from_pretrained(bert_dst)
    with pytest.raises(ValueError, match="upload_folder"):
        model.save_pretrained(tmp_path / "hub", push_to_hub=True)
    assert not os.path.exists(tmp_path / "hub")
