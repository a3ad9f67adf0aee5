"""GGUF export in llama.cpp's layout: gguf-py's tensor names, Llama's q/k rows in llama.cpp's
rotary order, the hyperparameters and the vocab, for a Llama with grouped KV heads and a real
BERT embedder (all-MiniLM-L6-v2). The packed tensors decode (gguf.quants.dequantize) to the
model's weights, rows reordered where llama.cpp's rope asks it and nowhere else."""

import json
import os

import numpy as np
import pytest
import torch

import torch_grit as tg
from torch_grit.cli import main as cli_main

import hf_cases as hc

gguf = pytest.importorskip("gguf")
transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

LLAMA_BLOCK = ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up",
               "ffn_down"]


def _tokenizer(folder, vocab_size):
    """A byte-level BPE tokenizer trained here (GPT-2's pre-tokenizer and decoder), saved as tokenizer.json."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(["a packed weight carries its contract with its bytes"] * 20, trainer)
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    return str(folder), tok.get_vocab_size()


def _llama(vocab=320, seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig(vocab_size=vocab, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         rope_theta=10000.0, tie_word_embeddings=False)
    torch.manual_seed(seed)
    return LlamaForCausalLM(config).eval()


def _read(path):
    r = gguf.GGUFReader(path)
    kv = {f.name: f.contents() for f in r.fields.values()}
    return {t.name: t for t in r.tensors}, kv


def _decode(t):
    return torch.from_numpy(np.array(gguf.quants.dequantize(t.data, t.tensor_type))).float()


def _same(a, b):
    """Equal values, NaN-free: ggml decodes MXFP4 code 8 as +0.0 where GRIT's law gives -0.0
    (docs/interop.md), so the bits may differ in the sign of zero and nowhere else."""
    return torch.equal(a, b) and torch.equal(a.abs().view(torch.int32), b.abs().view(torch.int32))


def _rope_rows(rows, heads):
    return torch.arange(rows).reshape(heads, 2, rows // heads // 2).transpose(1, 2).reshape(-1)


@pytest.fixture(scope="module")
def llama_file(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("llama")
    tok_dir, n_tok = _tokenizer(tmp / "tok", 300)
    model = _llama()
    tg.quantize_(model, "MXFP4")
    path = str(tmp / "llama.gguf")
    tg.save(model, path, tokenizer=tok_dir)
    return model, path, n_tok


def test_llama_names_hyperparameters_and_vocab_are_llama_cpps(llama_file):
    model, path, n_tok = llama_file
    tensors, kv = _read(path)
    want = {"token_embd.weight", "output_norm.weight", "output.weight"} | {
        "blk.%d.%s.weight" % (b, n) for b in range(2) for n in LLAMA_BLOCK}
    assert set(tensors) == want
    assert kv["general.architecture"] == "llama"
    cfg = model.config
    assert kv["llama.block_count"] == 2 and kv["llama.context_length"] == 64
    assert kv["llama.embedding_length"] == 128 and kv["llama.feed_forward_length"] == 256
    assert kv["llama.attention.head_count"] == 4 and kv["llama.attention.head_count_kv"] == 2
    assert kv["llama.rope.dimension_count"] == 32 and kv["llama.vocab_size"] == 320
    assert kv["llama.rope.freq_base"] == pytest.approx(10000.0)
    assert kv["llama.attention.layer_norm_rms_epsilon"] == pytest.approx(cfg.rms_norm_eps)
    # the vocab: GPT-2 byte-level BPE with its merges, padded to the embedding's rows
    assert kv["tokenizer.ggml.model"] == "gpt2" and kv["tokenizer.ggml.pre"] == "gpt-2"
    tokens = kv["tokenizer.ggml.tokens"]
    assert len(tokens) == 320 and len(kv["tokenizer.ggml.token_type"]) == 320
    assert tokens[:2] == ["<s>", "</s>"] and tokens[n_tok] == "[PAD%d]" % n_tok
    assert kv["tokenizer.ggml.token_type"][0] == gguf.TokenType.CONTROL
    assert kv["tokenizer.ggml.token_type"][-1] == gguf.TokenType.UNUSED
    assert len(kv["tokenizer.ggml.merges"]) > 0
    # norms are F32 vectors; every packed weight is MXFP4 blocks with its descriptor
    assert tensors["blk.0.attn_norm.weight"].tensor_type == gguf.GGMLQuantizationType.F32
    for b in range(2):
        for n in LLAMA_BLOCK[1:5] + LLAMA_BLOCK[6:]:
            name = "blk.%d.%s.weight" % (b, n)
            assert tensors[name].tensor_type == gguf.GGMLQuantizationType.MXFP4
            assert "grit.desc." + name in kv


def test_llama_weights_decode_to_the_model_with_q_and_k_rows_in_ropes_order(llama_file):
    model, path, _ = llama_file
    tensors, _ = _read(path)
    for b, layer in enumerate(model.model.layers):
        att, mlp = layer.self_attn, layer.mlp
        q, k = att.q_proj.weight.dequantize(), att.k_proj.weight.dequantize()
        assert _same(_decode(tensors["blk.%d.attn_q.weight" % b]), q[_rope_rows(128, 4)])
        assert _same(_decode(tensors["blk.%d.attn_k.weight" % b]), k[_rope_rows(64, 2)])
        for name, lin in (("attn_v", att.v_proj), ("attn_output", att.o_proj), ("ffn_gate", mlp.gate_proj),
                          ("ffn_up", mlp.up_proj), ("ffn_down", mlp.down_proj)):
            assert _same(_decode(tensors["blk.%d.%s.weight" % (b, name)]), lin.weight.dequantize()), name
    assert torch.equal(_decode(tensors["output_norm.weight"]), model.model.norm.weight.detach().float())
    # torch_grit.load reads the file back as it is: llama.cpp's names, q in its rope order, GRIT's planes
    back = tg.load(path)
    q = model.model.layers[0].self_attn.q_proj.weight
    assert back["blk.0.attn_q.weight"].grade_canonical == q.grade_canonical
    assert torch.equal(back["blk.0.attn_q.weight"].dequantize(), q.dequantize()[_rope_rows(128, 4)])
    v = model.model.layers[0].self_attn.v_proj.weight
    assert all(torch.equal(a, b) for a, b in zip(back["blk.0.attn_v.weight"].planes, v.planes))


def test_reordered_rows_under_ggmls_rope_give_hf_ropes_queries(llama_file):
    """Why the rows move: llama.cpp rotates adjacent pairs (2i, 2i+1) where Hugging Face's Llama
    rotates halves (i, i + d/2). The exported q, under ggml's rope, is HF's q under HF's rope, its
    rows in the exported order."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
    model, path, _ = llama_file
    tensors, _ = _read(path)
    att = model.model.layers[0].self_attn
    x = torch.randn(1, 5, 128)
    pos = torch.arange(5)[None]
    cos, sin = model.model.rotary_emb(x, pos)
    q = (x @ att.q_proj.weight.dequantize().T).view(1, 5, 4, 32).transpose(1, 2)
    hf, _ = apply_rotary_pos_emb(q, q, cos, sin)
    w = _decode(tensors["blk.0.attn_q.weight"])
    g = (x @ w.T).view(1, 5, 4, 16, 2)
    theta = pos[0, :, None].float() * 10000.0 ** (-torch.arange(16).float() * 2 / 32)   # ggml_rope, mode 0
    c, s = theta.cos()[None, :, None], theta.sin()[None, :, None]
    ours = torch.stack([g[..., 0] * c - g[..., 1] * s, g[..., 0] * s + g[..., 1] * c], -1).reshape(1, 5, 4, 32)
    expect = hf.transpose(1, 2)[..., _rope_rows(32, 1)]
    assert torch.allclose(ours, expect, atol=1e-5, rtol=1e-5)


