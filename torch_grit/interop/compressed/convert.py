"""compressed-tensors model folders -> GRIT model folders (``interop.folder`` does the streaming).

Two of the package's integer formats, pack-quantized and int-quantized, differ only in how a
layer's codes and zero points are stored (``layouts``); the rest is shared and planned here. Both
store ``weight_scale`` [out, in/group] (strategy "group") or [out, 1] ("channel") and decode
``x = scale * q`` (symmetric) or ``x = scale * (q - zp)`` (asymmetric), q and zp signed integers.

GRIT names a symmetric layer ``grit1(e=s<b>,k0=<group>,s0=...,esr=ratiomaxabs)``, each code q in
two's complement; an asymmetric one ``grit1(e=u<b>,k0=<group>,s0=...,zp=u<b>,esr=affineminmax)``,
codes and zero points offset binary (q + 2^(b-1), zp + 2^(b-1)), so that e - z = q - zp exactly.
A format that stores the other encoding has each code's top bit flipped; the bytes are otherwise
kept, the scales as they are.

Imported: pack-quantized 4- and 8-bit and int-quantized 8-bit weights, symmetric or asymmetric,
group or channel strategy, float16 or float32 scales. Refused with the reason, nothing written:
config groups that quantize activations too (W8A8: the weights alone would not compute what the
model does), the "tensor" strategy (one scale for the whole tensor: v1's level-0 groups run along
one axis), bfloat16 scales (not in GRIT v1's format ladder), other formats and bit widths.
"""

import numpy as np

from ...checkpoint.safetensors_io import CheckpointError
from ...contract.errors import GradeError
from ...contract.grade import Grade
from ...scan.records import is_class_target, target_matches
from ..folder import SCALE_DTYPES, LayerPlan, import_folder
from .layouts import LAYOUTS, sign_mask

LEAVES = ("weight", "weight_packed", "weight_scale", "weight_shape", "weight_zero_point", "weight_global_scale")
SCALES = {"F16": "binary16", "F32": "binary32"}


def import_compressed(src, dst, max_shard_size=None, on_tensor=None):
    """Write compressed-tensors model folder ``src`` as a GRIT model folder ``dst``; see ``interop.folder``."""
    return import_folder(src, dst, plan_layers, max_shard_size=max_shard_size, on_tensor=on_tensor)


def _scheme(prefix, groups):
    """The config group naming this module: a name or regex first, a class name (``Linear``) second."""
    by_class = None
    for group in groups.values():
        if not isinstance(group, dict):
            continue
        targets = [t for t in group.get("targets") or [] if isinstance(t, str)]
        if any(not is_class_target(t) and target_matches(t, prefix) for t in targets):
            return group
        if by_class is None and any(is_class_target(t) for t in targets):
            by_class = group
    return by_class


def plan_layers(source):
    qc, path = source.quantization_config, source.config_path
    if qc.get("quant_method") != "compressed-tensors":
        raise CheckpointError("quantization_config.quant_method is %r; not a compressed-tensors folder"
                              % (qc.get("quant_method"),), path, field="quant_method")
    groups = qc.get("config_groups") if isinstance(qc.get("config_groups"), dict) else {}
    ignore = [t for t in qc.get("ignore") or [] if isinstance(t, str)]
    # Every compressed-tensors format stores a weight_scale beside each quantized weight.
    mods = {p: l for p, l in source.modules(LEAVES).items() if "weight_scale" in l}
    if not mods:
        raise CheckpointError("no weight_scale tensor: the folder holds no quantized layer", source.path,
                              field="weight_scale")
    layers = []
    for prefix, leaves in sorted(mods.items()):
        lead = next(k for k in ("weight_packed", "weight", "weight_scale") if k in leaves)
        where = "%s.%s" % (prefix, lead)
        wpath = leaves[lead][0].path
        group = _scheme(prefix, groups)
        if group is None or any(target_matches(t, prefix) for t in ignore):
            raise CheckpointError("%s is quantized, but no config group targets it (or it is ignored)" % prefix,
                                  wpath, where, field="config_groups")
        if group.get("input_activations") or group.get("output_activations"):
            raise CheckpointError("the config group quantizes activations too; GRIT weight grades carry the "
                                  "weights only, and running this model without its activation quantization "
                                  "would change what it computes", wpath, where, field="activations")
        fmt = group.get("format") or qc.get("format")
        layout = LAYOUTS.get(fmt) if isinstance(fmt, str) else None
        if layout is None or layout.codes not in leaves:
            raise CheckpointError("format %r: torch_grit imports compressed-tensors' pack-quantized and "
                                  "int-quantized (integer) layers%s"
                                  % (fmt, "" if layout is None else ", and this layer has no %s" % layout.codes),
                                  wpath, where, field="format", found=fmt)
        args = group.get("weights") if isinstance(group.get("weights"), dict) else {}
        layers.append(_plan(source, prefix, leaves, layout, args, wpath, where))
    return layers


