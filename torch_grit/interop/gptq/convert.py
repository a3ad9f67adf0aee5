"""GPTQ and AWQ model folders -> GRIT model folders (``interop.folder`` does the streaming).

This module reads the family's ``quantization_config`` and plans each layer from the headers:
dtypes and shapes of qweight / qzeros / scales against each other and against the config's bits
and group size, and GPTQ's g_idx (read here: an act-order layer's input permutation is computed,
and a g_idx whose groups are not all group_size long refused, before anything is written). An
act-order layer's permutation is written as the int64 tensor ``<layer>.input_perm``.
"""

import torch

from ...checkpoint.safetensors_io import CheckpointError
from ...contract.errors import GradeError
from ...contract.grade import Grade
from ..folder import LayerPlan, import_folder
from .layout import BITS, LayoutError, codes_in, grade_text, input_perm, planes, words_for

LEAVES = ("qweight", "qzeros", "scales", "g_idx")
FAMILIES = ("gptq", "awq")


class QuantConfig:
    """The ``quantization_config`` of a GPTQ/AWQ folder, checked."""

    def __init__(self, qc, path):
        method = str(qc.get("quant_method", "")).lower()
        if method not in FAMILIES:
            raise CheckpointError("quantization_config.quant_method is %r; not a GPTQ or AWQ folder"
                                  % (qc.get("quant_method"),), path, field="quant_method", found=qc.get("quant_method"))
        self.family = method
        bits = qc.get("bits", qc.get("w_bit"))
        if not isinstance(bits, int) or isinstance(bits, bool):
            raise CheckpointError("quantization_config.bits is %r; an integer is needed" % (bits,), path,
                                  field="bits", found=bits)
        self.bits = bits
        group = qc.get("group_size", qc.get("q_group_size"))
        self.group = group if isinstance(group, int) and not isinstance(group, bool) else None
        self.sym = bool(qc.get("sym", False)) if method == "gptq" else not qc.get("zero_point", True)
        self.checkpoint_format = qc.get("checkpoint_format") if method == "gptq" else None
        version = qc.get("version", "gemm") if method == "awq" else None
        if version is not None and str(version).lower() != "gemm":
            raise CheckpointError("AWQ version %r: torch_grit reads the GEMM layout" % version, path,
                                  field="version", found=version)


def import_quantized(src, dst, max_shard_size=None, on_tensor=None):
    """Write GPTQ/AWQ model folder ``src`` as a GRIT model folder ``dst``; see ``interop.folder``."""
    return import_folder(src, dst, plan_layers, max_shard_size=max_shard_size, on_tensor=on_tensor)


