"""How compressed-tensors' integer formats store a layer's codes and zero points: one table row
per format. Everything else about a layer (its config group, scales, grade) the formats share,
and ``convert`` plans it once.

pack-quantized (the package's PackedQuantizationCompressor): ``weight_packed`` int32
[out, ceil(in*b/32)], each row's codes dense from bit 0 (code j at bits b*j), each the value q
plus 2^(b-1) (offset binary); ``weight_shape`` int64 [out, in]; asymmetric layers add
``weight_zero_point`` int32 [ceil(out*b/32), groups], each column's zero points dense from bit 0
along the output axis, offset binary too.

int-quantized (IntQuantizationCompressor): ``weight`` int8 [out, in], one code per byte, the value
q itself (two's complement); asymmetric layers add ``weight_zero_point`` int8 [out, groups], zp
itself. Only 8-bit codes are taken: a narrower code in a byte of its own would have to be checked
for range, byte by byte, before the import may start writing.

``code_bytes`` returns a layer's codes dense, row-major, b bits each from bit 0 of each byte (the
byte order GRIT's element plane has), in the format's own encoding; ``zero_point_bytes`` one code
per byte, row-major [out, groups]. ``offset_binary`` says which encoding that is; ``convert``
flips between it and the one the grade wants.
"""

import numpy as np

from ...checkpoint.safetensors_io import CheckpointError


class PackQuantized:
    format = "pack-quantized"
    codes = "weight_packed"
    bits = (4, 8)
    bits_why = ""
    offset_binary = True
    drop = ("weight_shape",)   # the grade's contiguous groups and the unit's shape say the same

    def shape(self, source, leaves, bits, path, where):
        """(out, in) from ``weight_shape``, checked against ``weight_packed``."""
        prefix = where.rpartition(".")[0]
        if "weight_shape" not in leaves:
            raise CheckpointError("%s has no weight_shape beside it" % where, path, where, field="weight_shape")
        wp, ws = leaves["weight_packed"][1], leaves["weight_shape"][1]
        if wp.dtype != "I32" or len(wp.shape) != 2:
            raise CheckpointError("weight_packed is %s %s; the compressor writes a 2-D int32 tensor"
                                  % (wp.dtype, list(wp.shape)), path, where, field="weight_packed", found=wp.dtype)
        if ws.dtype not in ("I64", "I32") or list(ws.shape) != [2]:
            raise CheckpointError("weight_shape is %s %s; expected 2 integers [out, in]"
                                  % (ws.dtype, list(ws.shape)), path, prefix + ".weight_shape", field="weight_shape")
        out_f, in_f = (int(v) for v in source.read(leaves["weight_shape"]).tolist())
        words = -(-in_f * bits // 32)
        if list(wp.shape) != [out_f, words] or in_f * bits % 8:
            raise CheckpointError("weight_packed is %s; weight_shape [%d, %d] at %d bits needs [%d, %d]"
                                  % (list(wp.shape), out_f, in_f, bits, out_f, words), path, where,
                                  field="weight_packed", expected=[out_f, words], found=list(wp.shape))
        return out_f, in_f

    def check_zero_points(self, zp, bits, out_f, groups, path, where):
        words = -(-out_f * bits // 32)
        if zp.dtype != "I32" or list(zp.shape) != [words, groups]:
            raise CheckpointError("weight_zero_point is %s %s; %d-bit zero points of [%d, %d] packed along the "
                                  "output axis need int32 [%d, %d]" % (zp.dtype, list(zp.shape), bits, out_f, groups,
                                                                       words, groups),
                                  path, where, field="weight_zero_point", expected=[words, groups],
                                  found=list(zp.shape))

    def code_bytes(self, packed, bits, out_f, in_f):
        # int32 words little-endian, codes dense from bit 0: the row's bytes are GRIT's, up to its padding.
        rows = np.ascontiguousarray(packed).view(np.uint8).reshape(out_f, -1)
        return rows[:, :in_f * bits // 8].reshape(-1)

    def zero_point_bytes(self, packed, bits, out_f, groups):
        return _zero_points(packed, bits, out_f, groups)


class IntQuantized:
    format = "int-quantized"
    codes = "weight"
    bits = (8,)
    bits_why = ("; narrower int-quantized codes sit one per byte, and each would need its range checked "
                "before the import may start writing")
    offset_binary = False
    drop = ()

    def shape(self, source, leaves, bits, path, where):
        """(out, in) from ``weight`` itself, an int8 matrix."""
        w = leaves["weight"][1]
        if w.dtype != "I8" or len(w.shape) != 2:
            raise CheckpointError("weight is %s %s; int-quantized %d-bit codes are a 2-D int8 tensor [out, in]"
                                  % (w.dtype, list(w.shape), bits), path, where, field="weight",
                                  expected="I8", found=w.dtype)
        return int(w.shape[0]), int(w.shape[1])

    def check_zero_points(self, zp, bits, out_f, groups, path, where):
        if zp.dtype != "I8" or list(zp.shape) != [out_f, groups]:
            raise CheckpointError("weight_zero_point is %s %s; %d-bit zero points of [%d, %d] are int8 [%d, %d]"
                                  % (zp.dtype, list(zp.shape), bits, out_f, groups, out_f, groups),
                                  path, where, field="weight_zero_point", expected=[out_f, groups],
                                  found=list(zp.shape))

    def code_bytes(self, weight, bits, out_f, in_f):
        return np.ascontiguousarray(weight).view(np.uint8).reshape(-1)

    def zero_point_bytes(self, zp, bits, out_f, groups):
        return np.ascontiguousarray(zp).view(np.uint8).reshape(-1)


LAYOUTS = {layout.format: layout for layout in (PackQuantized(), IntQuantized())}


def sign_mask(bits, per_byte):
    """XOR with this turns ``per_byte`` b-bit codes in a byte from offset binary (q + 2^(b-1)) to two's
    complement and back: only each code's top bit differs."""
    return np.uint8(sum(1 << (bits * i + bits - 1) for i in range(per_byte)))


def _zero_points(packed, bits, out_f, groups):
    """weight_zero_point (int32 [ceil(out*b/32), groups], each column's out codes dense from bit 0,
    offset binary) -> GRIT's zero-point plane: one byte per group, row-major [out, groups]."""
    cols = np.ascontiguousarray(np.asarray(packed).T).view(np.uint8).reshape(groups, -1)  # [groups, bytes]
    if bits == 8:
        codes = cols[:, :out_f]
    else:
        codes = np.stack([cols & 0x0F, cols >> 4], axis=-1).reshape(groups, -1)[:, :out_f]
    return np.ascontiguousarray(codes.T).reshape(-1).astype(np.uint8)
