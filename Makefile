# torch_grit: `make demo` and `make test` are the two entry points.
# Both create .venv/ (Python 3.11, torch 2.13.0 CPU), install what is missing
# (pip; apt for GoogleTest/CMake/Ninja) and build the extension with Ninja.

PYTHON_BOOT ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
export PATH := $(abspath $(VENV))/bin:$(PATH)
CMAKE_BUILD := build/cmake
EXT_SOURCES := $(wildcard csrc/grit/*.cpp csrc/grit/*.h csrc/kernels/cpu/*.cpp csrc/kernels/cpu/*.h csrc/ops/*.cpp csrc/ops/*.h)

.PHONY: demo test test-cpp test-py build bench sysdeps clean fuzz test-fuzz test-asan test-asan-py libtorch-example test-cuda-compile test-cuda-build

demo: build
	$(PY) examples/demo.py
	$(PY) examples/checkpoint_demo.py
	$(PY) examples/hf_roundtrip.py

test: build test-cpp test-py test-fuzz test-cuda-compile

sysdeps:
	@bash scripts/install_sysdeps.sh

$(VENV)/.deps: requirements-dev.txt
	@test -x $(PY) || $(PYTHON_BOOT) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	@touch $@

# The console script (torch-grit) comes from one editable install, which does
# not compile (GRIT_SKIP_EXT: pip would compile the extension in a folder it
# then deletes); `build` compiles it in place, incrementally (Ninja).
$(VENV)/.editable: $(VENV)/.deps pyproject.toml setup.py
	GRIT_SKIP_EXT=1 $(PY) -m pip install -q --no-build-isolation --no-deps -e .
	@touch $@

build: sysdeps $(VENV)/.editable $(EXT_SOURCES)
	$(PY) setup.py -q build_ext --inplace -j2

test-cpp: sysdeps
	cmake -S . -B $(CMAKE_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(CMAKE_BUILD) -j2
	ctest --test-dir $(CMAKE_BUILD) --output-on-failure
	$(CXX) -std=c++17 -fopenmp -fsyntax-only benchmarks/probe_block_sum_gemv.cpp  # a measurement, kept compiling
	$(CXX) -std=c++17 -fsyntax-only benchmarks/probe_amx_bf16_order.cpp  # the same
	$(CXX) -std=c++20 -Icsrc -fsyntax-only benchmarks/probe_bf16_dp.cpp  # the same

test-py: build libtorch-example
	$(PY) -m pytest tests/python

# The LibTorch example (examples/cpp): the grit ops built without Python and a
# C++ program that runs a TorchScript model; tests/python/test_libtorch.py runs
# it (and builds it itself when this was not run). Incremental, like build.
# It links the torch-free core and kernels from build/cmake (GRIT_PREBUILT_DIR)
# instead of compiling them a third time.
LIBTORCH_BUILD := build/libtorch
libtorch-example: sysdeps $(VENV)/.deps
	cmake -S . -B $(CMAKE_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
	@grep -qx 'GRIT_PREBUILT_DIR:PATH=$(abspath $(CMAKE_BUILD))' $(LIBTORCH_BUILD)/CMakeCache.txt 2>/dev/null \
	  || cmake -S examples/cpp -B $(LIBTORCH_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DGRIT_PREBUILT_DIR=$(abspath $(CMAKE_BUILD)) \
	  -DCMAKE_PREFIX_PATH="$$($(PY) -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')" >/dev/null
	cmake --build $(LIBTORCH_BUILD) -j2 --target run_scripted

# libFuzzer harnesses over the core, under ASan + UBSan (clang from apt).
# `make fuzz FUZZ_SECONDS=N` runs each for N seconds; `make test` runs each
# for FUZZ_SHORT seconds so a regression shows in CI.
FUZZERS := fuzz_check fuzz_grade fuzz_decode
# The Python readers a stranger's file reaches (safetensors: load + scan; GGUF:
# the scan; GGUF import: torch_grit.load; GGUF export: a folder's config.json and
# tokenizer files) under atheris, libFuzzer for CPython (tests/fuzz/pyfuzz.py says how
# -malloc_limit_mb is honoured there); build/fuzz/<name> is a launcher.
FUZZERS += fuzz_safetensors fuzz_gguf fuzz_gguf_import fuzz_gguf_export
FUZZ_SECONDS ?= 60
FUZZ_SHORT ?= 10
FUZZ_FLAGS := -std=c++17 -O1 -g -ffp-contract=off -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Icsrc
FUZZ_ENV := ASAN_OPTIONS=halt_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

build/fuzz/%: tests/fuzz/%.cpp $(wildcard csrc/grit/*.cpp csrc/grit/*.h) | sysdeps
	@mkdir -p build/fuzz
	clang++ $(FUZZ_FLAGS) $< csrc/grit/*.cpp -o $@

build/fuzz/%: tests/fuzz/%.py tests/fuzz/pyfuzz.py | build
	@mkdir -p build/fuzz
	@printf '#!/bin/sh\nexec "%s" "%s" "$$@"\n' "$(abspath $(PY))" "$(abspath $<)" > $@ && chmod +x $@

build/fuzz/seeds: tests/fuzz/make_seeds.py tests/corpus/make_corpus.py tests/python/scan/writers.py | build
	$(PY) tests/fuzz/make_seeds.py $@

define run_fuzzers
	@for f in $(FUZZERS); do \
	  mkdir -p build/fuzz/corpus/$$f; \
	  $(FUZZ_ENV) build/fuzz/$$f -max_total_time=$(1) -rss_limit_mb=2048 -malloc_limit_mb=512 \
	    -print_final_stats=1 build/fuzz/corpus/$$f build/fuzz/seeds/$$f > build/fuzz/$$f.log 2>&1 \
	    || { tail -40 build/fuzz/$$f.log; echo "$$f: FAILED"; exit 1; }; \
	  echo "$$f: $$(grep -o 'number_of_executed_units: [0-9]*' build/fuzz/$$f.log), 0 findings"; \
	done
endef

fuzz: $(addprefix build/fuzz/,$(FUZZERS)) build/fuzz/seeds
	$(call run_fuzzers,$(FUZZ_SECONDS))

test-fuzz: $(addprefix build/fuzz/,$(FUZZERS)) build/fuzz/seeds
	$(call run_fuzzers,$(FUZZ_SHORT))

# Every CUDA kernel file compiles with plain nvcc for sm_80 and sm_90, GPU or
# not, so a CUDA compile break cannot land (the GPU itself: benchmarks/gpu_check.sh).
NVCC ?= $(shell command -v nvcc || echo /usr/local/cuda/bin/nvcc)
NVCC_ARCHS := -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
# The CUDA op wrappers (csrc/ops/cuda_*.cpp) are checked against torch's
# CUDA headers, syntax only: the CPU wheel has those headers but not the
# one its CMake generates (a two-line stub stands in) nor the CUDA libraries.
test-cuda-compile: $(VENV)/.deps
	@test -x "$(NVCC)" || { echo "test-cuda-compile: nvcc not found; install the CUDA toolkit or set NVCC=/path/to/nvcc"; exit 1; }
	@mkdir -p build/cuda/stub/c10/cuda/impl
	@for f in $(wildcard csrc/kernels/cuda/*.cu); do \
	  $(NVCC) -std=c++17 -O3 -fmad=false -Icsrc $(NVCC_ARCHS) -c $$f -o build/cuda/$$(basename $$f .cu).o || exit 1; \
	  echo "$$f: compiles for sm_80 and sm_90"; \
	done
	@printf '#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n' > build/cuda/stub/c10/cuda/impl/cuda_cmake_macros.h
	@inc=$$($(PY) -c "import torch.utils.cpp_extension as c; print(' '.join('-I' + p for p in c.include_paths()))"); \
	cuda=$$(echo | $(NVCC) --dryrun -x cu -E - 2>&1 | sed -n 's/^#\$$ INCLUDES="\(.*\)" *$$/\1/p'); \
	for f in $(wildcard csrc/ops/cuda_*.cpp); do \
	  $(CXX) -std=c++20 -fsyntax-only -Ibuild/cuda/stub $$inc $$cuda -Icsrc $$f || exit 1; \
	  echo "$$f: compiles against torch's CUDA headers (syntax only)"; \
	done

# The whole extension as a GPU machine builds it, on a machine without a GPU:
# a CUDA build of torch in its own venv (torch 2.14.1+cu130, which lies on
# this kind of machine's disk and matches nvcc 13.0; about 5.5 GB), the .cu
# kernels and the ATen CUDA wrappers compiled for sm_80 and sm_90 and linked
# into build/cuda-torch (beside the normal build), imported there: every op
# with a CUDA kernel must have it registered under the CUDA key
# (test_cuda_registered.py), and the CPU op tests pass on that build (the
# CUDA tests skip: no device). Opt-in: 5.5 GB and about 13 minutes here
# (6 installing); `make test` runs test-cuda-compile instead.
# The lent GPU machine's own versions (torch 2.11.0+cu130, Python 3.12), from
# PyPI (4.8 GB; 6m52s here, install, build and tests):
#   make test-cuda-build CUDA_TORCH_PIN=torch==2.11.0 CUDA_TORCH=build/cuda-torch-211 PYTHON_BOOT=python3.12
CUDA_TORCH := build/cuda-torch
CUDA_TORCH_PIN ?= torch==2.14.1
CUDA_TORCH_TESTS := test_cuda_registered.py test_kernels_cpu.py test_ops.py test_nn.py test_quantize_op_cpu.py test_exact_linear.py \
  test_int4g_kernels_cpu.py test_kernels_cuda.py test_int4g_cuda.py test_quantize_cuda.py test_grad_input_cuda.py test_cuda_large_batch.py
test-cuda-build: sysdeps
	@test -x $(CUDA_TORCH)/venv/bin/python || $(PYTHON_BOOT) -m venv $(CUDA_TORCH)/venv
	$(CUDA_TORCH)/venv/bin/python -m pip install -q $(CUDA_TORCH_PIN) numpy setuptools wheel ninja pytest \
	  hypothesis safetensors tqdm matplotlib grit-datatype==1.1.0
	@$(CUDA_TORCH)/venv/bin/python -c "import torch, sys; sys.exit(0 if torch.version.cuda else \
	  'test-cuda-build: %s is not a CUDA build of torch' % torch.__version__)"
	PATH=$(abspath $(CUDA_TORCH))/venv/bin:$$PATH TORCH_CUDA_ARCH_LIST="8.0;9.0" MAX_JOBS=2 \
	  $(CUDA_TORCH)/venv/bin/python setup.py -q build_py --build-lib $(CUDA_TORCH)/lib \
	  build_ext --build-lib $(CUDA_TORCH)/lib --build-temp $(CUDA_TORCH)/tmp -j2
	PYTHONPATH=$(abspath $(CUDA_TORCH))/lib PYTHONSAFEPATH=1 GRIT_EXPECT_EXTENSION_DIR=$(abspath $(CUDA_TORCH))/lib \
	  $(CUDA_TORCH)/venv/bin/python -m pytest -p no:cacheprovider $(addprefix tests/python/,$(CUDA_TORCH_TESTS))

# The C++ core and its GoogleTest suite under ASan + UBSan.
test-asan: sysdeps
	cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGRIT_SANITIZE=ON >/dev/null
	cmake --build build/asan -j2 --target grit_core_tests grit_kernels_tests grit_cuda_emu_tests
	ASAN_OPTIONS=halt_on_error=1 UBSAN_OPTIONS=halt_on_error=1 ctest --test-dir build/asan --output-on-failure
	$(MAKE) --no-print-directory test-asan-py

# The Python suite against an ASan + UBSan build of torch_grit._C (setup.py
# GRIT_SANITIZE=1), built with a copy of the package into build/asan-py: the
# in-place torch_grit/_C*.so is never replaced. It is put first on the path
# (PYTHONPATH; PYTHONSAFEPATH=1 keeps the repo root, and so the in-place
# package, off the front of sys.path, in child processes too) and
# tests/python/conftest.py refuses to run if _C comes from anywhere else.
# Options, and why:
# - LD_PRELOAD of the compiler's libasan: python and torch are not ASan-built,
#   and ASan must be the first library loaded to intercept malloc; and of its
#   libstdc++: python is C, so libstdc++ would come later (with torch) and
#   ASan's __cxa_throw interceptor would abort at the first C++ exception
#   ("CHECK failed: ... real___cxa_throw != 0", measured);
# - log_path: pytest captures fd 2, and a report that halts the process would
#   be lost with it; reports go to build/asan-py/report.<pid> and are printed;
# - detect_leaks=0: CPython and torch keep allocations alive until exit, which
#   LeakSanitizer would report as leaks;
# - halt_on_error=1 (ASan and UBSan): the first report ends the run.
# Deselected (ASan reserves terabytes of address space and keeps freed memory
# in quarantine, so tests that measure memory limits cannot run under it):
# - test_hostile_files.py's load, scan and console-script runs: children under
#   RLIMIT_AS 2 GiB (ASan cannot map its shadow memory: "ReserveShadowMemoryRange
#   failed ... Perhaps you're using ulimit -v", measured);
# - test_convert.py's streaming test: a child under RLIMIT_DATA of 32 MiB
#   ("AddressSanitizer: allocator is out of memory trying to allocate 0x100000
#   bytes", measured).
ASAN_PY := build/asan-py
ASAN_PY_DESELECT := \
  --deselect tests/python/test_hostile_files.py::test_load_refuses_every_hostile_file_with_a_clear_error \
  --deselect tests/python/test_hostile_files.py::test_scan_gives_the_expected_exit_code_for_every_hostile_file \
  --deselect tests/python/test_hostile_files.py::test_scan_console_script_exits_4_without_a_traceback \
  --deselect tests/python/test_convert.py::test_conversion_streams_under_a_memory_limit
ASAN_PY_ENV = LD_PRELOAD="$$(g++ -print-file-name=libasan.so) $$(g++ -print-file-name=libstdc++.so.6)" \
  ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:log_path=$(abspath $(ASAN_PY))/report \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:log_path=$(abspath $(ASAN_PY))/report \
  PYTHONPATH=$(abspath $(ASAN_PY)) PYTHONSAFEPATH=1 GRIT_EXPECT_EXTENSION_DIR=$(abspath $(ASAN_PY))
test-asan-py: sysdeps $(VENV)/.editable
	GRIT_SANITIZE=1 $(PY) setup.py -q build_py --build-lib $(ASAN_PY) \
	  build_ext --build-lib $(ASAN_PY) --build-temp $(ASAN_PY)/tmp -j2
	@rm -f $(ASAN_PY)/report.*
	$(ASAN_PY_ENV) $(PY) -c 'import torch_grit._C as c; print("test-asan-py: torch_grit._C is", c.__file__)'
	$(ASAN_PY_ENV) $(PY) -m pytest tests/python $(ASAN_PY_DESELECT) \
	  || { cat $(ASAN_PY)/report.* 2>/dev/null; exit 1; }
	@! cat $(ASAN_PY)/report.* 2>/dev/null | grep .

bench: build test-cpp
	$(PY) benchmarks/bench_check.py

clean:
	rm -rf build torch_grit/*.so *.egg-info
