"""GPTQ and AWQ: int32-packed 4-bit weights with a zero-point plane.

Layouts, by the families' published packers (AutoGPTQ / GPTQModel, AutoAWQ GEMM):

    GPTQ  qweight [in*b/32, out]  (packed along the input axis, element i at bits b*i)
          qzeros  [groups, out*b/32]   scales [groups, out]   g_idx [in] (optional)
          v1 ("gptq") stores zero-1, v2 ("gptq_v2") stores zero as is
    AWQ   qweight [in, out*b/32]  (packed along the output axis in the order 0,2,4,6,1,3,5,7)
          qzeros  [groups, out*b/32]   scales [groups, out]

GRIT v1 names the contract (u4 elements, a binary16 scale and a u4 zero point
per group of k0, zpc=minus1 or asis), but not these bytes: the zero points are
dense nibbles (8 per int32) where v1 stores one per byte (CT_PAD8), and AWQ's
nibble order is no v1 placement. So the grade is inferred (for identity and
drift) and the bytes are reported as inexpressible, never approximated.
"""

from . import SCALE_FORMATS, claim, grade_or_reason, mark

AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)
_LEAVES = ("qweight", "qzeros", "scales")


def _orientation(qw, sc, qz, bits):
    per = 32 // bits if 32 % bits == 0 else None
    if per is None or len(qw) != 2 or len(sc) != 2 or len(qz) != 2:
        return None
    gptq = qw[1] == sc[1] and qz[1] * per == sc[1]
    awq = qw[1] == qz[1] and qw[1] * per == sc[1]
    if gptq != awq:
        return "gptq" if gptq else "awq"
    return None


