"""Profile before you pack (seed 002): what every candidate grade would do.

``profile(model_or_state_dict)`` writes nothing. For every float tensor of
rank 2 it runs the real encoder of each candidate grade (the C++ reference
encoder, the one quantize uses), decodes the result, and counts per tensor
and in total: values collapsed to zero, values clamped (outside the range
their group's scales can represent, from the core's decode_bounds), max
absolute error, MSE, SQNR and bytes. The preview is the result, not an
estimate. Rank-0/1 tensors (biases, norms) are exempt: they stay exact, as
quantize_ leaves them. The recommendation picks, per tensor, the smallest
grade within the error budget (a minimum SQNR in dB).

With ``activations="s8"`` each preview also measures what the s8 activation
law (``GritLinear(..., activations="s8")``) adds: the output SQNR of the
packed weight run with int8-packed activations against the same packed
weight with float activations, on a fixed seeded probe (8 rows of N(0, 1)
inputs, seed 0). It is measured on the real kernel; a grade without an s8 law
says why instead. ``activations="bf16"`` measures the bf16 activation law the
same way (x and the weight rounded to bfloat16, summed in AMX's order).
"""

from dataclasses import dataclass, field

import numpy as np
import torch

from ..contract.codec import decode_bounds, decode_planes, encode_planes
from ..contract.grade import Grade

CANDIDATES = ("MXFP4", "NVF4", "Q4KS", "I8S24")
DEFAULT_BUDGET_DB = 20.0
DESCRIPTOR_BYTES = 64


@dataclass
class GradePreview:
    grade: str
    applies: bool
    reason: str = ""
    collapsed: int = 0
    clamped: int = 0
    max_abs_err: float = 0.0
    mse: float = 0.0
    sqnr_db: float = float("inf")
    bytes: int = 0
    # activations="s8" / "bf16": output SQNR of that law against float activations on the same
    # packed weight
    activation_sqnr_db: float = None
    activation_reason: str = ""  # why there is no such figure (the grade has no s8 law)


@dataclass
class TensorProfile:
    name: str
    shape: tuple
    dtype: str
    source_bytes: int
    minimum: float = 0.0
    maximum: float = 0.0
    nonzero: int = 0
    nonfinite: int = 0
    exempt: str = ""
    previews: dict = field(default_factory=dict)
    choice: str = ""


@dataclass
class Profile:
    tensors: list
    budget_db: float
    grades: tuple
    activations: str = None  # "s8": previews carry activation_sqnr_db

    def totals(self):
        """Per grade: bytes of the packed tensors it applies to plus every exact tensor."""
        out = {}
        for g in self.grades:
            total = 0
            for t in self.tensors:
                p = t.previews.get(g)
                total += p.bytes if p is not None and p.applies else t.source_bytes
            out[g] = total
        return out

    def hints(self):
        lines = []
        packable = [t for t in self.tensors if not t.exempt]
        for g in self.grades:
            ok = sum(1 for t in packable if t.previews[g].applies and t.previews[g].sqnr_db >= self.budget_db)
            lines.append("%s stays within the %.1f dB budget for %d of %d tensors" % (g, self.budget_db, ok, len(packable)))
        return lines

    def table(self):
        act = self.activations is not None
        rows = ["| tensor | shape | grade | collapsed | clamped | max abs err | MSE | SQNR dB | bytes |"
                + (" %s activations: output SQNR dB |" % self.activations if act else ""),
                "|---|---|---|---|---|---|---|---|---|" + ("---|" if act else "")]
        for t in self.tensors:
            if t.exempt:
                rows.append("| %s | %s | exact (%s) | 0 | 0 | 0 | 0 | inf | %d |" % (t.name, t.shape, t.exempt, t.source_bytes)
                            + (" - |" if act else ""))
                continue
            for g in self.grades:
                p = t.previews[g]
                if not p.applies:
                    rows.append("| %s | %s | %s | - | - | - | - | - | (%s) |" % (t.name, t.shape, g, p.reason)
                                + (" - |" if act else ""))
                else:
                    rows.append("| %s | %s | %s%s | %d | %d | %.4g | %.4g | %.2f | %d |" % (
                        t.name, t.shape, g, " *" if t.choice == g else "", p.collapsed, p.clamped,
                        p.max_abs_err, p.mse, p.sqnr_db, p.bytes)
                        + ((" %.2f |" % p.activation_sqnr_db if p.activation_sqnr_db is not None
                            else " (no %s law) |" % self.activations) if act else ""))
        return "\n".join(rows)


def short_name(grade):
    """"MXFP4" for a reference grade, else the canonical string."""
    name = grade.name
    return name[len("GRADE_"):] if name else grade.canonical


def pick(previews, budget_db):
    """The budget rule: of the previews that apply and reach ``budget_db``, the one with the
    fewest bytes (the earlier on a tie); None if there is none. ``torch_grit.auto`` uses it."""
    best = None
    for p in previews:
        if p.applies and p.sqnr_db >= budget_db and (best is None or p.bytes < best.bytes):
            best = p
    return best


