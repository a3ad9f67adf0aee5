"""Cost of the boundary check: the C++ driver's numbers plus the Python call.

Prints one markdown table: ns per level-1 check in C++ (from
build/cmake/bench_check_cpp, built by `make test-cpp`), us per
torch_grit.check call from Python (byte lengths, and torch tensors as
planes), and level-2 digest GB/s from C++ and through Python. Targets:
<= 150 ns per level-1 check in C++, <= 3 us per Python call.
A benchmark, not a test: the numbers depend on the machine and its load.
"""

import json
import os
import platform
import subprocess
import sys
import time

import numpy as np
import torch

import torch_grit as tg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DRIVER = os.path.join(ROOT, "build", "cmake", "bench_check_cpp")


def per_call_us(fn, min_seconds=0.3, repeats=5):
    n = 1
    while True:  # calibrate: enough calls to fill min_seconds
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt >= min_seconds:
            break
        n *= 2 if dt <= 0 else max(2, int(min_seconds / dt * 1.2))
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - t0) / n * 1e6)
    return float(np.median(samples))


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main():
    if not os.path.exists(DRIVER):
        sys.exit("bench_check: %s is missing; run `make test-cpp` (or make bench) first" % DRIVER)
    cpp = json.loads(subprocess.run([DRIVER, "--json"], check=True, capture_output=True, text=True).stdout)

    shape = (4096, 4096)
    rows = []
    for grade in (tg.Grade.MXFP4, tg.Grade.NVF4, tg.Grade.Q4KS, tg.Grade.I8S24):
        desc = tg.Descriptor(grade, shape)
        lengths = desc.expected_plane_bytes()
        rows.append(("python check, lengths, %s" % grade.name, per_call_us(lambda: tg.check(desc, lengths)), "us"))
    desc = tg.Descriptor(tg.Grade.MXFP4, shape)
    tensors = [torch.empty(n, dtype=torch.uint8) for n in desc.expected_plane_bytes()]
    rows.append(("python check, torch tensors, GRADE_MXFP4", per_call_us(lambda: tg.check(desc, tensors)), "us"))

    planes = [np.random.default_rng(0).integers(0, 256, 64 << 20, dtype=np.uint8)]
    t0 = time.perf_counter()
    tg.digest(planes)
    dt = time.perf_counter() - t0
    rows.append(("python digest, 64 MiB", (64 << 20) / dt / 1e9, "GB/s"))

    print("machine: %s, %d cores, torch %s" % (cpu_name(), os.cpu_count(), torch.__version__))
    print()
    print("| what | median | unit | target |")
    print("|---|---|---|---|")
    for key, value in cpp.items():
        unit = "GB/s" if key.endswith("gbps") else "ns"
        target = "<= 150 ns" if key.startswith("level1_ns") else ""
        print("| C++ %s | %.1f | %s | %s |" % (key, value, unit, target))
    for what, value, unit in rows:
        target = "<= 3 us" if unit == "us" else ""
        print("| %s | %.2f | %s | %s |" % (what, value, unit, target))


if __name__ == "__main__":
    main()
