"""benchmarks/gpu_check.sh runs only on a lent GPU machine, where a broken
line costs minutes of a 15-minute budget. What can be held here: the script
parses, every test file it names exists, the two GPU benchmarks say "no CUDA
device" cleanly instead of failing in a traceback (with the GPUs hidden, so
on a GPU machine too), and the stand-in test runner walks every CUDA test
file."""

import os
import re
import shlex
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "benchmarks", "gpu_check.sh")


def _run(*args, hide_gpus=False):
    env = dict(os.environ, PYTHONPATH=ROOT)
    if hide_gpus:  # the no-device path, on a GPU machine too
        env["CUDA_VISIBLE_DEVICES"] = ""
    return subprocess.run(list(args), cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_the_script_parses():
    r = _run("bash", "-n", SCRIPT)
    assert r.returncode == 0, r.stderr


def test_every_file_it_names_exists():
    text = open(SCRIPT).read()
    named = set(re.findall(r"(?:tests/python|benchmarks)/[\w./]+\.py", text))
    assert len(named) >= 12, named  # the CUDA and CPU test files, the runner, both benchmarks
    missing = sorted(p for p in named if not os.path.exists(os.path.join(ROOT, p)))
    assert not missing, missing


@pytest.mark.parametrize("argv", [["benchmarks/bench_linear_cuda.py"],
                                  ["benchmarks/bench_quantize.py", "--device", "cuda", "--shapes", "64x64"]])
def test_gpu_benchmarks_say_there_is_no_device(argv):
    r = _run(sys.executable, *argv, hide_gpus=True)
    assert r.returncode == 1 and "no CUDA device visible" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_the_stand_in_runner_takes_every_cuda_test_file():
    """Where the machine has no pytest, the script's stand-in runner must import and walk every
    CUDA test file (here their tests skip: no device, or a CPU build of torch)."""
    files = shlex.split(re.search(r'CUDA_TESTS="([^"]+)"', open(SCRIPT).read()).group(1))
    assert len(files) >= 6, files
    r = _run(sys.executable, "benchmarks/gpu_check_runner.py", *files)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    summary = r.stdout.strip().splitlines()[-1]
    assert re.match(r"\d+ passed, 0 failed, \d+ skipped", summary), summary