def _unit(grade):
    """Values per row a grade's encoder needs (k0, times k1 for two levels, times M)."""
    f = grade.fields
    unit = int(f["k0"])
    if "k1" in f and int(f["k1"]) > 0:
        unit *= int(f["k1"])
    return unit


PROBE_ROWS = 8  # the activation probe: rows of N(0, 1), seed 0


def _activation_sqnr(grade, planes, decoded, shape, mode="s8"):
    """(output SQNR dB of the s8 or bf16 law against float activations on the same packed
    weight, reason)."""
    from .. import ops
    from ..contract.codec import s8_law

    if mode == "s8":
        try:
            s8_law(grade.canonical)
        except ValueError as e:
            return None, str(e)
    x = torch.randn(PROBE_ROWS, shape[1], generator=torch.Generator().manual_seed(0))
    tensors = [torch.from_numpy(np.frombuffer(bytes(p), dtype=np.uint8).copy()) for p in planes]
    run = ops.packed_linear_s8 if mode == "s8" else ops.packed_linear_bf16
    with torch.no_grad():
        y = run(x, tensors, grade.canonical, shape).double()
    ref = x.double() @ torch.from_numpy(decoded).double().view(shape).T
    ok = torch.isfinite(ref) & torch.isfinite(y)
    noise = float(((y - ref)[ok] ** 2).sum())
    signal = float((ref[ok] ** 2).sum())
    if noise == 0:
        return float("inf"), ""
    return (10.0 * float(np.log10(signal / noise)) if signal > 0 else float("-inf")), ""


def preview(w, grade, activations=None):
    """One tensor, one grade: encode, decode, bounds -> GradePreview (``activations="s8"`` or
    ``"bf16"``: with the output error that activation law adds on the fixed probe)."""
    grade = Grade.parse(grade)
    name = short_name(grade)
    v = np.ascontiguousarray(w, dtype=np.float32).reshape(-1)
    cols = w.shape[-1]
    if cols % _unit(grade) != 0:
        return GradePreview(name, False, "row length %d is not a multiple of %d" % (cols, _unit(grade)))
    planes = encode_planes(grade, v)
    d = decode_planes(grade, planes, v.size)
    lo, hi = decode_bounds(grade, planes, v.size)
    masked = (lo == 0) & (hi == 0)
    err = d.astype(np.float64) - v.astype(np.float64)
    finite = np.isfinite(v)
    err = err[finite]
    signal = float(np.sum(v[finite].astype(np.float64) ** 2))
    noise = float(np.sum(err ** 2))
    act_sqnr, act_reason = (_activation_sqnr(grade, planes, d, (w.shape[0], cols), activations)
                            if activations in ("s8", "bf16") else (None, ""))
    return GradePreview(
        grade=name, applies=True, activation_sqnr_db=act_sqnr, activation_reason=act_reason,
        collapsed=int(np.sum((v != 0) & (d == 0))),
        clamped=int(np.sum(((v < lo) | (v > hi)) & ~masked & finite)),
        max_abs_err=float(np.max(np.abs(err))) if err.size else 0.0,
        mse=noise / max(err.size, 1),
        sqnr_db=float("inf") if noise == 0 else (10.0 * np.log10(signal / noise) if signal > 0 else float("-inf")),
        bytes=sum(len(p) for p in planes) + DESCRIPTOR_BYTES,
    )


def _tensors(model_or_state_dict):
    if isinstance(model_or_state_dict, torch.nn.Module):
        return model_or_state_dict.state_dict().items()
    return model_or_state_dict.items()


def profile(model_or_state_dict, grades=CANDIDATES, budget_db=DEFAULT_BUDGET_DB, activations=None):
    """Preview every candidate grade on every tensor; writes nothing. ``activations="s8"`` (or
    ``"bf16"``) adds each preview's output SQNR under that activation law (see the module doc)."""
    from ..nn.linear import check_activations
    activations = check_activations(activations)
    grades = tuple(short_name(Grade.parse(g)) for g in grades)
    out = []
    for name, t in _tensors(model_or_state_dict):
        if not isinstance(t, torch.Tensor) or type(t) is not torch.Tensor and not isinstance(t, torch.nn.Parameter):
            raise TypeError("profile reads plain tensors; %s is a %s (already quantized?)" % (name, type(t).__name__))
        tp = TensorProfile(name, tuple(t.shape), str(t.dtype).replace("torch.", ""), t.numel() * t.element_size())
        if not t.is_floating_point():
            tp.exempt = "integer, copied verbatim"
        elif t.dim() < 2:
            tp.exempt = "rank %d, stored exact" % t.dim()
        if tp.exempt:
            out.append(tp)
            continue
        w = t.detach().to("cpu", torch.float32).reshape(t.shape[0], -1).numpy()
        finite = w[np.isfinite(w)]
        tp.minimum = float(finite.min()) if finite.size else 0.0
        tp.maximum = float(finite.max()) if finite.size else 0.0
        tp.nonzero = int(np.count_nonzero(w))
        tp.nonfinite = int(w.size - finite.size)
        for g in grades:
            tp.previews[g] = preview(w, g, activations)
        best = pick(tp.previews.values(), budget_db)
        tp.choice = best.grade if best is not None else ""
        out.append(tp)
    return Profile(out, budget_db, grades, activations)
