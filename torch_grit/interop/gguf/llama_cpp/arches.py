"""The architectures llama.cpp's layout is written for, and their hyperparameters.

Each Hugging Face ``model_type`` names the gguf architecture llama.cpp runs it as and what
llama.cpp's converter changes on the way: the row order of Llama's q and k, Gemma's norms
(its RMSNorm scales by 1 + w, llama.cpp's by w, so the converter stores w + 1), and whether
llama.cpp has a head of its own or always reads the embedding. ``hparams`` turns a config into
the ``<arch>.*`` keys (a list of GGUFWriter calls) and the tensors llama.cpp computes rope from
(``rope_freqs`` for Llama 3's scaling, Phi-3's long and short factors). Everything is checked
here, before a byte is written; a config llama.cpp would run differently from transformers
(a rope kind it does not have, Gemma 2's attention scale of its 27B model on another size,
another activation) is refused naming the field.
"""

import math
from typing import NamedTuple

import numpy as np

from .common import maybe, need, refuse


class Arch(NamedTuple):
    gguf: str                   # gguf.MODEL_ARCH member
    family: str                 # the hyperparameter writer: decoder, gemma, gemma3, phi3, bert
    reorder_qk: bool            # q/k rows interleaved head by head for ggml's rotary pairs
    norm_shift: float = 0.0     # added to every *norm.weight
    head_is_embedding: bool = False   # llama.cpp has no output.weight: the head must be token_embd
    act: tuple = ("silu",)      # the MLP activations llama.cpp's graph computes for it


ARCHES = {
    "llama": Arch("LLAMA", "decoder", True),
    "mistral": Arch("LLAMA", "decoder", True),
    "qwen2": Arch("QWEN2", "decoder", False),
    "qwen3": Arch("QWEN3", "decoder", False),
    "gemma": Arch("GEMMA", "gemma", False, 1.0, True, ("gelu_pytorch_tanh",)),
    "gemma2": Arch("GEMMA2", "gemma", False, 1.0, True, ("gelu_pytorch_tanh",)),
    "gemma3_text": Arch("GEMMA3", "gemma3", False, 1.0, False, ("gelu_pytorch_tanh",)),
    "phi3": Arch("PHI3", "phi3", False),
    "bert": Arch("BERT", "bert", False, act=("gelu",)),
}
POOLING = {"mean": "MEAN", "cls": "CLS", "last": "LAST", "none": "NONE"}
# llama.cpp's Gemma 2 and 3 take their attention scale from the model's size: 1/sqrt(hidden/heads)
# for the 27B models (46 and 62 blocks), else 1/sqrt(head_dim) (src/models/gemma2.cpp, gemma3.cpp).
GEMMA_27B_BLOCKS = {"gemma2": 46, "gemma3_text": 62}


def _activation(cfg, arch):
    act = cfg.get("hidden_activation") or cfg.get("hidden_act")
    if act not in arch.act:
        refuse("config.json: hidden activation %r; llama.cpp's %s graph computes %s"
               % (act, cfg.get("model_type"), " / ".join(arch.act)))


def _rope(cfg):
    """(parameters, kind, theta) of a config's rope, in transformers 5's rope_parameters or the
    older rope_scaling + rope_theta."""
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    if not isinstance(rope, dict):
        refuse("config.json: rope parameters %r are not an object" % (rope,))
    if "full_attention" in rope or "sliding_attention" in rope:
        refuse("config.json: rope parameters per attention kind; this export writes one rope for every layer")
    kind = rope.get("rope_type", rope.get("type")) or "default"
    theta = rope.get("rope_theta", cfg.get("rope_theta"))
    return rope, kind, (None if theta is None else need({"rope_theta": theta}, "rope_theta", kind=float))


def _original_context(cfg, rope):
    return need(dict(cfg, **rope), "original_max_position_embeddings")


