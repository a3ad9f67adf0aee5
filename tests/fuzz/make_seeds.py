"""Writes the fuzzers' seed corpora (generated, never hand-edited binaries).

Usage: python tests/fuzz/make_seeds.py OUTDIR
Seeds: each reference descriptor followed by a shape and its exact plane
lengths (fuzz_check); grade spellings (fuzz_grade); one input per decode
grade with encoded-looking bytes (fuzz_decode); for the Python readers
(fuzz_safetensors, fuzz_gguf, fuzz_gguf_import) every file of the hostile corpus
(tests/corpus/make_corpus.py) and valid files from the real writers
(torch_grit.save, GPTQ/AWQ/compressed-tensors layouts with their config.json,
gguf.GGUFWriter with declared and inferred contracts), small so the fuzzers
stay fast.
"""

import json
import os
import struct
import sys
import tempfile

import torch_grit as tg


def main(out):
    for name in ("fuzz_check", "fuzz_grade", "fuzz_decode"):
        os.makedirs(os.path.join(out, name), exist_ok=True)
    for i, grade in enumerate((tg.Grade.MXFP4, tg.Grade.Q4KS, tg.Grade.NVF4, tg.Grade.I8S24,
                               tg.Grade.MXFP4_RNE, tg.Grade.NVF4_RTZ)):
        desc = tg.Descriptor(grade, (256,))
        lens = desc.expected_plane_bytes()
        blob = desc.to_bytes() + bytes([1]) + struct.pack("<q", 256) + struct.pack("<4Q", *lens)
        planes = tg.encode_planes(grade, [((j * 37) % 17 - 8) / 4.0 for j in range(256)])
        with open(os.path.join(out, "fuzz_check", "ref%d" % i), "wb") as f:
            f.write(blob + b"".join(planes))
        with open(os.path.join(out, "fuzz_grade", "ref%d" % i), "w") as f:
            f.write(grade.canonical)
        with open(os.path.join(out, "fuzz_decode", "ref%d" % i), "wb") as f:
            f.write(bytes([i % 4, 0]) + b"".join(planes))
    with open(os.path.join(out, "fuzz_grade", "aliases"), "w") as f:
        f.write("GRIT1( E = FP4 , k0=032, s0=ue8m0, esr=ocp-mx, ao=pairwise_8 )")
    reader_seeds(out)


# libFuzzer's -max_len defaults to the largest seed; two hostile files of 200-600 KB
# would make every mutated input that large and the runs slow.
MAX_SEED_BYTES = 64 << 10
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def st_input(blob, config=None):
    """fuzz_safetensors' input: a flag byte, then (flag bit 0) a u16 length and config.json, then the file."""
    if config is None:
        return b"\0" + blob
    raw = json.dumps({"quantization_config": config}).encode()
    return b"\1" + struct.pack("<H", len(raw)) + raw + blob


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _safetensors_seeds(tmp, W):
    import numpy as np
    import torch

    seeds = {}
    for grade, shape in (("MXFP4", (64, 32)), ("Q4KS", (256, 16)), ("NVF4", (64, 16))):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(*shape), torch.nn.Linear(shape[1], 8))
        tg.quantize_(model, grade)
        path = os.path.join(tmp, "ours.safetensors")
        tg.save(model, path)
        seeds["ours_" + grade] = st_input(_read(path))
    layers = W.layer_names(1)
    gptq = {p: W.gptq_module(W.weights(i, 16, 64), 32) for i, p in enumerate(layers)}
    path = W.write_quantized_folder(os.path.join(tmp, "gptq"), gptq, None)
    seeds["gptq"] = st_input(_read(path), {"quant_method": "gptq", "bits": 4, "group_size": 32,
                                           "desc_act": False, "sym": False})
    seeds["gptq_no_config"] = st_input(_read(path))
    gptq3 = {p: W.gptq_module(W.weights(i, 32, 64), 32, bits=3) for i, p in enumerate(layers)}
    path = W.write_quantized_folder(os.path.join(tmp, "gptq3"), gptq3, None)
    seeds["gptq_3bit"] = st_input(_read(path), {"quant_method": "gptq", "bits": 3, "group_size": 32,
                                                "desc_act": False, "sym": False})
    perm = np.random.default_rng(0).permutation(64)
    act = {p: W.gptq_act_order_module(W.weights(i, 16, 64), 32, perm) for i, p in enumerate(layers)}
    path = W.write_quantized_folder(os.path.join(tmp, "gptq_act"), act, None)
    seeds["gptq_act_order"] = st_input(_read(path), {"quant_method": "gptq", "bits": 4, "group_size": 32,
                                                     "desc_act": True, "sym": False})
    awq = {p: W.awq_module(W.weights(i, 16, 64), 32) for i, p in enumerate(layers)}
    path = W.write_quantized_folder(os.path.join(tmp, "awq"), awq, None)
    seeds["awq"] = st_input(_read(path), {"quant_method": "awq", "bits": 4, "group_size": 32,
                                          "version": "gemm", "zero_point": True})
    t = {}
    for i, p in enumerate(layers):
        w = torch.from_numpy(W.weights(i, 16, 64))
        scale = w.abs().amax(1, keepdim=True) / 448.0
        t[p + ".weight"] = (w / scale).to(torch.float8_e4m3fn)
        t[p + ".weight_scale"] = scale.float()
    path = os.path.join(tmp, "ct.safetensors")
    W.save_file(t, path)
    seeds["compressed_tensors_fp8"] = st_input(_read(path), {
        "quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
            "num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True}}}})
    t = {p + ".weight_packed": torch.from_numpy(np.arange(16 * 8, dtype=np.int32).reshape(16, 8)) for p in layers}
    t.update({p + ".weight_scale": torch.ones(16, 2, dtype=torch.float16) for p in layers})
    t.update({p + ".weight_shape": torch.tensor([16, 64]) for p in layers})
    W.save_file(t, path)
    seeds["compressed_tensors_pack_quantized"] = st_input(_read(path), {
        "quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": [],
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
            "num_bits": 4, "type": "int", "strategy": "group", "group_size": 32, "symmetric": True}}}})
    t = {p + ".weight": torch.from_numpy((np.arange(16 * 64) % 255 - 127).astype(np.int8).reshape(16, 64))
         for p in layers}
    t.update({p + ".weight_scale": torch.ones(16, 2, dtype=torch.float16) for p in layers})
    t.update({p + ".weight_zero_point": torch.zeros(16, 2, dtype=torch.int8) for p in layers})
    W.save_file(t, path)
    seeds["compressed_tensors_int_quantized"] = st_input(_read(path), {
        "quant_method": "compressed-tensors", "format": "int-quantized", "ignore": [],
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
            "num_bits": 8, "type": "int", "strategy": "group", "group_size": 32, "symmetric": False}}}})
    layer = tg.nn.GritLinear.from_linear(torch.nn.Linear(64, 16), "MXFP4")
    layer.set_input_perm_(torch.from_numpy(perm))
    path = os.path.join(tmp, "permuted.safetensors")
    tg.save(torch.nn.Sequential(layer), path)
    seeds["ours_input_perm"] = st_input(_read(path))
    return seeds


