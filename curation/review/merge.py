"""The ``review`` stage: apply a pinned snapshot of reviewers' decisions to the kept items.

The snapshot is a Label Studio JSON export (a list of tasks, each with ``data.item_id`` and its
``annotations``). Reviewer identities are pseudonymised; timestamps are not carried.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from curation.errors import InputError
from curation.params import ReviewParams
from curation.records import keyed_hash, read_json, read_jsonl, staged_dir, write_jsonl
from curation.report import Report
from curation.schema import Item, Review, ReviewDecision

VERDICTS = ("accept", "accept_with_edits", "reject")
EDITABLE = {"question": "question", "answer": "answer", "rationale": "rationale", "reference_answer": "reference_answer"}


def parse_annotation(ann: dict[str, Any]) -> ReviewDecision:
    values: dict[str, Any] = {}
    for r in ann.get("result") or []:
        name, val = r.get("from_name"), r.get("value") or {}
        if "choices" in val:
            values[name] = val["choices"][0] if val["choices"] else None
        elif "text" in val:
            values[name] = " ".join(val["text"]) if isinstance(val["text"], list) else val["text"]
        elif "rating" in val:
            values[name] = val["rating"]
    verdict = values.get("verdict")
    if verdict not in VERDICTS:
        raise ValueError(f"verdict {verdict!r} is not one of {', '.join(VERDICTS)}")
    edits = {EDITABLE[k]: v for k, v in values.items() if k in EDITABLE and v}
    return ReviewDecision(
        reviewer="rev-" + keyed_hash("reviewer", str(ann.get("completed_by")), length=8), verdict=verdict,
        reject_reason=values.get("reject_reason"), edits=edits,
        difficulty=int(values["difficulty"]) if values.get("difficulty") is not None else None,
        comment=values.get("comment"),
    )


def cohen_kappa(pairs: list[tuple[str, str]]) -> float | None:
    if not pairs:
        return None
    n = len(pairs)
    po = sum(a == b for a, b in pairs) / n
    ca, cb = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    pe = sum(ca[k] * cb[k] for k in set(ca) | set(cb)) / (n * n)
    return 1.0 if pe == 1 else round((po - pe) / (1 - pe), 4)


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
    pairs: list[tuple[str, str]] = []
    for item in read_jsonl(src / "items.jsonl", Item):
        report.inputs += 1
        ds = decisions.get(item.item_id, [])
        if len(ds) >= 2:
            pairs.append((ds[0].verdict, ds[1].verdict))
        final = adjudicated.get(item.item_id)
        verdicts = {d.verdict for d in ds}
        if final is not None:
            verdict, applied = final.verdict, final
        elif len(verdicts) == 1 and len(ds) >= params.min_reviews:
            verdict, applied = ds[0].verdict, ds[0]
        else:
            verdict, applied = None, None
            if len(verdicts) > 1:
                report.counts["disagreement_pending_adjudication"] += 1
        item.review = Review(decisions=ds, final_verdict=verdict, adjudicated=final is not None) if ds or final else None
        if verdict == "reject":
            report.counts[f"rejected_by_review:{applied.reject_reason if applied else 'unspecified'}"] += 1
            continue
        if applied is not None and verdict == "accept_with_edits":
            for field, value in applied.edits.items():
                setattr(item, field, value)
            report.counts["edited"] += 1
        item.status = "reviewed" if verdict else "unreviewed"
        report.counts[item.status] += 1
        out.append(item)
    report.metrics["cohen_kappa_verdict"] = cohen_kappa(pairs)
    report.metrics["doubly_reviewed"] = len(pairs)
    report.outputs = len(out)
    with staged_dir(dst) as staging:
        write_jsonl(staging / "items.jsonl", out)
        report.write_quarantine(staging / "quarantine.jsonl")
    report.write(report_path)
    return report
