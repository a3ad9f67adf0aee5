"""The oracle side of CheckFuzz.MatchesTheOracle in test_check.cpp.

    .venv/bin/python tests/cpp/gen_check_fuzz_hash.py

Both sides draw the same cases from splitmix64: a reference descriptor
with a few byte mutations, a small shape and plane lengths that are either
the expected ones or perturbed. Per case they hash the level-1 status and,
when the size equations are defined, the four expected plane lengths
(capped at 2^64-1: a u64 API cannot be handed more). Prints the case
count, the status histogram and the fnv1a64 of the record.
"""

import struct
import sys

import grit
from grit.check import _SizeErr, expected_plane_bytes

M64 = (1 << 64) - 1
REFS = ["GRADE_MXFP4", "GRADE_Q4KS", "GRADE_NVF4", "GRADE_I8S24",
        "GRADE_MXFP4_RNE", "GRADE_NVF4_RTZ"]
DIMS = [0, 1, 2, 4, 8, 16, 32, 64, 96, 128, 256, 512, -1, 1 << 40]
SMALL = [0, 1, 2, 3, 4, 8, 16, 32, 0x40, 0x80, 0xFF]


class Rng:
    def __init__(self, seed):
        self.s = seed & M64

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & M64
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    def below(self, n):
        return self.next() % n


def draw(rng):
    """One case: (descriptor bytes, shape, length mode, perturbation)."""
    base = bytearray(grit.desc_for_grade(REFS[rng.below(6)]).pack())
    for _ in range(rng.below(3)):
        pos = rng.below(64)
        val = SMALL[rng.below(len(SMALL))] if rng.below(2) else rng.below(256)
        base[pos] = val
    rank = rng.below(4)
    shape = [DIMS[rng.below(len(DIMS))] for _ in range(rank)]
    # Bias the group axis extent toward a multiple of 256.
    if rank and rng.below(2):
        shape[0] = 256 * (1 + rng.below(3))
    mode = rng.below(4)   # 0,1: expected; 2: one plane off by one; 3: random
    plane = rng.below(4)
    rand = [rng.below(300) for _ in range(4)]
    return bytes(base), shape, mode, plane, rand


def run(n):
    rng = Rng(0x6772697431)  # "grit1"
    rec = bytearray()
    hist = [0] * 5
    for _ in range(n):
        raw, shape, mode, plane, rand = draw(rng)
        d = grit.GritDesc.unpack(raw)
        try:
            exp = [min(b, M64) for b in expected_plane_bytes(d, tuple(shape))["bytes"]]
        except _SizeErr:
            exp = None
        lens = list(exp) if exp is not None else [0, 0, 0, 0]
        if mode == 2:
            lens[plane] = (lens[plane] + 1) & M64
        elif mode == 3:
            lens = rand
        st = int(grit.grit_check_status(d, tuple(shape), lens, level=1).status)
        hist[st] += 1
        rec.append(st)
        rec.append(0 if exp is None else 1)
        if exp is not None:
            for b in exp:
                rec += struct.pack("<Q", b)
    return rec, hist


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    rec, hist = run(n)
    print("cases", n, "status histogram", hist)
    print("fnv1a64 0x%016x" % grit.fnv1a64(bytes(rec)))
