"""Benchmark torch-grit scan: header scans of 10,000-tensor files and --deep streaming.

    .venv/bin/python benchmarks/bench_scan.py [--tensors 10000] [--deep-mb 512] [--repeat 5]

Prints a markdown table: the median wall time of a header scan (safetensors
written by safetensors, GGUF written by gguf-py's GGUFWriter, every tensor a
quantized or declared one so each goes through inference or the core's check),
and the --deep rate over a torch_grit checkpoint whose planes carry recorded
digests (the level-2 check reads every byte and hashes it with FNV-1a-128).
Targets: header < 1 s, deep >= 500 MB/s.
"""

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time

import numpy as np
import torch

import torch_grit
from torch_grit.contract.placement import WELL_KNOWN
from torch_grit.scan import scan_paths


def timed(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def st_many(path, n):
    # torch_grit's checkpoint form: n packed MXFP4 tensors (planes + declared descriptor each).
    from safetensors.torch import save_file

    shape = (32, 64)
    desc = torch_grit.Descriptor("MXFP4", shape)
    data_n, scale_n, _, _ = desc.expected_plane_bytes()
    tensors, descs, records = {}, {}, {}
    for i in range(n):
        name = "model.layers.%d.mlp.w%d.weight" % (i // 8, i % 8)
        tensors[name + ".grit.data"] = torch.zeros(data_n, dtype=torch.uint8)
        tensors[name + ".grit.scale0"] = torch.full((scale_n,), 127, dtype=torch.uint8)
        descs[name] = desc.to_bytes().hex()
        records[name] = {"grade": desc.grade.canonical, "shape": list(shape), "dtype": "float32", "digest": "0" * 32}
    meta = {"__grit__": json.dumps(descs), "torch_grit": json.dumps({"version": 1, "tensors": records})}
    save_file(tensors, path, metadata=meta)


def gguf_many(path, n):
    import gguf

    w = gguf.GGUFWriter(path, "llama")
    w.add_file_type(int(gguf.LlamaFileType.MOSTLY_Q8_0))
    block = gguf.quants.quantize(np.zeros((1, 32), np.float32), gguf.GGMLQuantizationType.Q8_0)
    for i in range(n):
        w.add_tensor("blk.%d.t%d.weight" % (i // 8, i % 8), block, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def st_big(path, mb):
    from safetensors.torch import save_file

    rows = 8192
    cols = 8192
    desc = torch_grit.Descriptor("MXFP4", (rows, cols))
    sizes = desc.expected_plane_bytes()
    per = sum(sizes)
    count = max(1, int(mb * 1e6 // per))
    rng = np.random.default_rng(0)
    tensors, descs, records = {}, {}, {}
    for i in range(count):
        name = "layers.%d.w.weight" % i
        data = rng.integers(0, 256, sizes[0], dtype=np.uint8)
        scale = rng.integers(100, 140, sizes[1], dtype=np.uint8)
        tensors[name + ".grit.data"] = torch.from_numpy(data)
        tensors[name + ".grit.scale0"] = torch.from_numpy(scale)
        descs[name] = desc.to_bytes().hex()
        records[name] = {"grade": desc.grade.canonical, "shape": [rows, cols], "dtype": "float32",
                         "digest": torch_grit.digest([data, scale]).hex()}
    meta = {"__grit__": json.dumps(descs), "torch_grit": json.dumps({"version": 1, "tensors": records})}
    save_file(tensors, path, metadata=meta)
    return count * per


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--tensors", type=int, default=10000)
    ap.add_argument("--deep-mb", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "many.safetensors")
        st_many(p, args.tensors)
        t, r = timed(lambda: scan_paths([p]), args.repeat)
        assert r.exit_code() == 0 and sum(1 for x in r.records if x.source == "declared") == args.tensors
        rows.append(("header scan, safetensors, %d declared MXFP4 tensors" % args.tensors, "%.3f s" % t, "< 1 s"))
        p = os.path.join(d, "many.gguf")
        gguf_many(p, args.tensors)
        t, r = timed(lambda: scan_paths([p]), args.repeat)
        assert len(r.records) == args.tensors
        rows.append(("header scan, GGUF, %d inferred Q8_0 tensors" % args.tensors, "%.3f s" % t, "< 1 s"))
        p = os.path.join(d, "big.safetensors")
        nbytes = st_big(p, args.deep_mb)
        scan_paths([p], deep=True)   # warm the page cache: measure the scanner, not the disk
        t, r = timed(lambda: scan_paths([p], deep=True), max(1, args.repeat // 2))
        assert r.findings == [] and r.files[0]["deep_bytes"] == nbytes
        rows.append(("--deep, %.0f MB of MXFP4 planes, level-2 with digests" % (nbytes / 1e6),
                     "%.0f MB/s" % (nbytes / t / 1e6), ">= 500 MB/s"))
    print("| what | median | target |\n|---|---|---|")
    for row in rows:
        print("| %s | %s | %s |" % row)
    print("\n%s, %d CPUs, Python %s, torch %s" % (platform.processor() or platform.machine(), os.cpu_count(),
                                                  sys.version.split()[0], torch.__version__))


if __name__ == "__main__":
    main()
