"""Cutting a GritTensor into blocks of rows or columns: the shards that
torch's tensor parallelism asks for (``aten.split`` / ``aten.slice`` on the
weight, see ``collectives.py``).

GRIT's planes are bit streams over the row-major weight, with groups along
the rows. So a block of whole rows is a byte range of each plane. A block
of columns is a byte range of each row's share of each plane, if it begins
and ends on a group boundary (a two-level grade's super-block, a sparse
grade's quad). A per-tensor plane (NVF4's one binary32 scale) goes whole
into every shard, since it holds the same value for each. Each cut must
fall on a byte boundary in every plane. Each shard is rebuilt through
``GritTensor.from_planes``, so it carries its own descriptor and passes its
own level-1 check. Nothing is decoded, and no bit is changed.

A cut that would split a group is refused (ValueError) naming the tensor,
its grade and group span, and the cut that was asked for.
"""

from ..contract.descriptor import Descriptor
from ..contract.int4_groups import Int4Groups


def _lengths(grade, rows, cols):
    """The four plane lengths of a rows x cols weight (GRIT's size equations)."""
    if rows == 0 or cols == 0:
        return [0, 0, 0, 0]
    if isinstance(grade, Int4Groups):
        return [(rows * cols + 1) // 2, 8 * rows * (-(-cols // grade.group)), 0, 0]
    return list(Descriptor(grade, (rows, cols)).expected_plane_bytes())


def _label(w):
    return "GritTensor %r" % w.grit_name if w.grit_name else "a GritTensor"


def _per_tensor(grade, rows, cols, i):
    """Whether plane i has one length whatever the weight's size (a per-tensor scale)."""
    if isinstance(grade, Int4Groups):
        return False
    a, b = _lengths(grade, 1, cols)[i], _lengths(grade, 8, cols)[i]
    return a == b and a == _lengths(grade, rows, cols)[i]


def _byte_exact(grade, rows, cols, i):
    """Whether rows x cols values fill whole bytes of plane i (the bits of 8 such blocks are 8x theirs)."""
    return 8 * _lengths(grade, rows, cols)[i] == _lengths(grade, 8 * rows, cols)[i]


def row_spans(grade, rows, cols, r0, r1, label="a GritTensor"):
    """Per plane, the bytes of rows r0..r1 of a rows x cols weight: (first, width, count, stride)
    meaning bytes first + k*stride .. + width for k < count (here count 1: one range)."""
    def span(i):
        if r0 and not _byte_exact(grade, r0, cols, i):
            raise ValueError("%s (%s, shape %s): rows %d.. do not begin on a byte of plane %d; shard "
                             "it at a multiple of 8 rows" % (label, grade.canonical, (rows, cols), r0, i))
        return _lengths(grade, r0, cols)[i], _lengths(grade, r1 - r0, cols)[i], 1, 0
    return _plane_spans(grade, rows, cols, span)


def _plane_spans(grade, rows, cols, span):
    """span(i) for each plane i that holds bytes per value; an empty or per-tensor plane is
    taken whole (0, length, 1, 0)."""
    spans = []
    for i in range(4):
        full = _lengths(grade, rows, cols)[i]
        if full == 0 or _per_tensor(grade, rows, cols, i):
            spans.append((0, full, 1, 0))
        else:
            spans.append(span(i))
    return spans


def col_spans(grade, rows, cols, c0, c1, label="a GritTensor", pieces=None):
    """Per plane, the bytes of columns c0..c1 (every row): (first, width, count, stride), one
    range per row. ValueError where the cut would split a group or a byte."""
    span = group_span(grade)
    bad = next((c for c in (c0, c1) if c % span and c != cols), None)
    if bad is not None:
        asked = ("in_features=%d cut into %d shards of %d columns" % (cols, pieces, c1 - c0)
                 if pieces else "columns %d..%d" % (c0, c1))
        name = grade.name or grade.canonical
        if span >= cols:
            raise ValueError("%s (%s, shape %s): %s would split its rows' one group (a scale per row): "
                             "this weight cannot be sharded by in_features; shard the layer column-wise "
                             "(by rows)" % (label, name, (rows, cols), asked))
        raise ValueError("%s (%s, shape %s): %s would split a group at column %d; its groups span %d "
                         "columns, so a row-wise (in_features) shard must begin and end on a multiple of "
                         "%d. Choose a number of shards that divides in_features/%d = %s, or shard this "
                         "layer column-wise (by rows)" % (label, name, (rows, cols), asked, bad, span, span,
                                                          span, "%g" % (cols / span)))
    def span(i):
        if not _byte_exact(grade, 1, cols, i) or (c0 and not _byte_exact(grade, 1, c0, i)):
            raise ValueError("%s (%s, shape %s): columns %d..%d do not fall on whole bytes of plane %d "
                             "in every row" % (label, grade.canonical, (rows, cols), c0, c1, i))
        return _lengths(grade, 1, c0)[i], _lengths(grade, 1, c1 - c0)[i], rows, _lengths(grade, 1, cols)[i]
    return _plane_spans(grade, rows, cols, span)


def block_spans(grade, shape, dim, start, end, label="a GritTensor", pieces=None):
    """row_spans (dim 0) or col_spans (dim 1) of a GRIT grade's weight of ``shape``."""
    rows, cols = shape
    if dim == 0:
        return row_spans(grade, rows, cols, start, end, label)
    return col_spans(grade, rows, cols, start, end, label, pieces)


def gather(plane, span):
    """The bytes a span names, from a 1-D uint8 plane (a view where they are one range)."""
    first, width, count, stride = span
    if count == 1:
        return plane[first:first + width]
    plane = plane.contiguous()  # as_strided below counts in bytes of a packed plane
    return plane.as_strided((count, width), (stride, 1), plane.storage_offset() + first).contiguous().view(-1)


def cut_rows(w, r0, r1):
    """Rows r0..r1 of the stored (untransposed) weight w, as a GritTensor."""
    src = w.untile() if w.tiled else w
    rows, cols = src.logical_shape
    if r0 == 0 and r1 == rows:
        return w._derive()
    planes = src.planes
    if isinstance(src.grade, Int4Groups):
        return _cut_rows_int4g(src, planes, r0, r1)
    spans = row_spans(src.grade, rows, cols, r0, r1, _label(w))
    return _rebuild(w, [gather(p, sp) for p, sp in zip(planes, spans)], (r1 - r0, cols))


def _cut_rows_int4g(src, planes, r0, r1):
    rows, cols = src.logical_shape
    if (r0 * cols) % 2:
        raise ValueError("%s (%s, shape %s): row %d begins inside a byte of the packed codes (two "
                         "codes a byte); shard at an even row" % (_label(src), src.grade.name, (rows, cols), r0))
    codes, scales = planes[0], planes[1]
    n = (r1 - r0) * cols
    piece = codes[r0 * cols // 2:r0 * cols // 2 + (n + 1) // 2]
    if n % 2:  # the last byte's high nibble is the next row's first code: a shard pads it with 0
        piece = piece.clone()
        piece[-1] &= 0x0F
    per_row = 8 * (-(-cols // src.grade.group))
    return _rebuild(src, [piece, scales[r0 * per_row:r1 * per_row]] + planes[2:], (r1 - r0, cols))


def group_span(grade):
    """Columns a cut must keep together: the group (a two-level grade's super-block when its
    second level runs per block, a sparse grade's quad within it)."""
    if isinstance(grade, Int4Groups):
        return grade.group
    k0 = int(grade.fields["k0"])
    k1 = int(grade.fields.get("k1") or 0)
    return k0 * k1 if k1 > 0 else k0


def cut_cols(w, c0, c1, pieces=None):
    """Columns c0..c1 of the stored weight w (every row), as a GritTensor; ``pieces``, when the
    cut is one of torch's equal shards, is their number (for the refusal's wording)."""
    src = w.untile() if w.tiled else w
    rows, cols = src.logical_shape
    if c0 == 0 and c1 == cols:
        return w._derive()
    if isinstance(src.grade, Int4Groups):
        span = group_span(src.grade)
        if any(c % span and c != cols for c in (c0, c1)):
            raise ValueError("%s (%s, shape %s): columns %d..%d would split a group of %d"
                             % (_label(w), src.grade.name, (rows, cols), c0, c1, span))
        return _cut_cols_int4g(src, src.planes, c0, c1)
    spans = col_spans(src.grade, rows, cols, c0, c1, _label(w), pieces)
    return _rebuild(w, [gather(p, sp) for p, sp in zip(src.planes, spans)], (rows, c1 - c0))


def _cut_cols_int4g(src, planes, c0, c1):
    rows, cols = src.logical_shape
    if cols % 2 or c0 % 2 or c1 % 2:
        raise ValueError("%s (%s, shape %s): columns %d..%d of odd width or rows of odd length do not "
                         "fall on whole bytes of the packed codes (two codes a byte)"
                         % (_label(src), src.grade.name, (rows, cols), c0, c1))
    g = src.grade.group
    codes = planes[0].view(rows, cols // 2)[:, c0 // 2:c1 // 2].contiguous().view(-1)
    groups = -(-cols // g)
    scales = planes[1].view(rows, 8 * groups)[:, 8 * (c0 // g):8 * (-(-c1 // g))].contiguous().view(-1)
    return _rebuild(src, [codes, scales] + planes[2:], (rows, c1 - c0))


def _rebuild(w, planes, shape):
    out = type(w).from_planes(planes, w.grade_canonical, shape, w.logical_dtype, placement=_canonical(w, shape),
                              name=w.grit_name)
    if w.tiled and out.can_tile:
        out = out.tile()
    return out


def _canonical(w, shape):
    """The shard's placement: the grade's canonical one for its shape (None for INT4G)."""
    if not w.placement_words:
        return None
    return tuple(Descriptor(w.grade_canonical, shape).placement)


def join(pieces, dim, label=None):
    """The inverse of ``cut``: GritTensors of one grade and logical dtype, side by side along
    ``dim`` (0: rows one after another; 1: each row's columns, piece after piece), as one
    GritTensor with its own descriptor. ValueError naming the tensor where the pieces disagree
    (grade, dtype, the other dimension, a per-tensor plane) or a seam falls inside a byte."""
    first = pieces[0]
    label = label or _label(first)
    for p in pieces:
        if p.transposed:
            raise ValueError("%s: a transposed view is not joined; join the stored weights [out, in]" % label)
        if (p.grade_canonical, p.logical_dtype) != (first.grade_canonical, first.logical_dtype):
            raise ValueError("%s: the pieces to join differ: %s %s and %s %s"
                             % (label, first.grade_canonical, first.logical_dtype, p.grade_canonical,
                                p.logical_dtype))
        if p.logical_shape[1 - dim] != first.logical_shape[1 - dim]:
            raise ValueError("%s: pieces of shapes %s and %s do not join along dim %d"
                             % (label, tuple(first.logical_shape), tuple(p.logical_shape), dim))
    srcs = [p.untile() if p.tiled else p for p in pieces]
    if len(srcs) == 1:
        return pieces[0]._derive()
    sizes = [s.logical_shape[dim] for s in srcs]
    shape = (sum(sizes), first.logical_shape[1]) if dim == 0 else (first.logical_shape[0], sum(sizes))
    grade = srcs[0].grade
    if isinstance(grade, Int4Groups):
        planes = _join_int4g(srcs, dim, shape, label)
    else:
        planes = [_join_plane(grade, srcs, dim, shape, i, label) for i in range(4)]
    out = type(first).from_planes(planes, first.grade_canonical, shape, first.logical_dtype,
                                  placement=_canonical(first, shape), name=first.grit_name)
    if first.tiled and out.can_tile:
        out = out.tile()
    return out


def _join_plane(grade, srcs, dim, shape, i, label):
    import torch

    rows, cols = shape
    planes = [s.planes[i] for s in srcs]
    if _lengths(grade, rows, cols)[i] == 0:
        return planes[0][:0]
    if _per_tensor(grade, rows, cols, i):
        if any(not torch.equal(p, planes[0]) for p in planes[1:]):
            raise ValueError("%s (%s): the pieces' per-tensor plane %d differs; they are not cuts of one "
                             "weight" % (label, grade.canonical, i))
        return planes[0]
    for s in srcs[:-1]:  # every seam on a byte: each piece but the last fills whole bytes
        r, c = s.logical_shape
        exact = _byte_exact(grade, r, cols, i) if dim == 0 else _byte_exact(grade, 1, c, i)
        if not exact:
            raise ValueError("%s (%s): a piece of shape %s ends inside a byte of plane %d; it cannot be "
                             "joined along dim %d" % (label, grade.canonical, (r, c), i, dim))
    if dim == 0:
        return torch.cat([p.contiguous() for p in planes])
    return torch.cat([p.contiguous().view(rows, -1) for p in planes], dim=1).reshape(-1)


def _join_int4g(srcs, dim, shape, label):
    import torch

    rows, cols = shape
    g = srcs[0].grade.group
    for j, s in enumerate(srcs):
        r, c = s.logical_shape
        last = j == len(srcs) - 1
        if (dim == 0 and not last and (r * c) % 2) or (dim == 1 and (c % 2 or (not last and c % g))):
            raise ValueError("%s (%s): a piece of shape %s ends inside a byte of the packed codes or a "
                             "group; it cannot be joined along dim %d" % (label, srcs[0].grade.name, (r, c), dim))
    if dim == 0:
        codes = torch.cat([s.planes[0] for s in srcs])
        scales = torch.cat([s.planes[1] for s in srcs])
    else:
        codes = torch.cat([s.planes[0].contiguous().view(rows, -1) for s in srcs], dim=1).reshape(-1)
        scales = torch.cat([s.planes[1].contiguous().view(rows, -1) for s in srcs], dim=1).reshape(-1)
    return [codes, scales] + list(srcs[0].planes[2:])


def cut(w, dim, start, end, pieces=None):
    """Rows (dim 0) or columns (dim 1) start..end of the stored weight."""
    if w.transposed:
        raise ValueError("%s: a transposed view is not cut; shard the stored weight [out, in]" % _label(w))
    if dim == 0:
        return cut_rows(w, start, end)
    return cut_cols(w, start, end, pieces)


__all__ = ["cut", "join", "cut_rows", "cut_cols", "group_span", "block_spans", "gather"]
