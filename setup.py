"""Builds torch_grit._C with torch.utils.cpp_extension and Ninja.

The extension compiles the contract core (csrc/grit) from the same files
CMake builds into the torch-free static library: there is no second copy.
"""
import glob
import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

ROOT = os.path.dirname(os.path.abspath(__file__))


def sources():
    files = sorted(glob.glob(os.path.join("csrc", "grit", "*.cpp")))
    files += sorted(glob.glob(os.path.join("csrc", "kernels", "cpu", "*.cpp")))
    files += sorted(glob.glob(os.path.join("csrc", "ops", "*.cpp")))
    return files


CXX_FLAGS = ["-O3", "-std=c++17", "-ffp-contract=off", "-fvisibility=hidden"]
if os.environ.get("GRIT_SANITIZE") == "1":
    CXX_FLAGS += ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-O1"]

setup(
    ext_modules=[
        CppExtension(
            name="torch_grit._C",
            sources=sources(),
            include_dirs=[os.path.join(ROOT, "csrc")],
            extra_compile_args={"cxx": CXX_FLAGS},
            extra_link_args=["-fsanitize=address,undefined"] if os.environ.get("GRIT_SANITIZE") == "1" else [],
        )
    ],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)
