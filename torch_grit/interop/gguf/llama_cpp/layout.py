"""llama.cpp's layout for one model: tensor names, row order, tensor changes, keys, vocab.

``plan`` reads a Hugging Face config and the state dict and checks everything before a byte is
written; the ``Layout`` it returns renames each tensor (gguf-py's ``TensorNameMap``), gives the
row order llama.cpp's rope expects, applies the converter's changes to float tensors (Gemma's
norms), lists the tensors llama.cpp computes rope from, and writes the keys and the vocab.
"""

import numpy as np

from .arches import ARCHES, POOLING, hparams
from .common import config_dict, need, refuse
from .vocab import write_vocab

LAYOUTS = ("auto", "llama.cpp", "source")


def _same_storage(a, b):
    import torch
    plain = [isinstance(t, torch.Tensor) and type(t) is torch.Tensor for t in (a, b)]
    return all(plain) and a.shape == b.shape and a.data_ptr() == b.data_ptr()


class Layout:
    """llama.cpp's layout for one model: built by ``plan``."""

    def __init__(self, cfg, spec, n_blocks, pooling, tied_head):
        import gguf

        self.cfg, self.spec, self.n_blocks = cfg, spec, n_blocks
        self.reorder_qk = spec.reorder_qk
        self.arch = gguf.MODEL_ARCH[spec.gguf]
        self.arch_name = gguf.MODEL_ARCH_NAMES[self.arch]
        self.names = gguf.get_tensor_name_map(self.arch, n_blocks)
        self.pooling, self.tied_head = pooling, tied_head
        self.kind = cfg.get("model_type")
        self.kv, self.extra = hparams(cfg, spec, n_blocks, pooling)

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
            refuse("%s: an input permutation (act-order GPTQ) has no llama.cpp counterpart: llama.cpp "
                   "cannot permute a layer's inputs; export with layout='source'" % name)
        new = self.names.get_name(base, try_suffixes=(".weight", ".bias"))
        if new is None:
            refuse("%s: no llama.cpp %s tensor has this name (gguf.TensorNameMap); llama.cpp refuses a file "
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
            heads = need(self.cfg, "num_attention_heads")
        elif name.endswith(("k_proj.weight", "k_proj.bias")):
            heads = need(self.cfg, "num_key_value_heads", "num_attention_heads")
        else:
            return None
        if rows % (2 * heads):
            refuse("%s: %d rows do not split into %d heads of two rotary halves" % (name, rows, heads))
        return np.arange(rows).reshape(heads, 2, rows // heads // 2).swapaxes(1, 2).reshape(-1)

    def plain_tensor(self, name, t):
        """A float tensor as llama.cpp takes it: vectors (norms, biases) in float32, and for Gemma
        every norm weight plus one (its RMSNorm scales by 1 + w; the sum is formed in float32,
        as transformers forms it)."""
        if self.spec.norm_shift and name.endswith("norm.weight"):
            if not t.is_floating_point():
                refuse("%s: a %s norm weight; Gemma's norms are float" % (name, t.dtype))
            return t.detach().float() + self.spec.norm_shift
        if t.dim() == 1 and t.is_floating_point():
            return t.float()   # ggml's norms and adds take F32 vectors
        return t

    # -- metadata --------------------------------------------------------------------------------
    def write_kv(self, w, tokenizer):
        """The hyperparameters and the vocab (``tokenizer``: a folder holding tokenizer.json, or None)."""
        for call, value in self.kv:
            getattr(w, call)(value)
        write_vocab(w, tokenizer, self.spec.family, need(self.cfg, "vocab_size"))


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
        refuse("layout='llama.cpp' needs the model's config (a Hugging Face model, config=, or a folder)")
    if not isinstance(cfg, dict):
        refuse("config.json holds a %s, not an object" % type(cfg).__name__)
    kind = cfg.get("model_type")
    if not isinstance(kind, str) or kind not in ARCHES:
        if layout == "auto":
            return None
        refuse("model_type %r: llama.cpp's layout is written for %s" % (kind, ", ".join(sorted(ARCHES))))
    if pooling is not None and pooling not in POOLING:
        raise ValueError("pooling is one of %s; found %r" % (sorted(POOLING), pooling))
    spec = ARCHES[kind]
    blocks = need(cfg, "num_hidden_layers")
    if blocks > len(state):
        refuse("config.json: num_hidden_layers = %d, but the state dict holds %d tensors (every block "
               "has its own)" % (blocks, len(state)))
    head, embedding = state.get("lm_head.weight"), state.get("model.embed_tokens.weight")
    tied = bool(cfg.get("tie_word_embeddings")) and _same_storage(head, embedding)
    if spec.head_is_embedding and head is not None and not _same_storage(head, embedding):
        refuse("lm_head.weight: llama.cpp's %s reads its output head from token_embd, and this model's head is "
               "not the embedding (packed on its own, or untied); quantize_ with a filter_fn that leaves "
               "lm_head out keeps them one tensor" % kind)
    return Layout(cfg, spec, blocks, pooling, tied or spec.head_is_embedding)
