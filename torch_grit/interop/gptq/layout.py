"""GPTQ and AWQ linear layers -> GRIT planes, with the zero-point convention resolved.

The layouts, by the families' published packers (AutoGPTQ / GPTQModel, AutoAWQ GEMM):

    GPTQ  qweight [in*b/32, out] int32, packed along the input axis (element i at bits b*i);
          qzeros  [groups, out*b/32] int32, packed along the output axis; scales [groups, out];
          g_idx [in] int32 (optional): the group of each input.
    AWQ   qweight [in, out*b/32] int32, packed along the output axis in the order
          0,2,4,6,1,3,5,7 (4-bit); qzeros [groups, out*b/32] likewise; scales [groups, out].

Both decode ``w[o, i] = scale[g, o] * (q[i, o] - z[g, o])`` with g = i // group. GRIT names
that law ``zps=shared``: ``x = f32(S * f32(e - z))``, the zero point off before scaling. The
import writes the GRIT grade ``grit1(e=u<b>,k0=<group>,s0=binary16,zp=u<b>,esr=...)`` with the
zero points as they are meant (zpc=asis), so the convention is settled at import:

- GPTQ v1 (``checkpoint_format`` "gptq" or absent) stores each zero point minus one, packed
  as ``(z - 1) & mask``: a true zero of 0 is stored as the largest code (15 for 4 bits).
  AutoGPTQ's dequantizer reads ``(stored + 1) & mask``, the inverse of its packer; a reader
  that adds 1 without the mask gets 16, a zero point no 4-bit quantizer writes. The import
  takes AutoGPTQ's reading, the packer's inverse: z = (stored + 1) mod 2^b.
- GPTQ v2 ("gptq_v2") and AWQ store the zero point as it is.

Act-order (``desc_act``: a ``g_idx`` that is not ``i // group``) regroups the inputs. GRIT v1's
groups are contiguous runs of the input axis, so the import permutes the inputs instead:
``perm = argsort(g_idx)`` (stable) puts the inputs of group 0 first, then group 1, ..., and
``W' = W[:, perm]`` has contiguous groups of exactly ``group`` inputs, group g's scale and zero
point being the published group g's. The packed weight holds W' (its descriptor describes W'
honestly) and the layer carries ``perm`` as its input permutation: ``x[..., perm] @ W'^T`` is
``x @ W^T``. A g_idx whose groups are not all ``group`` inputs long is refused.
3-bit GPTQ packs codes across int32 words and is refused; 2, 4 and 8 bits are read.
"""

import numpy as np

AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)
SCALE_FORMATS = {"F16": "binary16", np.dtype(np.float16): "binary16"}


class LayoutError(ValueError):
    """A GPTQ/AWQ layer whose tensors disagree: ``field`` names the tensor at fault
    (qweight, qzeros, scales, g_idx, bits)."""

    def __init__(self, message, field, expected=None, found=None):
        super().__init__(message)
        self.field, self.expected, self.found = field, expected, found


def grade_text(bits, group, sym):
    """The GRIT grade of a GPTQ/AWQ layer (zero points as meant: zpc=asis)."""
    esr = "ratiomaxabs" if sym else "affineminmax"
    return "grit1(e=u%d,k0=%d,s0=binary16,zp=u%d,esr=%s)" % (bits, group, bits, esr)


def input_perm(g_idx, in_f, group):
    """The input permutation a GPTQ ``g_idx`` asks for: None when it is ``i // group`` (contiguous
    groups), else ``argsort(g_idx)`` (stable, int64), under which the inputs fall into contiguous
    groups of exactly ``group``. LayoutError (field g_idx) naming why not."""
    g_idx = np.asarray(g_idx)
    if g_idx.shape != (in_f,):
        raise LayoutError("g_idx has shape %s; the layer has %d inputs" % (list(g_idx.shape), in_f), "g_idx",
                          expected=[in_f], found=list(g_idx.shape))
    if not np.issubdtype(g_idx.dtype, np.integer):
        raise LayoutError("g_idx is %s; GPTQ writes an integer group index per input" % g_idx.dtype, "g_idx",
                          expected="int32", found=str(g_idx.dtype))
    groups = in_f // group
    ordered = np.arange(in_f) // group
    if np.array_equal(g_idx, ordered):
        return None
    bad = np.flatnonzero((g_idx < 0) | (g_idx >= groups))
    if len(bad):
        raise LayoutError("g_idx[%d] = %d is not a group (the layer has %d groups of %d)"
                          % (bad[0], g_idx[bad[0]], groups, group), "g_idx", expected="0..%d" % (groups - 1),
                          found=int(g_idx[bad[0]]))
    sizes = np.bincount(g_idx.astype(np.int64), minlength=groups)
    uneven = np.flatnonzero(sizes != group)
    if len(uneven):
        g = int(uneven[0])
        raise LayoutError("act-order g_idx puts %d inputs in group %d; every group holds exactly %d (group_size), "
                          "so the inputs cannot be permuted into GRIT's contiguous groups" % (sizes[g], g, group),
                          "g_idx", expected=group, found=int(sizes[g]))
    return np.argsort(g_idx, kind="stable").astype(np.int64)


def _unpack_words(words, bits, axis, order=None):
    """int32 words -> codes, ``32/bits`` per word along ``axis`` (0: rows, 1: columns)."""
    per = 32 // bits
    w = np.ascontiguousarray(words).view(np.uint32)
    mask = np.uint32((1 << bits) - 1)
    slots = [(w >> np.uint32(bits * s)) & mask for s in range(per)]
    if order is not None:   # slot s holds element order[s] of its run of `per`
        inv = [0] * per
        for s, e in enumerate(order):
            inv[e] = s
        slots = [slots[inv[e]] for e in range(per)]
    stacked = np.stack(slots, axis=axis + 1)   # [.., per, ..] right after the packed axis
    shape = list(w.shape)
    shape[axis] *= per
    return stacked.reshape(shape).astype(np.uint8)