def test_a_tied_head_is_left_to_token_embd_only_while_it_is_the_embedding(tmp_path):
    """llama.cpp multiplies by token_embd when output.weight is absent. A head that is still the
    embedding (one storage) is left out; a head quantize_ packed is no longer the embedding,
    whatever the config says, and is written."""
    model = _llama()
    model.config.tie_word_embeddings = True
    model.tie_weights()
    tg.quantize_(model, "MXFP4", filter_fn=lambda m, fqn: fqn != "lm_head")
    path = str(tmp_path / "tied.gguf")
    tg.save(model, path)
    tensors, kv = _read(path)
    assert "output.weight" not in tensors and "token_embd.weight" in tensors
    assert kv["tokenizer.ggml.model"] == "none" and kv["llama.vocab_size"] == 320   # no tokenizer given
    model = _llama()
    model.config.tie_word_embeddings = True
    model.tie_weights()
    tg.quantize_(model, "MXFP4")
    tg.save(model, path)
    tensors, _ = _read(path)
    assert tensors["output.weight"].tensor_type == gguf.GGMLQuantizationType.MXFP4


def test_qwen2_keeps_its_rows_and_biases(tmp_path):
    from transformers import Qwen2Config, Qwen2ForCausalLM
    config = Qwen2Config(vocab_size=320, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         tie_word_embeddings=True)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config).eval()
    _check_qwen(model, tmp_path, "qwen2")


