"""compressed-tensors ``pack-quantized`` model folders -> GRIT model folders
(``interop.folder`` does the streaming).

The layout, as the package's PackedQuantizationCompressor writes it for symmetric integer
weights: ``weight_packed`` int32 [out, ceil(in*b/32)], each row's codes dense from bit 0
(code j at bits b*j), each code the value plus 2^(b-1) (offset binary); ``weight_scale``
[out, in/group] (strategy "group") or [out, 1] ("channel"); ``weight_shape`` int64 [out, in].
It decodes ``x = scale * q``. GRIT names that ``grit1(e=s<b>,k0=<group>,s0=...,esr=ratiomaxabs)``
with q a two's-complement code: code(q) = stored XOR 2^(b-1), the bytes otherwise as they are.

Asymmetric weights add ``weight_zero_point`` int32 [ceil(out*b/32), in/group], each column's
zero points dense from bit 0 along the output axis, offset binary like the codes; they decode
``x = scale * (q - zp)``. GRIT names that ``grit1(e=u<b>,k0=<group>,s0=...,zp=u<b>,esr=affineminmax)``
with the stored codes and zero points as they are (both offset by 2^(b-1), so e - z = q - zp).

Imported: 4- and 8-bit weights, symmetric or asymmetric, group or channel strategy, float16 or
float32 scales. Refused with the reason, nothing written: config groups that quantize activations
too (W8A8: the weights alone would not compute what the model does), the "tensor" strategy (one scale for the whole tensor: v1's level-0 groups run
along one axis), bfloat16 scales (not in GRIT v1's format ladder), other formats and bit widths.
"""

import numpy as np

from ...checkpoint.safetensors_io import CheckpointError
from ...contract.errors import GradeError
from ...contract.grade import Grade
from ...scan.records import is_class_target, target_matches
from ..folder import SCALE_DTYPES, LayerPlan, import_folder

LEAVES = ("weight_packed", "weight_scale", "weight_shape", "weight_zero_point", "weight_global_scale")
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
        lead = "weight_packed" if "weight_packed" in leaves else "weight_scale"
        where = "%s.%s" % (prefix, lead)
        wpath = leaves[lead][0].path
        group = _scheme(prefix, groups)
        if group is None or any(target_matches(t, prefix) for t in ignore):
            raise CheckpointError("%s is packed, but no config group targets it (or it is ignored)" % prefix,
                                  wpath, where, field="config_groups")
        if group.get("input_activations") or group.get("output_activations"):
            raise CheckpointError("the config group quantizes activations too; GRIT weight grades carry the "
                                  "weights only, and running this model without its activation quantization "
                                  "would change what it computes", wpath, where, field="activations")
        fmt = group.get("format") or qc.get("format")
        if fmt != "pack-quantized" or "weight_packed" not in leaves:
            raise CheckpointError("format %r: torch_grit imports compressed-tensors' pack-quantized (integer) "
                                  "layers" % (fmt,), wpath, where, field="format", found=fmt)
        args = group.get("weights") if isinstance(group.get("weights"), dict) else {}
        layers.append(_plan(source, prefix, leaves, args, wpath, where))
    return layers


