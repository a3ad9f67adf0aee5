"""packed_linear_grad_input on CPU: grad_x = grad_y W with W decoded a block of rows at a time
(the active variant's decoder, whose bits are the reference decode's), or for batches of up to 48
rows decoded a chunk of a tile at a time straight into L1 (the fused route), each element the
fused multiply-adds acc = fma(grad_y[i, j], W[j, c], acc) in ascending j from +0.0, whatever the
instruction set, the thread count or the batch. An ordered sum of correctly rounded fused
multiply-adds, emulated in numpy's binary64, is the oracle.
"""

import numpy as np
import pytest
import torch

from torch_grit import _C, ops
from fma_oracle import fma32
from test_kernels_cpu import FP4_F16, GPTQ, Q8, S4_128, S4_CH, S4_F32, S8_128, S8_CH, S8_F32, SHAPES, _random_planes, _reference_weight

ISAS = tuple(_C.cpu_isas_supported())
GRADES = ("MXFP4", "NVF4", "Q4KS", "I8S24", "MXFP4_RNE", "NVF4_RTZ", Q8, GPTQ, S8_128, S4_128, FP4_F16, S4_F32, S8_F32, S8_CH, S4_CH,
          "grit1(e=e4m3,k0=32,s0=e8m0,esr=exp2floormaxabs)")  # the last has no fast decoder


def _ordered(gy, w):
    """grad_x[i, c] = fma(gy[i, n-1], w[n-1, c], ... fma(gy[i, 0], w[0, c], +0.0))."""
    gy, w = gy.numpy(), w.numpy()
    gx = np.zeros((gy.shape[0], w.shape[1]), np.float32)
    with np.errstate(over="ignore", invalid="ignore"):  # the planted infinite and NaN weights, on purpose
        for j in range(w.shape[0]):
            gx = fma32(gy[:, j:j + 1], w[j:j + 1, :], gx)
    return torch.from_numpy(gx)


def test_the_oracle_fuses_the_multiply_and_add():
    """fma32 against exact rational arithmetic on values where a rounded product then an add differs,
    ties of the final rounding included."""
    from fractions import Fraction
    rng = np.random.default_rng(0)
    a = rng.standard_normal(4000).astype(np.float32)
    b = rng.standard_normal(4000).astype(np.float32)
    c = (-(a.astype(np.float64) * b) * (1 + rng.standard_normal(4000) * 1e-6)).astype(np.float32)
    # (1 + 2^-18)(2^-24 - 2^-42) = 2^-24 - 2^-60: added to 1 + 2^-23 the binary64 sum is the float32
    # tie 1 + 2^-23 + 2^-24 (ties to even would give 1 + 2^-22); the exact sum lies below it.
    a = np.concatenate([a, np.float32([1.0 + 2.0 ** -18, 2.0 ** -24, 3.0])])
    b = np.concatenate([b, np.float32([2.0 ** -24 - 2.0 ** -42, 1.0 - 2.0 ** -24, 2.0 ** -30])])
    c = np.concatenate([c, np.float32([1.0 + 2.0 ** -23, 1.0, 1.0])])
    got = fma32(a, b, c)
    assert got[4000] == np.float32(1.0 + 2.0 ** -23)
    for g, x, y, z in zip(got, a, b, c):  # got is the float32 nearest the exact value, ties to even
        exact = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
        d = abs(Fraction(float(g)) - exact)
        for neighbour in (np.nextafter(g, np.float32(-np.inf)), np.nextafter(g, np.float32(np.inf))):
            dn = abs(Fraction(float(neighbour)) - exact)
            assert d < dn or (d == dn and int(np.float32(g).view(np.uint32)) % 2 == 0), (x, y, z, g)
    unfused = (a * b).astype(np.float32) + c
    assert (got != unfused).sum() > 100  # the values tell a fused step from a rounded product


def _same(a, b):
    """Equal bits, or NaN where the other is NaN (which NaN an add passes on is the hardware's choice)."""
    nan = a.isnan()
    bits = torch.int16 if a.element_size() == 2 else torch.int32
    return bool((nan == b.isnan()).all()) and torch.equal(a[~nan].view(bits), b[~nan].view(bits))


def _grad(isa, gy, planes, grade, shape):
    previous = _C._set_cpu_isa(isa)
    try:
        return torch.ops.grit.packed_linear_grad_input(gy, *planes, grade, list(shape))
    finally:
        _C._set_cpu_isa(previous)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("grade", GRADES)