def test_qwen3_writes_its_head_dim_and_q_k_norms(tmp_path):
    from transformers import Qwen3Config, Qwen3ForCausalLM
    config = Qwen3Config(vocab_size=320, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=64,
                         tie_word_embeddings=False)
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(config).eval()
    kv, tensors = _check_qwen(model, tmp_path, "qwen3", bias=False)
    assert kv["qwen3.attention.key_length"] == 64 and kv["qwen3.attention.value_length"] == 64
    assert tensors["blk.0.attn_q_norm.weight"].tensor_type == gguf.GGMLQuantizationType.F32
    assert tensors["blk.0.attn_q.weight"].shape.tolist() == [128, 256]   # 4 heads of 64: rows kept


def _check_qwen(model, tmp_path, arch, bias=True):
    tg.quantize_(model, "MXFP4")
    path = str(tmp_path / ("%s.gguf" % arch))
    tg.save(model, path)
    tensors, kv = _read(path)
    assert kv["general.architecture"] == arch and kv["%s.attention.head_count_kv" % arch] == 2
    assert "output.weight" in tensors   # the packed head (Qwen2's tied one too: quantize_ packed it)
    q = model.model.layers[1].self_attn.q_proj
    assert _same(_decode(tensors["blk.1.attn_q.weight"]), q.weight.dequantize())   # neox rope: rows kept
    if bias:
        assert torch.equal(_decode(tensors["blk.1.attn_q.bias"]), q.bias.detach().float())
    return kv, tensors


