"""Batches past CUDA's 65535 blocks along a grid's y: packed_linear's GEMM
(64 rows a block: 4,194,240 rows) and packed_linear_grad_input (4 rows a
block: 262,140 rows, a 32 x 8192-token training step is past it) for a GRIT
grade and INT4G. The kernels launch such a batch in cuts
(csrc/kernels/cuda/launch.cuh, over_batch); every output row is one block's
work either way, so the rows on both sides of a cut, and the first and last
rows, have the bits the same rows give in a batch of their own. (The CPU
emulator crosses the cut on every multi-block case of grit_cuda_emu_tests,
where the build lowers the limit to 1.) Skipped only when no CUDA device is
visible."""

import pytest
import torch

from torch_grit import ops

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device visible")

DEV = "cuda"
MAX_GRID_Y = 65535
N, K = 16, 64


def _planes(grade):
    w = torch.randn(N, K, generator=torch.Generator().manual_seed(5))
    return [p.to(DEV) for p in ops.quantize(w, grade)]


def _windows(m, cut):
    """Row ranges of 70 rows (a GEMM batch of their own): the first, around the cut, the last."""
    return ((0, 70), (cut - 35, cut + 35), (m - 70, m))


def _same(a, b):
    return torch.equal(a.view(torch.int16), b.view(torch.int16))


@pytest.mark.parametrize("grade", ("MXFP4", "INT4G32"))
def test_packed_linear_past_the_grid_limit(grade):
    planes = _planes(grade)
    cut = 64 * MAX_GRID_Y
    m = cut + 100
    x = torch.randn(m, K, device=DEV, dtype=torch.bfloat16, generator=torch.Generator(DEV).manual_seed(1))
    y = torch.ops.grit.packed_linear(x, *planes, grade, [N, K], None)
    assert y.shape == (m, N)
    for a, b in _windows(m, cut):
        want = torch.ops.grit.packed_linear(x[a:b].clone(), *planes, grade, [N, K], None)
        assert _same(y[a:b], want), (grade, a, b)


@pytest.mark.parametrize("grade", ("MXFP4", "INT4G32"))
def test_grad_input_past_the_grid_limit(grade):
    planes = _planes(grade)
    cut = 4 * MAX_GRID_Y
    m = cut + 100
    gy = torch.randn(m, N, device=DEV, dtype=torch.bfloat16, generator=torch.Generator(DEV).manual_seed(2))
    gx = torch.ops.grit.packed_linear_grad_input(gy, *planes, grade, [N, K])
    assert gx.shape == (m, K)
    for a, b in _windows(m, cut):
        want = torch.ops.grit.packed_linear_grad_input(gy[a:b].clone(), *planes, grade, [N, K])
        assert _same(gx[a:b], want), (grade, a, b)
