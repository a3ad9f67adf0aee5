"""llama.cpp's conventions for a GGUF model file: tensor names, row order, hyperparameters, vocab.

A GGUF file that llama.cpp runs is more than a container of tensors: the tensors carry
llama.cpp's names (``blk.N.attn_q.weight``, from gguf-py's ``TensorNameMap``), the attention
projections of a Llama carry their rows in the order llama.cpp's rotary embedding expects,
the hyperparameters sit in ``<arch>.*`` keys, and the tokenizer in ``tokenizer.ggml.*``. This
module plans that for the architectures it knows, from a Hugging Face config: ``Layout.rename``,
``Layout.row_order`` and ``Layout.write_kv``. Rows are independent in every GRIT grade and every
ggml block type (a block never spans two rows), so reordering rows moves bytes and changes no
value: the descriptor of a reordered tensor is the descriptor of the original.
"""

import json
import os

import numpy as np

# Hugging Face model_type -> (gguf MODEL_ARCH member, whether q/k rows are reordered for rope)
ARCHES = {"llama": ("LLAMA", True), "mistral": ("LLAMA", True), "qwen2": ("QWEN2", False),
          "qwen3": ("QWEN3", False), "bert": ("BERT", False)}
LAYOUTS = ("auto", "llama.cpp", "source")
POOLING = {"mean": "MEAN", "cls": "CLS", "last": "LAST", "none": "NONE"}


def _same_storage(a, b):
    import torch
    plain = [isinstance(t, torch.Tensor) and type(t) is torch.Tensor for t in (a, b)]
    return all(plain) and a.shape == b.shape and a.data_ptr() == b.data_ptr()


def _refuse(message):
    raise ValueError("%s; nothing was written" % message)


def config_dict(config):
    """A config as a dict: a transformers PretrainedConfig, a dict, or a folder / config.json path."""
    if config is None or isinstance(config, dict):
        return config
    if isinstance(config, (str, os.PathLike)):
        path = os.path.join(config, "config.json") if os.path.isdir(config) else str(config)
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    if hasattr(config, "to_dict"):
        return config.to_dict()
    raise TypeError("config: a transformers config, a dict or a path; found %s" % type(config).__name__)


INT_MAX = 2 ** 31 - 1                   # GGUF's uint32 / int32 keys
FLOAT_MAX = 3.4028234663852886e38       # its float32 keys


def _need(cfg, *keys, kind=int):
    """The first of ``keys`` the config has: a positive int up to 2^31 - 1, or (kind=float) a
    positive number a float32 holds."""
    for k in keys:
        v = cfg.get(k)
        if v is None:
            continue
        if kind is int:
            ok = type(v) is int and 0 < v <= INT_MAX
        else:
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= FLOAT_MAX
        if not ok:
            _refuse("config.json: %s is %r; llama.cpp's hyperparameter is a positive %s a GGUF %s holds"
                    % (k, v, "integer" if kind is int else "number", "int32" if kind is int else "float32"))
        return kind(v)
    _refuse("config.json has none of %s, which llama.cpp's %s hyperparameters need"
            % ("/".join(keys), cfg.get("model_type")))


