"""Checkpoints over the grade space, not only the reference grades: a weight of
any valid grade (seeded random grades from the oracle's own key domains, as
the oracle tests draw them), held as random plane bytes, saves and loads back
with the same grade, descriptor, planes and decoded values, under both
verification levels; stock safetensors opens the file, and `torch-grit scan
--deep` finds it clean."""

import math

import pytest
import torch
from safetensors.torch import load_file

import torch_grit
from torch_grit import Grade, GritTensor
from torch_grit.scan import scan_paths

from grit_cases import canonical_tokens_string, random_grade_fields, rng_for


def _weight(seed):
    """A random valid grade and a 2-D shape whose size it tiles, or None."""
    rng = rng_for("checkpoint-grade-space", seed)
    try:
        grade = Grade.parse(canonical_tokens_string(random_grade_fields(rng)))
    except ValueError:
        return None  # a combination the grammar refuses (the oracle tests cover those)
    unit = math.lcm(16, max(1, int(grade._native.k0)))
    cols = unit * rng.randint(1, 4)
    for rows in (rng.randint(1, 9), 8, 16, 64, 256):
        try:
            sizes = grade._native.plane_bytes(rows * cols)
        except ValueError:
            continue  # the grade's groups do not tile this size
        g = torch.Generator().manual_seed(seed)
        planes = [torch.randint(0, 256, (n,), dtype=torch.uint8, generator=g) for n in sizes]
        return grade, (rows, cols), planes
    return None


def _same(a, b):
    return a.shape == b.shape and torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def test_any_grade_round_trips(tmp_path):
    done = refused = 0
    for seed in range(160):
        case = _weight(seed)
        if case is None:
            continue
        grade, shape, planes = case
        try:
            w = GritTensor.from_planes(planes, grade, shape)
        except torch_grit.GritCheckError:
            continue  # random bytes a grade's own check refuses (a sparse count, say): not a weight
        path = tmp_path / ("w%d.safetensors" % seed)
        try:
            torch_grit.save({"layer.weight": w}, path)
        except torch_grit.GritCheckError as e:  # random sparsity metadata out of its declared order
            assert grade._native.has_sp and "sp_order" in str(e) and not path.exists(), (grade.canonical, e)
            refused += 1
            continue
        for verify in ("structure", "digest"):
            got = torch_grit.load(path, verify=verify)["layer.weight"]
            assert isinstance(got, GritTensor), grade.canonical
            assert got.grade == grade and got.descriptor == w.descriptor, grade.canonical
            assert all(torch.equal(a, b) for a, b in zip(got.planes, w.planes)), grade.canonical
            assert _same(got.dequantize(), w.dequantize()), grade.canonical
        assert all(n.startswith("layer.weight.grit.") for n in load_file(str(path))), grade.canonical
        report = scan_paths([str(path)], deep=True)  # torch-grit scan --deep: declared, digest verified
        assert report.exit_code() == 0, (grade.canonical, [f.to_json() for f in report.findings])
        done += 1
    assert done >= 60 and refused >= 1, (done, refused)
