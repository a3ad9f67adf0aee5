"""Crash-safe saves: SIGKILL at random moments, a full disk, a read-only folder, no permission.

Kill trials: a fork server (crash_save_child.py) imports torch once and holds two
versions A and B of a ~25 MB model (a float embedding and four MXFP4 GritLinear
weights). For each trial it forks a saver that writes the version not at the path
first, then the other, in a loop, over an existing checkpoint; this process sends
SIGKILL after a delay drawn uniformly from [0, 2 x one save's time] (seeded). After each
kill the path must be byte-identical to the complete old or the complete new file
(saves are deterministic, so sha256 against the two references decides) and load
clean with verify="digest"; every other file in the folder must be a
``.model.safetensors.tmp-*`` leftover, which load of the folder and scan never
take for a checkpoint.
"""

import errno
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager

import pytest
import torch

import torch_grit
from torch_grit import CheckpointError

HERE = os.path.dirname(os.path.abspath(__file__))
TRIALS = 200


def _sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_sigkill_during_save_leaves_the_old_or_the_new_file(tmp_path):
    refs, work = tmp_path / "refs", tmp_path / "work"
    refs.mkdir()
    work.mkdir()
    server = subprocess.Popen([sys.executable, os.path.join(HERE, "crash_save_child.py"), str(refs)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    try:
        ready = server.stdout.readline().split()
        assert ready and ready[0] == "ready", ready
        save_s = float(ready[1])
        digests = {v: _sha(refs / ("%s.safetensors" % v)) for v in "AB"}
        assert digests["A"] != digests["B"]
        reference = {v: torch_grit.load(refs / ("%s.safetensors" % v), verify="digest") for v in "AB"}
        target = work / "model.safetensors"
        shutil.copyfile(refs / "A.safetensors", target)
        current = "A"
        rng = random.Random(1234)
        outcomes = {"old": 0, "new": 0}
        leftovers_seen = 0
        t0 = time.perf_counter()
        for trial in range(TRIALS):
            new = "B" if current == "A" else "A"
            server.stdin.write("trial %s %s\n" % (new, target))
            pid = int(server.stdout.readline().split()[1])
            time.sleep(rng.uniform(0, 2.0 * save_s))
            os.kill(pid, signal.SIGKILL)
            reaped = server.stdout.readline().split()
            assert reaped[0] == "reaped"
            h = _sha(target)
            assert h in (digests["A"], digests["B"]), "trial %d: the target is neither version" % trial
            found = "A" if h == digests["A"] else "B"
            outcomes["old" if found == current else "new"] += 1
            current = found
            state = torch_grit.load(target, verify="digest")
            assert state.keys() == reference[found].keys()
            assert torch.equal(state["0.weight"], reference[found]["0.weight"])
            others = sorted(set(os.listdir(work)) - {"model.safetensors"})
            assert all(o.startswith(".model.safetensors.tmp-") for o in others), others
            leftovers_seen += bool(others)
            if trial < TRIALS - 1:  # keep the last trial's leftovers for the folder checks below
                for o in others:
                    os.unlink(work / o)
        elapsed = time.perf_counter() - t0
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    print("crash-safe: %d trials in %.1f s, one save %.3f s, outcomes %s, leftovers after %d kills"
          % (TRIALS, elapsed, save_s, outcomes, leftovers_seen))
    # the kills land both inside the write window and after a complete rename
    assert outcomes["old"] >= 5 and outcomes["new"] >= 5, outcomes
    assert leftovers_seen >= 10
    # a leftover temp file is never taken for a checkpoint
    if not any(o.startswith(".model.safetensors.tmp-") for o in os.listdir(work)):
        with open(work / ".model.safetensors.tmp-1-0", "wb") as f:
            f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{")  # a torn header, as a kill can leave
    assert torch_grit.load(work, verify="digest").keys() == reference[current].keys()
    proc = subprocess.run([sys.executable, "-m", "torch_grit", "scan", str(work), "--json"],
                          capture_output=True, text=True, timeout=60)
    doc = json.loads(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert [os.path.basename(f["path"]) for f in doc["files"]] == ["model.safetensors"], doc["files"]


# -- a full disk, a read-only folder, no permission -------------------------------------------

def _small_model():
    torch.manual_seed(3)
    m = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.Linear(512, 512))
    torch_grit.quantize_(m, "MXFP4")
    return m


def _mount(*args):
    return subprocess.run(["mount", *args], capture_output=True, text=True)


@contextmanager
def _tmpfs(size):
    folder = tempfile.mkdtemp(prefix="grit-tmpfs-")
    r = _mount("-t", "tmpfs", "-o", "size=%s" % size, "tmpfs", folder)
    if r.returncode != 0:
        os.rmdir(folder)
        yield None, r.stderr.strip()
        return
    try:
        yield folder, None
    finally:
        subprocess.run(["umount", folder], check=True)
        os.rmdir(folder)


def _assert_clear_failure(exc_info, folder, old_path, old_sha):
    msg = str(exc_info.value)
    assert folder in msg, "the error does not name the path: %s" % msg
    assert _sha(old_path) == old_sha, "the old checkpoint changed"
    torch_grit.load(old_path, verify="digest")
    assert sorted(os.listdir(folder)) == [os.path.basename(old_path)], os.listdir(folder)


def test_a_full_disk_raises_a_clear_error_and_keeps_the_old_file():
    """A 1 MiB tmpfs (needs root or CAP_SYS_ADMIN; the skip says when the mount is refused)."""
    small = _small_model()
    with _tmpfs("1m") as (folder, why):
        if folder is None:
            pytest.skip("mount -t tmpfs is refused here (%s); the RLIMIT_FSIZE test below "
                        "covers a failing write instead" % why)
        old = os.path.join(folder, "model.safetensors")
        torch_grit.save(small, old)           # ~0.3 MB: fits
        old_sha = _sha(old)
        big = torch.nn.Linear(1024, 1024)      # 4 MB float: does not fit
        with pytest.raises(OSError) as ei:
            torch_grit.save(big, old)
        assert ei.value.errno == errno.ENOSPC
        _assert_clear_failure(ei, folder, old, old_sha)


def test_a_file_size_limit_raises_a_clear_error_and_keeps_the_old_file(tmp_path):
    """RLIMIT_FSIZE in a child with SIGXFSZ ignored: the write fails with EFBIG (works unprivileged)."""
    old = str(tmp_path / "model.safetensors")
    torch_grit.save(_small_model(), old)
    old_sha = _sha(old)
    code = ("import resource, signal, sys, torch, torch_grit\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))\n"
            "try:\n    torch_grit.save(torch.nn.Linear(1024, 1024), sys.argv[1])\n"
            "except OSError as e:\n    print(e.errno, e); sys.exit(3)\n")
    r = subprocess.run([sys.executable, "-c", code, old], capture_output=True, text=True, timeout=60)
    assert r.returncode == 3 and r.stdout.split()[0] == str(errno.EFBIG), (r.stdout, r.stderr[-2000:])
    assert old in r.stdout, r.stdout
    assert _sha(old) == old_sha
    assert os.listdir(tmp_path) == ["model.safetensors"]


def test_a_read_only_folder_raises_a_clear_error_and_keeps_the_old_file():
    """chmod 0555 does not stop root, so as root the folder is a read-only bind mount."""
    small = _small_model()
    folder = tempfile.mkdtemp(prefix="grit-ro-")
    old = os.path.join(folder, "model.safetensors")
    torch_grit.save(small, old)
    old_sha = _sha(old)
    mounted = False
    try:
        if os.geteuid() == 0:
            r = _mount("--bind", folder, folder)
            if r.returncode != 0:
                pytest.skip("root, and a bind mount is refused (%s): a read-only folder cannot be made"
                            % r.stderr.strip())
            mounted = True
            r = _mount("-o", "remount,ro,bind", folder)
            assert r.returncode == 0, r.stderr
        else:
            os.chmod(folder, 0o555)
        with pytest.raises(OSError) as ei:
            torch_grit.save(_small_model().state_dict() | {"extra": torch.ones(3)}, old)
        assert ei.value.errno in (errno.EROFS, errno.EACCES)
        _assert_clear_failure(ei, folder, old, old_sha)
    finally:
        if mounted:
            subprocess.run(["umount", folder], check=True)
        os.chmod(folder, 0o755)
        shutil.rmtree(folder)


def test_no_write_permission_raises_a_clear_error_and_keeps_the_old_file():
    """A folder mode 0555 and a saver without the right: as root, a child that drops to nobody."""
    folder = tempfile.mkdtemp(prefix="grit-perm-")
    os.chmod(folder, 0o755)
    old = os.path.join(folder, "model.safetensors")
    torch_grit.save(_small_model(), old)
    os.chmod(old, 0o644)
    old_sha = _sha(old)
    os.chmod(folder, 0o555)
    code = ("import os, sys, torch, torch_grit\n"
            "if os.geteuid() == 0:\n    os.setgid(65534); os.setuid(65534)\n"
            "try:\n    torch_grit.save(torch.nn.Linear(8, 8), sys.argv[1])\n"
            "except PermissionError as e:\n    print(e.errno, e); sys.exit(3)\n")
    try:
        r = subprocess.run([sys.executable, "-c", code, old], capture_output=True, text=True, timeout=60)
        assert r.returncode == 3, (r.stdout, r.stderr[-2000:])
        assert r.stdout.split()[0] == str(errno.EACCES) and folder in r.stdout, r.stdout
        assert _sha(old) == old_sha
        assert os.listdir(folder) == ["model.safetensors"]
    finally:
        os.chmod(folder, 0o755)
        shutil.rmtree(folder)