def _rope_scaling(kv, cfg, rope, kind, head_dim, theta, allowed):
    """llama.cpp's keys for a scaled rope, and the tensors it needs (Llama 3's rope_freqs)."""
    if kind == "default":
        return []
    if kind not in allowed:
        refuse("config.json: rope_type %r; llama.cpp's %s layout here takes %s"
               % (kind, cfg.get("model_type"), ", ".join(allowed)))
    import gguf
    where = "config.json rope parameters"
    factor = need(rope, "factor", kind=float, where=where)
    if kind == "linear":
        kv += [("add_rope_scaling_type", gguf.RopeScalingType.LINEAR), ("add_rope_scaling_factor", factor)]
        return []
    if kind == "yarn":
        for key in ("mscale", "mscale_all_dim"):
            if rope.get(key) is not None:
                refuse("%s: %s (DeepSeek's YaRN attention scale) has no llama.cpp key" % (where, key))
        if rope.get("truncate", True) is not True:
            refuse("%s: truncate=False; llama.cpp's YaRN rounds its correction range to whole dimensions"
                   % where)
        kv += [("add_rope_scaling_type", gguf.RopeScalingType.YARN), ("add_rope_scaling_factor", factor),
               ("add_rope_scaling_orig_ctx_len", _original_context(cfg, rope))]
        for key, call in (("extrapolation_factor", "add_rope_scaling_yarn_ext_factor"),
                          ("attention_factor", "add_rope_scaling_yarn_attn_factor"),
                          ("beta_fast", "add_rope_scaling_yarn_beta_fast"),
                          ("beta_slow", "add_rope_scaling_yarn_beta_slow")):
            value = maybe(rope, key, where=where)
            if value is not None:
                kv.append((call, value))
        return []
    # llama3: llama.cpp divides each rotary frequency by rope_freqs[i]; transformers scales the
    # frequencies below the low-frequency wavelength by 1/factor and blends in between.
    low = need(rope, "low_freq_factor", kind=float, where=where, default=1.0)
    high = need(rope, "high_freq_factor", kind=float, where=where, default=4.0)
    if high <= low:
        refuse("%s: high_freq_factor %r is not above low_freq_factor %r" % (where, high, low))
    old = _original_context(cfg, rope)
    base = theta if theta is not None else 10000.0
    freqs = 1.0 / (base ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
    factors = []
    for f in freqs:
        wavelen = 2 * math.pi / f
        if wavelen < old / high:
            factors.append(1.0)
        elif wavelen > old / low:
            factors.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            factors.append(1.0 / ((1 - smooth) / factor + smooth))
    return [(gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.ROPE_FREQS] + ".weight", np.array(factors, dtype=np.float32))]


def _common(kv, cfg, n_blocks, heads):
    kv += [("add_block_count", n_blocks), ("add_context_length", need(cfg, "max_position_embeddings")),
           ("add_embedding_length", need(cfg, "hidden_size")),
           ("add_feed_forward_length", need(cfg, "intermediate_size")), ("add_head_count", heads)]


def _decoder(kv, cfg):
    kv += [("add_head_count_kv", need(cfg, "num_key_value_heads", "num_attention_heads")),
           ("add_layer_norm_rms_eps", need(cfg, "rms_norm_eps", kind=float)),
           ("add_vocab_size", need(cfg, "vocab_size"))]


