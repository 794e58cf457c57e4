"""Compare an LLM judge with clinicians on the same answers, so users can trust or reject the judge."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from curation.errors import InputError
from curation.jsonio import read_jsonl
from curation.review.merge import cohen_kappa


def _load(path: Path) -> dict[tuple[str, int], dict[str, Any]]:
    if not path.exists():
        raise InputError("file not found", path)
    if path.suffix == ".csv":
        with path.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    else:
        rows = list(read_jsonl(path))
    out = {}
    for n, r in enumerate(rows, 1):
        if "item_id" not in r:
            raise InputError(f"row {n}: no item_id", path)
        score = r.get("judge_score", r.get("score"))
        correct = r.get("correct")
        if isinstance(correct, str):
            correct = correct.strip().lower() in ("1", "true", "yes", "correct")
        out[(str(r["item_id"]), int(r.get("sample") or 0))] = {
            "score": float(score) if score not in (None, "") else None, "correct": correct}
    return out


def calibrate(judge_file: Path, clinician_file: Path, min_kappa: float = 0.6, min_rho: float = 0.6) -> dict[str, Any]:
    from scipy import stats

    judge, clin = _load(Path(judge_file)), _load(Path(clinician_file))
    keys = sorted(set(judge) & set(clin))
    if not keys:
        raise InputError("no (item_id, sample) in common with the judge's scores", clinician_file)
    pairs = [(judge[k]["correct"], clin[k]["correct"]) for k in keys
             if judge[k]["correct"] is not None and clin[k]["correct"] is not None]
    scored = [(judge[k]["score"], clin[k]["score"]) for k in keys
              if judge[k]["score"] is not None and clin[k]["score"] is not None]
    out: dict[str, Any] = {"n_matched": len(keys), "n_correctness_pairs": len(pairs), "n_score_pairs": len(scored)}
    out["percent_agreement"] = round(sum(a == b for a, b in pairs) / len(pairs), 4) if pairs else None
    out["cohen_kappa_correct"] = cohen_kappa(pairs)
    if len(scored) >= 3:
        j, c = [a for a, _ in scored], [b for _, b in scored]
        out["pearson_r"] = round(float(stats.pearsonr(j, c).statistic), 4)
        out["spearman_rho"] = round(float(stats.spearmanr(j, c).statistic), 4)
        out["mean_abs_diff"] = round(sum(abs(a - b) for a, b in scored) / len(scored), 4)
    else:
        out["pearson_r"] = out["spearman_rho"] = out["mean_abs_diff"] = None
    trust = (out["cohen_kappa_correct"] is not None and out["cohen_kappa_correct"] >= min_kappa
             and (out["spearman_rho"] is None or out["spearman_rho"] >= min_rho))
    out["verdict"] = "trust" if trust else "do_not_trust"
    out["thresholds"] = {"min_kappa": min_kappa, "min_spearman_rho": min_rho}
    return out


def dumps(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=2, sort_keys=True)
