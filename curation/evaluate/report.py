"""Aggregate scored samples into metrics per group, a leaderboard, and plots (PNG and DVC plot data)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from curation.evaluate.scoring import ERROR_TYPES, bootstrap_ci, pass_at_k
from curation.params import EvaluateParams
from curation.records import write_bytes, write_text


def _mean(xs: Iterable[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return round(sum(vals) / len(vals), 4) if vals else None


def _group(item_ids: list[str], per_item: dict[str, dict[str, Any]], ks: list[int],
           p: EvaluateParams) -> dict[str, Any]:
    rows = [per_item[i] for i in item_ids if per_item[i]["n"] > 0]
    mcq = [r["c"] / r["n"] for r in rows if r["format"] == "mcq"]
    out: dict[str, Any] = {
        "n_items": len(item_ids), "n_scored": len(rows),
        "mcq_accuracy": _mean(mcq),
        "mcq_accuracy_ci95": bootstrap_ci(mcq, p.bootstrap_resamples, 0.95, p.seed),
        "pass_at_1": _mean(r["c"] / r["n"] for r in rows),
        "pass_at_k": {str(k): _mean(pass_at_k(r["n"], r["c"], k) for r in rows if r["n"] >= k) for k in ks},
        "judge_score": _mean(r["judge_score"] for r in rows),
        "bertscore_f1": _mean(r["bertscore"] for r in rows),
    }
    return out


def aggregate(items: dict[str, Any], samples: list[Any], p: EvaluateParams) -> dict[str, Any]:
    per_item: dict[str, dict[str, Any]] = {}
    for iid, it in items.items():
        ss = [s for s in samples if s.item_id == iid and s.correct is not None]
        per_item[iid] = {
            "n": len(ss), "c": sum(bool(s.correct) for s in ss), "format": it.format,
            "judge_score": _mean(s.judge_score for s in ss), "bertscore": _mean(s.bertscore for s in ss),
        }
    ks = sorted({k for k in p.k if k <= p.samples})

    def by(key: Callable[[Any], Iterable[str]]) -> dict[str, Any]:
        groups: dict[str, list[str]] = {}
        for iid, it in items.items():
            for g in key(it):
                groups.setdefault(g, []).append(iid)
        return {g: _group(ids, per_item, ks, p) for g, ids in sorted(groups.items())}

    metrics: dict[str, Any] = {"overall": _group(list(items), per_item, ks, p)}
    metrics["mcq_accuracy"] = metrics["overall"]["mcq_accuracy"]
    metrics["pass_at_1"] = metrics["overall"]["pass_at_1"]
    metrics["pass_at_k"] = metrics["overall"]["pass_at_k"]
    metrics["by_task_type"] = by(lambda it: [it.task_type])
    metrics["by_visual_dim"] = by(lambda it: it.visual_dims)
    metrics["by_reasoning_dim"] = by(lambda it: it.reasoning_dims)
    metrics["by_source"] = by(lambda it: [it.source])
    metrics["by_difficulty"] = by(lambda it: [it.difficulty])
    metrics["by_format"] = by(lambda it: [it.format])
    # breadth: macro average over task types; depth: items that need at least one reasoning dimension
    task_p1 = [g["pass_at_1"] for g in metrics["by_task_type"].values() if g["pass_at_1"] is not None]
    metrics["breadth"] = _mean(task_p1)
    deep = [iid for iid, it in items.items() if it.reasoning_dims]
    metrics["depth"] = _group(deep, per_item, ks, p)["pass_at_1"] if deep else None
    wrong = [s for s in samples if s.correct is False]
    errors = Counter(s.error_type or "unclassified" for s in wrong)
    metrics["errors"] = {
        "wrong_samples": len(wrong),
        "counts": {e: errors.get(e, 0) for e in (*ERROR_TYPES, "unclassified")},
        "share": {e: round(errors.get(e, 0) / len(wrong), 4) if wrong else None
                  for e in (*ERROR_TYPES, "unclassified")},
    }
    metrics["failed_calls"] = sum(s.error is not None for s in samples)
    metrics["incomplete_items"] = sum(1 for r in per_item.values() if r["n"] < p.samples)
    metrics["samples_per_item"] = p.samples
    return metrics


def _fmt(v: float | None, pct: bool = True) -> str:
    if v is None:
        return "-"
    return f"{100 * v:.1f}" if pct else f"{v:.3f}"


def leaderboard(all_metrics: dict[str, Any]) -> str:
    rows = sorted(all_metrics.items(), key=lambda kv: -(kv[1]["pass_at_1"] or 0))
    any_m = next(iter(all_metrics.values()))
    ks = list(any_m["pass_at_k"])
    head = ["rank", "model", "MCQ acc. % (95% CI)", "pass@1 %", *[f"pass@{k} %" for k in ks], "breadth %", "depth %",
            "judge", "BERTScore F1", "items", "MCQ acc. % unshifted / circular"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for rank, (name, m) in enumerate(rows, 1):
        ci = m["overall"]["mcq_accuracy_ci95"]
        acc = _fmt(m["mcq_accuracy"]) + (f" ({_fmt(ci[0])}-{_fmt(ci[1])})" if ci else "")
        cells = [str(rank), name, acc, _fmt(m["pass_at_1"]), *[_fmt(m["pass_at_k"][k]) for k in ks],
                 _fmt(m["breadth"]), _fmt(m["depth"]), _fmt(m["overall"]["judge_score"], pct=False),
                 _fmt(m["overall"]["bertscore_f1"], pct=False), str(m["overall"]["n_scored"]), _circular(m)]
        lines.append("| " + " | ".join(cells) + " |")
    return ("# Leaderboard\n\n" + "\n".join(lines) + "\n\nbreadth: mean pass@1 over task types; "
            "depth: pass@1 on items that need a reasoning dimension (temporal, causal, long-tail, multi-source); "
            "circular: an MCQ counts only when answered right under every circular shift of its options (greedy, "
            "one call per shift; MMBench CircularEval), beside the unshifted greedy accuracy.\n")


def _circular(m: dict[str, Any]) -> str:
    c = m.get("circular")
    if not isinstance(c, dict):
        return "-"
    return f"{_fmt(c['vanilla_accuracy'])} / {_fmt(c['circular_accuracy'])}"


def plots(all_metrics: dict[str, Any], folder: Path) -> list[Path]:
    """Bar chart per model over dimensions, a radar over task types for all models, and DVC plot data."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    rows = []
    for name, m in all_metrics.items():
        for fam in ("by_visual_dim", "by_reasoning_dim", "by_task_type"):
            for g, v in m[fam].items():
                rows.append({"model": name, "family": fam.removeprefix("by_"), "group": g,
                             "pass_at_1": v["pass_at_1"], "n_items": v["n_items"]})
    data = folder / "dimensions.json"
    write_text(data, json.dumps(rows, indent=1) + "\n")
    written.append(data)

    def save(fig: Any, path: Path) -> None:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
        plt.close(fig)
        write_bytes(path, buf.getvalue())
        written.append(path)

    for name, m in all_metrics.items():
        groups = [(f"visual: {g}", v["pass_at_1"]) for g, v in m["by_visual_dim"].items()]
        groups += [(f"reasoning: {g}", v["pass_at_1"]) for g, v in m["by_reasoning_dim"].items()]
        fig, ax = plt.subplots(figsize=(8, 3.5))
        labels = [g for g, _ in groups]
        ax.bar(range(len(groups)), [100 * (v or 0) for _, v in groups], color="#3b6ea8")
        ax.set_xticks(range(len(groups)), labels, rotation=30, ha="right")
        ax.set_ylabel("pass@1 (%)")
        ax.set_ylim(0, 100)
        ax.set_title(f"{name}: pass@1 by dimension")
        save(fig, folder / f"{name}_dimensions.png")
    types = sorted({t for m in all_metrics.values() for t in m["by_task_type"]})
    if len(types) >= 3:
        angles = np.linspace(0, 2 * np.pi, len(types), endpoint=False).tolist()
        fig = plt.figure(figsize=(6, 6))
        ax = fig.add_subplot(111, polar=True)
        for name, m in all_metrics.items():
            vals = [100 * (m["by_task_type"].get(t, {}).get("pass_at_1") or 0) for t in types]
            ax.plot(angles + angles[:1], vals + vals[:1], label=name)
            ax.fill(angles + angles[:1], vals + vals[:1], alpha=0.15)
        ax.set_xticks(angles, [t.replace("_", " ") for t in types], fontsize=7)
        ax.set_ylim(0, 100)
        ax.legend(loc="upper right", bbox_to_anchor=(1.3, 1.1), fontsize=7)
        ax.set_title("pass@1 by task type")
        save(fig, folder / "radar_task_types.png")
    return written
