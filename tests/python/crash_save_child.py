"""Fork server for test_crash_safe_save: imports torch once, forks one saver per trial.

Protocol (lines on stdin/stdout):
  start:            prints "ready <seconds one save takes>" once the references are written
  "trial A|B PATH": forks a child that saves version A (or B) to PATH, then the other,
                    alternating forever; prints "pid <pid>"; after the parent has killed it,
                    prints "reaped <wait status>".
The two versions are deterministic (the same tensors give the same bytes), so the
parent can tell a complete old file from a complete new one by its sha256.
"""

import os
import sys
import time

import torch
from torch import nn

import torch_grit


def versions():
    torch.set_num_threads(1)   # no OpenMP pool in the process that forks
    torch.manual_seed(0)
    m = nn.Sequential(nn.Embedding(2000, 2048), *[nn.Linear(2048, 2048) for _ in range(4)])
    torch_grit.quantize_(m, "MXFP4")   # four packed weights: verify="digest" has planes to check
    a = m.state_dict()
    b = dict(a)
    b["0.weight"] = a["0.weight"] + 1.0
    return {"A": a, "B": b}


def main():
    ref_folder = sys.argv[1]
    sds = versions()
    times = []
    for name in ("A", "B", "A", "B"):
        t = time.perf_counter()
        torch_grit.save(sds[name], os.path.join(ref_folder, "%s.safetensors" % name))
        times.append(time.perf_counter() - t)
    print("ready %.6f" % min(times), flush=True)
    for line in sys.stdin:
        cmd, first, path = line.split()
        assert cmd == "trial"
        order = [first, "B" if first == "A" else "A"]
        pid = os.fork()
        if pid == 0:
            i = 0
            while True:
                torch_grit.save(sds[order[i % 2]], path)
                i += 1
        print("pid %d" % pid, flush=True)
        _, status = os.waitpid(pid, 0)
        print("reaped %d" % status, flush=True)


if __name__ == "__main__":
    main()
