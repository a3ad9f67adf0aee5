"""GGUF export in llama.cpp's layout beyond Llama, Qwen and BERT: Gemma, Gemma 2 and Gemma 3 (norms
stored as 1 + w, the head read from token_embd, soft caps, sliding window and its per-layer pattern,
a rope per attention kind), Phi-3 (fused qkv and
gate_up, partial rope, LongRoPE factors) and scaled rope (linear, YaRN, Llama 3's rope_freqs).
The rope tensors are checked against the frequencies transformers itself computes; the files
run in llama.cpp in benchmarks/check_llama_cpp.py."""

import os

import numpy as np
import pytest
import torch

import torch_grit as tg

gguf = pytest.importorskip("gguf")
transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

SIZE = dict(vocab_size=320, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64)
KEEP_HEAD = dict(filter_fn=lambda m, fqn: fqn != "lm_head")


def _model(kind, **config):
    cfg = getattr(transformers, kind + "Config")(**dict(SIZE, **config))
    torch.manual_seed(0)
    return getattr(transformers, kind + "ForCausalLM")(cfg).eval()


def _save(model, tmp_path, name="m.gguf", **quantize):
    tg.quantize_(model, "MXFP4", **quantize)
    path = str(tmp_path / name)
    tg.save(model, path)
    r = gguf.GGUFReader(path)
    return {t.name: t for t in r.tensors}, {f.name: f.contents() for f in r.fields.values()}


def _f32(t):
    assert t.tensor_type == gguf.GGMLQuantizationType.F32
    return torch.from_numpy(np.array(t.data)).reshape(-1)


def _default_inv_freq(dim, theta=10000.0):
    return 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def test_gemma_stores_norms_as_one_plus_w_and_reads_its_head_from_token_embd(tmp_path):
    model = _model("Gemma", head_dim=32)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith("norm.weight"):
                p.normal_(0.0, 0.3)   # trained norms are not zero, so + 1 shows
    tensors, kv = _save(model, tmp_path, **KEEP_HEAD)
    assert kv["general.architecture"] == "gemma" and kv["gemma.attention.key_length"] == 32
    assert kv["gemma.attention.head_count_kv"] == 2 and kv["gemma.vocab_size"] == 320
    assert "output.weight" not in tensors and tensors["token_embd.weight"].tensor_type == gguf.GGMLQuantizationType.F32
    layer = model.model.layers[1]
    for gname, w in (("blk.1.attn_norm.weight", layer.input_layernorm.weight),
                     ("blk.1.ffn_norm.weight", layer.post_attention_layernorm.weight),
                     ("output_norm.weight", model.model.norm.weight)):
        assert torch.equal(_f32(tensors[gname]), w.detach().float() + 1.0)
    assert tensors["blk.1.attn_q.weight"].tensor_type == gguf.GGMLQuantizationType.MXFP4


def test_gemma_refuses_a_head_that_is_not_the_embedding(tmp_path):
    model = _model("Gemma", head_dim=32)
    tg.quantize_(model, "MXFP4")   # packs the tied head on its own
    path = tmp_path / "m.gguf"
    with pytest.raises(ValueError, match="reads its output head from token_embd") as e:
        tg.save(model, str(path))
    assert "nothing was written" in str(e.value) and not path.exists()


def test_gemma2_writes_soft_caps_sliding_window_and_post_norms(tmp_path):
    model = _model("Gemma2", head_dim=32, query_pre_attn_scalar=32)
    tensors, kv = _save(model, tmp_path, **KEEP_HEAD)
    assert kv["general.architecture"] == "gemma2"
    assert kv["gemma2.attn_logit_softcapping"] == pytest.approx(50.0)
    assert kv["gemma2.final_logit_softcapping"] == pytest.approx(30.0)
    assert kv["gemma2.attention.sliding_window"] == 4096
    layer = model.model.layers[0]
    for gname, w in (("blk.0.post_attention_norm.weight", layer.post_attention_layernorm.weight),
                     ("blk.0.ffn_norm.weight", layer.pre_feedforward_layernorm.weight),
                     ("blk.0.post_ffw_norm.weight", layer.post_feedforward_layernorm.weight)):
        assert torch.equal(_f32(tensors[gname]), w.detach().float() + 1.0)


