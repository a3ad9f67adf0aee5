"""The package: setuptools reads its metadata without a deprecation (the TOML
license table it deprecated stops building on 2027-02-18), the metadata names
the license and carries its text, a build with the extension requires the
torch minor release it was compiled against, and an import under another
torch, or without a built extension, says so plainly."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_setuptools_reads_the_metadata_without_a_deprecation(tmp_path):
    env = dict(os.environ, GRIT_SKIP_EXT="1", PYTHONWARNINGS="always")
    run = subprocess.run([sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(tmp_path)], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "Deprecat" not in run.stderr, run.stderr[-4000:]
    info = open(tmp_path / "torch_grit.egg-info" / "PKG-INFO").read().splitlines()
    assert "Name: torch-grit" in info
    assert "License: Apache-2.0" in info
    assert "License-File: LICENSE" in info
    assert "Apache License" in open(os.path.join(ROOT, "LICENSE")).read(200)


def test_every_subpackage_is_in_the_distribution(tmp_path):
    """A package setuptools does not list is missing from a wheel (and from a non-editable
    install), while an editable checkout imports it fine: every folder of torch_grit with an
    __init__.py must be among the distribution's sources."""
    env = dict(os.environ, GRIT_SKIP_EXT="1")
    run = subprocess.run([sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(tmp_path)], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    sources = set(open(tmp_path / "torch_grit.egg-info" / "SOURCES.txt").read().split())
    packages = {os.path.relpath(os.path.join(d, "__init__.py"), ROOT)
                for d, _, files in os.walk(os.path.join(ROOT, "torch_grit")) if "__init__.py" in files}
    assert len(packages) > 10 and packages <= sources, sorted(packages - sources)


def _requires(tmp_path, skip_ext):
    env = dict(os.environ, GRIT_SKIP_EXT="1" if skip_ext else "0")
    tmp_path.mkdir()
    run = subprocess.run([sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(tmp_path)], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return open(tmp_path / "torch_grit.egg-info" / "requires.txt").read().split()


def test_a_build_with_the_extension_requires_the_torch_it_was_built_against(tmp_path):
    import torch

    major, minor = (int(v) for v in torch.__version__.split(".")[:2])
    assert "torch<%d.%d,>=%d.%d" % (major, minor + 1, major, minor) in _requires(tmp_path / "ext", False)
    assert "torch<2.15,>=2.11" in _requires(tmp_path / "skip", True)  # the package alone: the supported range


def test_the_build_records_its_torch():
    import torch
    from torch_grit import _build_info, _native

    assert _build_info.TORCH_VERSION == str(torch.__version__)
    assert _build_info.TORCH_CUDA == torch.version.cuda
    assert _native.built_against() == str(torch.__version__)


def test_another_torch_minor_is_named_before_the_extension_loads():
    from torch_grit._native import mismatch

    assert mismatch("2.13.0+cpu", "2.13.1+cu130") is None  # the same minor release: the same ABI
    assert mismatch(None, "2.14.1") is None  # not recorded: the loader decides
    reason = mismatch("2.13.0+cpu", "2.14.1+cu130")
    assert "built against torch 2.13.0+cpu and this is torch 2.14.1+cu130" in reason and "make build" in reason
    # End to end: an import of torch_grit whose build record names another minor release.
    code = ("import sys, types; m = types.ModuleType('torch_grit._build_info'); m.TORCH_VERSION = '2.10.0+cpu'; "
            "sys.modules['torch_grit._build_info'] = m\n"
            "try:\n    import torch_grit\nexcept ImportError as e:\n    print('ImportError:', e)")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "ImportError: torch_grit's extension was built against torch 2.10.0+cpu" in run.stdout, run.stdout


def test_an_unbuilt_extension_says_how_to_build_it(monkeypatch):
    import importlib.util

    from torch_grit import _native

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch_grit._C" else real(name, *a))
    with pytest.raises(ImportError, match=r"torch_grit._C, the compiled extension, is not built: run `make build`"):
        _native.load()
