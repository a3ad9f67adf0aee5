"""Raw safetensors surgery for the checkpoint tests.

``read_raw`` splits a file into its header (an ordered dict, as written) and
its data bytes per entry; ``write_raw`` writes any header and entry bytes back
as a well-formed container (offsets recomputed, so the container itself is
valid and only what a test changed on purpose is wrong). Written here, by
hand, so a test never depends on the writer it is testing.
"""

import hashlib
import json
import struct

import torch
from torch import nn

import torch_grit


def read_raw(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    meta = header.pop("__metadata__", None)
    entries = {}
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        b, e = info["data_offsets"]
        entries[name] = {"dtype": info["dtype"], "shape": list(info["shape"]), "bytes": data[b:e]}
    return meta, entries


def write_raw(path, meta, entries, offsets=None):
    """Write ``entries`` {name: {dtype, shape, bytes}}; ``offsets`` may override any entry's."""
    header = {}
    if meta is not None:
        header["__metadata__"] = meta
    cursor, blobs = 0, []
    for name, e in entries.items():
        header[name] = {"dtype": e["dtype"], "shape": e["shape"],
                        "data_offsets": [cursor, cursor + len(e["bytes"])]}
        cursor += len(e["bytes"])
        blobs.append(e["bytes"])
    for name, off in (offsets or {}).items():
        header[name]["data_offsets"] = off
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def grit_meta(meta):
    """The two JSON documents of a checkpoint's metadata, decoded."""
    return json.loads(meta["__grit__"]), json.loads(meta["torch_grit"])


def set_grit_meta(meta, descriptors, records):
    meta = dict(meta)
    meta["__grit__"] = json.dumps(descriptors)
    meta["torch_grit"] = json.dumps(records)
    return meta


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class TwoLayer(nn.Module):
    """A small model with two linear layers, a norm and an embedding."""

    def __init__(self, inp=256, hidden=256, out=32):
        super().__init__()
        self.emb = nn.Embedding(10, inp)
        self.fc1 = nn.Linear(inp, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.fc2 = nn.Linear(hidden, out)

    def forward(self, x):
        return self.fc2(self.norm(torch.relu(self.fc1(x))))


def packed_model(grade="MXFP4", seed=0):
    torch.manual_seed(seed)
    m = TwoLayer()
    torch_grit.quantize_(m, grade)
    return m


def float_model(seed=1):
    torch.manual_seed(seed)
    return TwoLayer()
