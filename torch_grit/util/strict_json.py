"""JSON that strict parsers accept: RFC 8259 has no Infinity or NaN.

A lossless layer's SQNR is +inf; Python's json writes it as the bare token
``Infinity``, which jq, JavaScript's JSON.parse and most other readers refuse.
Everything torch_grit prints or writes as JSON goes through ``dumps``, which
spells a non-finite float as the string "inf", "-inf" or "nan" (float()
reads each back).
"""

import json
import math


def strict(obj):
    """``obj`` with every non-finite float replaced by "inf", "-inf" or "nan"."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {k: strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict(v) for v in obj]
    return obj


def dumps(obj, **kwargs):
    return json.dumps(strict(obj), allow_nan=False, **kwargs)
