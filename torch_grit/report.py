"""Measure before and after (seed 001): what quantizing did, counted honestly.

``report(source_model, quantized_model)`` compares every packed layer with
the float layer it replaced: weight MSE, max absolute error, SQNR, and the
layer's output error on a fixed probe input. Storage is split into code
bytes (the data plane), scale bytes (scale planes), aux bytes (zero points
or sparsity metadata) and descriptor bytes; with checkpoint paths it adds
the safetensors header bytes and the complete file sizes, because code bytes
alone overstate the saving. Output: ``table()``, ``to_json()``, ``plot(png)``.
"""

import json
import math
import os
import struct
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F

from .nn import GritLinear

DESCRIPTOR_BYTES = 64


@dataclass
class LayerError:
    name: str
    shape: tuple
    grade: str
    weight_mse: float
    weight_max_abs: float
    sqnr_db: float
    output_mse: float
    output_max_abs: float
    source_bytes: int
    code_bytes: int
    scale_bytes: int
    aux_bytes: int
    descriptor_bytes: int = DESCRIPTOR_BYTES


@dataclass
class FileBytes:
    path: str
    total: int
    header: int


@dataclass
class Report:
    layers: list
    source_file: FileBytes = None
    quantized_file: FileBytes = None
    extra: dict = field(default_factory=dict)

    def totals(self):
        t = {k: sum(getattr(l, k) for l in self.layers)
             for k in ("source_bytes", "code_bytes", "scale_bytes", "aux_bytes", "descriptor_bytes")}
        sig = sum(l.weight_mse * _numel(l.shape) for l in self.layers)
        t["weight_mse"] = sig / max(sum(_numel(l.shape) for l in self.layers), 1)
        if self.source_file and self.quantized_file:
            t["source_file_bytes"] = self.source_file.total
            t["quantized_file_bytes"] = self.quantized_file.total
            t["quantized_header_bytes"] = self.quantized_file.header
        return t

    def to_json(self):
        return json.dumps({"layers": [asdict(l) for l in self.layers], "totals": self.totals(),
                           "source_file": asdict(self.source_file) if self.source_file else None,
                           "quantized_file": asdict(self.quantized_file) if self.quantized_file else None,
                           **self.extra}, indent=2)

    def table(self):
        rows = ["| layer | grade | weight MSE | max abs | SQNR dB | output MSE | output max abs | "
                "source B | code B | scale B | aux B | descr B |", "|" + "---|" * 12]
        for l in self.layers:
            rows.append("| %s | %s | %.3g | %.3g | %.2f | %.3g | %.3g | %d | %d | %d | %d | %d |" % (
                l.name, l.grade, l.weight_mse, l.weight_max_abs, l.sqnr_db, l.output_mse,
                l.output_max_abs, l.source_bytes, l.code_bytes, l.scale_bytes, l.aux_bytes,
                l.descriptor_bytes))
        t = self.totals()
        rows.append("| total | | %.3g | | | | | %d | %d | %d | %d | %d |" % (
            t["weight_mse"], t["source_bytes"], t["code_bytes"], t["scale_bytes"], t["aux_bytes"],
            t["descriptor_bytes"]))
        if self.source_file and self.quantized_file:
            rows.append("")
            rows.append("complete files: %d -> %d bytes (%.1f%%), of which safetensors header %d bytes; "
                        "packed planes alone %d -> %d" % (
                            self.source_file.total, self.quantized_file.total,
                            100.0 * self.quantized_file.total / self.source_file.total,
                            self.quantized_file.header, t["source_bytes"],
                            t["code_bytes"] + t["scale_bytes"] + t["aux_bytes"]))
        return "\n".join(rows)

    def plot(self, path):
        """A PNG of per-layer SQNR and output error."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        names = [l.name for l in self.layers]
        fig, (a, b) = plt.subplots(2, 1, figsize=(max(6, 0.35 * len(names) + 2), 6), sharex=True)
        a.bar(range(len(names)), [l.sqnr_db for l in self.layers], color="#3b7dd8")
        a.set_ylabel("weight SQNR (dB)")
        a.set_title("per-layer quantization error")
        b.bar(range(len(names)), [l.output_max_abs for l in self.layers], color="#d8643b")
        b.set_ylabel("output max |error|")
        b.set_xticks(range(len(names)))
        b.set_xticklabels(names, rotation=70, ha="right", fontsize=7)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def file_bytes(path):
    """Complete size and safetensors header size (8-byte length + JSON) of a file."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
    return FileBytes(str(path), os.path.getsize(path), 8 + n)


def report(source_model, quantized_model, probe=None, source_file=None, quantized_file=None,
           probe_rows=8, seed=0):
    """Compare every GritLinear of ``quantized_model`` with the same-named layer of ``source_model``."""
    src = dict(source_model.named_modules())
    layers = []
    gen = torch.Generator().manual_seed(seed)
    for name, q in quantized_model.named_modules():
        if not isinstance(q, GritLinear):
            continue
        s = src.get(name)
        if s is None or not isinstance(s, torch.nn.Linear) or isinstance(s, GritLinear):
            raise ValueError("report: %s is packed in the quantized model but the source has no float "
                             "nn.Linear of that name" % name)
        w = s.weight.detach().double().cpu()
        d = q.weight.dequantize().double().cpu()
        if w.shape != d.shape:
            raise ValueError("report: %s has shape %s in the source and %s packed"
                             % (name, tuple(w.shape), tuple(d.shape)))
        err = d - w
        noise = float((err ** 2).sum())
        sig = float((w ** 2).sum())
        x = probe.get(name) if isinstance(probe, dict) else probe
        if x is None:
            x = torch.randn(probe_rows, w.shape[1], generator=gen)
        x = x.to(torch.float32)
        with torch.no_grad():
            y_src = F.linear(x.double(), w, None if s.bias is None else s.bias.detach().double())
            y_q = q(x).double()
        out = y_q - y_src
        planes = q.weight.planes
        layers.append(LayerError(
            name=name, shape=tuple(w.shape), grade=q.weight.grade.name or q.weight.grade.canonical,
            weight_mse=noise / w.numel(), weight_max_abs=float(err.abs().max()),
            sqnr_db=float("inf") if noise == 0 else 10.0 * math.log10(sig / noise),
            output_mse=float((out ** 2).mean()), output_max_abs=float(out.abs().max()),
            source_bytes=s.weight.numel() * s.weight.element_size(),
            code_bytes=planes[0].numel(), scale_bytes=planes[1].numel() + planes[2].numel(),
            aux_bytes=planes[3].numel()))
    return Report(layers,
                  file_bytes(source_file) if source_file else None,
                  file_bytes(quantized_file) if quantized_file else None)
