"""What every part of llama.cpp's layout shares: the refusal, and a config's numbers read with
the bounds GGUF's keys put on them."""

import json
import os

INT_MAX = 2 ** 31 - 1                   # GGUF's uint32 / int32 keys
FLOAT_MAX = 3.4028234663852886e38       # its float32 keys


def refuse(message):
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


def need(cfg, *keys, kind=int, where="config.json", model=None, default=None):
    """The first of ``keys`` that ``cfg`` has: a positive int up to 2^31 - 1, or (kind=float) a
    positive number a float32 holds. When none is there: ``default`` if given, else refused; a
    value out of bounds is refused."""
    for k in keys:
        v = cfg.get(k)
        if v is None:
            continue
        if kind is int:
            ok = type(v) is int and 0 < v <= INT_MAX
        else:
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= FLOAT_MAX
        if not ok:
            refuse("%s: %s is %r; llama.cpp's hyperparameter is a positive %s a GGUF %s holds"
                   % (where, k, v, "integer" if kind is int else "number", "int32" if kind is int else "float32"))
        return kind(v)
    if default is not None:
        return default
    refuse("%s has none of %s, which llama.cpp's %s hyperparameters need"
           % (where, "/".join(keys), model or cfg.get("model_type")))


def maybe(cfg, key, kind=float, where="config.json"):
    """``need`` for a key that may be absent (None then)."""
    return None if cfg.get(key) is None else need(cfg, key, kind=kind, where=where)
