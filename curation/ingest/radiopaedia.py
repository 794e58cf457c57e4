"""Radiopaedia case exports: one ``case.json`` per folder with its ordered study images."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from curation.figure_kinds import figure_kind
from curation.ingest.base import IngestContext, path_digest
from curation.paths import safe_name, unique_name
from curation.schema import Case, Diagnosis, Figure, Patient, Provenance, SourceName

STR_FIELDS = ("title", "presentation", "body", "discussion", "author", "license", "gender", "diagnostic_certainty")


def ingest(ctx: IngestContext) -> list[Case]:
    cases = []
    used: set[Path] = set()
    files = ctx.files()
    for path in (p for p in files if p.suffix == ".json"):
        ctx.report.inputs += 1
        rel = ctx.rel_raw(path)
        data = ctx.read_document(path)
        if data is None:
            continue
        try:
            doc = json.loads(data.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError, or an integer of 5000 digits
            ctx.report.fail(rel, "json_invalid", str(exc))
            continue
        except RecursionError:
            ctx.report.fail(rel, "json_invalid", "nested too deeply")
            continue
        if not isinstance(doc, dict):
            ctx.report.fail(rel, "json_not_a_case", "top level is not an object")
            continue
        missing = [k for k in ctx.spec["required"] if not doc.get(k)]
        if missing:
            ctx.report.fail(rel, "case_missing_field", f"missing {', '.join(missing)}")
            continue
        problem = _shape_problem(doc, ctx.bounds.max_field_chars, ctx.bounds.max_id_chars)
        if problem:
            ctx.report.fail(rel, "case_malformed", problem)
            continue
        try:
            case = _case(ctx, path, doc, used)
        except (ValidationError, ValueError, TypeError) as exc:
            ctx.report.fail(rel, "case_malformed", f"{type(exc).__name__}: {exc}")
            continue
        if case is not None:
            cases.append(case)
    exts = set(ctx.spec["image_extensions"])
    for path in files:
        if path.suffix.lower() in exts and path.resolve() not in used:
            ctx.report.skip(ctx.rel_raw(path), "unreferenced_image", "image not listed in any case.json")
    return cases


def _shape_problem(doc: dict[str, Any], max_chars: int, max_id: int) -> str | None:
    """Why a case.json does not have the export's shape (fields of the wrong type, oversize text), or None."""
    for key in STR_FIELDS:
        v = doc.get(key)
        if v is not None and not isinstance(v, str):
            return f"{key} is {type(v).__name__}, not text"
        if isinstance(v, str) and len(v) > max_chars:
            return f"{key} has {len(v)} characters (bounds.max_field_chars {max_chars})"
    for key in ("id", "age"):
        v = doc.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, str | int | float)):
            return f"{key} is {type(v).__name__}, not text or a number"
    diff = doc.get("differential")
    if diff is not None and not isinstance(diff, str) and not (
            isinstance(diff, list) and all(isinstance(d, str) for d in diff)):
        return "differential is neither text nor a list of texts"
    studies = doc.get("studies")
    if not isinstance(studies, list):
        return f"studies is {type(studies).__name__}, not a list"
    for s, study in enumerate(studies, 1):
        if not isinstance(study, dict):
            return f"study {s} is {type(study).__name__}, not an object"
        for key in ("caption", "findings", "modality"):
            if study.get(key) is not None and not isinstance(study[key], str):
                return f"study {s} {key} is {type(study[key]).__name__}, not text"
        series_list = study.get("series") or []
        if not isinstance(series_list, list):
            return f"study {s} series is {type(series_list).__name__}, not a list"
        for n, series in enumerate(series_list, 1):
            if not isinstance(series, dict):
                return f"study {s} series {n} is {type(series).__name__}, not an object"
            if series.get("name") is not None and not isinstance(series["name"], str):
                return f"study {s} series {n} name is {type(series['name']).__name__}, not text"
            if len(series.get("name") or "") > max_id:
                return f"study {s} series {n} name has {len(series['name'])} characters (bounds.max_id_chars {max_id})"
            images = series.get("images") or []
            if not isinstance(images, list) or not all(isinstance(i, str) and i for i in images):
                return f"study {s} series {n} images is not a list of file names"
            if any(len(i) > 4 * max_id for i in images):
                return f"study {s} series {n} lists an image path over {4 * max_id} characters"
    return None


