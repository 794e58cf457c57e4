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
from curation.jsonio import read_json, read_jsonl, write_jsonl
from curation.params import ReviewParams
from curation.pseudonyms import keyed_hash, project_secret
from curation.records import staged_dir
from curation.report import Report
from curation.schema import Item, MarkedEvidence, Review, ReviewDecision

VERDICTS = ("accept", "accept_with_edits", "reject")
REJECT_REASONS = ("wrong_answer", "ambiguous", "not_answerable_from_the_images", "clinically_implausible",
                  "duplicate", "phi_visible", "poor_image", "evidence_not_visible")
EVIDENCE_VISIBLE = ("yes", "no", "wrong_slice")
EVIDENCE_LABELS = ("lesion", "hippocampus", "ventricle", "other")
REGION_TYPES = {"rectanglelabels": "rectangle", "keypointlabels": "keypoint"}
TEXT_FIELDS = ("question", "answer", "rationale", "reference_answer", "options")
DIM_FIELDS = ("visual_dims", "reasoning_dims")


def _slug(value: str) -> str:
    return "_".join(str(value).strip().lower().replace("-", " ").split())


def _num(v: Any, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or v != v or abs(v) > 1e6:
        raise ValueError(f"region {what} is not a number")
    return float(v)


def parse_region(r: dict[str, Any], task_data: dict[str, Any], reviewer: str | None = None) -> MarkedEvidence:
    """A rectangle or keypoint on a stack page -> the series, slice, and its corners in voxels and RAS mm.

    Label Studio gives x, y, width, height in percent of the page and the page as ``item_index``; a rotated
    rectangle is taken as the box around its corners."""
    import math

    from curation.review.stack import to_volume

    val = r.get("value") or {}
    kind = REGION_TYPES[str(r.get("type"))]
    labels = val.get(str(r.get("type"))) or []
    label = _slug(labels[0]) if labels else ""
    if label not in EVIDENCE_LABELS:
        raise ValueError(f"evidence label {labels[:1]!r} is not one of {', '.join(EVIDENCE_LABELS)}")
    x, y = _num(val.get("x"), "x") / 100, _num(val.get("y"), "y") / 100
    if kind == "rectangle":
        w, h = _num(val.get("width"), "width") / 100, _num(val.get("height"), "height") / 100
        a = math.radians(_num(val.get("rotation") or 0, "rotation"))
        # rotation is about the top-left corner, in pixels; fractions are scaled by the page's aspect
        ow, oh = (float(r.get("original_width") or 1), float(r.get("original_height") or 1))
        pts = [(x + (dx * w * ow * math.cos(a) - dy * h * oh * math.sin(a)) / ow,
                y + (dx * w * ow * math.sin(a) + dy * h * oh * math.cos(a)) / oh) for dx, dy in
               ((0, 0), (1, 0), (0, 1), (1, 1))]
        box = (min(p[0] for p in pts), min(p[1] for p in pts), max(p[0] for p in pts), max(p[1] for p in pts))
    else:
        box = (x, y, x, y)
    box = tuple(round(min(1.0, max(0.0, c)), 5) for c in box)  # type: ignore[assignment]
    page = r.get("item_index", val.get("item_index"))
    page = 0 if page is None else page
    pages, series = task_data.get("stack_pages") or [], task_data.get("stack_series") or []
    if not isinstance(page, int) or not 0 <= page < max(1, len(pages)):
        raise ValueError(f"region on page {page!r}, the stack has {len(pages)} pages")
    mark: dict[str, Any] = {"reviewer": reviewer, "label": label, "shape": kind, "image_box": box}
    entry = pages[page] if pages else [-1, page, None]
    if isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], int) and 0 <= entry[0] < len(series):
        st = series[entry[0]]
        vmin, mmin = to_volume(st, int(entry[1]), box[0], box[1])
        vmax, mmax = to_volume(st, int(entry[1]), box[2], box[3])
        mark.update(series_id=st.get("series_id"), visit_id=st.get("visit_id"), sequence=st.get("sequence"),
                    plane=st.get("plane"), slice_index=int(entry[1]), position_mm=entry[2],
                    voxel_min=tuple(min(a, b) for a, b in zip(vmin, vmax, strict=True)),
                    voxel_max=tuple(max(a, b) for a, b in zip(vmin, vmax, strict=True)),
                    mm_min=tuple(min(a, b) for a, b in zip(mmin, mmax, strict=True)),
                    mm_max=tuple(max(a, b) for a, b in zip(mmin, mmax, strict=True)))
    else:  # a page of the item's own images (a figure): where on it, no volume
        mark.update(plane="figure", slice_index=int(entry[1]) if isinstance(entry, list) else page)
    return MarkedEvidence(**mark)


