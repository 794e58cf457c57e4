"""Radiopaedia case exports: one ``case.json`` per folder with its ordered study images."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from curation.ingest.base import IngestContext, path_digest
from curation.schema import Case, Diagnosis, Figure, Patient, Provenance, SourceName


def ingest(ctx: IngestContext) -> list[Case]:
    cases = []
    used: set[Path] = set()
    for path in sorted(ctx.raw.rglob("*.json")):
        ctx.report.inputs += 1
        rel = ctx.rel_raw(path)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            ctx.report.fail(rel, "json_invalid", str(exc))
            continue
        if not isinstance(doc, dict):
            ctx.report.fail(rel, "json_not_a_case", "top level is not an object")
            continue
        missing = [k for k in ctx.spec["required"] if not doc.get(k)]
        if missing:
            ctx.report.fail(rel, "case_missing_field", f"missing {', '.join(missing)}")
            continue
        case = _case(ctx, path, doc, used)
        if case is not None:
            cases.append(case)
    exts = set(ctx.spec["image_extensions"])
    for path in sorted(ctx.raw.rglob("*")):
        if path.is_file() and path.suffix.lower() in exts and path not in used:
            ctx.report.skip(ctx.rel_raw(path), "unreferenced_image", "image not listed in any case.json")
    return cases


def _case(ctx: IngestContext, path: Path, doc: dict[str, Any], used: set[Path]) -> Case | None:
    spec = ctx.spec
    rid = str(doc.get("id") or path.parent.name)
    case_id = ctx.case_id(rid)
    figures = []
    for s, study in enumerate(doc.get("studies") or []):
        if not isinstance(study, dict):
            ctx.report.fail(ctx.rel_raw(path), "case_malformed", f"study {s + 1} is not an object")
            continue
        caption = " ".join(x for x in [study.get("caption"), study.get("findings")] if x)
        for series in study.get("series") or []:
            images = series.get("images") or []
            for i, img in enumerate(images):
                fig_id = f"s{s + 1}-{series.get('name', 'series')}-{i + 1:03d}"
                label = f"{study.get('modality', 'Image')} {series.get('name', '')} image {i + 1} of {len(images)}"
                label = label.strip()
                src = (path.parent / img).resolve()
                if not src.is_file():
                    ctx.report.incomplete(f"{ctx.rel_raw(path.parent)}/{img}", "image_missing",
                                          f"listed in {ctx.rel_raw(path)} but absent")
                    figures.append(Figure(figure_id=fig_id, label=label, caption=caption, missing=True))
                    continue
                used.add(src)
                stored = ctx.store(src, case_id, f"{fig_id}{src.suffix.lower()}")
                figures.append(Figure(figure_id=fig_id, label=label, caption=caption, path=stored))
    age = None
    m = re.match(r"\s*(\d+)", str(doc.get("age") or ""))
    if m:
        age = float(m.group(1))
    notes = "\n\n".join(x for x in [doc.get("body"), doc.get("discussion")] if x)
    return Case(
        case_id=case_id, source=SourceName.radiopaedia, license=doc.get("license") or spec["license"],
        attribution=spec["attribution"].format(author=doc.get("author") or "unknown author", id=rid),
        title=doc.get("title"),
        patient=Patient.with_age(age, sex=spec["sex"].get(str(doc.get("gender") or ""))),
        presentation=doc.get("presentation") or "", notes=notes, figures=figures,
        diagnosis=Diagnosis(primary=doc.get("title"), differential=list(doc.get("differential") or []),
                            certainty=doc.get("diagnostic_certainty")),
        provenance=Provenance(source_paths=[path_digest(ctx.rel_raw(path))]),
    )