def hparams(cfg, arch, n_blocks, pooling):
    """(kv, extra): the GGUFWriter calls that write ``<arch>.*``, and the generated tensors as
    (GGUF name, float32 array)."""
    import gguf

    kind = cfg.get("model_type")
    heads = need(cfg, "num_attention_heads")
    kv, extra = [], []
    _common(kv, cfg, n_blocks, heads)
    if arch.family == "bert":
        kv += [("add_layer_norm_eps", need(cfg, "layer_norm_eps", kind=float)), ("add_causal_attention", False),
               ("add_token_type_count", need(dict(cfg, type_vocab_size=cfg.get("type_vocab_size") or 1),
                                             "type_vocab_size")),
               ("add_vocab_size", need(cfg, "vocab_size"))]
        if pooling is not None:
            kv.append(("add_pooling_type", gguf.PoolingType[POOLING[pooling]]))
        return kv, extra
    _activation(cfg, arch)
    _decoder(kv, cfg)
    explicit_head_dim = cfg.get("head_dim") is not None
    head_dim = need(cfg, "head_dim") if explicit_head_dim else need(cfg, "hidden_size") // heads
    if arch.family == "gemma3":
        _gemma3(kv, cfg, n_blocks, heads, head_dim)
        return kv, extra
    rope, rope_kind, theta = _rope(cfg)
    if theta is not None:
        kv.append(("add_rope_freq_base", theta))
    if arch.family == "decoder":
        kv.append(("add_rope_dimension_count", head_dim))
        if explicit_head_dim:
            kv += [("add_key_length", head_dim), ("add_value_length", head_dim)]
        extra += _rope_scaling(kv, cfg, rope, rope_kind, head_dim, theta, ("linear", "yarn", "llama3"))
    elif arch.family == "gemma":
        kv += [("add_key_length", head_dim), ("add_value_length", head_dim)]
        _rope_scaling(kv, cfg, rope, rope_kind, head_dim, theta, ())
        if kind == "gemma2":
            _gemma2(kv, cfg, n_blocks, heads, head_dim)
    else:
        extra += _phi3(kv, cfg, rope, rope_kind, heads)
    return kv, extra


def _query_scale(cfg, n_blocks, heads, head_dim):
    kind = cfg.get("model_type")
    scale_dim = need(cfg, "hidden_size") // heads if n_blocks == GEMMA_27B_BLOCKS[kind] else head_dim
    if cfg.get("query_pre_attn_scalar", head_dim) != scale_dim:
        refuse("config.json: query_pre_attn_scalar is %r; llama.cpp's %s of %d blocks scales queries by "
               "1/sqrt(%d)" % (cfg.get("query_pre_attn_scalar"), kind, n_blocks, scale_dim))


def _gemma2(kv, cfg, n_blocks, heads, head_dim):
    for key, call in (("attn_logit_softcapping", "add_attn_logit_softcapping"),
                      ("final_logit_softcapping", "add_final_logit_softcapping")):
        # llama.cpp's Gemma 2 always caps (50 and 30 when the key is absent)
        kv.append((call, need(cfg, key, kind=float)))
    kv.append(("add_sliding_window", need(cfg, "sliding_window")))
    _query_scale(cfg, n_blocks, heads, head_dim)
    layer_types = cfg.get("layer_types")
    expected = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n_blocks)]
    if layer_types is not None and list(layer_types) != expected:
        refuse("config.json: layer_types %r; llama.cpp's Gemma 2 alternates sliding and full attention, "
               "sliding first" % (layer_types,))


def _phi3(kv, cfg, rope, rope_kind, heads):
    """Phi-3: rope over partial_rotary_factor of each head, llama.cpp's sliding window key, and for
    LongRoPE its long and short factors and attention factor."""
    import gguf

    n_embd = need(cfg, "hidden_size")
    partial = rope.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0))
    if not isinstance(partial, (int, float)) or isinstance(partial, bool) or not 0 < partial <= 1:
        refuse("config.json: partial_rotary_factor %r is not in (0, 1]" % (partial,))
    rope_dims = int(partial * n_embd) // heads
    orig = _original_context(cfg, rope)
    window = cfg.get("sliding_window")
    kv += [("add_rope_scaling_orig_ctx_len", orig), ("add_rope_dimension_count", rope_dims),
           ("add_sliding_window", 0 if window is None else need(cfg, "sliding_window"))]
    if rope_kind == "default":
        return []
    if rope_kind not in ("longrope", "su"):
        refuse("config.json: rope_type %r; llama.cpp's Phi-3 takes default and longrope" % rope_kind)
    where = "config.json rope parameters"
    factors = {}
    for key in ("long_factor", "short_factor"):
        f = rope.get(key)
        if not isinstance(f, list) or len(f) != rope_dims // 2 or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < 3.4e38 for v in f):
            refuse("%s: %s must be %d positive numbers (half the rotary dimensions)" % (where, key, rope_dims // 2))
        factors[key] = np.array(f, dtype=np.float32)
    scale = need(cfg, "max_position_embeddings") / orig
    attn = maybe(rope, "attention_factor", where=where)
    if attn is None:
        attn = math.sqrt(1 + math.log(scale) / math.log(orig)) if scale > 1.0 else 1.0
    kv.append(("add_rope_scaling_attn_factors", attn))
    return [(gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.ROPE_FACTORS_LONG] + ".weight", factors["long_factor"]),
            (gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.ROPE_FACTORS_SHORT] + ".weight", factors["short_factor"])]


