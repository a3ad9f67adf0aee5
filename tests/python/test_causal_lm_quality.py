"""Causal-LM quality on fixed inputs (torch_grit.quality) and in report(), through
examples/causal_lm_quality.py: a tiny transformers Llama trained a few steps on
the shipped text, scored before and after quantize_ at every grade."""

import dataclasses
import functools
import json
import math
import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import causal_lm_quality as example  # noqa: E402

import torch_grit  # noqa: E402
from torch_grit.quantization.quality import LMQuality, causal_lm_nll  # noqa: E402

# One layer, hidden 256 and intermediate 256: every projection's in_features
# is a multiple of Q4KS's 256-weight super-block, so every grade packs all 8.
TINY = dict(steps=20, hidden=256, intermediate=256, layers=1, heads=4, batch=8, seq=64, seed=0)

# Largest allowed rise of the held-out NLL (nats/token) after quantizing. Measured
# with TINY on the 2-core dev machine: MXFP4 +0.008, NVF4 +0.004, Q4KS +0.002,
# I8S24 +0.093 (2:4 sparsity drops half the weights), auto (chose NVF4) +0.004;
# the bounds leave about 5x margin.
MAX_NLL_RISE = {"MXFP4": 0.05, "NVF4": 0.05, "Q4KS": 0.05, "I8S24": 0.5, "auto": 0.05}


@pytest.fixture(scope="module")
def runs():
    """The example's pipeline, twice, in one process with the same seeds."""
    return example.run(**TINY), example.run(**TINY)


def test_training_lowers_the_held_out_nll(runs):
    info, rows = runs[0]
    trained = rows[0]["before"]["nll"]
    # Untrained: about ln(256) = 5.55 nats per byte; 20 steps reach about 2.56.
    assert info["untrained_nll"] > 5.0
    assert trained < info["untrained_nll"] - 2.0


def test_every_grade_packs_every_layer_and_stays_within_its_bound(runs):
    _, rows = runs[0]
    assert [r["grade"] for r in rows] == list(example.GRADES)
    for r in rows:
        assert r["layers_packed"] == r["layers"] == 8, r["grade"]
        before, after = r["before"]["nll"], r["after"]["nll"]
        assert math.isfinite(after), r["grade"]
        assert after - before <= MAX_NLL_RISE[r["grade"]], (r["grade"], before, after)
        assert r["after"]["tokens"] == r["before"]["tokens"] == 2019  # 2020 held-out bytes


def test_perplexity_is_exp_nll(runs):
    _, rows = runs[0]
    for r in rows:
        for side in ("before", "after"):
            assert r[side]["perplexity"] == math.exp(r[side]["nll"])


def test_numbers_repeat_exactly(runs):
    (info_a, rows_a), (info_b, rows_b) = runs
    assert info_a["untrained_nll"] == info_b["untrained_nll"]
    assert info_a["train_loss_last"] == info_b["train_loss_last"]
    for a, b in zip(rows_a, rows_b):
        assert (a["before"], a["after"]) == (b["before"], b["after"]), a["grade"]
        assert [l.output_max_abs for l in a["report"].layers] == \
               [l.output_max_abs for l in b["report"].layers]


def test_report_carries_the_quality_before_and_after(runs):
    _, rows = runs[0]
    rep = rows[0]["report"]
    assert rep.quality_before["nll"] == rows[0]["before"]["nll"]
    assert rep.quality_after["nll"] != rep.quality_before["nll"]
    table = rep.table()
    assert "| quality on fixed inputs | source | quantized | change |" in table
    assert "| perplexity | %.6g | %.6g |" % (rep.quality_before["perplexity"],
                                             rep.quality_after["perplexity"]) in table
    doc = json.loads(rep.to_json())
    assert doc["quality"] == {"before": rep.quality_before, "after": rep.quality_after}


