"""INT4G packed_linear on every CPU instruction-set variant.

The vector variants (KernelTable::int4g_tiles, csrc/kernels/cpu/packed_linear_int4g_simd.inc)
form the same binary64 weights and products and add them in the same order as the
reference kernel, so every variant returns the scalar variant's bits; they check
codes and scales as they read them, and a payload the reader refuses is refused
with the reader's own message.
"""

import pytest
import torch

from torch_grit import _C, ops

ISAS = tuple(_C.cpu_isas_supported())
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
# [rows, cols, group]: partial 16-row tiles, rows of 128+ columns (the wide
# load), tails of 2..30 columns, groups that do not divide the row, odd row
# lengths (rows start mid-byte in the stream: the op hands the vector kernels a
# row-aligned copy, int4g_align_rows; the scalar variant reads the stream).
CASES = ((40, 264, 32), (17, 130, 7), (33, 1000, 128), (16, 6, 4), (5, 2, 1), (18, 131, 32), (35, 1001, 64))


def _bits(t):
    return t.view(torch.int32) if t.dtype == torch.float32 else t.view(torch.int16)


def _x(shape, dtype, seed):
    """Random values; the first row holds NaN and infinities (so its outputs are mostly NaN),
    the others zeros of both signs and subnormals (so their outputs are numbers to compare)."""
    x = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
    rows = x.view(-1, shape[-1])
    rows[0, ::29] = float("nan")
    rows[0, 3::31] = float("inf")
    rows[0, 5::37] = -float("inf")
    rows[1:, 7::41] = 0.0
    rows[1:, 11::43] = -0.0
    rows[1:, 13::47] = 1e-40
    return x.to(dtype)


def _equal_bits(got, want):
    """The same bits, and not only NaN: every row after the first must hold numbers."""
    rows = want.reshape(-1, want.shape[-1])
    assert rows.shape[0] < 2 or not torch.isnan(rows[1:]).all()
    return torch.equal(_bits(got), _bits(want))


def _under(isa, op, *args):
    """op(*args) on CPU variant isa."""
    previous = _C._set_cpu_isa(isa)
    try:
        return op(*args)
    finally:
        _C._set_cpu_isa(previous)


def _linear(isa, *args):
    return _under(isa, torch.ops.grit.packed_linear, *args)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows, cols, group", CASES)
def test_every_variant_returns_the_scalar_bits(isa, dtype, rows, cols, group):
    grade = "INT4G%d" % group
    planes = ops.quantize(torch.randn(rows, cols, generator=torch.Generator().manual_seed(rows)), grade)
    bias = torch.randn(rows).to(dtype)
    for batch in ((1, cols), (3, cols), (2, 4, cols)):
        x = _x(batch, dtype, cols + len(batch))
        for b in (None, bias):
            want = _linear("scalar", x, *planes, grade, [rows, cols], b)
            got = _linear(isa, x, *planes, grade, [rows, cols], b)
            assert got.dtype == dtype and got.shape == want.shape
            assert _equal_bits(got, want), (isa, batch, b is None)


def _bad_planes():
    """(name, codes, scales) for a 20 x 64 INT4G16 matrix, each refused by the reader."""
    codes, scales = ops.quantize(torch.randn(20, 64, generator=torch.Generator().manual_seed(1)), "INT4G16")[:2]
    s = scales.view(torch.float64)
    out = []
    for name, at in (("reserved_low", 0), ("reserved_high", 19 * 64 + 63), ("reserved_mid", 7 * 64 + 33)):
        c = codes.clone()
        byte = at // 2
        c[byte] = (int(c[byte]) & (0x0F if at % 2 else 0xF0)) | (8 << (4 * (at % 2)))
        out.append((name, c, scales))
    for name, v, at in (("zero_scale", 0.0, 0), ("negative_scale", -2.0, 41), ("nan_scale", float("nan"), 79),
                        ("inf_scale", float("inf"), 17)):
        t = s.clone()
        t[at] = v
        out.append((name, codes, t.view(torch.uint8)))
    t = s.clone()
    t[6] = 1e308  # 7 * 1e308 overflows and the group's codes reach beyond +-1
    out.append(("non_finite", codes, t.view(torch.uint8)))
    return out


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("batch", (2, 2048))
def test_refusals_carry_the_readers_message(isa, batch):
    """Batch 2 takes the tile kernel, batch 2048 (1 MiB of binary64 activations) the batch
    kernel: each checks codes and scales as it reads them."""
    empty = torch.empty(0, dtype=torch.uint8)
    x = torch.randn(batch, 64)
    for name, codes, scales in _bad_planes():
        with pytest.raises(ValueError) as want:
            torch.ops.grit.check(codes, scales, empty, empty, "INT4G16", [20, 64])
        with pytest.raises(ValueError) as got:
            _linear(isa, x, codes, scales, empty, empty, "INT4G16", [20, 64], None)
        assert str(got.value).split("\n")[0] == str(want.value).split("\n")[0].replace(
            "grit::check", "grit::packed_linear"), name


@pytest.mark.parametrize("isa", ISAS)
def test_a_huge_scale_that_stays_finite_is_valid(isa):
    """7 * s overflows, but the group holds only codes -1, 0 and 1: the planes are valid
    (the vector kernel asks the reader, which agrees) and y is the scalar variant's."""
    w = torch.randn(20, 64, generator=torch.Generator().manual_seed(2))
    codes, scales, s1, aux = ops.quantize(w, "INT4G16")
    c = codes.clone()
    c[5 * 32: 5 * 32 + 8] = 0x1F  # row 5, columns 0-15: codes -1 and 1
    s = scales.view(torch.float64).clone()
    s[5 * 4] = 1e308
    planes = (c, s.view(torch.uint8), s1, aux)
    assert torch.ops.grit.check(*planes, "INT4G16", [20, 64])
    x = torch.randn(3, 64)
    want = _linear("scalar", x, *planes, "INT4G16", [20, 64], None)
    got = _linear(isa, x, *planes, "INT4G16", [20, 64], None)
    assert torch.equal(_bits(got), _bits(want))
    assert not torch.isfinite(got[:, 5]).any()  # +-1e308 products overflow binary32