def _plan(source, prefix, leaves, layout, args, path, where):
    bits, symmetric = _check_args(leaves, layout, args, path, where)
    out_f, in_f = layout.shape(source, leaves, bits, path, where)
    s0, k0 = _check_scale(prefix, leaves, args, out_f, in_f, path, where)
    groups = in_f // k0
    if not symmetric:
        layout.check_zero_points(leaves["weight_zero_point"][1], bits, out_f, groups, path,
                                 prefix + ".weight_zero_point")
    text = ("grit1(e=s%d,k0=%d,s0=%s,esr=ratiomaxabs)" % (bits, k0, s0) if symmetric else
            "grit1(e=u%d,k0=%d,s0=%s,zp=u%d,esr=affineminmax)" % (bits, k0, s0, bits))
    try:
        grade = Grade.parse(text)
    except GradeError as e:
        raise CheckpointError("the layer's grade: %s" % e, path, where, field="grade") from None
    # The grade's codes: two's complement when symmetric, offset binary when not; its zero points
    # offset binary. Flip each code's top bit where the format stores the other encoding.
    flip_codes = sign_mask(bits, 8 // bits) if layout.offset_binary == symmetric else np.uint8(0)
    flip_zps = np.uint8(0) if layout.offset_binary else sign_mask(bits, 1)

    def convert(a):
        data = layout.code_bytes(a[layout.codes], bits, out_f, in_f) ^ flip_codes
        scale = np.ascontiguousarray(a["weight_scale"]).view(np.uint8).reshape(-1)
        zps = np.zeros(0, np.uint8)
        if not symmetric:
            zps = layout.zero_point_bytes(a["weight_zero_point"], bits, out_f, groups) ^ flip_zps
        return [data, scale, np.zeros(0, np.uint8), zps]

    names = (layout.codes, "weight_scale") + layout.drop + (() if symmetric else ("weight_zero_point",))
    return LayerPlan(prefix, {k: leaves[k] for k in names}, (out_f, in_f), grade,
                     source.dtype or SCALE_DTYPES[leaves["weight_scale"][1].dtype], convert, drop=layout.drop)


def _check_args(leaves, layout, args, path, where):
    """(bits, symmetric) from the group's weight args, checked against the format and the leaves."""
    bits, strategy = args.get("num_bits", 4), args.get("strategy", "group")
    if args.get("type", "int") != "int" or bits not in layout.bits:
        raise CheckpointError("%s-bit %s weights: torch_grit imports %s integer %s layers%s"
                              % (bits, args.get("type"), _widths(layout.bits), layout.format, layout.bits_why),
                              path, where, field="num_bits", found=bits)
    symmetric = args.get("symmetric", True)
    if symmetric not in (True, False):
        raise CheckpointError("symmetric is %r; expected true or false" % (symmetric,), path, where,
                              field="symmetric", found=symmetric)
    if symmetric and "weight_zero_point" in leaves:
        raise CheckpointError("a symmetric layer with a weight_zero_point beside it", path, where,
                              field="weight_zero_point")
    if not symmetric and "weight_zero_point" not in leaves:
        raise CheckpointError("an asymmetric layer without its weight_zero_point", path, where,
                              field="weight_zero_point")
    if strategy not in ("group", "channel"):
        raise CheckpointError("strategy %r: one scale for the whole tensor is no v1 grade (level-0 groups run "
                              "along one axis)" % (strategy,), path, where, field="strategy", found=strategy)
    return bits, symmetric


def _check_scale(prefix, leaves, args, out_f, in_f, path, where):
    """(s0, k0): the scales' GRIT format and the group size, the inputs and ``weight_scale`` checked against it."""
    if "weight_scale" not in leaves:
        raise CheckpointError("%s has no weight_scale beside it" % where, path, where, field="weight_scale")
    sc, strategy = leaves["weight_scale"][1], args.get("strategy", "group")
    s0 = SCALES.get(sc.dtype)
    if s0 is None:
        raise CheckpointError("weight_scale is %s; GRIT v1 scales take float16 or float32 here (bfloat16 is not in "
                              "its format ladder)" % sc.dtype, path, prefix + ".weight_scale",
                              field="weight_scale_dtype", found=sc.dtype)
    k0 = in_f if strategy == "channel" else args.get("group_size")
    if not isinstance(k0, int) or k0 <= 0 or in_f % k0:
        raise CheckpointError("the weight [%d, %d] in groups of %r (strategy %s): its %d inputs are no whole "
                              "number of groups" % (out_f, in_f, k0, strategy, in_f),
                              path, where, field="group_size", expected=args.get("group_size"), found=in_f)
    if list(sc.shape) != [out_f, in_f // k0]:
        raise CheckpointError("weight_scale is %s; strategy %s with group_size %r over [%d, %d] needs [%d, %d]"
                              % (list(sc.shape), strategy, args.get("group_size"), out_f, in_f, out_f, in_f // k0),
                              path, prefix + ".weight_scale", field="weight_scale",
                              expected=[out_f, in_f // k0], found=list(sc.shape))
    return s0, k0


def _widths(bits):
    """(4, 8) -> '4- and 8-bit'."""
    return " and ".join("%d-" % b for b in bits) + "bit"