def _gguf_seeds(tmp, W):
    import gguf

    from torch_grit.contract.placement import WELL_KNOWN

    aos = (WELL_KNOWN["BLOCK_AOS"], WELL_KNOWN["BLOCK_AOS"], None)
    q8 = tg.Descriptor(tg.Grade.parse("grit1(e=s8,k0=32,s0=binary16,esr=ratiomaxabs)"), (4, 64), placement=aos)
    ft = gguf.LlamaFileType
    files = {
        "declared_q8": ([("blk.0.attn_q.weight", W.weights(1, 4, 64), "Q8_0")], ft.MOSTLY_Q8_0,
                        {"grit.desc.blk.0.attn_q.weight": q8.to_bytes().hex()}),
        "inferred_mixed": ([("blk.0.attn_q.weight", W.weights(1, 4, 64), "Q8_0"),
                            ("blk.0.ffn_up.weight", W.weights(2, 2, 64), "Q4_0"),
                            ("blk.0.ffn_gate.weight", W.weights(3, 2, 64), "MXFP4"),
                            ("output_norm.weight", W.weights(4, 1, 64)[0], "F32")], ft.MOSTLY_Q4_0, None),
        "inexpressible": ([("blk.0.ffn_up.weight", W.weights(1, 2, 64), "IQ4_NL"),
                           ("blk.0.ffn_down.weight", W.weights(3, 1, 256), "Q6_K")], ft.MOSTLY_IQ4_NL, None),
    }
    seeds = {}
    for name, (tensors, file_type, kv) in files.items():
        seeds[name] = _read(W.write_gguf(os.path.join(tmp, name + ".gguf"), tensors, file_type, kv))
    return seeds


