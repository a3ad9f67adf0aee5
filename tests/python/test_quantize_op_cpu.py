"""grit::quantize on CPU runs the block encoders over threads: its planes are
the core's reference encoder's bytes (torch_grit.contract.codec.encode_planes) for
every grade family, on tensors large enough to split across threads, with
NaN, Inf, zero and huge rows, whatever the thread count; a tensor the core
refuses is refused with the core's message."""

import numpy as np
import pytest
import torch

import torch_grit  # noqa: F401  (registers the ops)
from torch_grit.contract.codec import encode_planes

GRADES = [
    "MXFP4",
    "MXFP4_RNE",
    "grit1(e=e2m1,k0=32,s0=e8m0,esr=exp2ceilmaxabs)",
    "Q4KS",
    "NVF4",
    "NVF4_RTZ",
    "I8S24",
]


def weight(rows, cols, seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(rows, cols, generator=g)
    w[0] = 0.0
    w[1, ::3] = -0.0
    w[2] *= 1e30
    w[3] *= 1e-41  # binary32 subnormals
    w[4, 5] = float("nan")
    w[5, 7] = float("inf")
    w[6, 9] = float("-inf")
    w[7] = torch.randint(-12, 13, (cols,), generator=g).float() * 0.125  # exact ties
    return w.to(dtype)


def planes_of(w, grade):
    return [bytes(p.numpy().tobytes()) for p in torch.ops.grit.quantize(w, grade)]


@pytest.mark.parametrize("grade", GRADES)
def test_planes_are_the_core_encoders_bytes(grade):
    w = weight(96, 1024, seed=len(grade))  # 98304 values: several thread tasks
    got = planes_of(w, grade)
    want = encode_planes(grade, w.float().numpy())
    for i in range(4):
        assert got[i] == bytes(want[i]), "plane %d of %s differs from the core encoder" % (i, grade)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_weights_encode_their_float32_values(dtype):
    w = weight(16, 512, seed=3, dtype=dtype)
    for grade in ("MXFP4", "NVF4", "Q4KS", "I8S24"):
        want = encode_planes(grade, w.float().numpy())
        assert planes_of(w, grade) == [bytes(p) for p in want], grade


@pytest.mark.parametrize("grade", ["MXFP4", "NVF4", "Q4KS", "I8S24"])
def test_bytes_do_not_depend_on_the_thread_count(grade):
    w = weight(256, 2048, seed=11)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = planes_of(w, grade)
        torch.set_num_threads(max(2, before))
        many = planes_of(w, grade)
    finally:
        torch.set_num_threads(before)
    assert one == many


def test_empty_weight_keeps_the_nvf4_tensor_scale():
    got = planes_of(torch.empty(0, 64), "NVF4")
    want = encode_planes("NVF4", np.zeros(0, dtype=np.float32))
    assert got == [bytes(p) for p in want]
    assert len(got[2]) == 4


def test_a_tensor_the_core_refuses_raises_the_core_message():
    w = torch.full((2, 256), 3.0e38)
    w[1, 0] = -3.0e38  # Q4KS's step (hi - lo) / 15 leaves binary32 in row 1 only
    with pytest.raises(ValueError) as core:
        encode_planes("Q4KS", w.numpy())
    with pytest.raises(ValueError, match="grit::quantize: cannot quantize to .*overflows binary32") as op:
        torch.ops.grit.quantize(w, "Q4KS")
    assert str(core.value).split(": ", 1)[1] in str(op.value)


# Seed 001's INT4G: the op encodes groups over threads (kernels/common/int4g_encode.h); its planes are
# the core encoder's (Int4Groups.encode), odd row lengths (rows sharing a byte) and short final groups
# included; a refusal names the core's first offender however the rows were split.

from torch_grit.contract.int4_groups import Int4Groups  # noqa: E402


@pytest.mark.parametrize("shape,group", [((301, 257), 32), ((64, 1000), 7), ((33, 9), 4), ((1, 1), 1)])
def test_int4g_planes_are_the_core_encoders_bytes(shape, group):
    w = torch.randn(shape, generator=torch.Generator().manual_seed(shape[1]))
    w[0, : min(5, shape[1])] = 0.0
    packed, scales = Int4Groups(group).encode(w.double().numpy())
    before = torch.get_num_threads()
    try:
        for threads in (1, max(2, before)):
            torch.set_num_threads(threads)
            planes = torch.ops.grit.quantize(w, "INT4G%d" % group)
            assert planes[0].numpy().tobytes() == bytes(packed)
            assert planes[1].numpy().tobytes() == scales.tobytes()
    finally:
        torch.set_num_threads(before)


def test_int4g_refusal_names_the_first_offender_on_a_split_tensor():
    w = torch.randn(4000, 33)
    w[3999, 1] = float("nan")
    w[2500, 30] = float("inf")  # the first in row-major order
    with pytest.raises(ValueError, match="non-finite weight at row 2500, column 30"):
        torch.ops.grit.quantize(w, "INT4G8")