def parse_annotation(ann: dict[str, Any], task_data: dict[str, Any] | None = None, *,
                     secret: bytes | None = None) -> ReviewDecision:
    """One Label Studio annotation -> a decision; raises ValueError naming what is wrong. ``secret`` keys the
    reviewer's pseudonym (the project's; None reads ``CURATION_SECRET``)."""
    values: dict[str, Any] = {}
    regions: list[dict[str, Any]] = []
    result = ann.get("result")
    if not isinstance(result, list):
        raise ValueError("annotation has no result list")
    for r in result:
        if not isinstance(r, dict):
            raise ValueError("result entry is not an object")
        name, val = r.get("from_name"), r.get("value") or {}
        if r.get("type") in REGION_TYPES:
            regions.append(r)
        elif "choices" in val:
            choices = val["choices"]
            values[name] = list(choices) if name in DIM_FIELDS else (choices[0] if choices else None)
        elif "text" in val:
            values[name] = "\n".join(val["text"]) if isinstance(val["text"], list) else val["text"]
        elif "rating" in val:
            values[name] = val["rating"]
    visible = _slug(values["evidence_visible"]) if values.get("evidence_visible") else None
    if visible is not None and visible not in EVIDENCE_VISIBLE:
        raise ValueError(f"evidence visible {values['evidence_visible']!r} is not one of yes, no, wrong slice")
    verdict = _slug(values.get("verdict") or "")
    if visible == "no" and verdict in ("", "accept", "accept_with_edits"):
        # the claimed evidence is not in the volume: the item cannot stand, whatever else was chosen
        verdict, values["reject_reason"] = "reject", "evidence_not_visible"
    if verdict not in VERDICTS:
        raise ValueError(f"verdict {values.get('verdict')!r} is not one of {', '.join(VERDICTS)}")
    reason = _slug(values["reject_reason"]) if values.get("reject_reason") else None
    if reason is None and verdict == "reject" and visible == "no":
        reason = "evidence_not_visible"
    if reason is not None and reason not in REJECT_REASONS:
        raise ValueError(f"reject reason {values['reject_reason']!r} is not in the fixed list")
    reviewer = "rev-" + keyed_hash("reviewer", str(ann.get("completed_by")), secret=secret, length=8)
    marks = [parse_region(r, task_data or {}, reviewer) for r in regions]
    edits: dict[str, Any] = {}
    for k in TEXT_FIELDS:
        v = values.get(k)
        if isinstance(v, str) and v.strip():
            edits[k] = [o.strip() for o in v.splitlines() if o.strip()] if k == "options" else " ".join(v.split())
    for k in DIM_FIELDS:
        if k in values:
            edits[k] = sorted(values[k])
    return ReviewDecision(
        reviewer=reviewer, verdict=verdict, reject_reason=reason, edits=edits,
        difficulty=int(values["difficulty"]) if values.get("difficulty") is not None else None,
        comment=values.get("comment"), evidence_visible=visible, evidence=marks,
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
        "evidence_visible": (lambda d: d.evidence_visible, "nominal"),
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
    out.update(evidence_agreement(decisions))
    return out


def box_iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def evidence_agreement(decisions: dict[str, list[ReviewDecision]]) -> dict[str, Any]:
    """Where the first two reviewers of an item marked the evidence of the same series: how often on the same slice,
    and how much their rectangles overlap there (IoU in the slice, which is IoU in mm: the page is a linear map)."""
    same, pairs, ious = 0, 0, []
    for ds in decisions.values():
        if len(ds) < 2:
            continue
        first = [{(m.series_id, m.plane): m for m in reversed(d.evidence)} for d in ds[:2]]  # first mark per series
        for key in sorted(set(first[0]) & set(first[1]), key=str):
            a, b = first[0][key], first[1][key]
            pairs += 1
            if a.slice_index == b.slice_index:
                same += 1
                if a.shape == b.shape == "rectangle":
                    ious.append(box_iou(a.image_box, b.image_box))
    return {"evidence_pairs": pairs, "evidence_same_slice_rate": round(same / pairs, 4) if pairs else None,
            "evidence_rectangle_pairs": len(ious),
            "evidence_rectangle_iou": round(sum(ious) / len(ious), 4) if ious else None}


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


def _decisions(tasks: list[Any], name: str, secret: bytes,
               report: Report) -> tuple[dict[str, list[ReviewDecision]], dict[str, ReviewDecision]]:
    """The reviewers' decisions per item, and the adjudicator's where a task is an adjudication; a malformed task
    or annotation is counted (``name``: the snapshot's file name), a cancelled one skipped."""
    decisions: dict[str, list[ReviewDecision]] = {}
    adjudicated: dict[str, ReviewDecision] = {}
    for n, task in enumerate(tasks):
        item_id = ((task or {}).get("data") or {}).get("item_id") if isinstance(task, dict) else None
        if not item_id:
            report.fail(f"{name}#task{n + 1}", "annotation_malformed", "task has no data.item_id")
            continue
        for ann in task.get("annotations") or []:
            if not isinstance(ann, dict):
                report.fail(f"{name}#task{n + 1}", "annotation_malformed", "annotation is not an object")
                continue
            if ann.get("was_cancelled"):
                continue
            try:
                d = parse_annotation(ann, task.get("data") or {}, secret=secret)
            except (ValueError, TypeError, KeyError, ValidationError) as exc:
                report.fail(f"{name}#task{n + 1}", "annotation_malformed", str(exc))
                continue
            if (task.get("data") or {}).get("adjudication"):
                adjudicated[item_id] = d
            else:
                decisions.setdefault(item_id, []).append(d)
    return decisions, adjudicated


def run(params: ReviewParams, src: Path, annotations: Path, dst: Path, report_path: Path | None = None,
        secret: bytes | None = None) -> Report:
    """``secret``: the project's key for reviewer pseudonyms (the CLI passes it; None reads ``CURATION_SECRET``)."""
    src, dst, annotations = Path(src), Path(dst), Path(annotations)
    secret = project_secret() if secret is None else secret
    if not (src / "items.jsonl").exists():
        raise InputError("no items.jsonl (run the filter stage first)", src)
    report = Report(stage="review")
    tasks = read_json(annotations) if annotations.exists() else []
    if not isinstance(tasks, list):
        raise InputError("annotation snapshot is not a JSON list of tasks", annotations)
    decisions, adjudicated = _decisions(tasks, annotations.name, secret, report)
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
        marks = [] if verdict is None else (final.evidence if final is not None and final.evidence else
                                            [m for d in ds if d.verdict == verdict for m in d.evidence])
        item.review = (Review(decisions=ds, final_verdict=verdict, adjudicated=final is not None, evidence=marks)
                       if ds or final else None)
        report.counts["evidence_marked"] += bool(marks)
        report.counts["evidence_wrong_slice"] += any(d.evidence_visible == "wrong_slice" for d in ds)
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
