"""The package metadata: setuptools reads it without a deprecation (the TOML
license table it deprecated stops building on 2027-02-18), and the wheel's
metadata names the license and carries its text."""
import os
import subprocess
import sys

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
