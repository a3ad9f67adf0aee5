"""compressed-tensors checkpoints, read by the config's own words.

config.json's ``quantization_config`` (quant_method "compressed-tensors")
says which modules are quantized (``config_groups`` with ``targets``, minus the
``ignore`` list), with which arguments (num_bits, type, strategy, group_size,
symmetric) and in which ``format``. Each format's layout, as the package's
compressors write it:

    pack-quantized        weight_packed I32 [out, ceil(in*b/32)]: codes q + 2^(b-1), dense LSB-first;
                          weight_scale [out, in/g] (group) | [out, 1] (channel) | [1] (tensor);
                          weight_shape I64 [2]; weight_zero_point I32 packed along dim 0 (asymmetric)
    nvfp4-pack-quantized  weight_packed U8 [out, in/2] (e2m1 nibbles), weight_scale F8_E4M3 [out, in/16],
                          weight_global_scale F32 [1]; x = q * (scale / global_scale)
    mxfp4-pack-quantized  weight_packed U8 [out, in/2], weight_scale U8 [out, in/32] (e8m0 exponents)
    int-quantized, float-quantized, naive-quantized
                          weight I8 | F8 [out, in] and weight_scale (+ weight_zero_point, asymmetric)
    marlin-24             (legacy; no writer in compressed-tensors 0.20) Marlin-tiled 2:4 weights

Where GRIT v1 names the bytes exactly (mxfp4: GRADE_MXFP4 in row-major planes;
int8/e4m3 weights with per-channel or per-group binary16/binary32 scales) the
inferred descriptor's planes are checked by the core's size equations. Where
it does not, the reason is reported (inferred_inexpressible).
"""

from ...contract.check import check
from ...contract.errors import GritCheckError
from ..records import is_class_target, target_matches
from . import SCALE_FORMATS, claim, grade_or_reason, mark

_MARKERS = ("weight_packed", "weight_scale", "weight_global_scale", "weight_zero_point", "weight_shape",
            "scale_packed", "meta")
_FLOAT_DTYPES = {"F16", "BF16", "F32", "F64"}


def _scheme_for(prefix, groups):
    """The config group whose targets name this module (a name or regex first, a class name second)."""
    by_class = None
    for gname, group in groups.items():
        if not isinstance(group, dict):
            continue  # a malformed config group names no module
        targets = group.get("targets")
        targets = [t for t in targets if isinstance(t, str)] if isinstance(targets, list) else []
        if any(not is_class_target(t) and target_matches(t, prefix) for t in targets):
            return gname, group
        if by_class is None and any(is_class_target(t) for t in targets):
            by_class = (gname, group)
    return by_class or (None, None)


def _ignored(prefix, ignore):
    return any(target_matches(t, prefix) for t in ignore if isinstance(t, str))


def _guess_format(leaves):
    wp = leaves.get("weight_packed")
    if wp is not None:
        if "weight_global_scale" in leaves:
            return "nvfp4-pack-quantized"
        if wp.dtype == "U8":
            return "mxfp4-pack-quantized"
        return "pack-quantized"
    if "scale_packed" in leaves and "meta" in leaves:
        return "marlin-24"
    w = leaves.get("weight")
    if w is not None and "weight_scale" in leaves:
        return "int-quantized" if w.dtype == "I8" else "float-quantized"
    return None


