"""``grade="auto"``: the one rule that picks a grade per tensor.

Used by ``quantize_(model, "auto")`` and ``torch-grit quantize --grade auto``.
For each candidate grade the tensor fits, the real encoder runs and its
result is decoded (``profile.preview``: the preview is the result, not an
estimate); the grade with the fewest bytes whose weight SQNR is at least the
budget wins, the earlier candidate on a tie. No candidate within budget: the
tensor stays exact and the reason lists what each candidate reached.
"""

import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..contract.codec import encode_planes
from ..contract.errors import GradeError
from ..contract.grade import Grade
from .profile import CANDIDATES, DEFAULT_BUDGET_DB, pick, preview, short_name
from ..tensor.grit_tensor import group_size

AUTO = "auto"


def is_auto(grade):
    return isinstance(grade, str) and grade.strip().lower() == AUTO


RULE_NAME = "torch_grit.auto.choose"


def policy(budget_db, candidates):
    """What a checkpoint records about grades chosen by this rule (its "grade_policy"
    metadata): the scanner then reads a mixture of grades as intended, not as drift.
    The rule's recorded name is the one files have always carried (``choose`` lived in
    ``torch_grit.auto`` then); a new name would make the same choice write other bytes."""
    return {"grade": AUTO, "rule": RULE_NAME, "budget_db": parse_budget(budget_db),
            "candidates": [g.canonical for g in parse_candidates(candidates)]}


def parse_budget(budget_db, where="budget_db"):
    """The budget as a finite float (a minimum weight SQNR in dB), or ValueError naming it."""
    try:
        value = float(budget_db)
    except (TypeError, ValueError):
        value = None
    if value is None or not math.isfinite(value):
        raise ValueError("%s is the minimum weight SQNR in dB, a finite number such as 20; found %r"
                         % (where, budget_db))
    return value


def split_list(text):
    """``"MXFP4,grit1(e=s8,k0=32,...),NVF4"`` -> its items: commas inside parentheses
    belong to a canonical grade string."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return items


def parse_candidates(candidates, where="candidates"):
    """Candidate grades, parsed, in order, duplicates dropped; GradeError (a ValueError)
    naming a bad one: unparseable, or without an encoder the rule could run."""
    if isinstance(candidates, str):
        candidates = split_list(candidates)
    out = []
    for c in candidates:
        if isinstance(c, str) and (not c.strip() or is_auto(c)):
            raise GradeError("%s: each candidate is a grade name (%s) or canonical string; found %r"
                             % (where, ",".join(CANDIDATES), c), token=c)
        try:
            g = Grade.parse(c.strip() if isinstance(c, str) else c)
        except GradeError as e:
            raise GradeError("%s: unknown grade %r (%s); known names include %s"
                             % (where, c, e, ",".join(CANDIDATES)), e.code, e.token, e.position) from None
        try:  # the rule runs each candidate's encoder: refuse one without, up front
            encode_planes(g, np.zeros(group_size(g), np.float32))
        except GradeError as e:
            raise GradeError("%s: %r cannot be a candidate: %s" % (where, c, e), e.code, e.token,
                             e.position) from None
        if g not in out:
            out.append(g)
    if not out:
        raise GradeError("%s: give at least one grade (for example %s)" % (where, ",".join(CANDIDATES)))
    return tuple(out)


@dataclass
class AutoChoice:
    """What the rule decided for one tensor."""
    grade: Optional[Grade]          # None: the tensor stays exact
    reason: Optional[str]           # why nothing was chosen
    budget_db: float
    previews: dict = field(default_factory=dict)  # short grade name -> GradePreview
    skipped: dict = field(default_factory=dict)   # short grade name -> why it does not fit

    @property
    def chosen(self):
        return self.previews[short_name(self.grade)] if self.grade is not None else None

    def tried(self):
        """``MXFP4 17.3 dB, NVF4 20.5 dB, Q4KS does not fit``, in candidate order."""
        parts = []
        for name in list(self.previews) + [n for n in self.skipped if n not in self.previews]:
            p = self.previews.get(name)
            parts.append("%s %.1f dB" % (name, p.sqnr_db) if p is not None else "%s does not fit" % name)
        return ", ".join(parts)

    def to_json(self):
        return {"budget_db": self.budget_db,
                "sqnr_db": {n: p.sqnr_db for n, p in self.previews.items()},
                "bytes": {n: p.bytes for n, p in self.previews.items()},
                "does_not_fit": dict(self.skipped)}


def choose(weight, grades, budget_db, skip_reason):
    """The rule, for one float weight (numpy or torch, 2-D).

    ``grades``: candidates in order (see parse_candidates); ``skip_reason(grade)``
    says why the tensor cannot take a grade (shape, dtype), or None.
    """
    w = weight.detach().to("cpu").float().numpy() if hasattr(weight, "detach") else weight
    previews, skipped = {}, {}
    first_skip = None
    for g in grades:
        reason = skip_reason(g)
        if reason is not None:
            skipped[short_name(g)] = reason
            first_skip = first_skip or reason
            continue
        previews[short_name(g)] = preview(w, g)
    best = pick(previews.values(), budget_db)
    if best is not None:
        grade = next(g for g in grades if short_name(g) == best.grade)
        return AutoChoice(grade, None, budget_db, previews, skipped)
    if not previews:
        return AutoChoice(None, first_skip, budget_db, previews, skipped)
    tried = ", ".join("%s %.1f dB" % (p.grade, p.sqnr_db) for p in previews.values())
    return AutoChoice(None, "grade=auto: no candidate meets the %.1f dB budget (%s)"
                      % (budget_db, tried), budget_db, previews, skipped)


__all__ = ["AUTO", "AutoChoice", "CANDIDATES", "DEFAULT_BUDGET_DB", "choose", "is_auto",
           "parse_budget", "parse_candidates"]