class Uniform(torch.nn.Module):
    """Equal logits for every token of a vocabulary of ``vocab``: NLL is ln(vocab) exactly."""

    def __init__(self, vocab):
        super().__init__()
        self.vocab = vocab
        self.scale = torch.nn.Parameter(torch.zeros(()))

    def forward(self, ids):
        return self.scale.expand(*ids.shape, self.vocab)


@pytest.mark.parametrize("n, window", [(2, 1), (100, 7), (129, 128), (300, 128)])
def test_every_token_after_the_first_is_scored_once(n, window):
    q = causal_lm_nll(Uniform(256), torch.arange(n) % 256, window=window)
    assert q.tokens == n - 1 and q.windows == math.ceil((n - 1) / window)
    assert q.nll == pytest.approx(math.log(256), rel=1e-7)  # float32 log-softmax
    assert q.perplexity == math.exp(q.nll)


def test_one_window_equals_a_direct_forward():
    model = example.build_model(hidden=64, intermediate=128, layers=1, heads=1, seed=1)
    _, ids = example.load_tokens()
    ids = ids[:65]
    model.train()
    q = causal_lm_nll(model, ids, window=64)
    assert model.training  # restored
    model.eval()
    with torch.no_grad():
        logits = model(ids[None, :-1]).logits[0]
    direct = float(torch.nn.functional.cross_entropy(logits, ids[1:], reduction="none").double().sum()) / 64
    assert q == LMQuality(nll=direct, perplexity=math.exp(direct), tokens=64, windows=1)


@pytest.mark.parametrize("ids, kw, error, match", [
    (torch.zeros(2, 8, dtype=torch.long), {}, ValueError, "1-D sequence"),
    (torch.zeros(8), {}, TypeError, "integer token ids"),
    (torch.zeros(1, dtype=torch.long), {}, ValueError, "at least 2 tokens"),
    (torch.tensor([1, -1]), {}, ValueError, "negative id"),
    (torch.zeros(8, dtype=torch.long), {"window": 0}, ValueError, "window is a positive int"),
])
def test_bad_input_is_refused(ids, kw, error, match):
    with pytest.raises(error, match=match):
        causal_lm_nll(Uniform(4), ids, **kw)


def _pair():
    torch.manual_seed(0)
    src = torch.nn.Sequential(torch.nn.Linear(64, 32))
    q = torch.nn.Sequential(torch.nn.Linear(64, 32))
    q.load_state_dict(src.state_dict())
    torch_grit.quantize_(q, "MXFP4")
    return src, q


def test_report_quality_takes_a_mapping_and_refuses_what_is_not_one():
    src, q = _pair()
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(0))
    rep = torch_grit.report(src, q, quality=lambda m: {"out_norm": float(m(x).detach().norm())})
    assert rep.quality_before["out_norm"] == float(src(x).detach().norm())
    assert rep.quality_after["out_norm"] == float(q(x).detach().norm())
    with pytest.raises(TypeError, match="quality is a callable"):
        torch_grit.report(src, q, quality=3)
    with pytest.raises(TypeError, match="dataclass or a mapping"):
        torch_grit.report(src, q, quality=lambda m: 1.0)
    with pytest.raises(TypeError, match="expected a number"):
        torch_grit.report(src, q, quality=lambda m: {"name": "x"})
    assert "quality" not in json.loads(torch_grit.report(src, q).to_json())


def test_report_quality_binds_causal_lm_nll():
    # The documented way: functools.partial over fixed token ids.
    model = example.build_model(hidden=64, intermediate=128, layers=1, heads=1, seed=2)
    quantized = example.build_model(hidden=64, intermediate=128, layers=1, heads=1, seed=2)
    torch_grit.quantize_(quantized, "NVF4")
    ids = example.load_tokens()[1][:200]
    rep = torch_grit.report(model, quantized, quality=functools.partial(causal_lm_nll, token_ids=ids))
    assert rep.quality_before == dataclasses.asdict(causal_lm_nll(model, ids))
    assert rep.quality_after["tokens"] == 199 and math.isfinite(rep.quality_after["nll"])