class Layout:
    """llama.cpp's layout for one model: built by ``plan``."""

    def __init__(self, cfg, arch, reorder_qk, n_blocks, pooling, tied_head):
        import gguf

        self.cfg, self.reorder_qk, self.n_blocks = cfg, reorder_qk, n_blocks
        self.arch = gguf.MODEL_ARCH[arch]
        self.arch_name = gguf.MODEL_ARCH_NAMES[self.arch]
        self.names = gguf.get_tensor_name_map(self.arch, n_blocks)
        self.pooling, self.tied_head = pooling, tied_head
        self.kind = cfg.get("model_type")

    # -- names -----------------------------------------------------------------------------------
    def _dropped(self, name):
        if name.endswith((".rotary_emb.inv_freq", "embeddings.position_ids")):
            return True
        if self.kind == "bert":   # llama.cpp's BERT graph is the encoder: no pooler, no MLM / NSP heads
            return name.startswith(("pooler.", "cls."))
        if name == "lm_head.weight" and self.tied_head:
            return True   # tied: llama.cpp reads token_embd when output.weight is absent
        return False

    def rename(self, name):
        """The GGUF name of state-dict tensor ``name``, or None when llama.cpp has no use for it."""
        base = name[len("bert."):] if self.kind == "bert" and name.startswith("bert.") else name
        if self._dropped(base):
            return None
        if base.endswith(".input_perm"):
            _refuse("%s: an input permutation (act-order GPTQ) has no llama.cpp counterpart: llama.cpp "
                    "cannot permute a layer's inputs; export with layout='source'" % name)
        new = self.names.get_name(base, try_suffixes=(".weight", ".bias"))
        if new is None:
            _refuse("%s: no llama.cpp %s tensor has this name (gguf.TensorNameMap); llama.cpp refuses a file "
                    "with tensors it does not expect. Drop it from the state dict, or export with "
                    "layout='source'" % (name, self.arch_name))
        return new

    def row_order(self, name, rows):
        """The row order llama.cpp expects for ``name`` (None: as stored). Hugging Face Llama
        checkpoints hold each head's q and k rows as two halves, [r0 .. r(d/2-1) | i0 ..]; llama.cpp
        rotates adjacent pairs, so its converter interleaves the halves, head by head."""
        if not self.reorder_qk:
            return None
        if name.endswith(("q_proj.weight", "q_proj.bias")):
            heads = _need(self.cfg, "num_attention_heads")
        elif name.endswith(("k_proj.weight", "k_proj.bias")):
            heads = _need(self.cfg, "num_key_value_heads", "num_attention_heads")
        else:
            return None
        if rows % (2 * heads):
            _refuse("%s: %d rows do not split into %d heads of two rotary halves" % (name, rows, heads))
        return np.arange(rows).reshape(heads, 2, rows // heads // 2).swapaxes(1, 2).reshape(-1)

    # -- metadata --------------------------------------------------------------------------------
    def write_kv(self, w, tokenizer):
        """The hyperparameters and the vocab (``tokenizer``: a folder holding tokenizer.json, or None)."""
        cfg = self.cfg
        w.add_block_count(self.n_blocks)
        w.add_context_length(_need(cfg, "max_position_embeddings"))
        w.add_embedding_length(_need(cfg, "hidden_size"))
        w.add_feed_forward_length(_need(cfg, "intermediate_size"))
        heads = _need(cfg, "num_attention_heads")
        w.add_head_count(heads)
        if self.kind == "bert":
            w.add_layer_norm_eps(_need(cfg, "layer_norm_eps", kind=float))
            w.add_causal_attention(False)
            w.add_token_type_count(_need(dict(cfg, type_vocab_size=cfg.get("type_vocab_size") or 1),
                                         "type_vocab_size"))
            if self.pooling is not None:
                import gguf
                w.add_pooling_type(gguf.PoolingType[POOLING[self.pooling]])
        else:
            w.add_head_count_kv(_need(cfg, "num_key_value_heads", "num_attention_heads"))
            w.add_layer_norm_rms_eps(_need(cfg, "rms_norm_eps", kind=float))
            w.add_vocab_size(_need(cfg, "vocab_size"))
            rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
            if not isinstance(rope, dict):
                _refuse("config.json: rope parameters %r are not an object" % (rope,))
            kind = rope.get("rope_type", rope.get("type", "default"))
            if kind not in ("default", None):
                _refuse("config.json: rope_type %r; this export writes llama.cpp's plain rope only" % kind)
            if rope.get("rope_theta", cfg.get("rope_theta")) is not None:
                w.add_rope_freq_base(_need(dict(rope_theta=rope.get("rope_theta", cfg.get("rope_theta"))),
                                           "rope_theta", kind=float))
            head_dim = _need(cfg, "head_dim") if cfg.get("head_dim") is not None else \
                _need(cfg, "hidden_size") // heads
            w.add_rope_dimension_count(head_dim)
            if cfg.get("head_dim") is not None:
                w.add_key_length(head_dim)
                w.add_value_length(head_dim)
        write_vocab(w, tokenizer, self.kind, _need(cfg, "vocab_size"))


def plan(config, state, layout="auto", pooling=None):
    """llama.cpp's layout for a model with this config and ``state`` dict, or None
    (``layout="source"``, or "auto" with no config / an architecture this module does not know).
    The state dict bounds the block count (refused beyond its tensors, before gguf-py sizes a
    name map by it) and says whether the head is still the embedding: one storage, not a copy
    ``quantize_`` packed while the config still calls it tied."""
    if layout not in LAYOUTS:
        raise ValueError("layout is one of %s; found %r" % (LAYOUTS, layout))
    cfg = config_dict(config)
    if layout == "source" or (cfg is None and layout == "auto"):
        return None
    if cfg is None:
        _refuse("layout='llama.cpp' needs the model's config (a Hugging Face model, config=, or a folder)")
    if not isinstance(cfg, dict):
        _refuse("config.json holds a %s, not an object" % type(cfg).__name__)
    kind = cfg.get("model_type")
    if not isinstance(kind, str) or kind not in ARCHES:
        if layout == "auto":
            return None
        _refuse("model_type %r: llama.cpp's layout is written for %s" % (kind, ", ".join(sorted(ARCHES))))
    if pooling is not None and pooling not in POOLING:
        raise ValueError("pooling is one of %s; found %r" % (sorted(POOLING), pooling))
    arch, reorder = ARCHES[kind]
    blocks = _need(cfg, "num_hidden_layers")
    if blocks > len(state):
        _refuse("config.json: num_hidden_layers = %d, but the state dict holds %d tensors (every block "
                "has its own)" % (blocks, len(state)))
    tied = bool(cfg.get("tie_word_embeddings")) and _same_storage(state.get("lm_head.weight"),
                                                                  state.get("model.embed_tokens.weight"))
    return Layout(cfg, arch, reorder, blocks, pooling, tied)


# -- vocab ---------------------------------------------------------------------------------------
def tokenizer_folder(tokenizer, tmp):
    """A folder holding tokenizer.json: ``tokenizer`` itself (a path), or a transformers tokenizer
    saved into ``tmp``; None when there is none."""
    if tokenizer is None:
        return None
    if isinstance(tokenizer, (str, os.PathLike)):
        return str(tokenizer)
    if hasattr(tokenizer, "save_pretrained"):
        tokenizer.save_pretrained(tmp)
        return tmp
    raise TypeError("tokenizer: a folder or a transformers tokenizer; found %s" % type(tokenizer).__name__)


def _tokenizer_parts(doc, path):
    """(model, {id: added token}, {text: id}) of a tokenizer.json, each checked for its type:
    a refusal naming the field, never a KeyError from a stranger's file."""
    model = doc.get("model") if isinstance(doc, dict) else None
    if not isinstance(model, dict):
        _refuse("tokenizer %s: no \"model\" object" % path)
    vocab = model.get("vocab")
    if not isinstance(vocab, dict) or not all(isinstance(k, str) and type(v) is int for k, v in vocab.items()):
        _refuse("tokenizer %s: model.vocab is not an object of token -> integer id (a %s model?)"
                % (path, model.get("type")))
    added = doc.get("added_tokens") or []
    if not isinstance(added, list) or not all(
            isinstance(t, dict) and type(t.get("id")) is int and isinstance(t.get("content"), str) for t in added):
        _refuse("tokenizer %s: added_tokens is not a list of {id, content}" % path)
    special = {t["id"]: t for t in added}
    vocab = dict(vocab)
    for i, t in special.items():
        vocab.setdefault(t["content"], i)
    return model, special, vocab


def _third_party(what, path, fn):
    """gguf-py's readers of a tokenizer folder (SpecialVocab, LlamaHfVocab) over a stranger's
    files: what they raise on a malformed one becomes a refusal naming the folder."""
    try:
        return fn()
    except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError) as e:
        _refuse("tokenizer %s: gguf-py's %s could not read it (%s: %s)" % (path, what, type(e).__name__, e))


