"""The error a requantized tensor carries, against the floats it was packed from."""

import math

import torch


def weight_error(source, decoded):
    """{sqnr_db, max_abs_err} of ``decoded`` against ``source`` over the finite values."""
    s = source.double().reshape(-1)
    d = decoded.double().reshape(-1)
    keep = torch.isfinite(s)
    s, d = s[keep], d[keep]
    noise = float(((d - s) ** 2).sum())
    signal = float((s ** 2).sum())
    if noise == 0:
        sqnr = math.inf
    else:
        sqnr = 10.0 * math.log10(signal / noise) if signal > 0 else -math.inf
    return {"sqnr_db": sqnr, "max_abs_err": float((d - s).abs().max()) if s.numel() else 0.0}
