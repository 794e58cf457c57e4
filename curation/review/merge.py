"""The ``review`` stage: apply a pinned snapshot of reviewers' decisions to the kept items.

The snapshot is a Label Studio JSON export (a list of tasks, each with ``data.item_id`` and its
``annotations``). Reviewer identities are pseudonymised; timestamps are not carried.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from curation.errors import InputError
from curation.params import ReviewParams
from curation.records import keyed_hash, read_json, read_jsonl, staged_dir, write_jsonl
from curation.report import Report
from curation.schema import Item, Review, ReviewDecision

VERDICTS = ("accept", "accept_with_edits", "reject")
REJECT_REASONS = ("wrong_answer", "ambiguous", "not_answerable_from_the_images", "clinically_implausible",
                  "duplicate", "phi_visible", "poor_image")
TEXT_FIELDS = ("question", "answer", "rationale", "reference_answer", "options")
DIM_FIELDS = ("visual_dims", "reasoning_dims")


def _slug(value: str) -> str:
    return "_".join(str(value).strip().lower().replace("-", " ").split())


def parse_annotation(ann: dict[str, Any]) -> ReviewDecision:
    """One Label Studio annotation -> a decision; raises ValueError naming what is wrong."""
    values: dict[str, Any] = {}
    result = ann.get("result")
    if not isinstance(result, list):
        raise ValueError("annotation has no result list")
    for r in result:
        if not isinstance(r, dict):
            raise ValueError("result entry is not an object")
        name, val = r.get("from_name"), r.get("value") or {}
        if "choices" in val:
            choices = val["choices"]
            values[name] = list(choices) if name in DIM_FIELDS else (choices[0] if choices else None)
        elif "text" in val:
            values[name] = "\n".join(val["text"]) if isinstance(val["text"], list) else val["text"]
        elif "rating" in val:
            values[name] = val["rating"]
    verdict = _slug(values.get("verdict") or "")
    if verdict not in VERDICTS:
        raise ValueError(f"verdict {values.get('verdict')!r} is not one of {', '.join(VERDICTS)}")
    reason = _slug(values["reject_reason"]) if values.get("reject_reason") else None
    if reason is not None and reason not in REJECT_REASONS:
        raise ValueError(f"reject reason {values['reject_reason']!r} is not in the fixed list")
    edits: dict[str, Any] = {}
    for k in TEXT_FIELDS:
        v = values.get(k)
        if isinstance(v, str) and v.strip():
            edits[k] = [o.strip() for o in v.splitlines() if o.strip()] if k == "options" else " ".join(v.split())
    for k in DIM_FIELDS:
        if k in values:
            edits[k] = sorted(values[k])
    return ReviewDecision(
        reviewer="rev-" + keyed_hash("reviewer", str(ann.get("completed_by")), length=8), verdict=verdict,
        reject_reason=reason, edits=edits,
        difficulty=int(values["difficulty"]) if values.get("difficulty") is not None else None,
        comment=values.get("comment"),
    )


def cohen_kappa(pairs: list[tuple[Any, Any]]) -> float | None:
    if not pairs:
        return None
    n = len(pairs)
    po = sum(a == b for a, b in pairs) / n
    ca, cb = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    pe = sum(ca[k] * cb[k] for k in set(ca) | set(cb)) / (n * n)
    return 1.0 if pe == 1 else round((po - pe) / (1 - pe), 4)


def kripp_alpha(units: list[list[Any]], level: str = "nominal") -> float | None:
    """Krippendorff's alpha over units (items), each the list of values its reviewers gave (None = missing)."""
    import krippendorff
    import numpy as np

    units = [u for u in units if sum(v is not None for v in u) >= 2]
    if not units:
        return None
    values = sorted({v for u in units for v in u if v is not None}, key=str)
    if len(values) < 2:
        return 1.0
    code = {v: float(i) if level == "nominal" else float(v) for i, v in enumerate(values)}
    width = max(len(u) for u in units)
    data = np.full((width, len(units)), np.nan)
    for j, u in enumerate(units):
        for i, v in enumerate(u):
            if v is not None:
                data[i, j] = code[v]
    return round(float(krippendorff.alpha(reliability_data=data, level_of_measurement=level)), 4)


def agreement(decisions: dict[str, list[ReviewDecision]]) -> dict[str, Any]:
    """Cohen's kappa (first two reviewers) and Krippendorff's alpha (all reviewers) per field and overall."""
    multi = [ds for ds in decisions.values() if len(ds) >= 2]
    fields: dict[str, tuple[Any, str]] = {
        "verdict": (lambda d: d.verdict, "nominal"),
        "reject_reason": (lambda d: d.reject_reason if d.verdict == "reject" else "none", "nominal"),
        "difficulty": (lambda d: d.difficulty, "ordinal"),
    }
    out: dict[str, Any] = {"doubly_reviewed": len(multi)}
    alphas = []
    for name, (get, level) in fields.items():
        pairs = [(get(ds[0]), get(ds[1])) for ds in multi if get(ds[0]) is not None and get(ds[1]) is not None]
        out[f"cohen_kappa_{name}"] = cohen_kappa(pairs)
        a = kripp_alpha([[get(d) for d in ds] for ds in multi], level)
        out[f"krippendorff_alpha_{name}"] = a
        if a is not None:
            alphas.append(a)
    out["krippendorff_alpha_overall"] = round(sum(alphas) / len(alphas), 4) if alphas else None
    return out