@pytest.fixture(scope="module")
def minilm_export(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("minilm")
    folder = hc.convert(hc.minilm_folder(), tmp / "grit")
    path = str(tmp / "minilm.gguf")
    assert cli_main(["export", folder, path]) == 0
    return folder, path


def test_bert_embedder_exports_with_llama_cpps_bert_names_pooling_and_wordpiece_vocab(minilm_export):
    folder, path = minilm_export
    tensors, kv = _read(path)
    assert kv["general.architecture"] == "bert"
    block = ["attn_q", "attn_k", "attn_v", "attn_output", "attn_output_norm", "ffn_up", "ffn_down",
             "layer_output_norm"]
    want = {"token_embd.weight", "position_embd.weight", "token_types.weight", "token_embd_norm.weight",
            "token_embd_norm.bias"}
    for b in range(6):
        for n in block:
            want |= {"blk.%d.%s.weight" % (b, n), "blk.%d.%s.bias" % (b, n)}
    assert set(tensors) == want
    assert kv["bert.block_count"] == 6 and kv["bert.embedding_length"] == 384
    assert kv["bert.attention.head_count"] == 12 and kv["bert.attention.causal"] is False
    assert kv["bert.pooling_type"] == gguf.PoolingType.MEAN and kv["bert.attention.layer_norm_epsilon"] > 0
    assert kv["tokenizer.ggml.model"] == "bert"
    tokens = kv["tokenizer.ggml.tokens"]
    with open(os.path.join(hc.minilm_folder(), "tokenizer.json"), encoding="utf-8") as f:
        vocab = json.load(f)["model"]["vocab"]
    assert len(tokens) == len(vocab) == 30522
    assert tokens[vocab["[CLS]"]] == "[CLS]" and tokens[vocab["the"]] == "\u2581the"
    assert tokens[vocab["##s"]] == "s"
    # the special tokens, by gguf-py's SpecialVocab from the folder (as llama.cpp's converter writes them)
    assert kv["tokenizer.ggml.bos_token_id"] == vocab["[CLS]"]
    assert kv["tokenizer.ggml.seperator_token_id"] == vocab["[SEP]"]
    # every linear layer is MXFP4 with its descriptor, decoding to the folder's weights
    state = tg.load(os.path.join(folder, "model.safetensors"))
    w = state["encoder.layer.3.attention.self.query.weight"]
    assert _same(_decode(tensors["blk.3.attn_q.weight"]), w.dequantize())
    assert "grit.desc.blk.3.attn_q.weight" in kv
    assert tensors["blk.3.attn_q.bias"].tensor_type == gguf.GGMLQuantizationType.F32


def test_source_layout_keeps_the_checkpoints_names(minilm_export, tmp_path):
    folder, _ = minilm_export
    path = str(tmp_path / "src.gguf")
    assert cli_main(["export", folder, path, "--layout", "source"]) == 0
    tensors, kv = _read(path)
    assert kv["general.architecture"] == "torch_grit"
    assert "encoder.layer.3.attention.self.query.weight" in tensors


@pytest.mark.parametrize("change,match", [
    ({"model_type": "gpt_neox"}, "model_type 'gpt_neox'"),
    ("extra", "extra_table: no llama.cpp llama tensor"),
    ({"rope_parameters": {"rope_type": "dynamic", "rope_theta": 5e5, "factor": 8.0}}, "rope_type 'dynamic'"),
    ({"num_attention_heads": 5}, "128 rows do not split into 5 heads"),
])
def test_llama_cpp_layout_refusals_write_nothing(tmp_path, change, match):
    model = _llama()
    tg.quantize_(model, "MXFP4")
    config = model.config.to_dict()
    if change == "extra":
        model.register_buffer("extra_table", torch.zeros(3))
    else:
        config.update(change)
    path = tmp_path / "m.gguf"
    path.write_bytes(b"old")
    with pytest.raises(ValueError, match=match) as e:
        tg.save(model, str(path), layout="llama.cpp", config=config)
    assert "nothing was written" in str(e.value)
    assert path.read_bytes() == b"old" and sorted(os.listdir(tmp_path)) == ["m.gguf"]


def test_auto_layout_keeps_source_names_for_an_architecture_it_does_not_know(tmp_path):
    model = _llama()
    path = str(tmp_path / "m.gguf")
    tg.save(model, path, config=dict(model.config.to_dict(), model_type="gpt_neox"))
    tensors, kv = _read(path)
    assert kv["general.architecture"] == "torch_grit" and "model.layers.0.self_attn.q_proj.weight" in tensors


@pytest.mark.parametrize("config_change,tokenizer,match", [
    ({"num_hidden_layers": 10 ** 40}, None, "num_hidden_layers"),          # fuzz_gguf_export's finds
    ({"rms_norm_eps": 1e300}, None, "rms_norm_eps is 1e\\+300"),
    ({"hidden_size": "128"}, None, "hidden_size is '128'"),
    ({}, {"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "decoder": {"type": "ByteLevel"},
          "pre_tokenizer": {"type": "ByteLevel"}}, "no merges"),
    ({}, {"model": {"type": "BPE", "vocab": ["a"]}}, "model.vocab is not an object"),
    ({}, {"model": {"type": "WordPiece", "vocab": {"a": 0}}, "added_tokens": [{"id": "0"}]}, "added_tokens"),
    ({}, [], "no \"model\" object"),
])
def test_a_malformed_config_or_tokenizer_is_refused_naming_the_field(tmp_path, config_change, tokenizer, match):
    model = _llama()
    tg.quantize_(model, "MXFP4")
    tok_dir = None
    if tokenizer is not None:
        tok_dir = tmp_path / "tok"
        tok_dir.mkdir()
        (tok_dir / "tokenizer.json").write_text(json.dumps(tokenizer))
    path = tmp_path / "m.gguf"
    with pytest.raises(ValueError, match=match) as e:
        tg.save(model, str(path), config=dict(model.config.to_dict(), **config_change), tokenizer=tok_dir)
    assert "nothing was written" in str(e.value) and not path.exists()
