"""The CPU tile layout (csrc/kernels/cpu/nibble_tiles.h) of MXFP4, NVF4, Q4KS, I8S24 and siblings:
tile_nibbles / untile_nibbles give the planes back bit for bit, and
packed_linear_tiled returns packed_linear's bits on every CPU kernel
variant, grade, activation dtype and batch shape, ragged shapes, NaN and
infinite scales included; packed_linear_grad_input_tiled returns
packed_linear_grad_input's bits likewise (W decoded from the tiles), and
dequantize_tiled dequantize's; opcheck on the five ops; gradients; refusals
(other grades, irregular I8S24 quads)."""

import pytest
import torch

import torch_grit
from torch_grit import _C, ops

ISAS = tuple(_C.cpu_isas_supported())
# ggml Q8_0's grade, GPTQ/AWQ's u4 with zero points per 128, compressed-tensors' s4 per 64 and
# dense int8 per 128 (binary16 scales at 2-byte offsets of the scale dwords), as canonical strings.
Q8_0, U4Z_G128, S4_G64, S8_G128 = (torch_grit.Grade(g).canonical for g in ("Q8_0", "U4Z_G128", "S4_G64", "S8_G128"))
GRADES = ("MXFP4", "NVF4", "MXFP4_RNE", "NVF4_RTZ", "Q4KS", "I8S24", Q8_0, U4Z_G128, S4_G64, S8_G128)
K0 = {"NVF4": 16, "NVF4_RTZ": 16, U4Z_G128: 128, S4_G64: 64, S8_G128: 128}  # others: 32
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
# [out, in]: out not a multiple of the 16-row tile; in/k0 not a multiple of 4
# (a partial scale word) nor of the 256-column super-block.
SHAPES = {"MXFP4": ((17, 96), (40, 160), (33, 512)), "NVF4": ((17, 48), (40, 160), (33, 512))}
SHAPES["MXFP4_RNE"] = SHAPES["MXFP4"]
SHAPES["NVF4_RTZ"] = SHAPES["NVF4"]
SHAPES["Q4KS"] = ((17, 256), (40, 512), (33, 768))  # the encoder's rows hold whole 256-column super-blocks
SHAPES["I8S24"] = SHAPES[Q8_0] = ((17, 96), (40, 160), (33, 512))
SHAPES[U4Z_G128] = SHAPES[S8_G128] = ((17, 128), (40, 384), (33, 512))
SHAPES[S4_G64] = ((17, 64), (40, 192), (33, 512))
X_BATCHES = ((1,), (3, 5), (9,))


@pytest.fixture(params=ISAS)
def isa(request):
    previous = _C._set_cpu_isa(request.param)
    yield request.param
    _C._set_cpu_isa(previous)