def apply_edits(item: Item, edits: dict[str, Any]) -> str | None:
    """Apply a reviewer's corrections in place; returns why they cannot be applied, leaving the item untouched."""
    editable = ("question", "answer", "rationale", "reference_answer", *DIM_FIELDS)
    changes = {k: v for k, v in edits.items() if k in editable}
    if "options" in edits and item.options:
        changes["options"] = edits["options"]
    new = {**item.model_dump(), **changes}
    if new["options"]:
        if new["answer"] not in new["options"]:
            return "answer_not_in_options"
        if len(set(new["options"])) != len(new["options"]):
            return "duplicate_options"
        new["answer_index"] = new["options"].index(new["answer"])
    try:
        validated = Item.model_validate(new)
    except ValidationError:
        return "invalid_edit"
    for field in ("question", "answer", "rationale", "reference_answer", "options", "answer_index", *DIM_FIELDS):
        setattr(item, field, getattr(validated, field))
    return None


def run(params: ReviewParams, src: Path, annotations: Path, dst: Path, report_path: Path | None = None) -> Report:
    src, dst, annotations = Path(src), Path(dst), Path(annotations)
    if not (src / "items.jsonl").exists():
        raise InputError("no items.jsonl (run the filter stage first)", src)
    report = Report(stage="review")
    tasks = read_json(annotations) if annotations.exists() else []
    if not isinstance(tasks, list):
        raise InputError("annotation snapshot is not a JSON list of tasks", annotations)
    decisions: dict[str, list[ReviewDecision]] = {}
    adjudicated: dict[str, ReviewDecision] = {}
    for n, task in enumerate(tasks):
        item_id = ((task or {}).get("data") or {}).get("item_id") if isinstance(task, dict) else None
        if not item_id:
            report.fail(f"{annotations.name}#task{n + 1}", "annotation_malformed", "task has no data.item_id")
            continue
        for ann in task.get("annotations") or []:
            if not isinstance(ann, dict):
                report.fail(f"{annotations.name}#task{n + 1}", "annotation_malformed", "annotation is not an object")
                continue
            if ann.get("was_cancelled"):
                continue
            try:
                d = parse_annotation(ann)
            except (ValueError, TypeError) as exc:
                report.fail(f"{annotations.name}#task{n + 1}", "annotation_malformed", str(exc))
                continue
            if (task.get("data") or {}).get("adjudication"):
                adjudicated[item_id] = d
            else:
                decisions.setdefault(item_id, []).append(d)
    out: list[Item] = []
    queue: list[Item] = []
    for item in read_jsonl(src / "items.jsonl", Item):
        report.inputs += 1
        ds = decisions.get(item.item_id, [])
        final = adjudicated.get(item.item_id)
        # reviewers agree when they give the same verdict and, for edits, the same edits
        verdicts = {d.verdict + (json.dumps(d.edits, sort_keys=True) if d.verdict == "accept_with_edits" else "")
                    for d in ds}
        if final is not None:
            verdict, applied = final.verdict, final
        elif len(verdicts) == 1 and len(ds) >= params.min_reviews:
            verdict, applied = ds[0].verdict, ds[0]
        else:
            verdict, applied = None, None
        item.review = (Review(decisions=ds, final_verdict=verdict, adjudicated=final is not None)
                       if ds or final else None)
        if verdict is None and len(verdicts) > 1:
            report.counts["disagreement_pending_adjudication"] += 1
            queue.append(item.model_copy(deep=True))
        if verdict == "reject":
            report.counts[f"rejected_by_review:{applied.reject_reason if applied else 'unspecified'}"] += 1
            continue
        if applied is not None and verdict == "accept_with_edits":
            problem = apply_edits(item, applied.edits)
            if problem:
                report.fail(item.item_id, f"edit_not_applied:{problem}", "the item is kept as generated")
                item.status = "unreviewed"
                report.counts["unreviewed"] += 1
                out.append(item)
                continue
            report.counts["edited"] += 1
        item.status = "reviewed" if verdict else "unreviewed"
        report.counts[item.status] += 1
        out.append(item)
    report.metrics.update(agreement(decisions))
    report.metrics["adjudication_queue"] = len(queue)
    report.outputs = len(out)
    with staged_dir(dst) as staging:
        write_jsonl(staging / "items.jsonl", out)
        write_jsonl(staging / "adjudication_queue.jsonl", queue)
        report.write_quarantine(staging / "quarantine.jsonl")
    report.write(report_path)
    return report