def write_vocab(w, folder, kind, n_vocab):
    """``tokenizer.ggml.*`` from a Hugging Face tokenizer.json: WordPiece as llama.cpp's "bert"
    vocab (its phantom-space spelling), byte-level BPE as "gpt2" (with its merges), BPE with byte
    fallback as "llama". With no tokenizer: "none" and the vocab size, so llama.cpp runs the
    model on token ids. Padded to the embedding's rows with unused tokens, as llama.cpp's
    converter pads."""
    import gguf
    from pathlib import Path

    if folder is None:
        w.add_tokenizer_model("none")
        if kind == "bert":   # the llama arch writes llama.vocab_size with its hyperparameters
            w.add_vocab_size(n_vocab)
        return
    path = os.path.join(folder, "tokenizer.json")
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        _refuse("tokenizer %s: %s (the export reads a Hugging Face tokenizer.json)" % (folder, e))
    model, special, vocab = _tokenizer_parts(doc, path)
    if sorted(vocab.values()) != list(range(len(vocab))):
        _refuse("tokenizer %s: token ids are not 0..%d without gaps" % (path, len(vocab) - 1))
    if len(vocab) > n_vocab:
        _refuse("tokenizer %s has %d tokens; the model's embedding has %d rows" % (path, len(vocab), n_vocab))
    tokens = [None] * len(vocab)
    for text, i in vocab.items():
        tokens[i] = text
    types = [gguf.TokenType.CONTROL if i in special and special[i].get("special") else
             gguf.TokenType.USER_DEFINED if i in special else gguf.TokenType.NORMAL for i in range(len(tokens))]
    kind_of = model.get("type")
    merges = False
    if kind_of == "WordPiece":
        tokens = [t if ty == gguf.TokenType.CONTROL else t[2:] if t.startswith("##") else "\u2581" + t
                  for t, ty in zip(tokens, types)]
        w.add_tokenizer_model("bert")
        w.add_tokenizer_pre("default")
    elif kind_of == "BPE" and not model.get("byte_fallback") and (doc.get("decoder") or {}).get("type") == "ByteLevel":
        pre = doc.get("pre_tokenizer") or {}
        if pre.get("type") != "ByteLevel" or not pre.get("use_regex", True):
            _refuse("tokenizer %s: pre-tokenizer %s; llama.cpp's pre-tokenizers are named by the source model, "
                    "and this export names only GPT-2's byte-level one" % (path, pre.get("type")))
        if not isinstance(model.get("merges"), list) or not model["merges"]:
            _refuse("tokenizer %s: a byte-level BPE model with no merges; llama.cpp's BPE vocab needs them" % path)
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("gpt-2")
        merges = True
    elif kind_of == "BPE" and model.get("byte_fallback"):
        tokens, scores, types = [], [], []
        for text, score, ty in _third_party("LlamaHfVocab", folder,
                                            lambda: list(gguf.vocab.LlamaHfVocab(Path(folder)).all_tokens())):
            tokens.append(text.decode("utf-8", "replace") if isinstance(text, bytes) else text)
            scores.append(score)
            types.append(ty)
        if len(tokens) > n_vocab:
            _refuse("tokenizer %s has %d tokens; the model's embedding has %d rows" % (path, len(tokens), n_vocab))
        w.add_tokenizer_model("llama")
        w.add_token_scores(scores + [-1000.0] * (n_vocab - len(tokens)))
    else:
        _refuse("tokenizer %s: a %s model; this export writes WordPiece, byte-level BPE and byte-fallback "
                "BPE vocabularies" % (path, kind_of))
    for i in range(len(tokens), n_vocab):
        tokens.append("[PAD%d]" % i)
        types.append(gguf.TokenType.UNUSED)
    w.add_token_list(tokens)
    w.add_token_types(types)
    special_vocab = _third_party("SpecialVocab", folder,
                                 lambda: gguf.SpecialVocab(folder, load_merges=merges, n_vocab=n_vocab))
    special_vocab.add_to_gguf(w, quiet=True)