def infer(ctx):
    cfg = ctx.config
    declared = cfg.method == "compressed-tensors"
    mods = {p: l for p, l in ctx.modules().items()
            if "weight_packed" in l or ("weight" in l and "weight_scale" in l)
            or ("scale_packed" in l and "meta" in l)}
    if not mods or (not declared and not any("weight_packed" in l for l in mods.values())):
        return False
    groups = cfg.get("config_groups") if declared and isinstance(cfg.get("config_groups"), dict) else {}
    ignore = cfg.get("ignore") if declared and isinstance(cfg.get("ignore"), list) else []
    global_fmt = cfg.get("format") if declared else None
    global_fmt = global_fmt if isinstance(global_fmt, str) else None
    source = ("%s (quant_method compressed-tensors)" % cfg.source) if declared else "tensor-name pattern"

    summary, inexpressible = {}, {}
    for prefix, leaves in sorted(mods.items()):
        gname, group = _scheme_for(prefix, groups)
        if declared and (group is None or _ignored(prefix, ignore)):
            continue
        weights = (group or {}).get("weights")
        weights = weights if isinstance(weights, dict) else {}
        fmt = (group or {}).get("format")
        fmt = fmt if isinstance(fmt, str) else global_fmt
        if fmt in (None, "mixed-precision"):
            fmt = _guess_format(leaves)
        claim(ctx, {k: v for k, v in leaves.items() if k in _MARKERS or k == "weight"
                    or k.startswith("input_") or k.startswith("output_")})
        handler = _HANDLERS.get(fmt)
        if handler is None:
            lead = leaves.get("weight_packed") or leaves.get("weight") or next(iter(leaves.values()))
            why = "compressed-tensors format %r is not one this scanner reads" % fmt
            mark(ctx, lead, "compressed-tensors/%s" % fmt, label="ct:%s" % fmt, expressible=False, reason=why)
            inexpressible.setdefault(why, []).append(prefix)
            summary[("ct:%s" % fmt)] = summary.get("ct:%s" % fmt, 0) + 1
            continue
        label = handler(ctx, prefix, leaves, weights, inexpressible)
        if label:
            summary[label] = summary.get(label, 0) + 1

    if not summary:
        return True
    ctx.report.add("format_inferred", ctx.path,
                   "no GRIT descriptor; %d compressed-tensors module(s) (recognised by %s): %s (inferred, not "
                   "declared)" % (sum(summary.values()), source,
                                  ", ".join("%s x%d" % kv for kv in sorted(summary.items()))),
                   data={"family": "compressed-tensors", "family_source": source, "modules": sum(summary.values()),
                         "labels": dict(sorted(summary.items())), "ignore": ignore, "config": cfg.source})
    for reason, prefixes in sorted(inexpressible.items()):
        ctx.report.add("inferred_inexpressible", ctx.path,
                       "%d compressed-tensors module(s): GRIT v1 cannot name these bytes: %s" % (len(prefixes), reason),
                       data={"family": "compressed-tensors", "modules": len(prefixes), "sample": prefixes[:8],
                             "reason": reason})
    _partial(ctx, ignore, declared)
    return True


def _partial(ctx, ignore, declared):
    loose = []
    for e in ctx.header.entries:
        if e.name in ctx.claimed or not e.name.endswith(".weight") or e.dtype not in _FLOAT_DTYPES:
            continue
        if len(e.shape) != 2 or min(e.shape) <= 1:
            continue
        prefix = e.name[:-len(".weight")]
        if declared and _ignored(prefix, ignore):
            continue
        loose.append(e.name)
    if loose:
        ctx.report.add("partial_quantisation", ctx.path,
                       "%d float linear weight(s) sit beside compressed-tensors modules and are not in the "
                       "config's ignore list: %s" % (len(loose), ", ".join(loose[:6]) + (" ..." if len(loose) > 6 else "")),
                       data={"unquantised": loose[:32], "count": len(loose), "ignore": ignore})


def _layout(ctx, prefix, lead, problems):
    ctx.report.add("family_layout", ctx.path, "compressed-tensors: %s" % "; ".join(problems), tensor=lead.name,
                   data={"family": "compressed-tensors", "problems": problems, "module": prefix})


def _args(weights, key, default=None):
    v = weights.get(key, default)
    return default if v is None else v


def _groups_check(ctx, prefix, lead, strategy, group_size, scale, out, in_f):
    """Scale-plane shape by strategy; returns k0 (elements per scale along the input axis) or None."""
    if strategy in ("group", "tensor_group"):
        if not isinstance(group_size, int) or group_size <= 0:
            _layout(ctx, prefix, lead, ["strategy %s without a group_size" % strategy])
            return None
        if len(scale.shape) != 2 or scale.shape[0] != out:
            _layout(ctx, prefix, lead, ["weight_scale is %s, expected [%d, groups]" % (list(scale.shape), out)])
            return None
        if scale.shape[1] * group_size != in_f:
            ctx.report.add("group_size_mismatch", ctx.path,
                           "config declares group_size %d, but weight_scale %s gives %d groups over %d inputs "
                           "(%s per group)" % (group_size, list(scale.shape), scale.shape[1], in_f,
                                               in_f / scale.shape[1] if scale.shape[1] else "no"),
                           tensor=lead.name, data={"declared": group_size, "groups": scale.shape[1],
                                                   "in_features": in_f})
            return None
        return group_size
    if strategy == "channel":
        if list(scale.shape) != [out, 1]:
            _layout(ctx, prefix, lead, ["channel strategy needs weight_scale [%d, 1], found %s"
                                        % (out, list(scale.shape))])
            return None
        return in_f
    return None


def _core_size_check(ctx, rec, planes, lead):
    """The core's level-1 check of the inferred descriptor against the real plane lengths."""
    if rec.desc is None:
        return
    try:
        check(rec.desc, planes, tensor=lead.name)
    except GritCheckError as exc:
        ctx.report.add("size" if exc.status == "SizeMismatch" else "check", ctx.path,
                       "inferred %s: %s" % (rec.grade, exc), tensor=lead.name,
                       data={"status": exc.status, "field": exc.field, "expected": exc.expected,
                             "found": exc.found, "plane": exc.plane, "source": "inferred"})


