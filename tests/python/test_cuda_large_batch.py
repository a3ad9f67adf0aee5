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


# op name: (the call, rows a block along y, the input's columns)
OPS = {
    "packed_linear": (lambda t, planes, grade: torch.ops.grit.packed_linear(t, *planes, grade, [N, K], None), 64, K),
    "packed_linear_grad_input": (
        lambda t, planes, grade: torch.ops.grit.packed_linear_grad_input(t, *planes, grade, [N, K]), 4, N),
}


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("grade", ("MXFP4", "INT4G32"))
def test_rows_past_the_grid_limit_keep_their_bits(op, grade):
    run, per_block, cols = OPS[op]
    planes = _planes(grade)
    cut = per_block * MAX_GRID_Y
    m = cut + 100
    t = torch.randn(m, cols, device=DEV, dtype=torch.bfloat16, generator=torch.Generator(DEV).manual_seed(1))
    out = run(t, planes, grade)
    assert out.shape == (m, K if op == "packed_linear_grad_input" else N)
    for a, b in _windows(m, cut):
        assert _same(out[a:b], run(t[a:b].clone(), planes, grade)), (op, grade, a, b)
