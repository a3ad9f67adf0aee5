"""bitsandbytes 4-bit (NF4 / FP4) weights, as transformers serializes them:
``<w>`` U8 packed codes beside ``<w>.absmax``, ``<w>.quant_map`` and a
``<w>.quant_state.bitsandbytes__nf4`` (or ``__fp4``) entry. Both decode through
a 16-entry lookup table: a codebook, which v1 has no element class for."""

from . import claim, mark

_REASONS = {
    "nf4": "NF4 is a codebook (lookup-table) format; v1 has no codebook element class",
    "fp4": "bitsandbytes FP4 decodes through its own 16-entry lookup table with absmax scaling; v1 has no "
           "codebook element class",
}


def infer(ctx):
    found = {}
    for e in ctx.header.entries:
        for kind in _REASONS:
            tail = ".quant_state.bitsandbytes__" + kind
            if e.name.endswith(tail) and e.name not in ctx.claimed:
                found[e.name[:-len(tail)]] = kind
    if not found:
        return False
    by_kind = {}
    for weight, kind in sorted(found.items()):
        leaves = {e.name: e for e in ctx.header.entries if e.name == weight or e.name.startswith(weight + ".")}
        claim(ctx, leaves)
        lead = leaves.get(weight)
        if lead is not None:
            mark(ctx, lead, "bitsandbytes/" + kind, label="bnb:" + kind, expressible=False, reason=_REASONS[kind])
        by_kind.setdefault(kind, []).append(weight)
    for kind, weights in sorted(by_kind.items()):
        ctx.report.add("inferred_inexpressible", ctx.path,
                       "%d bitsandbytes %s weight(s): %s" % (len(weights), kind.upper(), _REASONS[kind]),
                       data={"family": "bitsandbytes", "kind": kind, "tensors": len(weights),
                             "sample": weights[:8], "reason": _REASONS[kind]})
    return True
