"""examples/lora_finetune.py runs, and its loss falls (it exits 1 if not)."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_lora_finetune_example_loss_falls():
    script = os.path.join(ROOT, "examples", "lora_finetune.py")
    done = subprocess.run([sys.executable, script, "--steps", "100", "--every", "20"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [l for l in done.stdout.splitlines() if l.startswith("task B step")]
    losses = [float(l.split()[-1]) for l in lines]
    assert len(losses) == 6 and losses[-1] < 0.5 * losses[0]
    assert "packed" in done.stdout and "lower" in done.stdout


def test_lora_finetune_example_in_bfloat16_under_the_bf16_law():
    script = os.path.join(ROOT, "examples", "lora_finetune.py")
    done = subprocess.run([sys.executable, script, "--steps", "100", "--every", "20", "--bf16"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [l for l in done.stdout.splitlines() if l.startswith("task B step")]
    losses = [float(l.split()[-1]) for l in lines]
    assert len(losses) == 6 and losses[-1] < 0.5 * losses[0]
