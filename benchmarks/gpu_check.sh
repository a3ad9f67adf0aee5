#!/usr/bin/env bash
# The GPU check, for a machine with a CUDA GPU and a CUDA build of torch (the
# lent H200: torch 2.11 + CUDA 13, no network). It builds torch_grit there
# (CUDA kernels for this GPU only), runs the CUDA tests (and the CPU kernel
# tests on that machine's CPU), then the GPU benchmark, and writes it all
# under $OUT (default build/gpu_check): summary.txt, env.txt, build.log,
# tests.txt, bench_cuda.md, bench_quantize_cuda.md, sanitize_memcheck.txt and
# sanitize_racecheck.txt. Budget: under 10 minutes.
#
#   OUT=/tmp/gpu bash benchmarks/gpu_check.sh
#
# A rehearsal without a GPU (a copy of the tree and a CUDA build of torch;
# the CUDA tests then skip and the benchmarks say there is no device):
#   PY=build/cuda-torch-211/venv/bin/python GRIT_CUDA_ARCH=9.0 BUILD_TIMEOUT=900 bash benchmarks/gpu_check.sh
set -u
cd "$(dirname "$0")/.."
# The extension is built in place and not installed there: `python script.py`
# puts only the script's folder on sys.path, so the runner and the benchmarks
# need the repository root on it to import torch_grit.
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
OUT=${OUT:-build/gpu_check}
mkdir -p "$OUT"
PY=${PY:-$(command -v python3 || command -v python)}
T0=$(date +%s)
log() { echo "[gpu_check +$(( $(date +%s) - T0 ))s] $*" | tee -a "$OUT/summary.txt"; }

{
  nvidia-smi
  command -v nvcc && nvcc --version
  "$PY" -c "import sys, torch; print(sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda,
'available', torch.cuda.is_available()); print(torch.cuda.get_device_name(0))"
  "$PY" -m pip list 2>/dev/null | grep -iE '^(torch|numpy|pytest|ninja|setuptools) '
  echo "cpus: $(nproc)"; lscpu | grep -E 'Model name|Flags' | cut -c1-200
} > "$OUT/env.txt" 2>&1
log "python $PY; $(grep -m1 '^torch' "$OUT/env.txt")"

# 1. Build, for this GPU's architecture only. torch finds Ninja on PATH (and
# without it compiles one file at a time): take the Python's own (pip's
# ninja) or, failing that, the development machine's binary if it was carried
# (the device tool: carry [".venv/bin/ninja"]).
if ! command -v ninja > /dev/null; then
  SCRIPTS=$("$PY" -c "import sysconfig; print(sysconfig.get_path('scripts'))")
  if [ -x "$SCRIPTS/ninja" ]; then
    export PATH="$SCRIPTS:$PATH"
  elif [ -x .venv/bin/ninja ]; then
    mkdir -p build/ninja-bin && cp .venv/bin/ninja build/ninja-bin/ && export PATH="$PWD/build/ninja-bin:$PATH"
  fi
fi
log "ninja: $(command -v ninja || echo 'none, so one file at a time') $(ninja --version 2>/dev/null)"
ARCH=${GRIT_CUDA_ARCH:-$("$PY" -c "import torch; print('%d.%d' % torch.cuda.get_device_capability(0))")}
TORCH_CUDA_ARCH_LIST="$ARCH" MAX_JOBS="$(nproc)" timeout "${BUILD_TIMEOUT:-270}" "$PY" setup.py -q build_ext --inplace \
  -j "$(nproc)" > "$OUT/build.log" 2>&1
rc=$?
log "build for sm_${ARCH/./}: rc=$rc"
if [ $rc -ne 0 ]; then tail -40 "$OUT/build.log"; exit 1; fi
"$PY" -c "import torch, torch_grit; print('CUDA kernels registered:',
torch._C._dispatch_has_kernel_for_dispatch_key('grit::packed_linear', 'CUDA'))" 2>&1 | tee -a "$OUT/summary.txt"

# 2. Tests: the CUDA kernels (the exact mode's CPU == CUDA bits among them,
# INT4G's, quantize's and grad_input's among them), and the CPU kernels, the CPU quantize
# and the exact mode on this CPU.
CUDA_TESTS="tests/python/test_cuda_registered.py tests/python/test_kernels_cuda.py tests/python/test_int4g_cuda.py
  tests/python/test_quantize_cuda.py tests/python/test_grad_input_cuda.py tests/python/test_cuda_large_batch.py"
if "$PY" -c "import pytest" 2>/dev/null; then
  # One pytest process per file, so that a crash (a segfault) in one file
  # costs that file alone; each file's summary line goes to the log.
  : > "$OUT/tests.txt"
  for f in $CUDA_TESTS tests/python/test_kernels_cpu.py tests/python/test_int4g_kernels_cpu.py \
      tests/python/test_quantize_op_cpu.py tests/python/test_exact_linear.py; do
    # -o addopts=: the project's own -q on top of this one would drop the summary line.
    echo "== $f" >> "$OUT/tests.txt"
    timeout 60 "$PY" -X faulthandler -m pytest -q -rs -o addopts= -p no:cacheprovider "$f" >> "$OUT/tests.txt" 2>&1
    log "tests $f: rc=$? $(grep -E '(passed|failed|error|skipped)' "$OUT/tests.txt" | tail -1)"
  done
else
  # shellcheck disable=SC2086
  timeout 150 "$PY" benchmarks/gpu_check_runner.py $CUDA_TESTS > "$OUT/tests.txt" 2>&1
  log "tests (no pytest here: stand-in runner, CUDA tests only): rc=$? $(tail -1 "$OUT/tests.txt")"
fi

# 3. The GPU benchmark.
timeout 90 "$PY" benchmarks/bench_linear_cuda.py > "$OUT/bench_cuda.md" 2>&1
log "benchmark: rc=$? (table in bench_cuda.md)"
timeout 60 "$PY" benchmarks/bench_quantize.py --device cuda --shapes 4096x4096 > "$OUT/bench_quantize_cuda.md" 2>&1
log "quantize benchmark: rc=$? (table in bench_quantize_cuda.md)"

# 4. compute-sanitizer over every kernel once on small ragged shapes
# (benchmarks/gpu_sanitize.py): memcheck (out-of-bounds, misaligned) and
# racecheck (shared-memory races). Last, so a slow instrumented run costs
# nothing above it.
if command -v compute-sanitizer > /dev/null; then
  for tool in memcheck racecheck; do
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 75 compute-sanitizer --tool $tool --error-exitcode 9 \
      "$PY" benchmarks/gpu_sanitize.py > "$OUT/sanitize_$tool.txt" 2>&1
    log "compute-sanitizer $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|all agree|SOME DIFFER' "$OUT/sanitize_$tool.txt" | tr '\n' ' ')"
  done
else
  log "compute-sanitizer: not on PATH, skipped"
fi