@pytest.mark.parametrize("change,match", [
    (dict(query_pre_attn_scalar=64), "query_pre_attn_scalar is 64"),           # llama.cpp scales by 1/sqrt(32)
    (dict(layer_types=["full_attention", "sliding_attention"]), "alternates sliding and full"),
    (dict(hidden_activation="gelu"), "hidden activation 'gelu'"),
])
def test_gemma2_configs_llama_cpp_would_run_differently_are_refused(tmp_path, change, match):
    model = _model("Gemma2", head_dim=32, query_pre_attn_scalar=32)
    tg.quantize_(model, "MXFP4", **KEEP_HEAD)
    path = tmp_path / "m.gguf"
    with pytest.raises(ValueError, match=match):
        tg.save(model, str(path), config=dict(model.config.to_dict(), **change))
    assert not path.exists()


GEMMA3 = dict(head_dim=32, query_pre_attn_scalar=32, num_hidden_layers=3, sliding_window=8,
              layer_types=["sliding_attention", "sliding_attention", "full_attention"],
              rope_parameters={"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                               "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}})


def _gemma3():
    torch.manual_seed(0)   # Gemma 3's text model: Gemma3ForCausalLM over a Gemma3TextConfig
    return transformers.Gemma3ForCausalLM(transformers.Gemma3TextConfig(**dict(SIZE, **GEMMA3))).eval()


def test_gemma3_writes_its_layer_pattern_and_a_rope_per_attention_kind(tmp_path):
    model = _gemma3()
    with torch.no_grad():
        model.model.layers[0].self_attn.q_norm.weight.normal_(0.0, 0.3)
    tensors, kv = _save(model, tmp_path, **KEEP_HEAD)
    assert kv["general.architecture"] == "gemma3"
    assert kv["gemma3.rope.freq_base"] == 1e6 and kv["gemma3.rope.freq_base_swa"] == 1e4
    assert kv["gemma3.rope.scaling.type"] == "linear" and kv["gemma3.rope.scaling.factor"] == 8.0
    assert kv["gemma3.attention.sliding_window"] == 8
    assert list(kv["gemma3.attention.sliding_window_pattern"]) == [True, True, False]
    assert "output.weight" not in tensors   # the tied head, left to token_embd
    q_norm = model.model.layers[0].self_attn.q_norm.weight
    assert torch.equal(_f32(tensors["blk.0.attn_q_norm.weight"]), q_norm.detach().float() + 1.0)


