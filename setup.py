"""Builds torch_grit._C with torch.utils.cpp_extension and Ninja.

The extension compiles the contract core (csrc/grit) from the same files
CMake builds into the torch-free static library: there is no second copy.
"""
import glob
import os

import torch
from setuptools import setup
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension

ROOT = os.path.dirname(os.path.abspath(__file__))

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

# Products and sums stay separate roundings on the GPU too (no FMA).
NVCC_FLAGS = ["-O3", "-std=c++17", "-fmad=false"]

setup(
    ext_modules=[
        (CUDAExtension if WITH_CUDA else CppExtension)(
            name="torch_grit._C",
            sources=sources(),
            include_dirs=[os.path.join(ROOT, "csrc")],
            extra_compile_args={"cxx": CXX_FLAGS, "nvcc": NVCC_FLAGS} if WITH_CUDA else {"cxx": CXX_FLAGS},
            extra_link_args=["-fopenmp"]
            + (["-fsanitize=address,undefined"] if os.environ.get("GRIT_SANITIZE") == "1" else []),
        )
    ],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)
