"""Compare two releases (``curate release diff``) and export a release in other layouts."""

from __future__ import annotations

import base64
import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from curation.errors import InputError

COMPARED = ("question", "context", "options", "answer", "answer_index", "reference_answer", "rationale", "turns",
            "visual_dims", "reasoning_dims", "task_type", "format", "review_status", "review_verdict", "license",
            "image_refs", "evidence")


def load_rows(release: Path) -> list[dict[str, Any]]:
    files = sorted(Path(release, "data").glob("*.parquet"))
    if not files:
        raise InputError("no Parquet files under data/ (is this a release folder?)", release)
    rows = []
    for f in files:
        split = f.name.split("-")[0]
        for r in pq.read_table(f).to_pylist():
            r["split"] = split
            images = r.pop("images") or []
            r["image_sha256"] = [hashlib.sha256(i["bytes"]).hexdigest() for i in images if i.get("bytes")]
            rows.append(r)
    return rows


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


def export_neural_medbench(release: Path, out: Path) -> int:
    """Neural-MedBench's JSON layout: one record per case with its text, images as data URIs and questions."""
    from curation.records import write_text

    files = sorted(Path(release, "data").glob("*.parquet"))
    if not files:
        raise InputError("no Parquet files under data/ (is this a release folder?)", release)
    cases: dict[str, dict[str, Any]] = {}
    for f in files:
        for r in pq.read_table(f).to_pylist():
            c = cases.setdefault(r["case_id"], {"case_id": r["case_id"], "text": r["context"], "images": [],
                                                "image_refs": [], "source": r["source"], "license": r["license"],
                                                "attribution": r["attribution"], "questions": []})
            for img in r["images"] or []:
                uri = "data:image/png;base64," + base64.b64encode(img["bytes"]).decode()
                if uri not in c["images"]:
                    c["images"].append(uri)
            for ref in r["image_refs"] or []:
                if ref not in c["image_refs"]:
                    c["image_refs"].append(ref)
            if len(r["context"] or "") > len(c["text"] or ""):
                c["text"] = r["context"]
            c["questions"].append({
                "id": r["item_id"], "task": r["task_type"], "format": r["format"], "question": r["question"],
                "options": list(r["options"] or []), "answer": r["answer"],
                "reference_answer": r["reference_answer"], "rationale": r["rationale"],
                "dialogue": json.loads(r["turns"] or "[]"), "visual_dims": list(r["visual_dims"] or []),
                "reasoning_dims": list(r["reasoning_dims"] or []), "images": len(r["images"] or []),
            })
    records = [cases[k] for k in sorted(cases)]
    write_text(out, json.dumps(records, indent=1, ensure_ascii=False) + "\n")
    return len(records)