@pytest.mark.parametrize("change,match", [
    (dict(attn_logit_softcapping=50.0), "does not cap attention logits"),
    (dict(rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                           "sliding_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}}),
     "sliding_attention rope_type 'linear'"),
    (dict(layer_types=["sliding_attention"]), "layer_types"),
    (dict(query_pre_attn_scalar=256), "query_pre_attn_scalar is 256"),
])
def test_gemma3_configs_llama_cpp_would_run_differently_are_refused(tmp_path, change, match):
    model = _gemma3()
    tg.quantize_(model, "MXFP4", **KEEP_HEAD)
    path = tmp_path / "m.gguf"
    with pytest.raises(ValueError, match=match):
        tg.save(model, str(path), config=dict(model.config.to_dict(), **change))
    assert not path.exists()


PHI3 = dict(pad_token_id=None, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)


def test_phi3_keeps_fused_qkv_and_gate_up(tmp_path):
    model = _model("Phi3", **PHI3)
    tensors, kv = _save(model, tmp_path)
    assert kv["general.architecture"] == "phi3" and kv["phi3.rope.dimension_count"] == 32
    assert kv["phi3.rope.scaling.original_context_length"] == 4096 and kv["phi3.attention.sliding_window"] == 0
    # ggml shapes are [columns, rows]: q (128) + k (64) + v (64) rows; gate and up halves of 256
    assert tensors["blk.0.attn_qkv.weight"].shape.tolist() == [128, 256]
    assert tensors["blk.0.ffn_up.weight"].shape.tolist() == [128, 512]
    assert "output.weight" in tensors and "rope_factors_long.weight" not in tensors


def test_phi3_longrope_writes_transformers_factors_and_attention_factor(tmp_path):
    rng = np.random.default_rng(1)
    rope = dict(rope_type="longrope", rope_theta=10000.0, partial_rotary_factor=0.5,
                long_factor=[float(v) for v in rng.uniform(1, 8, 8)],
                short_factor=[float(v) for v in rng.uniform(1, 2, 8)])
    model = _model("Phi3", original_max_position_embeddings=16, rope_parameters=rope, **PHI3)
    tensors, kv = _save(model, tmp_path)
    assert kv["phi3.rope.dimension_count"] == 16   # half of each 32-wide head
    assert kv["phi3.rope.scaling.attn_factor"] == pytest.approx(np.sqrt(1 + np.log(4) / np.log(16)))
    long, short = _f32(tensors["rope_factors_long.weight"]), _f32(tensors["rope_factors_short.weight"])
    assert torch.equal(long, torch.tensor(rope["long_factor"], dtype=torch.float32))
    # llama.cpp divides each rotary frequency by the factor: transformers' short-context frequencies
    hf = model.model.rotary_emb.inv_freq
    assert torch.allclose(_default_inv_freq(16) / short, hf, rtol=1e-6)


def _llama_rope(tmp_path, **rope):
    model = _model("Llama", rope_parameters=dict(rope_theta=10000.0, **rope), tie_word_embeddings=False)
    return model, _save(model, tmp_path)


def test_linear_and_yarn_rope_scaling_write_llama_cpps_keys(tmp_path):
    _, (_, kv) = _llama_rope(tmp_path, rope_type="linear", factor=2.0)
    assert kv["llama.rope.scaling.type"] == "linear" and kv["llama.rope.scaling.factor"] == 2.0
    _, (_, kv) = _llama_rope(tmp_path, rope_type="yarn", factor=4.0, original_max_position_embeddings=16,
                             beta_fast=16.0)
    assert kv["llama.rope.scaling.type"] == "yarn" and kv["llama.rope.scaling.factor"] == 4.0
    assert kv["llama.rope.scaling.original_context_length"] == 16
    assert kv["llama.rope.scaling.yarn_beta_fast"] == 16.0


def test_llama3_rope_freqs_reproduce_transformers_frequencies(tmp_path):
    model, (tensors, kv) = _llama_rope(tmp_path, rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                       high_freq_factor=4.0, original_max_position_embeddings=64)
    factors = _f32(tensors["rope_freqs.weight"])
    assert factors.numel() == 16 and factors.min() == 1.0 and factors.max() == 8.0
    assert ((factors > 1.0) & (factors < 8.0)).any()   # the blended band is exercised
    hf = model.model.rotary_emb.inv_freq
    assert torch.allclose(_default_inv_freq(32) / factors, hf, rtol=1e-6)
    assert "llama.rope.scaling.type" not in kv   # llama.cpp reads Llama 3's scaling from the tensor


@pytest.mark.parametrize("rope,match", [
    (dict(rope_type="dynamic", factor=2.0), "rope_type 'dynamic'"),
    (dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=16, mscale=0.7), "mscale"),
    (dict(rope_type="yarn", factor=4.0), "original_max_position_embeddings"),
    (dict(rope_type="linear", factor=-1.0), "factor is -1.0"),
    (dict(rope_type="llama3", factor=8.0, low_freq_factor=4.0, high_freq_factor=1.0,
          original_max_position_embeddings=16), "high_freq_factor 1.0 is not above"),
])
def test_rope_scaling_llama_cpp_cannot_reproduce_is_refused(tmp_path, rope, match):
    model = _model("Llama", tie_word_embeddings=False)
    tg.quantize_(model, "MXFP4")
    config = dict(model.config.to_dict(), rope_parameters=dict(rope_theta=10000.0, **rope))
    path = tmp_path / "m.gguf"
    with pytest.raises(ValueError, match=match) as e:
        tg.save(model, str(path), config=config)
    assert "nothing was written" in str(e.value) and sorted(os.listdir(tmp_path)) == []


def test_phi3_longrope_factors_of_the_wrong_length_are_refused(tmp_path):
    model = _model("Phi3", **PHI3)
    tg.quantize_(model, "MXFP4")
    rope = dict(rope_type="longrope", rope_theta=10000.0, long_factor=[1.0] * 3, short_factor=[1.0] * 16)
    with pytest.raises(ValueError, match="long_factor must be 16 positive numbers"):
        tg.save(model, str(tmp_path / "m.gguf"), config=dict(model.config.to_dict(), rope_parameters=rope))
