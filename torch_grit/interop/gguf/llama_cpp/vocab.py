"""llama.cpp's vocab keys (``tokenizer.ggml.*``) from a Hugging Face tokenizer folder."""

import json
import os

from .common import refuse as _refuse


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


def write_vocab(w, folder, family, n_vocab):
    """``tokenizer.ggml.*`` from a Hugging Face tokenizer.json: WordPiece as llama.cpp's "bert"
    vocab (its phantom-space spelling), byte-level BPE as "gpt2" (with its merges), BPE with byte
    fallback as "llama". With no tokenizer: "none" and the vocab size, so llama.cpp runs the
    model on token ids. Padded to the embedding's rows with unused tokens, as llama.cpp's
    converter pads."""
    import gguf
    from pathlib import Path

    if folder is None:
        w.add_tokenizer_model("none")   # <arch>.vocab_size, with the hyperparameters, sizes it
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
        if family == "gemma":   # Gemma's SentencePiece model adds no space before the text
            w.add_add_space_prefix(False)
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
