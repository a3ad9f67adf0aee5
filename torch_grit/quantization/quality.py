"""Model quality on fixed inputs: what a user of the model sees, before and after quantizing.

``causal_lm_nll(model, token_ids)`` scores a fixed token sequence with a causal
language model: the sequence is cut into fixed, non-overlapping windows (no
shuffling, no sampling), each window predicts its own next tokens, and the
result is the mean negative log likelihood in nats per scored token and its
exponential, the perplexity. The model runs in eval mode under no_grad, so the
same model and tokens give the same numbers on every run.

``torch_grit.report(src, quantized, quality=...)`` takes any callable
``model -> metrics`` (a dataclass or a mapping of floats), such as
``functools.partial(causal_lm_nll, token_ids=ids)``, and reports it for both
models.
"""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class LMQuality:
    nll: float          # mean negative log likelihood, nats per scored token
    perplexity: float   # exp(nll)
    tokens: int         # tokens scored
    windows: int        # windows the sequence was cut into


def causal_lm_nll(model, token_ids, window=128, batch_size=8):
    """Mean NLL (nats/token) and perplexity of ``model`` on ``token_ids``, deterministically.

    ``token_ids``: a 1-D integer tensor (or list). It is cut into consecutive
    windows of ``window + 1`` tokens overlapping by one (the last token of a
    window is the first of the next), so every token after the first is
    scored exactly once, with the context of its own window; a final shorter
    window is scored too. ``model(input_ids)`` must return logits
    ``[batch, time, vocab]`` or an object with ``.logits`` (a transformers
    causal LM). Log probabilities are taken in float32 and summed in float64.
    The model's training mode is restored afterwards.
    """
    ids = _token_ids(token_ids)
    if not isinstance(window, int) or window < 1:
        raise ValueError("causal_lm_nll: window is a positive int (tokens of context per "
                         "window); found %r" % (window,))
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError("causal_lm_nll: batch_size is a positive int; found %r" % (batch_size,))
    starts = list(range(0, ids.numel() - 1, window))
    chunks = [ids[s:s + window + 1] for s in starts]
    device = _device_of(model)
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        with torch.no_grad():
            # Windows of equal length go together; the short tail, if any, alone.
            for length in sorted({c.numel() for c in chunks}, reverse=True):
                same = [c for c in chunks if c.numel() == length]
                for b in range(0, len(same), batch_size):
                    batch = torch.stack(same[b:b + batch_size]).to(device)
                    logits = _logits(model(batch[:, :-1]))
                    if logits.shape[:2] != batch[:, :-1].shape:
                        raise ValueError("causal_lm_nll: the model returned logits of shape %s for "
                                         "input_ids of shape %s; expected [batch, time, vocab]"
                                         % (tuple(logits.shape), tuple(batch[:, :-1].shape)))
                    nll = F.cross_entropy(logits.float().flatten(0, 1), batch[:, 1:].flatten(),
                                          reduction="none")
                    total += float(nll.double().sum())
                    count += nll.numel()
    finally:
        model.train(was_training)
    mean = total / count
    return LMQuality(nll=mean, perplexity=math.exp(mean), tokens=count, windows=len(chunks))


def _token_ids(token_ids):
    ids = torch.as_tensor(token_ids)
    if ids.dim() != 1:
        raise ValueError("causal_lm_nll: token_ids is a 1-D sequence of token ids; found shape %s"
                         % (tuple(ids.shape),))
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise TypeError("causal_lm_nll: token_ids holds integer token ids; found dtype %s" % ids.dtype)
    if ids.numel() < 2:
        raise ValueError("causal_lm_nll: token_ids needs at least 2 tokens (one to read, one to "
                         "predict); found %d" % ids.numel())
    if int(ids.min()) < 0:
        raise ValueError("causal_lm_nll: token_ids holds a negative id (%d)" % int(ids.min()))
    return ids.to(torch.long).cpu()


def _device_of(model):
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def _logits(out):
    logits = getattr(out, "logits", out)
    if not isinstance(logits, torch.Tensor):
        raise TypeError("causal_lm_nll: the model returned %s; expected a logits tensor or an "
                        "object with .logits" % type(out).__name__)
    return logits
