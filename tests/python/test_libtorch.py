"""TorchScript: torch.jit.script of a model with GritLinear layers, and the
saved .pt run by a C++ program (examples/cpp) against the LibTorch inside the
installed torch, without Python, giving Python's outputs bit for bit.

The C++ build goes to build/libtorch and is reused: the first run compiles
the grit ops library and the program (minutes on 2 cores), later runs only
what changed (Ninja).
"""

import copy
import fcntl
import io
import os
import re
import shutil
import subprocess

import pytest
import torch
from torch import nn

import torch_grit
from torch_grit import GritTensor
from torch_grit.nn import GritLinear, ScriptableGritLinear

from grit_cases import REF_NAMES

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(ROOT, "build", "libtorch")
PROGRAM = os.path.join(BUILD, "run_scripted")

# torch 2.13 marks torch.jit.script/save/load deprecated (in favour of torch.export,
# see test_export.py); they still work, and this file is about them.
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.*deprecated:DeprecationWarning")

# Seen on the GPU machine's torch 2.11.0+cu130: a grit op that raises while a
# TorchScript module runs it from Python (through the op's Python-registered
# autograd) killed the process with SIGSEGV; torch 2.13.0 raises cleanly, and
# the C++ program reports the same error on both.
JIT_ERRORS_FROM_PYTHON = pytest.mark.skipif(
    torch.__version__ < "2.13", reason="torch %s's TorchScript interpreter crashed (SIGSEGV) "
    "instead of raising a grit op's error from Python (seen on 2.11.0)" % torch.__version__)


def mlp(seed=0):
    # in_features 256 everywhere: a multiple of every reference grade's group (Q4KS: 256).
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(256, 256), nn.GELU(), nn.LayerNorm(256),
                         nn.Linear(256, 64, bias=False))


def quantized_mlp(grade):
    model = mlp().eval()
    torch_grit.quantize_(model, grade)
    return model


# -- torch.jit.script in Python ------------------------------------------------------


def test_script_swaps_in_the_twin_and_keeps_outputs_and_state_dict():
    model = quantized_mlp("NVF4")
    x = torch.randn(2, 3, 256)
    with torch.no_grad():
        want = model(x)
    state = model.state_dict()
    planes = [p.data_ptr() for p in model[0].weight.stored_planes]
    scripted = torch.jit.script(model)
    # TorchScript's __prepare_scriptable__ protocol swaps the children in place.
    assert isinstance(model[0], ScriptableGritLinear) and isinstance(model[3], ScriptableGritLinear)
    assert [getattr(model[0], n).data_ptr() for n in GritTensor.PLANE_NAMES] == planes
    assert model[0].grade == torch_grit.Grade.NVF4.canonical and model[0].shape == [256, 256]
    assert "grade=GRADE_NVF4" in repr(model[0])
    with torch.no_grad():
        assert torch.equal(scripted(x), want) and torch.equal(model(x), want)
    # The same state_dict as before: weight a GritTensor with the same bytes, bias a tensor.
    after = model.state_dict()
    assert list(after) == list(state)
    for key, value in state.items():
        if isinstance(value, GritTensor):
            assert isinstance(after[key], GritTensor)
            assert after[key].descriptor.to_bytes() == value.descriptor.to_bytes()
            assert all(torch.equal(a, b) for a, b in zip(after[key].planes, value.planes))
        else:
            assert torch.equal(after[key], value)


def test_twin_loads_a_grit_linear_state_dict_and_refuses_other_grades():
    src = quantized_mlp("Q4KS")
    fresh = nn.Sequential(GritLinear(256, 256, grade="Q4KS"), nn.GELU(), nn.LayerNorm(256),
                          GritLinear(256, 64, bias=False, grade="Q4KS")).eval()
    torch.jit.script(fresh)
    fresh.load_state_dict(src.state_dict())
    x = torch.randn(4, 256)
    with torch.no_grad():
        assert torch.equal(fresh(x), src(x))
    other = GritLinear(256, 64, bias=False, grade="MXFP4")
    twin = other.__prepare_scriptable__()
    with pytest.raises(RuntimeError, match="grade grit1"):
        twin.load_state_dict({"weight": src[3].weight.detach()})
    with pytest.raises(RuntimeError, match="Missing key.*weight"):
        twin.load_state_dict({})


def test_script_a_grit_linear_directly_and_train_its_bias():
    torch.manual_seed(0)
    layer = GritLinear.from_linear(nn.Linear(256, 32), "MXFP4")
    x = torch.randn(8, 256)
    want = layer(x)
    scripted = torch.jit.script(layer)
    assert torch.equal(scripted(x), want)
    # The twin shares the bias Parameter: gradients reach it, never the planes.
    scripted(x).sum().backward()
    assert torch.equal(layer.bias.grad, torch.full((32,), 8.0))


