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
3-bit GPTQ (AutoGPTQ's packer: 32 codes in three int32 words, codes 10 and 21 straddling two
words) is one little-endian bit stream per column, code i at bits 3i..3i+2 of it. GRIT v1 names
no 3-bit element, so the codes and zero points are widened into u4 (values 0..7 of 0..15: the
decode ``scale * (q - z)`` is the same number), and the scale rule, a 3-bit quantizer's, is
declared as torch_grit's own: ``esr=custom:u3affineminmax`` (asymmetric) or
``custom:u3ratiomaxabs`` (symmetric). The widening costs 4/3 of the code bytes.
AWQ's GEMM packer has no 3-bit layout; 2, 4 and 8 bits are read from AWQ, 2, 3, 4 and 8 from GPTQ.
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


BITS = (2, 3, 4, 8)


def grade_text(bits, group, sym):
    """The GRIT grade of a GPTQ/AWQ layer (zero points as meant: zpc=asis); 3-bit codes are
    carried in u4 with the 3-bit quantizer's scale rule named as torch_grit's (custom:)."""
    esr = "ratiomaxabs" if sym else "affineminmax"
    if bits == 3:
        return "grit1(e=u4,k0=%d,s0=binary16,zp=u4,esr=custom:u3%s)" % (group, esr)
    return "grit1(e=u%d,k0=%d,s0=binary16,zp=u%d,esr=%s)" % (bits, group, bits, esr)


def codes_in(words, bits):
    """How many ``bits``-bit codes ``words`` int32 words hold (None: not a whole number)."""
    return None if (words * 32) % bits else words * 32 // bits


def words_for(codes, bits):
    """How many int32 words hold ``codes`` codes of ``bits`` bits (None: not a whole number)."""
    return None if (codes * bits) % 32 else codes * bits // 32


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


def _unpack_stream(words, bits, axis):
    """2-D int32 words -> codes, the words along ``axis`` read as one little-endian bit stream
    (code i at bits bits*i .. bits*i+bits-1), for widths that do not divide 32."""
    w = np.moveaxis(np.ascontiguousarray(words).view(np.uint32), axis, 0).astype(np.uint64)   # [words, m]
    start = np.arange(w.shape[0] * 32 // bits, dtype=np.int64) * bits
    word, off = start // 32, (start % 32).astype(np.uint64)[:, None]
    nxt = np.minimum(word + 1, w.shape[0] - 1)       # a code that spills reads the next word's low bits
    spill = (off + np.uint64(bits)) > np.uint64(32)
    v = (w[word] >> off) | np.where(spill, w[nxt] << (np.uint64(32) - off), np.uint64(0))
    codes = (v & np.uint64((1 << bits) - 1)).astype(np.uint8)     # [codes, m]
    return np.ascontiguousarray(np.moveaxis(codes, 0, axis))


def _unpack_words(words, bits, axis, order=None):
    """int32 words -> codes, ``32/bits`` per word along ``axis`` (0: rows, 1: columns)."""
    if 32 % bits:
        return _unpack_stream(words, bits, axis)
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
    if bits not in BITS or (bits == 3 and family == "awq"):
        raise LayoutError("%d-bit codes: torch_grit reads 2, 3, 4 and 8 bits (GPTQ) and 2, 4 and 8 bits (AWQ)" % bits,
                          "bits_unsupported", found=bits)
    for name, a in (("qweight", qweight), ("qzeros", qzeros)):
        if a.dtype != np.int32 or a.ndim != 2:
            raise LayoutError("%s is %s %s; the packers write a 2-D int32 tensor" % (name, a.dtype, list(a.shape)),
                              name, found=str(a.dtype))
    if scales.dtype != np.float16 or scales.ndim != 2:
        raise LayoutError("scales are %s %s; torch_grit reads 2-D float16 scales (binary16)"
                          % (scales.dtype, list(scales.shape)), "scales", found=str(scales.dtype))
    groups, out_f = scales.shape
    if family == "gptq":
        in_f = codes_in(qweight.shape[0], bits) or 0
        want_qw = (words_for(in_f, bits), out_f)
    elif family == "awq":
        in_f = qweight.shape[0]
        want_qw = (in_f, words_for(out_f, bits))
    else:
        raise ValueError("family is gptq or awq; found %r" % family)
    zero_words = words_for(out_f, bits)
    if zero_words is None or tuple(qweight.shape) != want_qw:
        raise LayoutError("qweight is %s; with scales %s (%d groups, %d outputs) the %s layout needs %s"
                          % (list(qweight.shape), list(scales.shape), groups, out_f, family.upper(), list(want_qw)),
                          "qweight", expected=list(want_qw), found=list(qweight.shape))
    if tuple(qzeros.shape) != (groups, zero_words):
        raise LayoutError("qzeros is %s; scales %s need [%d, %d] (%d-bit zero points packed in int32)"
                          % (list(qzeros.shape), list(scales.shape), groups, zero_words, bits),
                          "qzeros", expected=[groups, zero_words], found=list(qzeros.shape))
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
    data = _pack_codes(np.ascontiguousarray(q.T), 4 if bits == 3 else bits)   # rows = outputs; 3 bits widened
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
