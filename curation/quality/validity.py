"""Validity: does an item's answer need its image? The per-template decision from the blind baselines
(``quality.blind``) and the model baselines (``quality.ablation``): each lift over chance with its Wilson interval,
a template above ``filter.validity.max_blind_lift`` marked (and blocked when ``block`` is on), and the rows the
validity report and its plot show.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any

from curation.params import ValidityParams
from curation.quality.items import mean
from curation.schema import Item


def difficulty_by_model(items: list[Item]) -> dict[str, Any]:
    """Model-assisted difficulty as each filter model alone would rate it, so the bias toward them is visible."""
    rates: dict[str, list[float]] = defaultdict(list)
    for i in items:
        for m, r in i.quality.difficulty_pass_rates.items():
            rates[m].append(r)
    out = {}
    for m, rs in sorted(rates.items()):
        grades = Counter("easy" if r >= 0.8 else ("medium" if r >= 0.4 else "hard") for r in rs)
        out[m] = {"items": len(rs), "mean_pass_rate": mean(rs), **{g: grades.get(g, 0) for g in
                                                                    ("easy", "medium", "hard")}}
    return out


# -- decisions ----------------------------------------------------------------------------------------------
def wilson(p: float, n: int, confidence: float) -> tuple[float, float]:
    """Wilson score interval of a proportion ``p`` over ``n`` trials at ``confidence`` (0: the point itself)."""
    if n <= 0 or confidence <= 0:
        return p, p
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(max(p * (1 - p), 0.0) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _over(v: dict[str, Any], acc: float, chance: float, what: str, params: ValidityParams) -> bool:
    """Whether the lift of ``acc`` over ``chance`` is above the threshold at the lower end of its interval over the
    template's items; records the interval, and the lift as uncertain where only its point estimate is above."""
    eps = 1e-9
    n = int(v.get("mcq_items") or v["items"])
    lo, hi = wilson(acc, n, params.confidence)
    v["lift_intervals"][what] = [round(lo - chance, 4), round(hi - chance, 4)]
    if lo - chance > params.max_blind_lift + eps:
        return True
    if acc - chance > params.max_blind_lift + eps:
        v["uncertain"].append(f"{what} lift {100 * (acc - chance):.1f} points, {100 * params.confidence:.0f}% "
                              f"interval {100 * (lo - chance):.1f}..{100 * (hi - chance):.1f} over {n} items")
    return False


def decide(templates: dict[str, dict[str, Any]], models: dict[str, Any], params: ValidityParams) -> None:
    """Mark each template above the threshold (blind or model without an image) with its reasons, and blocked
    when ``block`` is on. Each lift carries its Wilson interval over the template's items (``*_interval``, in
    accuracy minus chance); a template is above the threshold only when the interval's lower end is, and one whose
    interval spans the threshold is listed as ``uncertain`` (more items would settle it)."""
    for t, v in templates.items():
        reasons, details = [], []
        v["uncertain"], v["lift_intervals"] = [], {}

        b = v["best_blind_baseline"]
        if v["best_blind_lift"] is not None and b and _over(v, v["blind_baselines"][b], v["chance"], b, params):
            reasons.append(f"blind_baseline:{b}")
            details.append(f"{b} {100 * v['blind_baselines'][b]:.1f}% vs chance {100 * v['chance']:.1f}%")
        v["models"] = {}
        for name, m in (models.get("models") or {}).items():
            got = m["templates"].get(t)
            if not got:
                continue
            v["models"][name] = got
            mcq_chance = v["chance"]
            for cond in params.block_on:
                acc = got.get(cond)
                if acc is not None and _over(v, acc, mcq_chance, f"{name}:{cond}", params):
                    reasons.append(f"model_without_image:{name}:{cond}")
                    details.append(f"{name} {cond} {100 * acc:.1f}% vs chance {100 * mcq_chance:.1f}%")
        v["above_threshold"] = bool(reasons)
        v["blocked"] = bool(reasons) and params.block
        v["reasons"] = reasons
        v["detail"] = "; ".join(details) + (f" (> {100 * params.max_blind_lift:.0f} points)" if details else "")


def plot_rows(templates: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """DVC plot data: one row per template, its best blind baseline's accuracy and lift over chance in points."""
    rows = []
    for t, v in templates.items():
        best = v["best_blind_baseline"]
        acc = v["blind_baselines"].get(best) if best else None
        rows.append({"template": t, "best_blind_baseline": best or "-", "chance": round(100 * v["chance"], 2),
                     "accuracy": round(100 * (acc or 0), 2), "lift_points": round(100 * (v["best_blind_lift"] or 0), 2),
                     "blocked": bool(v.get("blocked"))})
    return rows
