"""examples/qlora_finetune.py runs end to end (save_pretrained, convert, from_pretrained, PEFT)
and the adapters over packed weights lower the loss as they do over the float model."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_qlora_example_trains_over_packed_weights():
    script = os.path.join(ROOT, "examples", "qlora_finetune.py")
    done = subprocess.run([sys.executable, script, "--steps", "12", "--pretrain-steps", "8", "--json"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = json.loads(done.stdout[done.stdout.index("{"):])
    packed, float_ = out["packed"], out["float"]
    assert len(packed["losses"]) == len(float_["losses"]) == 12
    assert min(packed["losses"][-3:]) < packed["losses"][0]
    assert packed["eval_nll"] < out["packed_nll_before"]
    # same adapters, same batches: the packed curve follows the float one closely
    assert abs(packed["losses"][0] - float_["losses"][0]) < 0.1 * float_["losses"][0]
    assert packed["seconds_per_step"] > 0 and float_["seconds_per_step"] > 0
