"""Every CUDA kernel once, on small ragged shapes, for compute-sanitizer
(memcheck finds out-of-bounds and misaligned accesses, racecheck shared-memory
races between a block's threads). Each result is compared with the CPU kernel
so a run also says whether the answers agree; exit 1 on any disagreement.

    compute-sanitizer --tool memcheck python benchmarks/gpu_sanitize.py
    compute-sanitizer --tool racecheck python benchmarks/gpu_sanitize.py
"""

import sys

import torch

from torch_grit import ops

DEV = "cuda"


def _close(got, want, what, exact):
    got = got.cpu()
    if exact:
        ok = torch.equal(got.view(torch.int32), want.view(torch.int32)) if got.dtype == torch.float32 \
            else torch.equal(got, want)
    else:
        ok = torch.allclose(got.float(), want.float(), rtol=1e-3, atol=1e-3, equal_nan=True)
    print("%-50s %s" % (what, "ok" if ok else "DIFFERS"), flush=True)
    return ok


def main():
    if not torch.cuda.is_available():
        print("no CUDA device visible")
        return 1
    ok = True
    g = torch.Generator().manual_seed(0)
    # Ragged: rows not a multiple of the tile, columns not a multiple of 32
    # units (k = 288 is 9 units of 32, not a whole number of 64-wide tiles; Q4KS needs whole 256-column blocks).
    for grade, (n, k) in (("MXFP4", (70, 288)), ("NVF4", (70, 288)), ("Q4KS", (70, 512)),
                          ("I8S24", (70, 288)), ("INT4G32", (70, 256))):
        w = torch.randn(n, k, generator=g)
        planes = ops.quantize(w, grade)
        dplanes = [p.to(DEV) for p in planes]
        ok &= _close(ops.quantize(w.to(DEV), grade)[0], planes[0], "%s quantize" % grade, True)
        ok &= _close(ops.dequantize(dplanes, grade, (n, k)), ops.dequantize(planes, grade, (n, k)),
                     "%s dequantize" % grade, True)
        for m in (1, 5, 9, 67):  # GEMV (<= 8 rows) and tiled GEMM (> 8)
            x = torch.randn(m, k, generator=g)
            bias = torch.randn(n, generator=g)
            ok &= _close(ops.packed_linear(x.to(DEV), dplanes, grade, (n, k), bias.to(DEV)),
                         ops.packed_linear(x, planes, grade, (n, k), bias), "%s packed_linear m=%d" % (grade, m), False)
            gy = torch.randn(m, n, generator=g)
            ok &= _close(torch.ops.grit.packed_linear_grad_input(gy.to(DEV), *dplanes, grade, [n, k]),
                         torch.ops.grit.packed_linear_grad_input(gy, *planes, grade, [n, k]),
                         "%s grad_input m=%d" % (grade, m), False)
        if grade in ("MXFP4", "I8S24"):  # the grades with an exact integer law
            x = torch.randn(3, k, generator=g)
            codes, scales = ops.pack_activations(x, 32)
            dcodes, dscales = ops.pack_activations(x.to(DEV), 32)
            ok &= _close(dcodes, codes, "%s pack_activations" % grade, True)
            ok &= _close(ops.packed_linear_exact(dcodes, dscales, dplanes, grade, (n, k), None),
                         ops.packed_linear_exact(codes, scales, planes, grade, (n, k), None),
                         "%s packed_linear_exact" % grade, True)
    torch.cuda.synchronize()
    print("all agree" if ok else "SOME DIFFER")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
