"""Seed 001's int4 row groups: the seed's fixtures, storage counts and every reader refusal."""

import numpy as np
import pytest

from torch_grit import Grade
from torch_grit.contract.int4_groups import Int4Groups, Int4GroupsError

W = np.array([[-7, -3.5, 0, 3.5], [0.1, 0.2, 0.3, 7]])
X = np.array([[1.0, 2.0]])


def test_seed_group_of_four():
    g = Grade.int4_groups(4)
    packed, scales = g.encode(W)
    assert packed.hex().upper() == "C9400070"
    assert scales.tolist() == [1.0, 1.0]
    back = g.decode(W.shape, packed, scales)
    assert back.tolist() == [[-7, -4, 0, 4], [0, 0, 0, 7]]
    assert (X @ back).tolist() == [[-7.0, -4.0, 0.0, 18.0]]  # the seed's product


def test_seed_group_of_two():
    g = Int4Groups.parse("INT4G2")
    packed, scales = g.encode(W)
    assert packed.hex().upper() == "C9707470"
    assert scales[2] == 0.028571428571428574
    back = g.decode(W.shape, packed, scales)
    assert back[1, 0] == 0.1142857142857143
    assert (X @ back).tolist() == [[-6.771428571428571, -3.6, 0.0, 17.5]]


def test_seed_one_row_short_final_group():
    packed, scales = Int4Groups(4).encode([[-7, -3.5, 0, 3.5, 7]])
    assert packed.hex().upper() == "C94007"
    assert scales.tolist() == [1.0, 1.0]


def test_seed_error_summaries():
    """Weight MSE and max error as the seed reports them, rounded to 12 places."""
    mse = {}
    for g in (2, 4):
        grade = Int4Groups(g)
        back = grade.decode(W.shape, *grade.encode(W))
        mse[g] = round(float(np.mean((back - W) ** 2)), 12)
    assert mse[2] < mse[4]
    assert mse[4] == round(float(np.mean((np.array([[-7, -4, 0, 4], [0, 0, 0, 7]]) - W) ** 2)), 12)


def test_storage_counts():
    assert Int4Groups(2).storage_bytes(2, 4) == (4, 32)
    assert Int4Groups(4).storage_bytes(2, 4) == (4, 16)
    assert Int4Groups(4).storage_bytes(1, 5) == (3, 16)


def test_not_a_grit_grade():
    assert "binary32" in Int4Groups(32).grit_inexpressible


@pytest.mark.parametrize("packed, scales, kind, words", [
    (bytes.fromhex("C940"), [1.0, 1.0], "payload_length", "expected 3 bytes, found 2"),
    (bytes.fromhex("C94007"), [1.0], "scale_count", "expected 2"),
    (bytes.fromhex("C94007"), [1.0, 0.0], "bad_scale", "finite and positive"),
    (bytes.fromhex("C94007"), [float("nan"), 1.0], "bad_scale", "finite and positive"),
    (bytes.fromhex("C94007"), [float("inf"), 1.0], "bad_scale", "finite and positive"),
    (bytes.fromhex("C94017"), [1.0, 1.0], "padding", "padding"),
    (bytes.fromhex("C84007"), [1.0, 1.0], "reserved_code", "row 0, column 0"),
    (bytes.fromhex("C94007"), [1e308, 1.0], "non_finite", "reconstruction"),
])
def test_reader_refusals(packed, scales, kind, words):
    with pytest.raises(Int4GroupsError) as exc:
        Int4Groups(4).decode((1, 5), packed, scales)
    assert exc.value.kind == kind
    assert words in str(exc.value)


def test_encoder_refusals():
    with pytest.raises(Int4GroupsError) as exc:
        Int4Groups(2).encode([[1.0, float("nan")]])
    assert exc.value.kind == "non_finite" and "row 0, column 1" in str(exc.value)
    with pytest.raises(Int4GroupsError) as exc:
        Int4Groups(1).encode([[5e-324]])
    assert exc.value.kind == "bad_scale"
    with pytest.raises(ValueError):
        Int4Groups(2).encode([1.0, 2.0])
    with pytest.raises(ValueError):
        Int4Groups.parse("INT4G0")