def test_misaligned_scale_plane_is_read_correctly():
    """A scale plane at an odd byte offset is copied, not read in place."""
    planes = ops.quantize(torch.randn(17, 40), "INT4G8")
    buf = torch.empty(planes[1].numel() + 1, dtype=torch.uint8)
    buf[1:] = planes[1]
    odd = buf[1:]
    assert odd.data_ptr() % 8 != 0
    x = torch.randn(2, 40)
    want = torch.ops.grit.packed_linear(x, *planes, "INT4G8", [17, 40], None)
    got = torch.ops.grit.packed_linear(x, planes[0], odd, planes[2], planes[3], "INT4G8", [17, 40], None)
    assert torch.equal(got, want)


def _grad_input(isa, gy, planes, grade, shape):
    return _under(isa, torch.ops.grit.packed_linear_grad_input, gy, *planes, grade, list(shape))


# Large batches: from 16 rows whose binary64 activations fill 1 MiB the vector variants'
# forward takes the batch kernel (int4g_batch_simd.inc, chunks of 256 columns; here the
# batches of 39 and 70 rows), and grad_input takes the variant's KernelTable::int4g_grad_input
# at any batch; [rows, cols, group] with chunks that groups straddle, ragged tiles and an odd
# row length.
LARGE = ((40, 4104, 32), (33, 4097, 100), (17, 3400, 7))


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
@pytest.mark.parametrize("rows, cols, group", LARGE)
def test_large_batches_return_the_scalar_bits(isa, dtype, rows, cols, group):
    grade = "INT4G%d" % group
    planes = ops.quantize(torch.randn(rows, cols, generator=torch.Generator().manual_seed(cols)), grade)
    bias = torch.randn(rows).to(dtype)
    for batch in ((8, cols), (3, 13, cols), (70, cols)):
        x = _x(batch, dtype, cols + batch[0])
        want = _linear("scalar", x, *planes, grade, [rows, cols], bias)
        got = _linear(isa, x, *planes, grade, [rows, cols], bias)
        assert _equal_bits(got, want), (isa, batch)
        gy = _x(batch[:-1] + (rows,), dtype, rows + batch[0])
        want = _grad_input("scalar", gy, planes, grade, (rows, cols))
        got = _grad_input(isa, gy, planes, grade, (rows, cols))
        assert _equal_bits(got, want), (isa, batch, "grad_input")


@pytest.mark.parametrize("isa", ISAS)
def test_a_row_alone_is_the_same_row_inside_a_batch(isa):
    """Batch 1 takes the tile kernel and batch 40 the batch kernel: each row's y (and
    grad_x) is the same bits either way."""
    grade, shape = "INT4G32", (50, 4096)
    planes = ops.quantize(torch.randn(shape, generator=torch.Generator().manual_seed(3)), grade)
    x = _x((40, shape[1]), torch.float32, 5)
    gy = _x((40, shape[0]), torch.float32, 6)
    y = _linear(isa, x, *planes, grade, list(shape), None)
    gx = _grad_input(isa, gy, planes, grade, shape)
    for i in (0, 7, 39):
        alone = _linear(isa, x[i:i + 1], *planes, grade, list(shape), None)
        assert torch.equal(_bits(alone[0]), _bits(y[i])), i
        alone = _grad_input(isa, gy[i:i + 1], planes, grade, shape)
        assert torch.equal(_bits(alone[0]), _bits(gx[i])), i


def test_large_batches_do_not_depend_on_the_thread_count():
    grade, shape = "INT4G64", (70, 4160)
    planes = ops.quantize(torch.randn(shape, generator=torch.Generator().manual_seed(4)), grade)
    x = _x((40, shape[1]), torch.float32, 8)
    gy = _x((40, shape[0]), torch.float32, 9)
    before = torch.get_num_threads()
    out = {}
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            out[threads] = (torch.ops.grit.packed_linear(x, *planes, grade, list(shape), None),
                            torch.ops.grit.packed_linear_grad_input(gy, *planes, grade, list(shape)))
    finally:
        torch.set_num_threads(before)
    for a, b in zip(out[1], out[2]):
        assert _equal_bits(a, b)


def _dequantize(isa, planes, grade, shape, dtype):
    return _under(isa, torch.ops.grit.dequantize, *planes, grade, list(shape), dtype)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("rows, cols, group", ((40, 600, 32), (33, 522, 100), (17, 300, 7), (18, 131, 32)))
def test_dequantize_returns_the_scalar_bits(isa, rows, cols, group):
    """The vector variants decode even row lengths themselves (KernelTable::int4g_decode_rows);
    odd ones take the core's decoder. Every dtype is the binary64 decode, cast."""
    grade = "INT4G%d" % group
    planes = ops.quantize(torch.randn(rows, cols, generator=torch.Generator().manual_seed(rows)), grade)
    for dtype in (torch.float64, torch.float32, torch.bfloat16, torch.float16):
        want = _dequantize("scalar", planes, grade, (rows, cols), dtype)
        got = _dequantize(isa, planes, grade, (rows, cols), dtype)
        assert got.dtype == dtype and torch.equal(got.view(torch.uint8), want.view(torch.uint8)), dtype
