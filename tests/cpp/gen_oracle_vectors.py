"""Regenerate tests/cpp/oracle_vectors.h from the published GRIT oracle.

    .venv/bin/python tests/cpp/gen_oracle_vectors.py > tests/cpp/oracle_vectors.h

Inputs are fixed (no randomness); every value is stored as its binary32 bit
pattern so the C++ side sees exactly what the oracle saw. Expected planes
come from grit.encode(), expected values from grit.decode_bits().
"""

import math
import struct

import grit

NAN = float("nan")
INF = float("inf")


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def bits(x):
    return grit.numeric.f32_bits(x)


def mxfp4_input():
    v = []
    # block 0: ordinary values, ties on the e2m1 ladder once scaled (amax 6
    # gives scale 2^0 under floor), zeros of both signs.
    b0 = [0.0, -0.0, 0.25, 0.75, 1.25, 2.5, 3.5, 5.0, 6.0, -6.0, -2.5, -0.25,
          0.1, 0.3, 0.6, 1.1, 1.9, 2.2, 2.9, 4.4, 5.4, -1.75, -3.25, -4.9,
          1e-6, -1e-6, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0]
    v += b0
    # block 1: a NaN poisons the whole block.
    b1 = [float(i) * 0.5 - 3.0 for i in range(32)]
    b1[5] = NAN
    v += b1
    # block 2: all zeros, mixed signs.
    v += [(-0.0 if i % 3 == 0 else 0.0) for i in range(32)]
    # block 3: an infinity poisons too.
    b3 = [0.125 * (i - 16) for i in range(32)]
    b3[31] = -INF
    v += b3
    # block 4: huge values (FLT_MAX, near-overflow).
    b4 = [3.4028234663852886e38 * (1.0 - i / 64.0) * (-1) ** i for i in range(32)]
    v += b4
    # block 5: tiny values including binary32 subnormals.
    b5 = [math.ldexp(1.0, -149 + (i % 24)) * (1 + (i % 3)) * (-1) ** (i // 2)
          for i in range(32)]
    v += b5
    # block 6: amax = 1.4142135 (f*f < 2) -> floor and rne agree.
    b6 = [1.4142135 * (i - 15) / 16.0 for i in range(32)]
    b6[0] = 1.4142135
    v += b6
    # block 7: amax = 1.4142137 (f*f > 2) -> rne rounds the exponent up.
    b7 = [1.4142137 * (i - 15) / 16.0 for i in range(32)]
    b7[0] = -1.4142137
    v += b7
    return [f32(x) for x in v]


def q4ks_input():
    v = []
    # super-block 0: mixed signs and magnitudes per sub-block.
    for i in range(256):
        s = i // 32
        v.append(((i * 37) % 61 - 30) * 0.01 * (s + 1) + (0.05 if s == 3 else 0.0))
    # super-block 1: a NaN poisons the super-block.
    sb1 = [0.001 * (i - 128) for i in range(256)]
    sb1[200] = NAN
    v += sb1
    # super-block 2: all zeros (d = dmin = 0).
    v += [(-0.0 if i % 2 else 0.0) for i in range(256)]
    # super-block 3: non-negative only (offsets are 0 -> dmin = 0), plus
    # one sub-block of negative zeros.
    sb3 = [((i * 13) % 17) * 0.25 for i in range(256)]
    for i in range(64, 96):
        sb3[i] = -0.0
    v += sb3
    return [f32(x) for x in v]


def nvf4_input():
    v = []
    # block 0: ordinary values.
    v += [0.5 * (i - 8) + 0.1 for i in range(16)]
    # block 1: NaN poisons the block (not counted in the tensor amax).
    b1 = [0.25 * i for i in range(16)]
    b1[3] = NAN
    v += b1
    # block 2: all zeros, both signs.
    v += [(-0.0 if i % 2 else 0.0) for i in range(16)]
    # block 3: +Inf poisons the block.
    b3 = [1.0] * 16
    b3[0] = INF
    v += b3
    # block 4: tiny next to the tensor amax: the e4m3 block scale underflows
    # to zero and the block decodes to signed zeros.
    v += [1e-9 * (1 if i % 2 else -1) for i in range(16)]
    # block 5: the tensor amax and values between ladder points.
    v += [1000.0, -1000.0, 700.0, 550.0, 420.0, 300.0, -250.0, 170.0,
          90.0, 60.0, -45.0, 20.0, 8.0, -0.0, 0.0, 333.3]
    return [f32(x) for x in v]


def i8s24_input():
    v = []
    # group 0: ordinary values, magnitude ties broken to the lower index.
    g0 = [1.0, -1.0, 0.5, 0.25,    # tie 1.0 / -1.0: keep 0,1
          0.0, 3.0, -3.0, 3.0,     # three-way tie: keep 1,2
          -7.5, 0.1, 0.2, 7.5,
          0.0, 0.0, 0.0, 0.0,      # all zero: keep 0,1
          100.0, -50.0, 25.0, -12.5,
          0.3, -0.7, 0.9, -0.2,
          -0.0, 0.0, -0.0, 2.0,
          63.5, 64.5, -127.0, 1.0]
    v += g0
    # group 1: NaN is the largest magnitude, is kept, and poisons the group.
    g1 = [0.5 * (i % 7) - 1.0 for i in range(32)]
    g1[9] = NAN
    v += g1
    # group 2: tiny values whose binary16 scale would round to zero.
    v += [1e-12 * (i + 1) * (-1) ** i for i in range(32)]
    # group 3: all zeros, and an infinity in group 4.
    v += [0.0] * 32
    g4 = [float(i) for i in range(32)]
    g4[30] = INF
    v += g4
    return [f32(x) for x in v]


def emit_u32(name, vals):
    out = ["static const uint32_t %s[%d] = {" % (name, len(vals))]
    for i in range(0, len(vals), 8):
        out.append("    " + ", ".join("0x%08xu" % x for x in vals[i:i + 8]) + ",")
    out.append("};")
    return "\n".join(out)


def emit_hex(name, b):
    h = bytes(b).hex()
    lines = ["static const char %s[] =" % name]
    if not h:
        lines.append('    "";')
        return "\n".join(lines)
    for i in range(0, len(h), 96):
        lines.append('    "%s"' % h[i:i + 96])
    lines[-1] += ";"
    return "\n".join(lines)


def case(prefix, grade, vals):
    planes = grit.encode(grade, vals)
    n = len(vals)
    dec = [int(x, 16) for x in grit.decode_bits(grade, planes, n)]
    parts = [
        emit_u32(prefix + "_in", [bits(x) for x in vals]),
        emit_hex(prefix + "_p0", planes[0]),
        emit_hex(prefix + "_p1", planes[1]),
        emit_hex(prefix + "_p2", planes[2]),
        emit_hex(prefix + "_p3", planes[3]),
        emit_u32(prefix + "_out", dec),
    ]
    return "\n".join(parts)


def main():
    print("// Generated by tests/cpp/gen_oracle_vectors.py from the GRIT %s oracle."
          % grit.__version__)
    print("// Do not edit by hand: regenerate.")
    print("#pragma once")
    print()
    print("#include <cstdint>")
    print()
    print("namespace oracle {")
    print()
    mx = mxfp4_input()
    print(case("mxfp4", "GRADE_MXFP4", mx))
    print()
    print(case("mxfp4rne", "GRADE_MXFP4_RNE", mx))
    print()
    print(case("q4ks", "GRADE_Q4KS", q4ks_input()))
    print()
    print(case("nvf4", "GRADE_NVF4", nvf4_input()))
    print()
    print(case("i8s24", "GRADE_I8S24", i8s24_input()))
    print()
    print("}  // namespace oracle")


if __name__ == "__main__":
    main()
