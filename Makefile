# torch_grit: `make demo` and `make test` are the two entry points.
# Both create .venv/ (Python 3.11, torch 2.13.0 CPU), install what is missing
# (pip; apt for GoogleTest/CMake/Ninja) and build the extension with Ninja.

PYTHON_BOOT ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
export PATH := $(abspath $(VENV))/bin:$(PATH)
CMAKE_BUILD := build/cmake
EXT_SOURCES := $(wildcard csrc/grit/*.cpp csrc/grit/*.h csrc/kernels/cpu/*.cpp csrc/kernels/cpu/*.h csrc/ops/*.cpp csrc/ops/*.h)

.PHONY: demo test test-cpp test-py build bench sysdeps clean fuzz test-fuzz test-asan libtorch-example test-cuda-compile

demo: build
	$(PY) examples/demo.py
	$(PY) examples/checkpoint_demo.py

test: build test-cpp test-py test-fuzz test-cuda-compile

sysdeps:
	@bash scripts/install_sysdeps.sh

$(VENV)/.deps: requirements-dev.txt
	@test -x $(PY) || $(PYTHON_BOOT) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	@touch $@

# The console script (torch-grit) comes from one editable install; later
# builds are incremental (Ninja) in place.
$(VENV)/.editable: $(VENV)/.deps pyproject.toml setup.py
	$(PY) -m pip install -q --no-build-isolation --no-deps -e .
	@touch $@

build: sysdeps $(VENV)/.editable $(EXT_SOURCES)
	$(PY) setup.py -q build_ext --inplace -j2

test-cpp: sysdeps
	cmake -S . -B $(CMAKE_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(CMAKE_BUILD) -j2
	ctest --test-dir $(CMAKE_BUILD) --output-on-failure

test-py: build libtorch-example
	$(PY) -m pytest tests/python

# The LibTorch example (examples/cpp): the grit ops built without Python and a
# C++ program that runs a TorchScript model; tests/python/test_libtorch.py runs
# it (and builds it itself when this was not run). Incremental, like build.
LIBTORCH_BUILD := build/libtorch
libtorch-example: sysdeps $(VENV)/.deps
	@test -f $(LIBTORCH_BUILD)/build.ninja || cmake -S examples/cpp -B $(LIBTORCH_BUILD) -G Ninja \
	  -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_PREFIX_PATH="$$($(PY) -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')" >/dev/null
	cmake --build $(LIBTORCH_BUILD) -j2 --target run_scripted

# libFuzzer harnesses over the core, under ASan + UBSan (clang from apt).
# `make fuzz FUZZ_SECONDS=N` runs each for N seconds; `make test` runs each
# for FUZZ_SHORT seconds so a regression shows in CI.
FUZZERS := fuzz_check fuzz_grade fuzz_decode
FUZZ_SECONDS ?= 60
FUZZ_SHORT ?= 10
FUZZ_FLAGS := -std=c++17 -O1 -g -ffp-contract=off -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Icsrc
FUZZ_ENV := ASAN_OPTIONS=halt_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

build/fuzz/%: tests/fuzz/%.cpp $(wildcard csrc/grit/*.cpp csrc/grit/*.h) | sysdeps
	@mkdir -p build/fuzz
	clang++ $(FUZZ_FLAGS) $< csrc/grit/*.cpp -o $@

build/fuzz/seeds: tests/fuzz/make_seeds.py | build
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
test-cuda-compile:
	@test -x "$(NVCC)" || { echo "test-cuda-compile: nvcc not found; install the CUDA toolkit or set NVCC=/path/to/nvcc"; exit 1; }
	@mkdir -p build/cuda
	@for f in $(wildcard csrc/kernels/cuda/*.cu); do \
	  $(NVCC) -std=c++17 -O3 -fmad=false -Icsrc $(NVCC_ARCHS) -c $$f -o build/cuda/$$(basename $$f .cu).o || exit 1; \
	  echo "$$f: compiles for sm_80 and sm_90"; \
	done

# The C++ core and its GoogleTest suite under ASan + UBSan.
test-asan: sysdeps
	cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGRIT_SANITIZE=ON >/dev/null
	cmake --build build/asan -j2 --target grit_core_tests
	ASAN_OPTIONS=halt_on_error=1 UBSAN_OPTIONS=halt_on_error=1 ctest --test-dir build/asan --output-on-failure

bench: build test-cpp
	$(PY) benchmarks/bench_check.py

clean:
	rm -rf build torch_grit/*.so *.egg-info