def _case(ctx: IngestContext, path: Path, doc: dict[str, Any], used: set[Path]) -> Case | None:
    spec = ctx.spec
    rid = str(doc.get("id") or path.parent.name)
    case_id = ctx.case_id(rid)
    figures = []
    seen_ids: set[str] = set()
    for s, study in enumerate(doc.get("studies") or []):
        caption = " ".join(x for x in [study.get("caption"), study.get("findings")] if x)
        for series in study.get("series") or []:
            images = series.get("images") or []
            # a series name is a name, never a path
            name = safe_name(series.get("name") or "series", max_len=min(64, ctx.bounds.max_id_chars))
            # a series of one image is a key image, which the study's caption describes: what it is (the study's
            # modality, the series' name, the plane) is said, as a teaching file says it of each figure; a stack's
            # slices are not each described, and keep no kind (the lesion's slice is chosen from the report)
            kind = figure_kind(f"{study.get('modality') or ''} {series.get('name') or ''}",
                               study.get("plane") if isinstance(study.get("plane"), str) else None)
            key_image = len(images) == 1 and kind.modality
            said = {**kind.model_dump(exclude={"kind"}), "kind": kind.kind} if key_image else {}
            for i, img in enumerate(images):
                fig_id = unique_name(f"s{s + 1}-{name}-{i + 1:03d}", seen_ids)  # series names repeat
                label = f"{study.get('modality', 'Image')} {series.get('name', '')} image {i + 1} of {len(images)}"
                label = label.strip()
                where = f"{ctx.rel_raw(path)}#{fig_id}"
                src = path.parent / img
                if not ctx.inside_raw(src):
                    ctx.report.inputs += 1  # the file it names is an input that cannot be used
                    ctx.report.fail(where, "outside_raw", f"image {img[:200]!r} resolves outside the raw folder; "
                                                          "not read")
                    figures.append(Figure(figure_id=fig_id, label=label, caption=caption, missing=True, **said))
                    continue
                src = src.resolve()
                if not src.is_file():
                    ctx.report.incomplete(f"{ctx.rel_raw(path.parent)}/{img}", "image_missing",
                                          f"listed in {ctx.rel_raw(path)} but absent")
                    figures.append(Figure(figure_id=fig_id, label=label, caption=caption, missing=True, **said))
                    continue
                used.add(src)
                stored = ctx.store(src, case_id, f"{fig_id}{src.suffix.lower()}")
                figures.append(Figure(figure_id=fig_id, label=label, caption=caption, path=stored, **said))
    age = None
    m = re.match(r"\s*(\d+)", str(doc.get("age") or ""))
    if m:
        age = float(m.group(1))
    notes = "\n\n".join(x for x in [doc.get("body"), doc.get("discussion")] if x)
    differential = doc.get("differential") or []
    if isinstance(differential, str):  # one diagnosis given as text, not its characters
        differential = [differential]
    origin, licence, attribution = _origin(doc, rid, spec)
    return Case(
        case_id=case_id, source=SourceName("radiopaedia"), license=licence, attribution=attribution, origin=origin,
        title=doc.get("title"),
        patient=Patient.with_age(age, sex=spec["sex"].get(str(doc.get("gender") or ""))),
        presentation=doc.get("presentation") or "", notes=notes, figures=figures,
        diagnosis=Diagnosis(primary=doc.get("title"), differential=list(differential),
                            certainty=doc.get("diagnostic_certainty")),
        provenance=Provenance(source_paths=[path_digest(ctx.rel_raw(path))]),
    )


def _origin(doc: dict[str, Any], rid: str, spec: dict[str, Any]) -> tuple[str, str, str]:
    """The case's address, licence and attribution, from the site its ``url`` is on: a case exported in
    Radiopaedia's layout from another teaching file (MedPix) is that site's, under that site's terms, never
    "Radiopaedia.org"; a site the spec does not know is credited by its address, its terms not stated. A licence the
    export itself states comes first."""
    from urllib.parse import urlparse

    url = str(doc.get("url") or "").strip()
    parsed = urlparse(url) if re.match(r"https?://", url) else None
    host = (parsed.hostname or "").lower() if parsed else ""
    author = doc.get("author") or "unknown author"
    if not host or host == "radiopaedia.org" or host.endswith(".radiopaedia.org"):
        return (url or f"Radiopaedia rID {rid}", doc.get("license") or spec["license"],
                spec["attribution"].format(author=author, id=rid))
    site = next((v for k, v in spec["origins"].items() if host == k or host.endswith("." + k)), spec["unknown_origin"])
    return (url, doc.get("license") or site["license"].format(host=host),
            site["attribution"].format(author=author, id=rid, url=url, host=host))