def reader_seeds(out):
    """Seeds of fuzz_safetensors and fuzz_gguf (written by real writers; nothing binary is committed)."""
    sys.path[:0] = [os.path.join(ROOT, "tests", "corpus"), os.path.join(ROOT, "tests", "python", "scan")]
    import make_corpus
    import writers as W

    st_dir, gguf_dir = os.path.join(out, "fuzz_safetensors"), os.path.join(out, "fuzz_gguf")
    os.makedirs(st_dir, exist_ok=True)
    os.makedirs(gguf_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus")
        for entry in make_corpus.generate(corpus):
            blob = _read(os.path.join(corpus, entry["file"]))
            if len(blob) > MAX_SEED_BYTES:
                continue   # st_huge_rank, st_header_deep_nesting: tests/python/test_hostile_files.py has them
            if entry["kind"] == "safetensors":
                blob = st_input(blob)
            with open(os.path.join(st_dir if entry["kind"] == "safetensors" else gguf_dir, entry["class"]), "wb") as f:
                f.write(blob)
        for folder, seeds in ((st_dir, _safetensors_seeds(tmp, W)), (gguf_dir, _gguf_seeds(tmp, W))):
            for name, blob in seeds.items():
                with open(os.path.join(folder, name), "wb") as f:
                    f.write(blob)
        # fuzz_gguf_import: a flag byte (bit 0: requantize), then the file; the scan's GGUF
        # seeds, and files torch_grit.save writes with declared descriptors.
        import_dir = os.path.join(out, "fuzz_gguf_import")
        os.makedirs(import_dir, exist_ok=True)
        for name in os.listdir(gguf_dir):
            blob = _read(os.path.join(gguf_dir, name))
            for flag in (0, 1):
                with open(os.path.join(import_dir, "%s.%d" % (name, flag)), "wb") as f:
                    f.write(bytes([flag]) + blob)
        for grade in ("MXFP4", "Q4KS", "grit1(e=s8,k0=32,s0=binary16,esr=ratiomaxabs)"):
            import torch

            path = os.path.join(tmp, "ours.gguf")
            w = tg.quantize(torch.randn(4, 256, generator=torch.Generator().manual_seed(0)), grade)
            tg.save({"blk.0.ffn_down.weight": w, "output_norm.weight": torch.ones(8)}, path)
            with open(os.path.join(import_dir, "ours_%s" % tg.Grade(grade).id), "wb") as f:
                f.write(b"\0" + _read(path))
    export_seeds(os.path.join(out, "fuzz_gguf_export"))


def export_seeds(folder):
    """fuzz_gguf_export: a flag byte, a u16 length and config.json, then tokenizer.json (and, with
    flag bit 1, a u16 length before it and tokenizer_config.json after): a Llama config with a
    byte-level BPE and a WordPiece tokenizer trained here, small; Gemma 2, Gemma 3, Phi-3 LongRoPE, Llama 3
    rope and YaRN configs without a tokenizer."""
    import json
    import struct

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    os.makedirs(folder, exist_ok=True)
    config = json.dumps({"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 64,
                         "intermediate_size": 128, "num_attention_heads": 2, "num_key_value_heads": 1,
                         "max_position_embeddings": 32, "rms_norm_eps": 1e-6, "vocab_size": 64,
                         "rope_theta": 10000.0}).encode()
    text = ["a packed weight carries its contract"] * 4
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(text, trainers.BpeTrainer(vocab_size=40, special_tokens=["<s>"], show_progress=False))
    wp = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wp.pre_tokenizer = pre_tokenizers.Whitespace()
    wp.train_from_iterator(text, trainers.WordPieceTrainer(vocab_size=40, special_tokens=["[UNK]", "[CLS]"],
                                                           show_progress=False))
    tok_cfg = json.dumps({"bos_token": "<s>", "add_bos_token": True}).encode()
    for name, tok in (("bpe", bpe), ("wordpiece", wp)):
        body = tok.to_str().encode()
        with open(os.path.join(folder, name), "wb") as f:
            f.write(bytes([1]) + struct.pack("<H", len(config)) + config + body)
        with open(os.path.join(folder, name + "_with_config"), "wb") as f:
            f.write(bytes([3]) + struct.pack("<H", len(config)) + config + struct.pack("<H", len(body)) + body
                    + tok_cfg)
    with open(os.path.join(folder, "no_tokenizer"), "wb") as f:
        f.write(bytes([0]) + struct.pack("<H", len(config)) + config)
    # the other architectures' hyperparameters and the rope kinds, without a tokenizer
    base = json.loads(config)
    others = {
        "gemma2": dict(base, model_type="gemma2", head_dim=32, query_pre_attn_scalar=32, sliding_window=16,
                       attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
                       hidden_activation="gelu_pytorch_tanh", layer_types=["sliding_attention"]),
        "gemma3": dict(base, model_type="gemma3_text", head_dim=32, query_pre_attn_scalar=32, sliding_window=8,
                       hidden_activation="gelu_pytorch_tanh", layer_types=["sliding_attention"], rope_parameters={
                           "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                           "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}),
        "phi3_longrope": dict(base, model_type="phi3", original_max_position_embeddings=16, rope_parameters={
            "rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
            "long_factor": [2.0] * 8, "short_factor": [1.0] * 8}),
        "llama3_rope": dict(base, rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                                                   "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                   "original_max_position_embeddings": 16}),
        "yarn_rope": dict(base, model_type="qwen2", rope_parameters={
            "rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 16}),
    }
    for name, cfg in others.items():
        body = json.dumps(cfg).encode()
        with open(os.path.join(folder, name), "wb") as f:
            f.write(bytes([0]) + struct.pack("<H", len(body)) + body)


if __name__ == "__main__":
    main(sys.argv[1])