def _gemma3(kv, cfg, n_blocks, heads, head_dim):
    """Gemma 3 (text): a rope per attention kind (full layers: rope_freq_base and a linear scaling;
    sliding layers: rope_freq_base_swa, unscaled, as llama.cpp runs them), the layer kinds as
    llama.cpp's sliding_window_pattern array, q/k norms (shifted by one with the other norms)."""
    where = "config.json rope parameters"
    rope = cfg.get("rope_parameters")
    if isinstance(rope, dict) and ("full_attention" in rope or "sliding_attention" in rope):
        full, local = rope.get("full_attention"), rope.get("sliding_attention", {"rope_theta": 10000.0})
    else:   # the older form: rope_theta, rope_scaling and rope_local_base_freq
        full = dict(cfg.get("rope_scaling") or {}, rope_theta=cfg.get("rope_theta", 1000000.0))
        local = {"rope_theta": cfg.get("rope_local_base_freq", 10000.0)}
    if not isinstance(full, dict) or not isinstance(local, dict):
        refuse("%s: full_attention and sliding_attention must be objects" % where)
    theta = need(full, "rope_theta", kind=float, where=where + " (full_attention)")
    kv += [("add_rope_freq_base", theta),
           ("add_rope_freq_base_swa", need(local, "rope_theta", kind=float, where=where + " (sliding_attention)")),
           ("add_key_length", head_dim), ("add_value_length", head_dim)]
    if (local.get("rope_type", local.get("type")) or "default") != "default":
        refuse("%s: sliding_attention rope_type %r; llama.cpp's Gemma 3 runs its sliding layers on plain rope"
               % (where, local.get("rope_type", local.get("type"))))
    _rope_scaling(kv, cfg, full, full.get("rope_type", full.get("type")) or "default", head_dim, theta, ("linear",))
    if cfg.get("attn_logit_softcapping") is not None:
        refuse("config.json: attn_logit_softcapping %r; llama.cpp's Gemma 3 does not cap attention logits"
               % (cfg.get("attn_logit_softcapping"),))
    if cfg.get("use_bidirectional_attention"):
        refuse("config.json: use_bidirectional_attention; llama.cpp runs that as EmbeddingGemma, not Gemma 3")
    if cfg.get("final_logit_softcapping") is not None:
        kv.append(("add_final_logit_softcapping", need(cfg, "final_logit_softcapping", kind=float)))
    _query_scale(cfg, n_blocks, heads, head_dim)
    layer_types = cfg.get("layer_types")
    if not isinstance(layer_types, list) or len(layer_types) != n_blocks or not all(
            t in ("sliding_attention", "full_attention") for t in layer_types):
        refuse("config.json: layer_types %r; Gemma 3 names each of its %d layers sliding_attention or "
               "full_attention" % (layer_types, n_blocks))
    if "sliding_attention" in layer_types:
        kv += [("add_sliding_window", need(cfg, "sliding_window")),
               ("add_sliding_window_pattern", [t == "sliding_attention" for t in layer_types])]