def test_every_variant_gives_the_ordered_sum(isa, grade):
    shapes = SHAPES.get(grade, ((20, 64), (70, 96)))
    # 600 rows of 64 columns: a block of 512 decoded rows and a short one (blocks hold up to 512
    # rows, fewer as rows get longer, at least 64).
    wide = {S8_CH: 160, S4_CH: 512}.get(grade, 128 if grade in (GPTQ, S8_128, S4_128, S4_F32) else 64)
    for i, shape in enumerate(shapes + ((600, wide),)):
        planes = _random_planes(grade, shape, seed=i) if grade.startswith("grit1") else \
            ops.quantize(torch.randn(shape, generator=torch.Generator().manual_seed(i)), grade)
        w = _reference_weight(grade, planes, shape)
        for m in (1, 3, 9, 13, 70):  # up to 48 rows the fused route, 70 the decoded blocks
            gy = torch.randn(m, shape[0], generator=torch.Generator().manual_seed(m))
            got = _grad(isa, gy, planes, grade, shape)
            assert _same(got, _ordered(gy, w)), (isa, grade, shape, m)


@pytest.mark.parametrize("isa", ISAS)
def test_irregular_sparse_planes_and_non_finite_scales(isa):
    """I8S24 quads naming one position twice make the fast decoder give up (from the start, at
    row 100, or at row 550 of a second block of rows, after a first one went through the strips:
    the reference takes over there, its cursor found); random MXFP4 bytes hold NaN and infinite
    scales."""
    late = _random_planes("I8S24", (150, 160), seed=4)
    late[3][(100 * 40 + 7) // 2] = 0x55  # row 100: two quads name position 1 twice
    later = _random_planes("I8S24", (600, 160), seed=6)
    later[3][(550 * 40 + 7) // 2] = 0x55  # row 550, in the second block of 512 rows
    for grade, planes, shape in (("I8S24", _random_planes("I8S24", (150, 160), regular=False), (150, 160)),
                                 ("I8S24", late, (150, 160)),
                                 ("I8S24", later, (600, 160)),
                                 ("MXFP4", _random_planes("MXFP4", (90, 96), seed=3), (90, 96))):
        w = _reference_weight(grade, planes, shape)
        gy = torch.randn(4, shape[0], generator=torch.Generator().manual_seed(5))
        assert _same(_grad(isa, gy, planes, grade, shape), _ordered(gy, w)), (isa, grade)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("grade", ("MXFP4", "Q4KS", "I8S24"))
def test_batches_past_a_pass_of_rows_keep_the_ordered_sum(isa, grade):
    """1100 batch rows: the strips kernel takes them in passes of 512 (three here, the last short);
    every row matches the ordered sum, and a row of the last pass alone gives its bits in the batch."""
    shape = (64, 160)  # 160 columns: two whole strips of 64 and a partial one
    planes = ops.quantize(torch.randn(shape, generator=torch.Generator().manual_seed(8)), grade)
    w = _reference_weight(grade, planes, shape)
    gy = torch.randn(1100, shape[0], generator=torch.Generator().manual_seed(9))
    got = _grad(isa, gy, planes, grade, shape)
    assert _same(got, _ordered(gy, w)), (isa, grade)
    alone = _grad(isa, gy[1050:1051], planes, grade, shape)
    assert _same(alone[0], got[1050]), (isa, grade)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("grade", ("MXFP4", "NVF4", "Q4KS", "I8S24", Q8, GPTQ))
def test_the_fused_route_over_many_chunks_keeps_the_ordered_sum(isa, grade):
    """Rows of 1280, 1152 and 640 columns: five chunks of 256, and four or two and a short one, split between
    threads, the rows of a partial last tile continuing on the block route; batches of 1 to 48
    rows (the fused route) and 49 (the blocks), 1 and 2 threads, a row alone as in the batch."""
    before = torch.get_num_threads()
    try:
        for i, shape in enumerate(((48, 1280), (37, 1152), (21, 640))):
            if grade == "Q4KS" and shape[1] % 256:
                continue  # the encoder's rows hold whole 256-column super-blocks
            planes = ops.quantize(torch.randn(shape, generator=torch.Generator().manual_seed(20 + i)), grade)
            w = _reference_weight(grade, planes, shape)
            for m in (1, 6, 48, 49):
                gy = torch.randn(m, shape[0], generator=torch.Generator().manual_seed(m))
                want = _ordered(gy, w)
                for threads in (1, 2):
                    torch.set_num_threads(threads)
                    got = _grad(isa, gy, planes, grade, shape)
                    assert _same(got, want), (isa, grade, shape, m, threads)
                alone = _grad(isa, gy[m - 1:m], planes, grade, shape)
                assert _same(alone[0], want[m - 1]), (isa, grade, shape, m)
    finally:
        torch.set_num_threads(before)


def test_thread_count_does_not_change_the_bits():
    shape = (200, 512)
    planes = ops.quantize(torch.randn(shape), "MXFP4")
    gy = torch.randn(7, 200)
    before = torch.get_num_threads()
    out = []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            out.append(torch.ops.grit.packed_linear_grad_input(gy, *planes, "MXFP4", list(shape)))
    finally:
        torch.set_num_threads(before)
    assert torch.equal(out[0].view(torch.int32), out[1].view(torch.int32))


needs_pairs = pytest.mark.skipif("avx512_bf16" not in ISAS, reason="the pair path checked here runs only in the "
                                 "avx512_bf16 kernel variant, and this CPU has no AVX512_BF16")


@pytest.fixture
def pair_gemm_on():
    """Batches > 1 take the pair path whatever the CPU's vendor (by default AMD cores only)."""
    previous = _C._cpu_set_pair_gemm(1)
    yield
    _C._cpu_set_pair_gemm(previous)


@needs_pairs
def test_bfloat16_grad_y_over_mxfp4_takes_pairs_with_the_same_bits(pair_gemm_on):
    """Two rows per vdpbf16ps where every product is exact and every sum normal (pairs_allowed);
    a weight whose scales leave that range, or float32 grad_y, takes the FMA route."""
    g = torch.Generator().manual_seed(11)
    for shape in ((600, 64), (33, 512), (17, 96)):
        planes = ops.quantize(torch.randn(shape, generator=g), "MXFP4")
        w = _reference_weight("MXFP4", planes, shape)
        for m in (65, 71):  # batches of up to 48 rows take the fused route instead
            gy = torch.randn(m, shape[0], generator=g).to(torch.bfloat16)
            before = _C._cpu_pair_path_calls()
            got = _grad("avx512_bf16", gy, planes, "MXFP4", shape)
            assert _C._cpu_pair_path_calls() > before, shape
            assert _same(got, _ordered(gy.float(), w).to(torch.bfloat16)), (shape, m)
    shape = (40, 64)
    planes = ops.quantize(torch.randn(shape, generator=g), "MXFP4")
    planes[1][3] = 60  # one block's weights below 2^-56
    w = _reference_weight("MXFP4", planes, shape)
    gy = torch.randn(70, shape[0], generator=g).to(torch.bfloat16)
    before = _C._cpu_pair_path_calls()
    got = _grad("avx512_bf16", gy, planes, "MXFP4", shape)
    assert _C._cpu_pair_path_calls() == before
    assert _same(got, _ordered(gy.float(), w).to(torch.bfloat16))


@needs_pairs
def test_the_tiled_backward_takes_pairs_where_the_planes_would(pair_gemm_on):
    """packed_linear_grad_input_tiled decides the pair route from GRIT's scale codes (untiled, no
    padding): pairs for in-range codes, none for a code planted in the last, partial tile."""
    g = torch.Generator().manual_seed(12)
    shape = (40, 96)  # 40 rows: the last tile holds 8
    planes = ops.quantize(torch.randn(shape, generator=g), "MXFP4")
    gy = torch.randn(66, shape[0], generator=g).to(torch.bfloat16)  # past the fused route's 48 rows
    for plant in (None, 60):
        p = [t.clone() for t in planes]
        if plant is not None:
            p[1][39 * 3 + 2] = plant  # row 39, its last group
        tiled = ops.tile_nibbles(p, "MXFP4", shape)
        previous = _C._set_cpu_isa("avx512_bf16")
        try:
            before = _C._cpu_pair_path_calls()
            got = ops.packed_linear_grad_input_tiled(gy, tiled, "MXFP4", shape)
            took_pairs = _C._cpu_pair_path_calls() > before
            want = torch.ops.grit.packed_linear_grad_input(gy, *p, "MXFP4", list(shape))
        finally:
            _C._set_cpu_isa(previous)
        assert took_pairs == (plant is None)
        assert _same(got, want) and _same(got, _ordered(gy.float(), _reference_weight("MXFP4", p, shape))
                                          .to(torch.bfloat16))


@needs_pairs
def test_batches_take_pairs_only_where_the_pair_gemm_is_on():
    """With the pair GEMM off (the choice on non-AMD cores) a batch of 70 takes the FMA route, with
    it on the pairs; a single row takes the fused route either way. The same bits throughout."""
    g = torch.Generator().manual_seed(13)
    shape = (64, 96)
    planes = ops.quantize(torch.randn(shape, generator=g), "MXFP4")
    w = _reference_weight("MXFP4", planes, shape)
    for mode in (0, 1):
        previous = _C._cpu_set_pair_gemm(mode)
        try:
            for m in (1, 70):
                gy = torch.randn(m, shape[0], generator=g).to(torch.bfloat16)
                before = _C._cpu_pair_path_calls()
                got = _grad("avx512_bf16", gy, planes, "MXFP4", shape)
                assert (_C._cpu_pair_path_calls() > before) == (m == 70 and mode == 1), (mode, m)
                assert _same(got, _ordered(gy.float(), w).to(torch.bfloat16)), (mode, m)
        finally:
            _C._cpu_set_pair_gemm(previous)