def plan_layers(source):
    """Every GPTQ/AWQ layer of ``source`` (an ``interop.folder.Source``), checked."""
    cfg = QuantConfig(source.quantization_config, source.config_path)
    mods = {p: l for p, l in source.modules(LEAVES).items() if "qweight" in l}
    if not mods:
        raise CheckpointError("no qweight tensor: the folder holds no %s layer" % cfg.family.upper(), source.path,
                              field="qweight")
    layers = []
    for prefix, leaves in sorted(mods.items()):
        for leaf in ("qzeros", "scales"):
            if leaf not in leaves:
                raise CheckpointError("%s.qweight has no %s beside it" % (prefix, leaf), leaves["qweight"][0].path,
                                      prefix + ".qweight", field=leaf)
        path, where = leaves["qweight"][0].path, prefix + ".qweight"
        in_f, out_f, groups = _static_checks(cfg, prefix, leaves)
        g_idx, perm = None, None
        if "g_idx" in leaves:
            g_idx = source.read(leaves["g_idx"]).numpy()
            try:
                perm = input_perm(g_idx, in_f, in_f // groups)
            except LayoutError as e:
                raise CheckpointError(str(e), path, prefix + ".g_idx", field=e.field, expected=e.expected,
                                      found=e.found) from None
        try:
            grade = Grade.parse(grade_text(cfg.bits, in_f // groups, cfg.sym))
        except GradeError as e:
            raise CheckpointError("the layer's grade: %s" % e, path, where, field="grade") from None
        layers.append(LayerPlan(prefix, leaves, (out_f, in_f), grade, source.dtype or torch.float16,
                                _converter(cfg, path, where, g_idx if perm is not None else None),
                                drop=("g_idx",),
                                extras={} if perm is None else {prefix + ".input_perm": torch.from_numpy(perm)}))
    return layers


def _converter(cfg, path, where, g_idx=None):
    def convert(a):
        try:
            return planes(cfg.family, a["qweight"], a["qzeros"], a["scales"], cfg.bits, g_idx,
                          cfg.checkpoint_format)[0]
        except LayoutError as e:
            raise CheckpointError(str(e), path, where, field=e.field) from None
    return convert


def _static_checks(cfg, prefix, leaves):
    """Dtypes, ranks and the config's bits and group size against the shapes (header only);
    returns (in_features, out_features, groups)."""
    qw, qz, sc = (leaves[k][1] for k in ("qweight", "qzeros", "scales"))
    path = leaves["qweight"][0].path
    where = prefix + ".qweight"
    if cfg.bits not in BITS or (cfg.bits == 3 and cfg.family == "awq"):
        raise CheckpointError("quantization_config.bits = %d: torch_grit reads 2, 3, 4 and 8 bits (GPTQ) and 2, "
                              "4 and 8 bits (AWQ)" % cfg.bits, path, where, field="bits_unsupported", found=cfg.bits)
    for leaf, e, dt in (("qweight", qw, "I32"), ("qzeros", qz, "I32"), ("scales", sc, "F16")):
        if e.dtype != dt or len(e.shape) != 2:
            raise CheckpointError("%s is %s %s; the %s layout has a 2-D %s tensor there"
                                  % (leaf, e.dtype, list(e.shape), cfg.family.upper(), dt), path,
                                  prefix + "." + leaf, field=leaf, expected=dt, found=e.dtype)
    groups, out_f = sc.shape
    in_f = (codes_in(qw.shape[0], cfg.bits) or 0) if cfg.family == "gptq" else qw.shape[0]
    want_qw = [words_for(in_f, cfg.bits), out_f] if cfg.family == "gptq" else [in_f, words_for(out_f, cfg.bits)]
    zero_words = words_for(out_f, cfg.bits)
    if zero_words is None or list(qw.shape) != want_qw:
        raise CheckpointError("qweight is %s, but scales %s at %d bits need %s: the config's bits are not the "
                              "ones the planes hold, or the tensors disagree"
                              % (list(qw.shape), list(sc.shape), cfg.bits, want_qw), path, where, field="qweight",
                              expected=want_qw, found=list(qw.shape))
    if list(qz.shape) != [groups, zero_words]:
        raise CheckpointError("qzeros is %s; scales %s need [%d, %d] at %d bits (quantization_config.bits): the "
                              "config's bits are not the ones the planes hold, or the tensors disagree"
                              % (list(qz.shape), list(sc.shape), groups, zero_words, cfg.bits),
                              path, prefix + ".qzeros", field="qzeros", expected=[groups, zero_words],
                              found=list(qz.shape))
    if groups == 0 or in_f % groups:
        raise CheckpointError("%d input features do not split into %d groups" % (in_f, groups), path,
                              prefix + ".scales", field="scales", found=groups)
    if cfg.group is not None and cfg.group != -1 and cfg.group != in_f // groups:
        raise CheckpointError("quantization_config.group_size is %d, but scales %s give groups of %d over %d "
                              "inputs" % (cfg.group, list(sc.shape), in_f // groups, in_f), path, where,
                              field="group_size", expected=cfg.group, found=in_f // groups)
    return in_f, out_f, groups