def infer(ctx):
    mods = {p: l for p, l in ctx.modules().items() if all(k in l for k in _LEAVES)}
    if not mods:
        return False
    cfg, path, report = ctx.config, ctx.path, ctx.report
    bits = cfg.get("bits", cfg.get("w_bit", 4))
    bits = bits if isinstance(bits, int) and not isinstance(bits, bool) and 1 <= bits <= 8 else 4
    method = cfg.method if cfg.method in ("gptq", "awq") else None
    if method:
        family, source = method, "%s quant_method" % cfg.source
    elif any("g_idx" in l for l in mods.values()):
        family, source = "gptq", "g_idx tensors (AWQ writes none)"
    else:
        votes = {_orientation(l["qweight"].shape, l["scales"].shape, l["qzeros"].shape, bits) for l in mods.values()}
        votes.discard(None)
        family, source = (votes.pop(), "packed-int32 shapes") if len(votes) == 1 else (None, "undetermined")
    fmt = cfg.get("checkpoint_format")
    if family == "gptq":
        v2 = isinstance(fmt, str) and fmt.lower() == "gptq_v2"
        zpc = "asis" if v2 else "minus1"
        zpc_declared = isinstance(fmt, str)
        zpc_source = ("%s checkpoint_format=%r" % (cfg.source, fmt)) if zpc_declared else \
            "GPTQ v1 convention assumed: nothing in the artifact records it"
    elif family == "awq":
        zpc, zpc_declared, zpc_source = "asis", False, "AWQ convention assumed: nothing in the artifact records it"
    else:
        zpc, zpc_declared, zpc_source = None, False, "family undetermined"
    group_cfg = cfg.get("group_size", cfg.get("q_group_size"))
    desc_act = cfg.get("desc_act") is True
    version = cfg.get("version", "gemm") if family == "awq" else None

    grades, labels, layout_bad = {}, {}, 0
    for prefix, leaves in sorted(mods.items()):
        claim(ctx, leaves)
        qw, qz, sc = leaves["qweight"], leaves["qzeros"], leaves["scales"]
        where = prefix + ".qweight"
        problems = []
        if qw.dtype != "I32" or qz.dtype != "I32":
            problems.append("qweight/qzeros are %s/%s, the packers write I32" % (qw.dtype, qz.dtype))
        if len(qw.shape) != 2 or len(qz.shape) != 2 or len(sc.shape) != 2:
            problems.append("qweight %s, qzeros %s, scales %s are not all rank 2"
                            % (list(qw.shape), list(qz.shape), list(sc.shape)))
        if problems or family is None:
            _layout(report, path, where, family or "gptq/awq", problems or
                    ["the shapes do not say GPTQ or AWQ and no config says which"])
            layout_bad += 1
            continue
        groups, out = sc.shape
        if family == "gptq":
            in_f = qw.shape[0] * 32 // bits
            want = {"qweight": [in_f * bits // 32, out], "qzeros": [groups, out * bits // 32], "scales": [groups, out]}
            if "g_idx" in leaves:
                want["g_idx"] = [in_f]
        else:
            in_f = qw.shape[0]
            want = {"qweight": [in_f, out * bits // 32], "qzeros": [groups, out * bits // 32], "scales": [groups, out]}
        for leaf, shape in want.items():
            if list(leaves[leaf].shape) != shape:
                problems.append("%s is %s, the %s layout needs %s (in=%d, out=%d, groups=%d, %d-bit)"
                                % (leaf, list(leaves[leaf].shape), family.upper(), shape, in_f, out, groups, bits))
        if groups == 0 or in_f % groups:
            problems.append("%d input features do not split into %d equal groups" % (in_f, groups))
        if problems:
            _layout(report, path, where, family, problems)
            layout_bad += 1
            continue
        k0 = in_f // groups
        if isinstance(group_cfg, int) and not isinstance(group_cfg, bool):
            cfg_k0 = in_f if group_cfg == -1 else group_cfg
            if cfg_k0 != k0:
                report.add("group_size_mismatch", path,
                           "%s declares group_size %d, but scales %s give %d groups of %d over %d inputs"
                           % (ctx.config.source, group_cfg, list(sc.shape), groups, k0, in_f), tensor=where,
                           data={"declared": group_cfg, "from_bytes": k0, "groups": groups, "in_features": in_f})
        s0 = SCALE_FORMATS.get(sc.dtype)
        reasons = ["the zero points are dense %d-bit values, %d per int32; v1 stores one zero point per byte "
                   "(CT_PAD8)" % (bits, 32 // bits if 32 % bits == 0 else 0)]
        if family == "awq":
            reasons.append("AWQ packs nibbles in the order %s, which no v1 placement registers" % (AWQ_ORDER,))
            if str(version).lower() != "gemm":
                reasons.append("AWQ version %r is not the GEMM layout this scanner reads" % version)
        if desc_act:
            reasons.append("act-order (desc_act=true): g_idx regroups inputs, which v1's contiguous groups "
                           "cannot carry")
        grade = None
        if s0 is None:
            reasons.append("scales are %s, not in the v1 format ladder" % sc.dtype)
        else:
            if family == "gptq":
                text = "grit1(e=u%d,k0=%d,s0=%s,zp=u%d,zpc=%s,esr=ratiomaxabs)" % (bits, k0, s0, bits, zpc)
            else:
                text = "grit1(e=u%d,k0=%d,s0=%s,zp=u%d,esr=affineminmax)" % (bits, k0, s0, bits)
            grade, why = grade_or_reason(text)
            if why:
                reasons.append("the contract itself: " + why)
        label = grade.canonical if grade is not None else "%s:u%d:k0=%d:zpc=%s" % (family, bits, k0, zpc)
        mark(ctx, qw, family, grade=grade, label=label, expressible=False, reason="; ".join(reasons),
             logical_shape=(out, in_f))
        for leaf in leaves:
            if leaf != "qweight":
                ctx.records[leaves[leaf].name].family = family
        grades.setdefault(label, []).append(prefix)
        labels[prefix] = (label, reasons)
        if family == "gptq" and "g_idx" in leaves:
            ctx.plan("g_idx", ctx.records[qw.name], leaves["g_idx"], k0)
        ctx.plan("qzeros", ctx.records[qw.name], qz, (bits, zpc))

    if not labels:
        return True
    n = len(labels)
    report.add("format_inferred", path,
               "no GRIT descriptor; %d module(s) are %s (recognised by %s), grade%s %s (inferred, not declared)"
               % (n, (family or "gptq/awq").upper(), source, "s" if len(grades) > 1 else "", ", ".join(sorted(grades))),
               data={"family": family, "family_source": source, "modules": n, "bits": bits,
                     "grades": {g: len(p) for g, p in sorted(grades.items())}, "config": ctx.config.source})
    by_reason = {}
    for prefix, (label, reasons) in labels.items():
        by_reason.setdefault("; ".join(reasons), []).append(prefix)
    for reason, prefixes in sorted(by_reason.items()):
        report.add("inferred_inexpressible", path,
                   "%d %s module(s): GRIT v1 names the contract but not these bytes: %s"
                   % (len(prefixes), family.upper(), reason),
                   data={"family": family, "modules": len(prefixes), "sample": sorted(prefixes)[:8],
                         "reason": reason, "act_order": desc_act,
                         "packing_order": list(AWQ_ORDER) if family == "awq" else list(range(8))})
    if family in ("gptq", "awq"):
        other = "awq" if family == "gptq" else "gptq"
        severity = "warning" if zpc_declared else "disagreement"
        tail = ("%s states it; the tensors alone would not" % zpc_source if zpc_declared else
                "%s. Read the other way, every weight shifts by exactly one quantization step" % zpc_source)
        report.add("zp_convention_ambiguous", path,
                   "the %s qzeros planes of %d module(s) are byte-for-byte what %s writes under the opposite "
                   "convention (zpc=%s here, zpc=%s there): same names, dtype, shapes and byte counts. %s"
                   % (family.upper(), n, other.upper(), zpc, "asis" if zpc == "minus1" else "minus1", tail),
                   severity=severity,
                   fix="declare the convention: a GRIT descriptor carries it as the ZP_MINUS1 flag and zpc token",
                   data={"family": family, "ambiguous_with": other, "zpc": zpc, "declared": zpc_declared,
                         "source": zpc_source, "modules": n})
    return True


def _layout(report, path, where, family, problems):
    report.add("family_layout", path, "%s: %s" % (family.upper(), "; ".join(problems)), tensor=where,
               data={"family": family, "problems": problems})
