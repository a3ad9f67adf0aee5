"""The quantization config beside a safetensors shard (config.json's
``quantization_config``, or AutoGPTQ's ``quantize_config.json``): safetensors
itself says nothing about quantization, so every family keeps its contract
in a sibling file. Read bounded; a config that does not parse is ignored."""

import json
import os

MAX_CONFIG_BYTES = 4 << 20


def _load(path):
    try:
        with open(path, "rb") as fh:
            blob = fh.read(MAX_CONFIG_BYTES + 1)
        if len(blob) > MAX_CONFIG_BYTES:
            return None
        doc = json.loads(blob.decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


class QuantConfig:
    """``data``: the quantization config dict (may be empty); ``source``: its file."""

    __slots__ = ("data", "source")

    def __init__(self, data, source):
        self.data, self.source = data or {}, source

    @property
    def method(self):
        m = self.data.get("quant_method") or self.data.get("quant-method")
        return m.strip().lower().replace("_", "-") if isinstance(m, str) else None

    def get(self, key, default=None):
        return self.data.get(key, default)


def load_config(shard_path):
    folder = os.path.dirname(os.path.abspath(shard_path))
    cfg = _load(os.path.join(folder, "config.json"))
    if cfg and isinstance(cfg.get("quantization_config"), dict):
        return QuantConfig(cfg["quantization_config"], os.path.join(folder, "config.json"))
    qcfg = _load(os.path.join(folder, "quantize_config.json"))
    if qcfg:
        return QuantConfig(qcfg, os.path.join(folder, "quantize_config.json"))
    return QuantConfig({}, None)
