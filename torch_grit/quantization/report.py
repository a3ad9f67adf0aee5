"""Measure before and after (seed 001): what quantizing did, counted honestly.

``report(source_model, quantized_model)`` compares every packed layer with
the float layer it replaced: weight MSE, max absolute error, SQNR, and the
layer's output error on a fixed probe input. Storage is split into code
bytes (the data plane), scale bytes (scale planes), aux bytes (zero points
or sparsity metadata) and descriptor bytes; with checkpoint paths it adds
the safetensors header bytes and the complete file sizes, because code bytes
alone overstate the saving. With ``quality=`` (a callable ``model -> metrics``,
e.g. ``functools.partial(torch_grit.quality.causal_lm_nll, token_ids=ids)``)
it also runs both models on fixed inputs and reports what a user of the model
sees, before and after. Output: ``table()``, ``to_json()``, ``plot(png)``.
"""

import math
import numbers
import os
import struct
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, is_dataclass

import torch
import torch.nn.functional as F

from ..util import strict_json
from ..nn.linear import GritLinear

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
    # layers with an activation mode (s8, bf16): what packing the probe's rows adds, beside the
    # weight error.
    activations: str = None
    activation_sqnr_db: float = None    # probe x against its packed rows decoded
    activation_output_mse: float = None  # the layer's output, the mode against float activations


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
    quality_before: dict = None   # the quality callable's metrics on the source model
    quality_after: dict = None    # ... and on the quantized model

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
        return strict_json.dumps({"layers": [asdict(l) for l in self.layers], "totals": self.totals(),
                           "source_file": asdict(self.source_file) if self.source_file else None,
                           "quantized_file": asdict(self.quantized_file) if self.quantized_file else None,
                           **({"quality": {"before": self.quality_before, "after": self.quality_after}}
                              if self.quality_before is not None else {}),
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
        moded = [l for l in self.layers if l.activations]
        if moded:
            rows += ["", "| layer | activations | activation SQNR dB | output MSE added by the activations |",
                     "|---|---|---|---|"]
            for l in moded:
                rows.append("| %s | %s | %.2f | %.3g |" % (l.name, l.activations, l.activation_sqnr_db,
                                                          l.activation_output_mse))
        if self.quality_before is not None:
            rows += ["", "| quality on fixed inputs | source | quantized | change |", "|---|---|---|---|"]
            for k, before in self.quality_before.items():
                after = self.quality_after[k]
                rows.append("| %s | %.6g | %.6g | %+.4g |" % (k, before, after, after - before))
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


def _metrics(result):
    """A quality callable's result as {name: number}: a dataclass or a mapping of numbers."""
    if is_dataclass(result) and not isinstance(result, type):
        result = asdict(result)
    if not isinstance(result, Mapping):
        raise TypeError("report: quality(model) returns a dataclass or a mapping of numbers; "
                        "found %s" % type(result).__name__)
    out = {}
    for k, v in result.items():
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError("report: quality metric %r is %r (%s); expected a number"
                            % (k, v, type(v).__name__))
        out[str(k)] = v
    return out


def probe_input(in_features, rows=8, seed=0):
    """A layer's fixed probe: ``rows`` x ``in_features`` standard normal values from a
    generator seeded with ``seed`` alone, so a layer's numbers do not depend on which other
    layers were packed or in which order they are visited."""
    return torch.randn(rows, in_features, generator=torch.Generator().manual_seed(seed))


def layer_error(name, weight, bias, packed_layer, x):
    """One layer: source ``weight`` [out, in] and ``bias`` (or None) against ``packed_layer``
    (a GritLinear) on the probe ``x``. ``report`` and ``torch-grit quantize --report`` use it."""
    w = weight.detach().double().cpu()
    d = packed_layer.weight.dequantize().double().cpu()
    if w.shape != d.shape:
        raise ValueError("report: %s has shape %s in the source and %s packed"
                         % (name, tuple(w.shape), tuple(d.shape)))
    err = d - w
    noise = float((err ** 2).sum())
    sig = float((w ** 2).sum())
    x = x.to(torch.float32)
    with torch.no_grad():
        y_src = F.linear(x.double(), w, None if bias is None else bias.detach().double())
        y_q = packed_layer(x).double()
    out = y_q - y_src
    planes = packed_layer.weight.planes
    grade = packed_layer.weight.grade
    act = _activation_error(packed_layer, x, y_q) if packed_layer.activations else {}
    return LayerError(
        name=name, shape=tuple(w.shape), grade=grade.name or grade.canonical,
        weight_mse=noise / w.numel(), weight_max_abs=float(err.abs().max()),
        sqnr_db=float("inf") if noise == 0 else 10.0 * math.log10(sig / noise),
        output_mse=float((out ** 2).mean()), output_max_abs=float(out.abs().max()),
        source_bytes=weight.numel() * weight.element_size(),
        code_bytes=planes[0].numel(), scale_bytes=planes[1].numel() + planes[2].numel(),
        aux_bytes=planes[3].numel(),
        # INT4G (seed 001) has no GRIT descriptor: it cannot be saved as one.
        descriptor_bytes=0 if packed_layer.weight.is_int4_groups else DESCRIPTOR_BYTES, **act)


def _activation_error(layer, x, y_q):
    """What the activation mode's packing of the probe rows adds (s8: int8 blocks; bf16: the
    rounding to bfloat16, the weight's own rounding included in the output error): the rows'
    SQNR and the output error against the same packed weight with float activations."""
    from .. import ops
    w = layer.weight
    with torch.no_grad():
        if layer.activations == "bf16":
            x_hat = torch.where(x.abs() < 2.0 ** -126, torch.zeros_like(x), x.bfloat16().float()).double()
        else:
            kb = ops.s8_block(w.grade_canonical)
            codes, scales = ops.pack_activations(x, kb)
            x_hat = (codes.double().view(*x.shape[:-1], -1, kb) * scales.double()[..., None]).view(x.shape)
        y_float = F.linear(x, w, layer.bias).double()
    noise = float(((x_hat - x.double()) ** 2).sum())
    sig = float((x.double() ** 2).sum())
    return {"activations": layer.activations,
            "activation_sqnr_db": float("inf") if noise == 0 else 10.0 * math.log10(sig / noise),
            "activation_output_mse": float(((y_q - y_float) ** 2).mean())}


def report(source_model, quantized_model, probe=None, source_file=None, quantized_file=None,
           probe_rows=8, seed=0, quality=None):
    """Compare every GritLinear of ``quantized_model`` with the same-named layer of ``source_model``.

    ``quality``: optional callable ``model -> metrics`` (a dataclass or a mapping
    of numbers, e.g. ``torch_grit.quality.causal_lm_nll`` bound to fixed token
    ids); it is called on the source and on the quantized model and both
    results are in ``table()`` and ``to_json()``.
    """
    if quality is not None and not callable(quality):
        raise TypeError("report: quality is a callable model -> metrics; found %s"
                        % type(quality).__name__)
    src = dict(source_model.named_modules())
    layers = []
    for name, q in quantized_model.named_modules():
        if not isinstance(q, GritLinear):
            continue
        s = src.get(name)
        if s is None or not isinstance(s, torch.nn.Linear) or isinstance(s, GritLinear):
            raise ValueError("report: %s is packed in the quantized model but the source has no float "
                             "nn.Linear of that name" % name)
        x = probe.get(name) if isinstance(probe, dict) else probe
        if x is None:
            x = probe_input(s.weight.shape[1], probe_rows, seed)
        layers.append(layer_error(name, s.weight, s.bias, q, x))
    before = after = None
    if quality is not None:
        before, after = _metrics(quality(source_model)), _metrics(quality(quantized_model))
        if list(before) != list(after):
            raise ValueError("report: quality returned metrics %s for the source model and %s for "
                             "the quantized one; expected the same names" % (list(before), list(after)))
    return Report(layers,
                  file_bytes(source_file) if source_file else None,
                  file_bytes(quantized_file) if quantized_file else None,
                  quality_before=before, quality_after=after)