def _pack_codes(codes, bits):
    """[n, k] codes -> GRIT's data plane: rows one after another, ``8/bits`` codes a byte, low bits first."""
    flat = codes.reshape(-1)
    if bits == 8:
        return flat.copy()
    per = 8 // bits
    v = flat.reshape(-1, per).astype(np.uint8)
    out = np.zeros(v.shape[0], dtype=np.uint8)
    for s in range(per):
        out |= (v[:, s] << (bits * s)).astype(np.uint8)
    return out


def planes(family, qweight, qzeros, scales, bits, g_idx=None, checkpoint_format=None):
    """The four GRIT planes and the logical shape (out, in) of one GPTQ/AWQ layer.

    With an act-order ``g_idx`` the planes hold the weight's columns permuted by
    ``input_perm(g_idx, ...)``, which the layer must apply to its input.
    ``family`` is "gptq" or "awq"; arrays are numpy (int32 qweight/qzeros, float16 scales).
    Raises LayoutError naming the tensor that disagrees with the others.
    """
    if bits not in (2, 4, 8):
        raise LayoutError("%d-bit codes: torch_grit reads 2, 4 and 8 bits (3-bit GPTQ packs codes across "
                          "int32 words, a layout GRIT's planes do not take apart)" % bits, "bits_unsupported", found=bits)
    per = 32 // bits
    for name, a in (("qweight", qweight), ("qzeros", qzeros)):
        if a.dtype != np.int32 or a.ndim != 2:
            raise LayoutError("%s is %s %s; the packers write a 2-D int32 tensor" % (name, a.dtype, list(a.shape)),
                              name, found=str(a.dtype))
    if scales.dtype != np.float16 or scales.ndim != 2:
        raise LayoutError("scales are %s %s; torch_grit reads 2-D float16 scales (binary16)"
                          % (scales.dtype, list(scales.shape)), "scales", found=str(scales.dtype))
    groups, out_f = scales.shape
    if family == "gptq":
        in_f = qweight.shape[0] * per
        want_qw = (in_f // per, out_f)
    elif family == "awq":
        in_f = qweight.shape[0]
        want_qw = (in_f, out_f // per)
    else:
        raise ValueError("family is gptq or awq; found %r" % family)
    if out_f % per or tuple(qweight.shape) != want_qw:
        raise LayoutError("qweight is %s; with scales %s (%d groups, %d outputs) the %s layout needs %s"
                          % (list(qweight.shape), list(scales.shape), groups, out_f, family.upper(), list(want_qw)),
                          "qweight", expected=list(want_qw), found=list(qweight.shape))
    if tuple(qzeros.shape) != (groups, out_f // per):
        raise LayoutError("qzeros is %s; scales %s need [%d, %d] (%d-bit zero points, %d per int32)"
                          % (list(qzeros.shape), list(scales.shape), groups, out_f // per, bits, per),
                          "qzeros", expected=[groups, out_f // per], found=list(qzeros.shape))
    if groups == 0 or in_f % groups:
        raise LayoutError("%d input features do not split into %d equal groups" % (in_f, groups), "scales",
                          found=groups)
    group = in_f // groups
    perm = input_perm(g_idx, in_f, group) if g_idx is not None else None
    order = AWQ_ORDER if family == "awq" and bits == 4 else None
    if family == "gptq":
        q = _unpack_words(qweight, bits, axis=0)                  # [in, out]
        if perm is not None:
            q = q[perm]                                           # W' = W[:, perm]: contiguous groups
    else:
        q = _unpack_words(qweight, bits, axis=1, order=order)     # [in, out]
    z = _unpack_words(qzeros, bits, axis=1, order=order)          # [groups, out]
    if family == "gptq" and str(checkpoint_format or "gptq").lower() != "gptq_v2":
        z = ((z.astype(np.uint16) + 1) & ((1 << bits) - 1)).astype(np.uint8)
    data = _pack_codes(np.ascontiguousarray(q.T), bits)           # rows = outputs
    s0 = np.ascontiguousarray(scales.T).view(np.uint8).reshape(-1)   # (o, g) row-major, little-endian
    aux = np.ascontiguousarray(z.T).reshape(-1)
    return [data, s0, np.zeros(0, np.uint8), aux], (out_f, in_f), group


def reference_weight(family, qweight, qzeros, scales, bits, checkpoint_format=None, g_idx=None):
    """The published dequantization in float32, for the tests: scale * (q - z), input i in
    group ``g_idx[i]`` (``i // group`` without one)."""
    order = AWQ_ORDER if family == "awq" and bits == 4 else None
    q = _unpack_words(qweight, bits, axis=0 if family == "gptq" else 1, order=order).astype(np.float32)
    z = _unpack_words(qzeros, bits, axis=1, order=order).astype(np.int64)
    if family == "gptq" and str(checkpoint_format or "gptq").lower() != "gptq_v2":
        z = (z + 1) & ((1 << bits) - 1)
    groups = scales.shape[0]
    group = q.shape[0] // groups
    g = np.arange(q.shape[0]) // group if g_idx is None else np.asarray(g_idx, dtype=np.int64)
    zi = z.astype(np.float32)[g]
    si = scales.astype(np.float32)[g]
    return (si * (q - zi)).T.copy()   # [out, in]
