"""make demo: the GRIT contract end to end on one weight matrix.

Prints the reference grades (canonical string, 64-bit id, the 64 descriptor
bytes, the gid for a 256x512 weight), then quantizes a fixed random weight
to each grade, checks the descriptor against the planes (level 1 and the
level-2 digest), decodes it back, and shows a corrupted plane being refused.
"""

import numpy as np

import torch_grit as tg

SHAPE = (256, 512)


def sqnr_db(x, y):
    return 20.0 * np.log10(np.linalg.norm(x) / np.linalg.norm(x - y))


def main():
    rng = np.random.default_rng(0)
    w = (rng.standard_normal(SHAPE) * 0.02).astype(np.float32)
    print("torch_grit %s: GRIT v1.1 reference grades, weight %s, seed 0\n" % (tg.__version__, SHAPE))
    for grade in (tg.Grade.MXFP4, tg.Grade.NVF4, tg.Grade.Q4KS, tg.Grade.I8S24,
                  tg.Grade.MXFP4_RNE, tg.Grade.NVF4_RTZ):
        desc = tg.Descriptor(grade, SHAPE)
        planes = tg.encode_planes(grade, w)
        tg.check(desc, planes)                                  # level 1: sizes
        digest = tg.digest(planes)
        tg.check(desc, planes, level=2, digest=digest)          # level 2: contents
        back = tg.decode_planes(grade, planes, w.size).reshape(SHAPE)
        nbytes = sum(len(p) for p in planes)
        print("%s" % grade.name)
        print("  grade      %s" % grade.canonical)
        print("  grade_id   0x%016x" % grade.id)
        print("  descriptor %s" % desc.to_bytes().hex())
        print("  gid        %s" % desc.gid)
        print("  planes     %s bytes (%.3f bytes/weight vs 4.000 float32), digest %s"
              % ([len(p) for p in planes], nbytes / w.size, digest.hex()))
        print("  check      level 1 ok, level 2 ok; SQNR after decode %.2f dB\n" % sqnr_db(w, back))

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


if __name__ == "__main__":
    main()
