"""Builds torch_grit._C with torch.utils.cpp_extension and Ninja.

The extension compiles the contract core (csrc/grit) from the same files
CMake builds into the torch-free static library: there is no second copy.
"""
import glob
import os
import shutil
import subprocess

import torch
from setuptools import setup

ROOT = os.path.dirname(os.path.abspath(__file__))


def _cuda_home_behind_a_wrapper():
    """torch takes CUDA_HOME as the folder above the `nvcc` on PATH; where that
    nvcc is a wrapper script (/usr/local/bin/nvcc on this project's machines),
    the toolkit's headers are not there and every CUDA wrapper fails on
    cuda_runtime.h. nvcc names its own folder in --dryrun (`#$ _HERE_=...`)."""
    if torch.version.cuda is None or os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH"):
        return None
    nvcc = shutil.which("nvcc")
    if nvcc is None or os.path.exists(os.path.join(os.path.dirname(os.path.dirname(nvcc)), "include",
                                                   "cuda_runtime.h")):
        return None
    try:
        dry = subprocess.run([nvcc, "--dryrun", "-x", "cu", "-E", os.devnull], capture_output=True, text=True,
                             timeout=60).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    for line in dry.splitlines():
        if line.startswith("#$ _HERE_="):
            home = os.path.dirname(line.split("=", 1)[1].strip())
            if os.path.exists(os.path.join(home, "include", "cuda_runtime.h")):
                return home
    return None


_HOME = _cuda_home_behind_a_wrapper()
if _HOME:
    os.environ["CUDA_HOME"] = _HOME

from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension  # noqa: E402

# The CUDA kernels (csrc/kernels/cuda/*.cu) and their ATen wrappers
# (csrc/ops/cuda_*.cpp) build where torch has CUDA and nvcc is found;
# GRIT_NO_CUDA=1 leaves them out. `make test-cuda-compile` checks the .cu
# files with plain nvcc everywhere.
WITH_CUDA = torch.version.cuda is not None and CUDA_HOME is not None and os.environ.get("GRIT_NO_CUDA") != "1"


def sources():
    files = sorted(glob.glob(os.path.join("csrc", "grit", "*.cpp")))
    files += sorted(glob.glob(os.path.join("csrc", "kernels", "cpu", "*.cpp")))
    files += sorted(f for f in glob.glob(os.path.join("csrc", "ops", "*.cpp"))
                    if WITH_CUDA or not os.path.basename(f).startswith("cuda_"))
    if WITH_CUDA:
        files += sorted(glob.glob(os.path.join("csrc", "kernels", "cuda", "*.cu")))
    return files


# C++20: torch's own headers use it (2.13's c10 has default member
# initializers on bit-fields, which C++17 builds only warn about).
CXX_FLAGS = ["-O3", "-std=c++20", "-ffp-contract=off", "-fvisibility=hidden"]
# at::parallel_for runs threads only where the caller is compiled with OpenMP
# (ATen's is, and its libgomp.so.1 is the one the loader then reuses).
CXX_FLAGS += ["-fopenmp"]
if os.environ.get("GRIT_SANITIZE") == "1":
    CXX_FLAGS += ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-O1"]
else:
    # No debug information (Python's own CFLAGS bring -g): the two SIMD kernel
    # files, each every grade's instantiations, compile in 159 s instead of
    # 279 s (and 0.7 GB instead of 3.4 GB of compiler memory) with -g0 here,
    # the critical path of a parallel build such as benchmarks/gpu_check.sh's.
    CXX_FLAGS += ["-g0"]

# Products and sums stay separate roundings on the GPU too (no FMA).
NVCC_FLAGS = ["-O3", "-std=c++17", "-fmad=false"]

# The extension binds to the C++ ABI of the torch it is compiled against: the
# build records that torch (torch_grit/_build_info.py, read before the
# extension loads) and a wheel requires the same minor release.
SKIP_EXT = os.environ.get("GRIT_SKIP_EXT") == "1"
TORCH_RANGE = "torch>=2.11,<2.15"


def _torch_requirement():
    if SKIP_EXT:
        return TORCH_RANGE
    major, minor = (int(v) for v in torch.__version__.split(".")[:2])
    return "torch>=%d.%d,<%d.%d" % (major, minor, major, minor + 1)


class _BuildExt(BuildExtension.with_options(use_ninja=True)):
    """build_ext that also writes torch_grit/_build_info.py beside the extension."""

    def run(self):
        folder = os.path.join(ROOT if self.inplace else self.build_lib, "torch_grit")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "_build_info.py")
        text = ('"""Written by setup.py when it builds torch_grit._C; not in git."""\n'
                "TORCH_VERSION = %r\nTORCH_CUDA = %r\n" % (str(torch.__version__), torch.version.cuda))
        if not os.path.exists(path) or open(path).read() != text:
            with open(path, "w") as f:
                f.write(text)
        super().run()


# GRIT_SKIP_EXT=1: the package without its extension. The Makefile's editable
# install uses it: pip compiles an editable install's extension in a temporary
# folder that it deletes, so the `setup.py build_ext --inplace` that follows
# (objects kept in build/, rebuilt only where sources change) compiled all of
# it a second time on every fresh checkout.
EXTENSIONS = [] if SKIP_EXT else [
    (CUDAExtension if WITH_CUDA else CppExtension)(
        name="torch_grit._C",
        sources=sources(),
        include_dirs=[os.path.join(ROOT, "csrc")],
        extra_compile_args={"cxx": CXX_FLAGS, "nvcc": NVCC_FLAGS} if WITH_CUDA else {"cxx": CXX_FLAGS},
        extra_link_args=["-fopenmp"]
        + (["-fsanitize=address,undefined"] if os.environ.get("GRIT_SANITIZE") == "1" else []),
    )
]

# The license is set here, not in pyproject.toml: setuptools deprecates the
# TOML table (`license = {text = ...}`; builds break from 2027-02-18) and
# only 77 and newer read the SPDX string that replaces it, while the GPU
# machine builds with whatever setuptools its torch brought. This keyword
# means the same to both.
setup(
    license="Apache-2.0",
    license_files=["LICENSE"],
    install_requires=[_torch_requirement(), "numpy", "safetensors>=0.4"],
    ext_modules=EXTENSIONS,
    cmdclass={"build_ext": _BuildExt},
)
