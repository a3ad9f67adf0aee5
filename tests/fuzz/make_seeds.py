"""Writes the fuzzers' seed corpora (generated, never hand-edited binaries).

Usage: python tests/fuzz/make_seeds.py OUTDIR
Seeds: each reference descriptor followed by a shape and its exact plane
lengths (fuzz_check); grade spellings (fuzz_grade); one input per decode
grade with encoded-looking bytes (fuzz_decode).
"""

import os
import struct
import sys

import torch_grit as tg


def main(out):
    for name in ("fuzz_check", "fuzz_grade", "fuzz_decode"):
        os.makedirs(os.path.join(out, name), exist_ok=True)
    for i, grade in enumerate((tg.Grade.MXFP4, tg.Grade.Q4KS, tg.Grade.NVF4, tg.Grade.I8S24,
                               tg.Grade.MXFP4_RNE, tg.Grade.NVF4_RTZ)):
        desc = tg.Descriptor(grade, (256,))
        lens = desc.expected_plane_bytes()
        blob = desc.to_bytes() + bytes([1]) + struct.pack("<q", 256) + struct.pack("<4Q", *lens)
        planes = tg.encode_planes(grade, [((j * 37) % 17 - 8) / 4.0 for j in range(256)])
        with open(os.path.join(out, "fuzz_check", "ref%d" % i), "wb") as f:
            f.write(blob + b"".join(planes))
        with open(os.path.join(out, "fuzz_grade", "ref%d" % i), "w") as f:
            f.write(grade.canonical)
        with open(os.path.join(out, "fuzz_decode", "ref%d" % i), "wb") as f:
            f.write(bytes([i % 4, 0]) + b"".join(planes))
    with open(os.path.join(out, "fuzz_grade", "aliases"), "w") as f:
        f.write("GRIT1( E = FP4 , k0=032, s0=ue8m0, esr=ocp-mx, ao=pairwise_8 )")


if __name__ == "__main__":
    main(sys.argv[1])