def _planes(grade, shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return ops.quantize(torch.randn(shape, generator=g), grade)


def _x(batch, k, dtype, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*batch, k, generator=g).to(dtype)


def _same_bits(a, b):
    return torch.equal(a.view(torch.int16 if a.element_size() == 2 else torch.int32),
                       b.view(torch.int16 if b.element_size() == 2 else torch.int32))


@pytest.mark.parametrize("grade", GRADES)
def test_untile_gives_the_planes_back(grade):
    for shape in SHAPES[grade]:
        planes = _planes(grade, shape)
        tiled = ops.tile_nibbles(planes, grade, shape)
        n, k = shape
        sizes = torch_grit.Grade.parse(grade)._native.plane_bytes(n * k)
        tiles, db, sb = (n + 15) // 16, sizes[0] // n, sizes[1] // n
        assert tiled[0].numel() == tiles * 64 * 4 * ((db + 15) // 16)
        assert tiled[1].numel() == tiles * 64 * 4 * ((sb + 15) // 16)
        assert tiled[2] is planes[2] and tiled[3] is planes[3]
        back = ops.untile_nibbles(tiled, grade, shape)
        for a, b in zip(back, planes):
            assert torch.equal(a, b), (grade, shape)


@pytest.mark.parametrize("grade", GRADES)
def test_same_bits_as_packed_linear_on_every_variant(isa, grade):
    for shape in SHAPES[grade]:
        planes = _planes(grade, shape)
        tiled = ops.tile_nibbles(planes, grade, shape)
        for batch in X_BATCHES:
            for dtype in DTYPES:
                x = _x(batch, shape[1], dtype)
                bias = _x((), shape[0], dtype, seed=2) if len(batch) == 1 else None
                want = ops.packed_linear(x, planes, grade, shape, bias)
                got = ops.packed_linear_tiled(x, tiled, grade, shape, bias)
                assert got.dtype == dtype and got.shape == want.shape
                assert _same_bits(got, want), (isa, grade, shape, batch, dtype)


def test_non_finite_scales_and_activations_same_bits(isa):
    """E8M0 code 255 (NaN) and 0 (2^-127, whose group does not factor) in
    some tiles, an infinity in x: the tiles that cannot run in place take
    the planes' route, and every output keeps packed_linear's bits."""
    grade, shape = "MXFP4", (48, 160)
    planes = _planes(grade, shape)
    s0 = planes[1].clone()
    s0[0 * 5 + 2] = 255      # row 0: NaN scale
    s0[20 * 5 + 4] = 0       # row 20 (tile 1): code 0
    planes = [planes[0], s0, planes[2], planes[3]]
    tiled = ops.tile_nibbles(planes, grade, shape)
    for dtype in (torch.bfloat16, torch.float32):
        for poison_x in (False, True):
            x = _x((1,), shape[1], dtype)
            if poison_x:
                x[0, 7] = float("inf")
            want = ops.packed_linear(x, planes, grade, shape)
            got = ops.packed_linear_tiled(x, tiled, grade, shape)
            assert _same_bits(got, want), (isa, dtype, poison_x)
            assert torch.isnan(got[0, 0]) and not torch.isnan(got[0, 1:16]).any() or poison_x


def test_batch_one_takes_the_pair_loop_exactly_on_avx512_bf16(isa):
    """Batch 1, bfloat16 x, MXFP4 tiles: the two-product bfloat16 loop runs on the
    avx512_bf16 variant and on no other (they have no vdpbf16ps), with the
    planes' bits either way. (That every SIMD variant decodes the tiles in place
    is tests/cpp/kernels/test_nibble_tiles.cpp's SimdVariantsReadTheTilesInPlace.)
    The loop runs four groups side by side and the last k/32 mod 4 alone:
    shapes with only the first, both, and only the second."""
    for shape in ((64, 256), (40, 160), (17, 96)):
        planes = _planes("MXFP4", shape)
        tiled = ops.tile_nibbles(planes, "MXFP4", shape)
        x = _x((1,), shape[1], torch.bfloat16)
        before = _C._cpu_pair_path_calls()
        got = ops.packed_linear_tiled(x, tiled, "MXFP4", shape)
        assert (_C._cpu_pair_path_calls() > before) == (isa == "avx512_bf16"), (isa, shape)
        assert _same_bits(got, ops.packed_linear(x, planes, "MXFP4", shape)), (isa, shape)


def test_same_bits_for_any_thread_count():
    shape = (200, 512)
    planes = _planes("MXFP4", shape)
    tiled = ops.tile_nibbles(planes, "MXFP4", shape)
    x = _x((1,), shape[1], torch.bfloat16)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = ops.packed_linear_tiled(x, tiled, "MXFP4", shape)
        torch.set_num_threads(max(2, threads))
        many = ops.packed_linear_tiled(x, tiled, "MXFP4", shape)
    finally:
        torch.set_num_threads(threads)
    assert _same_bits(one, many)


def test_gradients_match_packed_linear():
    grade, shape = "NVF4", (40, 160)
    planes = _planes(grade, shape)
    tiled = ops.tile_nibbles(planes, grade, shape)
    x0 = _x((3,), shape[1], torch.float32)
    b0 = _x((), shape[0], torch.float32, seed=3)
    gy = _x((3,), shape[0], torch.float32, seed=4)
    grads = []
    for fn, p in ((ops.packed_linear, planes), (ops.packed_linear_tiled, tiled)):
        x, b = x0.clone().requires_grad_(), b0.clone().requires_grad_()
        fn(x, p, grade, shape, b).backward(gy)
        grads.append((x.grad, b.grad))
    assert _same_bits(grads[0][0], grads[1][0]) and _same_bits(grads[0][1], grads[1][1])


@pytest.mark.parametrize("grade", GRADES)
def test_grad_input_from_the_tiles_has_the_planes_bits(isa, grade):
    for i, shape in enumerate(SHAPES[grade] + ((600, max(64, K0.get(grade, 32))),)):
        planes = _planes(grade, shape, seed=i)
        tiled = ops.tile_nibbles(planes, grade, shape)
        for dtype in DTYPES:
            for batch in X_BATCHES:
                gy = _x(batch, shape[0], dtype, seed=7)
                want = torch.ops.grit.packed_linear_grad_input(gy, *planes, grade, list(shape))
                got = ops.packed_linear_grad_input_tiled(gy, tiled, grade, shape)
                assert got.shape == want.shape and got.dtype == dtype
                nan = want.isnan()
                assert torch.equal(nan, got.isnan()) and _same_bits(got[~nan], want[~nan]), \
                    (isa, grade, shape, dtype, batch)


@pytest.mark.parametrize("grade", GRADES)
def test_dequantize_from_the_tiles_has_the_planes_bits(isa, grade):
    for i, shape in enumerate(SHAPES[grade]):
        planes = _planes(grade, shape, seed=i)
        tiled = ops.tile_nibbles(planes, grade, shape)
        for dtype in DTYPES:
            want = ops.dequantize(planes, grade, shape, dtype)
            got = ops.dequantize_tiled(tiled, grade, shape, dtype)
            assert got.dtype == dtype and got.shape == want.shape
            assert _same_bits(got, want), (isa, grade, shape, dtype)


def test_tiled_dequantize_reads_the_tiles():
    """GritTensor.dequantize() of a tiled weight decodes the tiles in place: no untiled copy."""
    w = torch_grit.quantize(_x((64,), 256, torch.float32), "MXFP4")
    assert w.tiled
    with torch.profiler.profile() as prof:
        d = w.dequantize()
    names = {e.name for e in prof.events()}
    assert "grit::dequantize_tiled" in names and "grit::untile_nibbles" not in names, names
    assert _same_bits(d, ops.dequantize(w.planes, "MXFP4", (64, 256)))


def test_tiled_backward_reads_the_tiles():
    """packed_linear_tiled's backward calls packed_linear_grad_input_tiled: the tiles are never
    untiled for it."""
    grade, shape = "MXFP4", (40, 160)
    tiled = ops.tile_nibbles(_planes(grade, shape), grade, shape)
    x = _x((3,), shape[1], torch.float32).requires_grad_()
    y = ops.packed_linear_tiled(x, tiled, grade, shape)
    with torch.profiler.profile() as prof:
        y.backward(torch.ones_like(y))
    names = {e.name for e in prof.events()}
    assert "grit::packed_linear_grad_input_tiled" in names and "grit::untile_nibbles" not in names, names


@pytest.mark.parametrize("grade", ("MXFP4", "NVF4", "Q4KS", "I8S24"))
def test_opcheck_tile_and_untile(grade):
    shape = (40, 512)
    planes = _planes(grade, shape)
    torch.library.opcheck(torch.ops.grit.tile_nibbles.default, (*planes, grade, list(shape)))
    tiled = ops.tile_nibbles(planes, grade, shape)
    torch.library.opcheck(torch.ops.grit.untile_nibbles.default, (tiled[0], tiled[1], grade, list(shape)))


@pytest.mark.parametrize("grade,dtype", [("MXFP4", torch.float32), ("NVF4", torch.bfloat16),
                                         ("Q4KS", torch.float16), ("I8S24", torch.float32)])
def test_opcheck_dequantize_tiled(grade, dtype):
    shape = (40, 160) if grade != "Q4KS" else (40, 256)
    tiled = ops.tile_nibbles(_planes(grade, shape), grade, shape)
    torch.library.opcheck(torch.ops.grit.dequantize_tiled.default, (*tiled, grade, list(shape), dtype))


@pytest.mark.parametrize("grade,x_shape,dtype,with_bias", [
    ("MXFP4", (1, 160), torch.bfloat16, True), ("MXFP4", (3, 5, 160), torch.float32, False),
    ("NVF4", (1, 160), torch.float16, False), ("NVF4", (0, 160), torch.bfloat16, True),
    ("Q4KS", (2, 160), torch.bfloat16, True), ("I8S24", (1, 160), torch.float32, True)])
def test_opcheck_packed_linear_tiled(grade, x_shape, dtype, with_bias):
    shape = (40, 160) if grade != "Q4KS" else (40, 256)
    x_shape = (*x_shape[:-1], shape[1])
    tiled = ops.tile_nibbles(_planes(grade, shape), grade, shape)
    x = torch.randn(x_shape).to(dtype).requires_grad_()
    bias = torch.randn(shape[0]).to(dtype).requires_grad_() if with_bias else None
    torch.library.opcheck(torch.ops.grit.packed_linear_tiled.default, (x, *tiled, grade, list(shape), bias))


@pytest.mark.parametrize("grade,gy_shape,dtype", [
    ("MXFP4", (1, 40), torch.bfloat16), ("MXFP4", (3, 5, 40), torch.float32), ("NVF4", (2, 40), torch.float16),
    ("NVF4", (0, 40), torch.float32), ("Q4KS", (2, 40), torch.bfloat16), ("I8S24", (3, 40), torch.float32)])
def test_opcheck_packed_linear_grad_input_tiled(grade, gy_shape, dtype):
    shape = (40, 160) if grade != "Q4KS" else (40, 256)
    tiled = ops.tile_nibbles(_planes(grade, shape), grade, shape)
    gy = torch.randn(gy_shape).to(dtype).requires_grad_()
    torch.library.opcheck(torch.ops.grit.packed_linear_grad_input_tiled.default, (gy, *tiled, grade, list(shape)))


@pytest.mark.parametrize("grade", ("MXFP8", "U8Z_G128"))
def test_refuses_grades_the_layout_does_not_hold(grade):
    shape = (32, 256)
    grade = torch_grit.Grade(grade).canonical
    planes = _planes(grade, shape)
    with pytest.raises(ValueError, match="tile layout holds .*grade .* is not one"):
        ops.tile_nibbles(planes, grade, shape)


def test_refuses_sparse_positions_that_name_one_place_twice():
    """An I8S24 quad naming one position twice leaves the rows' codes without fixed
    offsets: tile_nibbles refuses it naming the plane, can_tile is False, and the planes
    keep working (quantize's own planes always name two positions)."""
    shape = (32, 256)
    planes = [p.clone() for p in _planes("I8S24", shape)]
    assert torch_grit.GritTensor.from_planes(planes, "I8S24", shape).can_tile
    planes[3][40] = 0x55  # two quads, each naming position 1 twice
    with pytest.raises(ValueError, match="plane 'aux'.*names one position twice"):
        ops.tile_nibbles(planes, "I8S24", shape)
    w = torch_grit.GritTensor.from_planes(planes, "I8S24", shape)
    assert not w.can_tile
    with pytest.raises(ValueError, match="names one position twice"):
        w.tile()
    x = _x((2,), shape[1], torch.float32)
    assert torch.isfinite(torch.nn.functional.linear(x, w)).all()


def test_refuses_wrong_sizes_and_types_naming_the_plane():
    shape = (40, 160)
    planes = _planes("MXFP4", shape)
    tiled = ops.tile_nibbles(planes, "MXFP4", shape)
    x = _x((1,), shape[1], torch.bfloat16)
    with pytest.raises(ValueError, match=r"plane 'data' must hold 3840 bytes .* found 3839"):
        ops.packed_linear_tiled(x, [tiled[0][:-1], tiled[1], tiled[2], tiled[3]], "MXFP4", shape)
    with pytest.raises(ValueError, match=r"plane 'scale0' must hold"):
        ops.packed_linear_tiled(x, [tiled[0], planes[1], tiled[2], tiled[3]], "MXFP4", shape)
    with pytest.raises(TypeError, match=r"plane 'data' must be a uint8 tensor"):
        ops.packed_linear_tiled(x, [tiled[0].to(torch.int16), tiled[1]], "MXFP4", shape)
    with pytest.raises(ValueError, match=r"x"):
        ops.packed_linear_tiled(_x((1,), 96, torch.bfloat16), tiled, "MXFP4", shape)
    with pytest.raises(ValueError, match=r"plane 'data' must hold"):
        ops.untile_nibbles([tiled[0][:64], tiled[1]], "MXFP4", shape)
    with pytest.raises(ValueError, match=r"plane 'scale0' must hold"):
        ops.dequantize_tiled([tiled[0], tiled[1][:-4], tiled[2], tiled[3]], "MXFP4", shape)
    with pytest.raises(TypeError, match=r"'dtype' must be a floating dtype"):
        ops.dequantize_tiled(tiled, "MXFP4", shape, torch.int32)


# -- a property: any shape, any plane bytes, any variant -------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=150, derandomize=True, database=None, deadline=None)
@given(grade=st.sampled_from(GRADES), rows=st.integers(1, 50), groups=st.integers(1, 20),
       batch=st.integers(1, 4), isa=st.sampled_from(ISAS),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**31 - 1))
def test_any_shape_and_bytes_give_the_planes_bits(grade, rows, groups, batch, isa, dtype, seed):
    """Uniformly random plane bytes (NaN, zero and non-factoring scale codes, a
    random per-tensor scale for NVF4) on random ragged shapes: the tiled ops
    return packed_linear's and dequantize's bits on the variant drawn."""
    k = groups * K0.get(grade, 32)
    if grade == "Q4KS":
        rows = 8 * ((rows + 7) // 8)  # level-1 groups of 8 may straddle rows: rows * k/32 a multiple of 8
    g = torch.Generator().manual_seed(seed)
    sizes = torch_grit.Grade.parse(grade)._native.plane_bytes(rows * k)
    planes = [torch.randint(0, 256, (b,), dtype=torch.uint8, generator=g) for b in sizes]
    if grade == "I8S24":  # the layout holds quads naming two distinct positions: move a repeated one on
        m = planes[3].to(torch.int32)
        for q in (0, 4):
            i0, i1 = (m >> q) & 3, (m >> (q + 2)) & 3
            m = torch.where(i0 == i1, m ^ ((i1 ^ ((i1 + 1) & 3)) << (q + 2)), m)
        planes[3] = m.to(torch.uint8)
    x = torch.randn(batch, k, generator=g).to(dtype)
    previous = _C._set_cpu_isa(isa)
    try:
        want = torch.ops.grit.packed_linear(x, *planes, grade, [rows, k], None)
        tiled = ops.tile_nibbles(planes, grade, (rows, k))
        got = ops.packed_linear_tiled(x, tiled, grade, (rows, k))
        w_want = torch.ops.grit.dequantize(*planes, grade, [rows, k], dtype)
        w_got = ops.dequantize_tiled(tiled, grade, (rows, k), dtype)
    finally:
        _C._set_cpu_isa(previous)
    assert _same_bits(got, want), (grade, rows, k, batch, isa, dtype)
    assert _same_bits(w_got, w_want), ("dequantize", grade, rows, k, isa, dtype)