def test_saved_script_loads_in_python():
    model = quantized_mlp("I8S24")
    x = torch.randn(5, 256)
    with torch.no_grad():
        want = model(x)
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(model), buf)
    buf.seek(0)
    loaded = torch.jit.load(buf)
    with torch.no_grad():
        assert torch.equal(loaded(x), want)


@JIT_ERRORS_FROM_PYTHON
def test_saved_script_raises_the_ops_error_in_python():
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(quantized_mlp("I8S24")), buf)
    buf.seek(0)
    loaded = torch.jit.load(buf)
    with pytest.raises(Exception, match="argument 'x' has 100 features"):
        loaded(torch.randn(2, 100))


# -- the C++ program -----------------------------------------------------------------


def _build():
    """Configure (once) and build run_scripted; returns the build seconds."""
    missing = [t for t in ("cmake", "ninja") if shutil.which(t) is None]
    if missing:
        pytest.skip("%s not on PATH: install them (make sysdeps) to build the LibTorch example"
                    % " and ".join(missing))
    os.makedirs(BUILD, exist_ok=True)
    # One build at a time: several test runs may share this tree.
    with open(os.path.join(BUILD, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(os.path.join(BUILD, "build.ninja")):
            subprocess.run(["cmake", "-S", os.path.join(ROOT, "examples", "cpp"), "-B", BUILD,
                            "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                            "-DCMAKE_PREFIX_PATH=" + torch.utils.cmake_prefix_path],
                           check=True, capture_output=True, text=True)
        jobs = str(min(os.cpu_count() or 2, 8))
        r = subprocess.run(["cmake", "--build", BUILD, "-j", jobs, "--target", "run_scripted"],
                           capture_output=True, text=True)
        assert r.returncode == 0, "building examples/cpp failed:\n" + r.stdout[-4000:] + r.stderr


@pytest.fixture(scope="module")
def run_scripted(tmp_path_factory):
    _build()
    tmp = tmp_path_factory.mktemp("libtorch")

    def run(module, x, expect_ok=True):
        model_path, x_path, y_path = tmp / "model.pt", tmp / "x.pt", tmp / "y.pt"
        torch.jit.save(module, str(model_path))
        torch.save(x, str(x_path))
        if y_path.exists():
            y_path.unlink()
        r = subprocess.run([PROGRAM, str(model_path), str(x_path), str(y_path)],
                           capture_output=True, text=True, timeout=120)
        if not expect_ok:
            return r
        assert r.returncode == 0, r.stdout + r.stderr
        return torch.load(str(y_path)), r.stdout

    return run


@pytest.mark.parametrize("grade", REF_NAMES)
def test_cpp_program_gives_pythons_outputs_bit_for_bit(run_scripted, grade):
    model = quantized_mlp(grade)
    x = torch.randn(3, 5, 256)
    with torch.no_grad():
        eager = model(copy.deepcopy(x))
    scripted = torch.jit.script(model)
    with torch.no_grad():
        in_python = scripted(x)
    y, stdout = run_scripted(scripted, x)
    # The same kernels from the same sources in the same order: exact equality.
    assert y.shape == (3, 5, 64) and y.dtype == torch.float32
    assert torch.equal(y, in_python) and torch.equal(y, eager)
    assert "-> output [3, 5, 64] Float" in stdout


@pytest.mark.parametrize("grade", ["MXFP4", "NVF4"])
def test_cpp_program_runs_a_tiled_model_bit_for_bit(run_scripted, grade):
    """A model in the CPU tile layout (torch_grit.tile_): its twins call
    grit::packed_linear_tiled, which the C++ program's ops library registers."""
    model = quantized_mlp(grade)
    x = torch.randn(2, 256)
    with torch.no_grad():
        want = model(x)
    assert torch_grit.tile_(model) == ["0", "3"]
    scripted = torch.jit.script(model)
    assert isinstance(model[0], ScriptableGritLinear) and model[0].tiled  # swapped in place
    y, _ = run_scripted(scripted, x)
    assert torch.equal(y, want)


def test_cpp_program_bfloat16(run_scripted):
    model = quantized_mlp("MXFP4").to(torch.bfloat16)
    x = torch.randn(4, 256, dtype=torch.bfloat16)
    with torch.no_grad():
        want = model(x)
    y, _ = run_scripted(torch.jit.script(model), x)
    assert y.dtype == torch.bfloat16 and torch.equal(y, want)


def test_cpp_program_reports_the_ops_error(run_scripted):
    r = run_scripted(torch.jit.script(quantized_mlp("Q4KS")), torch.randn(2, 100),
                     expect_ok=False)
    assert r.returncode == 1
    assert re.search(r"grit::packed_linear(_tiled)?: argument 'x' has 100 features", r.stderr), r.stderr


def test_cpp_program_does_not_load_python():
    _build()
    libs = subprocess.run(["ldd", PROGRAM], capture_output=True, text=True, check=True).stdout
    assert "libgrit_ops.so" in libs
    assert "libpython" not in libs and "libtorch_python" not in libs, libs