def _plan(source, prefix, leaves, args, path, where):
    bits, strategy = args.get("num_bits", 4), args.get("strategy", "group")
    if args.get("type", "int") != "int" or bits not in (4, 8):
        raise CheckpointError("%s-bit %s weights: torch_grit imports 4- and 8-bit integer pack-quantized layers"
                              % (bits, args.get("type")), path, where, field="num_bits", found=bits)
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
    for leaf in ("weight_scale", "weight_shape"):
        if leaf not in leaves:
            raise CheckpointError("%s has no %s beside it" % (where, leaf), path, where, field=leaf)
    wp, sc, ws = (leaves[k][1] for k in ("weight_packed", "weight_scale", "weight_shape"))
    if wp.dtype != "I32" or len(wp.shape) != 2:
        raise CheckpointError("weight_packed is %s %s; the compressor writes a 2-D int32 tensor"
                              % (wp.dtype, list(wp.shape)), path, where, field="weight_packed", found=wp.dtype)
    if ws.dtype not in ("I64", "I32") or list(ws.shape) != [2]:
        raise CheckpointError("weight_shape is %s %s; expected 2 integers [out, in]" % (ws.dtype, list(ws.shape)),
                              path, prefix + ".weight_shape", field="weight_shape")
    out_f, in_f = (int(v) for v in source.read(leaves["weight_shape"]).tolist())
    words = -(-in_f * bits // 32)
    if list(wp.shape) != [out_f, words] or in_f * bits % 8:
        raise CheckpointError("weight_packed is %s; weight_shape [%d, %d] at %d bits needs [%d, %d]"
                              % (list(wp.shape), out_f, in_f, bits, out_f, words), path, where,
                              field="weight_packed", expected=[out_f, words], found=list(wp.shape))
    s0 = SCALES.get(sc.dtype)
    if s0 is None:
        raise CheckpointError("weight_scale is %s; GRIT v1 scales take float16 or float32 here (bfloat16 is not in "
                              "its format ladder)" % sc.dtype, path, prefix + ".weight_scale",
                              field="weight_scale_dtype", found=sc.dtype)
    k0 = in_f if strategy == "channel" else args.get("group_size")
    if not isinstance(k0, int) or k0 <= 0 or in_f % k0 or list(sc.shape) != [out_f, in_f // k0]:
        raise CheckpointError("weight_scale is %s; strategy %s with group_size %r over [%d, %d] needs [%d, %s]"
                              % (list(sc.shape), strategy, args.get("group_size"), out_f, in_f, out_f,
                                 in_f // k0 if isinstance(k0, int) and k0 > 0 else "?"),
                              path, prefix + ".weight_scale", field="weight_scale", found=list(sc.shape))
    groups = in_f // k0
    if not symmetric:
        zp = leaves["weight_zero_point"][1]
        zp_words = -(-out_f * bits // 32)
        if zp.dtype != "I32" or list(zp.shape) != [zp_words, groups]:
            raise CheckpointError("weight_zero_point is %s %s; %d-bit zero points of [%d, %d] packed along the "
                                  "output axis need int32 [%d, %d]" % (zp.dtype, list(zp.shape), bits, out_f, groups,
                                                                       zp_words, groups),
                                  path, prefix + ".weight_zero_point", field="weight_zero_point",
                                  expected=[zp_words, groups], found=list(zp.shape))
    # Symmetric: two's-complement codes, x = S * q. Asymmetric: the stored offset-binary codes
    # as unsigned elements and zero points, x = S * (e - z) with e - z = q - zp exactly.
    text = ("grit1(e=s%d,k0=%d,s0=%s,esr=ratiomaxabs)" % (bits, k0, s0) if symmetric else
            "grit1(e=u%d,k0=%d,s0=%s,zp=u%d,esr=affineminmax)" % (bits, k0, s0, bits))
    try:
        grade = Grade.parse(text)
    except GradeError as e:
        raise CheckpointError("the layer's grade: %s" % e, path, where, field="grade") from None
    offset = np.uint8(0) if not symmetric else (np.uint8(1 << (bits - 1)) if bits == 8 else np.uint8(0x88))
    row_bytes = in_f * bits // 8

    def convert(a):
        rows = np.ascontiguousarray(a["weight_packed"]).view(np.uint8).reshape(out_f, -1)[:, :row_bytes]
        data = (rows ^ offset).reshape(-1)
        scale = np.ascontiguousarray(a["weight_scale"]).view(np.uint8).reshape(-1)
        zps = np.zeros(0, np.uint8)
        if not symmetric:
            zps = _zero_points(a["weight_zero_point"], bits, out_f, groups)
        return [data, scale, np.zeros(0, np.uint8), zps]

    names = ("weight_packed", "weight_scale", "weight_shape") + (() if symmetric else ("weight_zero_point",))
    return LayerPlan(prefix, {k: leaves[k] for k in names},
                     (out_f, in_f), grade, source.dtype or SCALE_DTYPES[sc.dtype], convert, drop=("weight_shape",))


def _zero_points(packed, bits, out_f, groups):
    """weight_zero_point (int32 [ceil(out*b/32), groups], each column's out codes dense from bit 0,
    offset binary) -> GRIT's zero-point plane: one byte per group, row-major [out, groups]."""
    cols = np.ascontiguousarray(np.asarray(packed).T).view(np.uint8).reshape(groups, -1)  # [groups, bytes]
    if bits == 8:
        codes = cols[:, :out_f]
    else:
        codes = np.stack([cols & 0x0F, cols >> 4], axis=-1).reshape(groups, -1)[:, :out_f]
    return np.ascontiguousarray(codes.T).reshape(-1).astype(np.uint8)
