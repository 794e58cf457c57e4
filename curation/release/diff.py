"""Compare two releases (``curate release diff``) and export a release in other layouts."""

from __future__ import annotations

import base64
import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

from curation.release import read
from curation.schema import ReleaseRow

# an item's identity (case and template, else id), its images compared by hash, and who/what made it are not
# compared; every other column of ReleaseRow is
NOT_COMPARED = {"item_id", "case_id", "template_id", "images", "difficulty", "source", "attribution"}
COMPARED = tuple(c for c in ReleaseRow.columns() if c not in NOT_COMPARED)


def load_rows(release: Path) -> list[dict[str, Any]]:
    """Every row as a dict with its split and the SHA-256 of each embedded image in place of the bytes."""
    out = []
    for row in read.rows(release):
        r = row.model_dump(exclude={"images"})
        r["split"] = row.split
        r["image_sha256"] = [hashlib.sha256(i.data).hexdigest() for i in row.images if i.data]
        out.append(r)
    return out


def _key(r: dict[str, Any]) -> str:
    # an item's identity across versions: its case and the template that made it (content changes keep the key)
    return f"{r['case_id']}|{r['template_id']}" if r.get("template_id") else r["item_id"]


def _dims(r: dict[str, Any]) -> list[str]:
    return [f"task_type:{r['task_type']}", *(f"visual:{d}" for d in r["visual_dims"]),
            *(f"reasoning:{d}" for d in r["reasoning_dims"])]


def diff(a: Path, b: Path) -> dict[str, Any]:
    ra, rb = {_key(r): r for r in load_rows(a)}, {_key(r): r for r in load_rows(b)}
    added = sorted(set(rb) - set(ra))
    removed = sorted(set(ra) - set(rb))
    changed = []
    for k in sorted(set(ra) & set(rb)):
        fields = [f for f in (*COMPARED, "image_sha256", "split") if ra[k].get(f) != rb[k].get(f)]
        if fields:
            changed.append({"key": k, "from": ra[k]["item_id"], "to": rb[k]["item_id"], "fields": fields})
    per_dim: dict[str, Counter[str]] = {"added": Counter(), "removed": Counter(), "changed": Counter()}
    for k in added:
        per_dim["added"].update(_dims(rb[k]))
    for k in removed:
        per_dim["removed"].update(_dims(ra[k]))
    for c in changed:
        per_dim["changed"].update(_dims(rb[c["key"]]))
    return {
        "a": str(a), "b": str(b), "items_a": len(ra), "items_b": len(rb),
        "added": [rb[k]["item_id"] for k in added], "removed": [ra[k]["item_id"] for k in removed], "changed": changed,
        "counts": {"added": len(added), "removed": len(removed), "changed": len(changed),
                   "unchanged": len(set(ra) & set(rb)) - len(changed)},
        "per_dimension": {kind: dict(sorted(c.items())) for kind, c in per_dim.items()},
    }


def diff_lines(d: dict[str, Any]) -> list[str]:
    """``curate release diff``'s table of a ``diff()`` result: the counts, then each dimension's added, removed and
    changed items."""
    c = d["counts"]
    return [f"{d['a']} -> {d['b']}: {c['added']} added, {c['removed']} removed, {c['changed']} changed, "
            f"{c['unchanged']} unchanged",
            *(f"  {kind:<8} {dim:<40} {n}" for kind in ("added", "removed", "changed")
              for dim, n in d["per_dimension"][kind].items())]


def export_neural_medbench(release: Path, out: Path) -> int:
    """Neural-MedBench's JSON layout: one record per case with its text, images as data URIs and questions."""
    from curation.records import write_text

    cases: dict[str, dict[str, Any]] = {}
    for r in read.rows(release):
        c = cases.setdefault(r.case_id, {"case_id": r.case_id, "text": r.context, "images": [], "image_refs": [],
                                         "source": r.source, "license": r.license, "attribution": r.attribution,
                                         "questions": []})
        for img in r.images:
            if not img.data:
                continue
            uri = "data:image/png;base64," + base64.b64encode(img.data).decode()
            if uri not in c["images"]:
                c["images"].append(uri)
        for ref in r.image_refs:
            if ref not in c["image_refs"]:
                c["image_refs"].append(ref)
        if len(r.context) > len(c["text"]):
            c["text"] = r.context
        c["questions"].append({
            "id": r.item_id, "task": r.task_type, "format": r.format, "question": r.question,
            "options": list(r.options), "answer": r.answer, "reference_answer": r.reference_answer,
            "rationale": r.rationale, "dialogue": json.loads(r.turns or "[]"), "visual_dims": list(r.visual_dims),
            "reasoning_dims": list(r.reasoning_dims), "images": len(r.images),
        })
    records = [cases[k] for k in sorted(cases)]
    write_text(out, json.dumps(records, indent=1, ensure_ascii=False) + "\n")
    return len(records)