def _pack_quantized(ctx, prefix, leaves, weights, inexpressible):
    wp, scale = leaves.get("weight_packed"), leaves.get("weight_scale")
    bits = _args(weights, "num_bits", 4)
    if wp is None or scale is None or len(wp.shape) != 2 or wp.dtype != "I32":
        _layout(ctx, prefix, wp or scale, ["pack-quantized needs an I32 rank-2 weight_packed and a weight_scale"])
        return None
    if type(bits) is not int or not 1 <= bits <= 8:   # found by tests/fuzz/fuzz_safetensors.py (num_bits 0)
        _layout(ctx, prefix, wp, ["config num_bits is %r; pack-quantized packs 1- to 8-bit codes" % (bits,)])
        return None
    out = wp.shape[0]
    strategy, gs = _args(weights, "strategy", "group"), weights.get("group_size")
    in_f = scale.shape[1] * gs if strategy == "group" and isinstance(gs, int) and len(scale.shape) == 2 \
        else wp.shape[1] * 32 // bits
    problems = []
    if wp.shape[1] != -(-in_f * bits // 32):
        problems.append("weight_packed is %s, %d %d-bit codes per row need %d int32"
                        % (list(wp.shape), in_f, bits, -(-in_f * bits // 32)))
    ws = leaves.get("weight_shape")
    if ws is not None and list(ws.shape) != [2]:
        problems.append("weight_shape is %s, expected [2]" % list(ws.shape))
    if problems:
        _layout(ctx, prefix, wp, problems)
        return None
    k0 = _groups_check(ctx, prefix, wp, strategy, gs, scale, out, in_f)
    sym = _args(weights, "symmetric", True)
    reasons = ["the stored codes are offset binary (q + %d), a zero point implied by the format and never "
               "stored; v1 s%d is two's complement and u%d needs a stored zero-point plane" % (1 << (bits - 1), bits, bits)]
    if not sym:
        reasons.append("the zero points are packed densely along the output axis; v1 stores one per byte")
    if strategy == "tensor":
        reasons.append("one scale for the whole tensor: v1 level-0 groups run along one axis")
    s0 = SCALE_FORMATS.get(scale.dtype)
    grade = None
    if k0 and s0:
        text = ("grit1(e=s%d,k0=%d,s0=%s,esr=ratiomaxabs)" % (bits, k0, s0) if sym else
                "grit1(e=s%d,k0=%d,s0=%s,zp=s%d,esr=affineminmax)" % (bits, k0, s0, bits))
        grade, why = grade_or_reason(text)
        if why:
            reasons.append("the contract itself: " + why)
    elif not s0:
        reasons.append("weight_scale is %s, not in the v1 format ladder" % scale.dtype)
    reason = "; ".join(reasons)
    label = grade.canonical if grade is not None else "ct:pack-quantized:int%d:%s" % (bits, strategy)
    mark(ctx, wp, "compressed-tensors/pack-quantized", grade=grade, label=label, expressible=False, reason=reason,
         logical_shape=(out, in_f))
    inexpressible.setdefault(reason, []).append(prefix)
    return label


def _fp4(ctx, prefix, leaves, weights, inexpressible, nv):
    wp, scale = leaves.get("weight_packed"), leaves.get("weight_scale")
    fmt = "nvfp4-pack-quantized" if nv else "mxfp4-pack-quantized"
    if wp is None or scale is None or len(wp.shape) != 2 or wp.dtype != "U8":
        _layout(ctx, prefix, wp or scale, ["%s needs a U8 rank-2 weight_packed and a weight_scale" % fmt])
        return None
    out, in_f = wp.shape[0], wp.shape[1] * 2
    gs = _args(weights, "group_size", 16 if nv else 32)
    want_scale = ("F8_E4M3",) if nv else ("U8", "F8_E8M0")
    problems = []
    if scale.dtype not in want_scale:
        problems.append("weight_scale is %s, %s writes %s" % (scale.dtype, fmt, "/".join(want_scale)))
    if nv and ("weight_global_scale" not in leaves or list(leaves["weight_global_scale"].shape) != [1]):
        problems.append("weight_global_scale [1] is missing or misshapen")
    if problems:
        _layout(ctx, prefix, wp, problems)
        return None
    k0 = _groups_check(ctx, prefix, wp, "group", gs, scale, out, in_f)
    if nv:
        reason = ("the tensor scale is stored as a divisor (x = q * scale / global_scale); v1's level-1 scale "
                  "multiplies, so the stored bytes are not GRADE_NVF4's s1 plane")
        mark(ctx, wp, "compressed-tensors/" + fmt, label="ct:nvfp4:k0=%s" % k0, expressible=False, reason=reason,
             logical_shape=(out, in_f))
        inexpressible.setdefault(reason, []).append(prefix)
        return "ct:nvfp4:k0=%s" % k0
    if k0 != 32:
        return None
    grade, _ = grade_or_reason("MXFP4")
    rec = mark(ctx, wp, "compressed-tensors/" + fmt, grade=grade, expressible=True, logical_shape=(out, in_f))
    _core_size_check(ctx, rec, [wp.nbytes, scale.nbytes], wp)
    return grade.canonical


def _naive(ctx, prefix, leaves, weights, inexpressible):
    w, scale = leaves.get("weight"), leaves.get("weight_scale")
    if w is None or scale is None or len(w.shape) != 2:
        _layout(ctx, prefix, w or scale, ["a quantized weight needs a rank-2 weight and a weight_scale"])
        return None
    out, in_f = w.shape
    elem = {"I8": "s8", "F8_E4M3": "e4m3"}.get(w.dtype)
    strategy, gs = _args(weights, "strategy", "channel"), weights.get("group_size")
    reasons = []
    if elem is None:
        reasons.append({"F8_E4M3FNUZ": "FNUZ FP8 (another exponent bias, no negative zero) needs bias_ovr, "
                                       "which v1 requires to be 0",
                        "F8_E5M2FNUZ": "FNUZ FP8 needs bias_ovr, which v1 requires to be 0",
                        "F8_E5M2": "e5m2 is not in the v1 element ladder"}.get(
            w.dtype, "weight dtype %s is not a v1 element format" % w.dtype))
    k0 = None
    if strategy in ("group", "channel"):
        k0 = _groups_check(ctx, prefix, w, strategy, gs, scale, out, in_f)
    elif strategy == "tensor":
        reasons.append("one scale for the whole tensor: v1 level-0 groups run along one axis")
    elif strategy == "block":
        reasons.append("two-dimensional %s blocks: v1 groups run along one axis" % weights.get("block_structure"))
    s0 = SCALE_FORMATS.get(scale.dtype)
    if s0 is None:
        reasons.append("weight_scale is %s, not in the v1 format ladder" % scale.dtype)
    sym = _args(weights, "symmetric", True)
    grade = None
    if not reasons and k0:
        text = ("grit1(e=%s,k0=%d,s0=%s,esr=ratiomaxabs)" % (elem, k0, s0) if sym else
                "grit1(e=%s,k0=%d,s0=%s,zp=%s,esr=affineminmax)" % (elem, k0, s0, elem))
        grade, why = grade_or_reason(text)
        if why:
            reasons.append(why)
    family = "compressed-tensors/%s-quantized" % ("int" if w.dtype == "I8" else "float")
    if reasons or grade is None:
        reason = "; ".join(reasons) or "the scale planes do not match the declared strategy"
        label = "ct:%s:%s" % (w.dtype, strategy)
        mark(ctx, w, family, label=label, expressible=False, reason=reason, logical_shape=(out, in_f))
        if reasons:
            inexpressible.setdefault(reason, []).append(prefix)
        return label
    rec = mark(ctx, w, family, grade=grade, expressible=True, logical_shape=(out, in_f))
    zp = leaves.get("weight_zero_point")
    _core_size_check(ctx, rec, [w.nbytes, scale.nbytes, 0, zp.nbytes if (zp is not None and not sym) else 0], w)
    return grade.canonical


def _marlin24(ctx, prefix, leaves, weights, inexpressible):
    lead = leaves.get("weight_packed") or next(iter(leaves.values()))
    reason = ("marlin-24 tiles the 2:4-sparse weights, their scales and metadata into Marlin's kernel layout, "
              "which no v1 placement registers")
    mark(ctx, lead, "compressed-tensors/marlin-24", label="ct:marlin-24", expressible=False, reason=reason)
    inexpressible.setdefault(reason, []).append(prefix)
    return "ct:marlin-24"


_HANDLERS = {
    "pack-quantized": _pack_quantized,
    "nvfp4-pack-quantized": lambda c, p, l, w, i: _fp4(c, p, l, w, i, True),
    "mxfp4-pack-quantized": lambda c, p, l, w, i: _fp4(c, p, l, w, i, False),
    "int-quantized": _naive, "float-quantized": _naive, "naive-quantized": _naive,
    "marlin-24": _marlin24,
}
