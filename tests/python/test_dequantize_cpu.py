"""grit::dequantize on CPU runs the active variant's decoder over 16-row tiles in parallel; its
bits are the core's reference decode (csrc/grit, torch_grit.decode_planes) on every variant and
grade, ragged shapes, random planes (NaN and infinite scale codes), planes the fast decoder
hands back to the reference, and any thread count.
"""

import numpy as np
import pytest
import torch

import torch_grit
from torch_grit import _C, ops
from test_kernels_cpu import GPTQ, GRADES, SHAPES, _random_planes, _reference_weight

ISAS = tuple(_C.cpu_isas_supported())
NO_FAST_DECODER = "grit1(e=e4m3,k0=32,s0=e8m0,esr=exp2floormaxabs)"


def _dequantize(isa, planes, grade, shape, dtype=torch.float32):
    previous = _C._set_cpu_isa(isa)
    try:
        return ops.dequantize(planes, grade, shape, dtype)
    finally:
        _C._set_cpu_isa(previous)


def _bits(t):
    return t.contiguous().view(torch.int32)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("grade", GRADES)
def test_every_variant_decodes_like_the_core(isa, grade):
    wide = SHAPES[grade][0][1] if SHAPES[grade][0][1] == SHAPES[grade][-1][1] else 256  # per-channel: in = k0
    for i, shape in enumerate(SHAPES[grade] + ((600, wide),)):
        drawn = [_random_planes(grade, shape, seed=i),
                 ops.quantize(torch.randn(shape, generator=torch.Generator().manual_seed(i)), grade)]
        for planes in drawn:
            got = _dequantize(isa, planes, grade, shape)
            assert got.shape == shape and got.dtype == torch.float32
            assert torch.equal(_bits(got), _bits(_reference_weight(grade, planes, shape))), (isa, grade, shape)


@pytest.mark.parametrize("isa", ISAS)
def test_grades_and_planes_the_fast_decoders_hand_back(isa):
    shape = (40, 96)
    planes = _random_planes(NO_FAST_DECODER, shape, seed=2)
    assert torch.equal(_bits(_dequantize(isa, planes, NO_FAST_DECODER, shape)),
                       _bits(_reference_weight(NO_FAST_DECODER, planes, shape)))
    # I8S24 quads naming one position twice: the whole weight comes from the reference.
    irregular = _random_planes("I8S24", (150, 160), seed=4, regular=False)
    assert torch.equal(_bits(_dequantize(isa, irregular, "I8S24", (150, 160))),
                       _bits(_reference_weight("I8S24", irregular, (150, 160))))


def test_other_ranks_and_dtypes():
    planes = ops.quantize(torch.randn(64, 96), "MXFP4")
    flat = ops.dequantize(planes, "MXFP4", (64, 96))
    assert torch.equal(ops.dequantize(planes, "MXFP4", (4, 16, 96)), flat.reshape(4, 16, 96))
    for dtype in (torch.bfloat16, torch.float16):
        assert torch.equal(ops.dequantize(planes, "MXFP4", (64, 96), dtype), flat.to(dtype))


def test_thread_count_does_not_change_the_bits():
    shape = (1000, 512)
    planes = _random_planes("NVF4", shape, seed=9)
    before = torch.get_num_threads()
    out = []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            out.append(ops.dequantize(planes, "NVF4", shape))
    finally:
        torch.set_num_threads(before)
    assert torch.equal(_bits(out[0]), _bits(out[1]))


def test_grit_tensor_dequantize_is_the_reference_decode():
    w = torch.randn(48, 256)
    t = torch_grit.quantize(w, "Q4KS")
    want = _reference_weight("Q4KS", t.planes, (48, 256))
    assert torch.equal(_bits(t.dequantize()), _bits(want))
    assert np.isfinite(t.dequantize().numpy()).all()
