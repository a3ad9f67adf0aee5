# torch_grit: `make demo` and `make test` are the two entry points.
# Both create .venv/ (Python 3.11, torch 2.13.0 CPU), install what is missing
# (pip; apt for GoogleTest/CMake/Ninja) and build the extension with Ninja.

PYTHON_BOOT ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
export PATH := $(abspath $(VENV))/bin:$(PATH)
CMAKE_BUILD := build/cmake
EXT_SOURCES := $(wildcard csrc/grit/*.cpp csrc/grit/*.h csrc/kernels/cpu/*.cpp csrc/kernels/cpu/*.h csrc/ops/*.cpp csrc/ops/*.h)

.PHONY: demo test test-cpp test-py build bench sysdeps clean

demo: build
	$(PY) examples/demo.py

test: build test-cpp test-py

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

test-py: build
	$(PY) -m pytest tests/python

bench: build test-cpp
	$(PY) benchmarks/bench_check.py

clean:
	rm -rf build torch_grit/*.so *.egg-info
