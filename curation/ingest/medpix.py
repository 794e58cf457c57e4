"""MedPix teaching cases in the layout of the public MedPix 2.0 dataset: ``Case_topic.json`` (a record per case:
its history, exam, findings, differential, diagnosis), ``Descriptions.json`` (a record per image: caption,
modality, plane, age, sex) and ``images/``. Each image becomes a figure that says what it is (figure_kinds)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from curation.figure_kinds import FigureKind, caption_kind, figure_kind
from curation.ingest.base import IngestContext, path_digest
from curation.paths import safe_name
from curation.schema import Case, Diagnosis, Figure, Patient, Provenance, SourceName


def ingest(ctx: IngestContext) -> list[Case]:
    spec = ctx.spec
    records = _records(ctx, spec["cases_file"])
    descriptions = _records(ctx, spec["descriptions_file"])
    if records is None:
        return []
    by_image: dict[str, dict[str, Any]] = {}
    for n, d in enumerate(descriptions or []):
        name = d.get("image") if isinstance(d, dict) else None
        if not isinstance(name, str) or not name:
            ctx.report.skip(f"{spec['descriptions_file']}#{n + 1}", "description_without_image",
                            "an image record with no image name")
            continue
        by_image[name] = d
    images = _image_files(ctx)
    used: set[Path] = set()
    cases = []
    for n, rec in enumerate(records):
        where = f"{spec['cases_file']}#{n + 1}"
        ctx.report.inputs += 1
        problem = _shape_problem(rec, ctx.bounds.max_field_chars, ctx.bounds.max_id_chars)
        if problem:
            ctx.report.fail(where, "case_malformed", problem)
            continue
        try:
            case = _case(ctx, rec, by_image, images, used, where)
        except (ValidationError, ValueError, TypeError) as exc:
            ctx.report.fail(where, "case_malformed", f"{type(exc).__name__}: {exc}")
            continue
        if case is not None:
            cases.append(case)
    for stem, path in sorted(images.items()):
        if path not in used:
            ctx.report.skip(ctx.rel_raw(path), "unreferenced_image", f"{stem} is not listed by any case")
    return cases


def _records(ctx: IngestContext, name: str) -> list[Any] | None:
    """The records of one of the dataset's JSON files (a list, or an object of records), or None quarantined."""
    found = [p for p in ctx.files() if p.name == name]
    if not found:
        ctx.report.fail(name, "file_missing", f"no {name} in the raw folder (the MedPix 2.0 layout)")
        return None
    path = found[0]
    data = ctx.read_document(path)
    if data is None:
        return None
    try:
        doc = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        ctx.report.fail(ctx.rel_raw(path), "json_invalid", str(exc)[:200])
        return None
    except RecursionError:
        ctx.report.fail(ctx.rel_raw(path), "json_invalid", "nested too deeply")
        return None
    if isinstance(doc, dict):
        doc = list(doc.values())
    if not isinstance(doc, list):
        ctx.report.fail(ctx.rel_raw(path), "json_not_records", "top level is neither a list nor an object")
        return None
    return doc


def _image_files(ctx: IngestContext) -> dict[str, Path]:
    exts = set(ctx.spec["image_extensions"])
    return {p.stem: p.resolve() for p in ctx.files() if p.suffix.lower() in exts}


def _text(value: Any, missing: list[str]) -> str:
    if not isinstance(value, str):
        return ""
    v = value.strip()
    return "" if v in missing else v


_AGE = re.compile(r"\b(\d{1,3})(?:\s*|-)(?:years?|yrs?|y)(?:[- ]?old|/o|\.o\.|o)\b|\b(\d{1,2})[- ]?(?:months?|mos?)"
                  r"(?:[- ]old)?\b|\b(\d{1,3})\s*(?:yo|y/o|y\.o\.)", re.I)


def _stated_age(history: str) -> float | None:
    """The age a history states first ("27 year old", "44yo", "a 5-month-old": 0 years), or None."""
    m = _AGE.search(history)
    if m is None:
        return None
    if m.group(2):
        return int(m.group(2)) / 12
    return float(m.group(1) or m.group(3))


def _shape_problem(rec: Any, max_chars: int, max_id: int) -> str | None:
    if not isinstance(rec, dict):
        return f"record is {type(rec).__name__}, not an object"
    uid = rec.get("U_id")
    if not isinstance(uid, str) or not uid.strip():
        return "no U_id"
    if len(uid) > max_id:
        return f"U_id has {len(uid)} characters (bounds.max_id_chars {max_id})"
    for key in ("Case", "Topic"):
        v = rec.get(key)
        if v is not None and not isinstance(v, dict):
            return f"{key} is {type(v).__name__}, not an object"
        for field, text in (v or {}).items():
            if text is not None and not isinstance(text, str):
                return f"{key}.{field} is {type(text).__name__}, not text"
            if isinstance(text, str) and len(text) > max_chars:
                return f"{key}.{field} has {len(text)} characters (bounds.max_field_chars {max_chars})"
    for key in ("MRI", "TAC"):
        v = rec.get(key)
        if v is not None and not (isinstance(v, list) and all(isinstance(i, str) for i in v)):
            return f"{key} is not a list of image names"
    return None


def _case(ctx: IngestContext, rec: dict[str, Any], by_image: dict[str, dict[str, Any]], images: dict[str, Path],
          used: set[Path], where: str) -> Case | None:
    spec = ctx.spec
    missing = spec["missing_values"]
    fields = {k: _text((rec.get("Case") or {}).get(v), missing) for k, v in spec["case_fields"].items()}
    uid = rec["U_id"].strip()
    if not fields["diagnosis"] and not fields["findings"]:
        ctx.report.fail(where, "case_missing_field", f"{uid}: neither a diagnosis nor findings")
        return None
    case_id = ctx.case_id(uid)
    figures: list[Figure] = []
    ages, sexes = [], []
    names = [name for key in spec["image_lists"] for name in (rec.get(key) or [])]
    for i, name in enumerate(dict.fromkeys(names)):
        desc = by_image.get(name) or {}
        d: dict[str, Any] = desc["Description"] if isinstance(desc.get("Description"), dict) else {}
        modality, image_type = _text(d.get("Modality"), missing), _text(desc.get("Type"), missing)
        plane, caption = _text(d.get("Plane"), missing), _text(d.get("Caption"), missing)
        kind = figure_kind(modality or image_type, plane)
        if kind.kind is None:
            kind = _kind_from_caption(kind, modality, image_type, caption)
        fig_id = f"f{i + 1:02d}" + (f"-{safe_name(kind.kind.lower())}" if kind.kind else "")
        label = " ".join(x for x in (plane, modality) if x) or None
        common = {"figure_id": fig_id, "label": label, "caption": caption, **kind.model_dump(exclude={"kind"}),
                  "kind": kind.kind}
        if not common["modality"]:  # a montage or an unnamed sequence is still MR or CT
            common["modality"] = image_type or None
        ages.append(_text(d.get("Age"), missing))
        sexes.append(_text(d.get("Sex"), missing))
        src = images.get(name)
        if src is None:
            ctx.report.incomplete(f"images/{safe_name(name)}", "image_missing", f"listed by {uid} but absent")
            figures.append(Figure(**common, missing=True))
            continue
        used.add(src)
        stored = ctx.store(src, case_id, f"{fig_id}{src.suffix.lower()}")
        figures.append(Figure(**common, path=stored))
    # the age the history states comes first: the image records' "Age" is 0 where it is unknown, and whole years
    # for an infant ("a 5-month-old" recorded as 1)
    age = _stated_age(fields["history"])
    if age is None:
        age = next((float(a) for a in ages if a.replace(".", "", 1).isdigit() and float(a) > 0), None)
    sex = next((spec["sex"][s] for s in sexes if s in spec["sex"]), None)
    # the history and the examination are two fields: each ends its sentence ("Skull pain" + "Noncontributory")
    presentation = " ".join(x if x.rstrip().endswith((".", "!", "?")) else f"{x.rstrip()}."
                            for x in (fields["history"], fields["exam"]) if x)
    sections = {k: fields[k] for k in ("findings", "exam", "treatment", "discussion") if fields[k]}
    return Case(
        case_id=case_id, source=SourceName("medpix"), license=spec["license"],
        attribution=spec["attribution"].format(id=uid), origin=f"MedPix {uid}", title=fields["title"] or None,
        patient=Patient.with_age(age, sex=sex), presentation=presentation, sections=sections, figures=figures,
        diagnosis=Diagnosis(primary=fields["diagnosis"] or None,
                            differential=[fields["differential"]] if fields["differential"] else [],
                            certainty=fields["diagnosis_by"] or None),
        provenance=Provenance(source_paths=[path_digest(f"{spec['cases_file']}#{uid}")]),
    )


# a label that names no one image ("CT - Montage", "MR - Montage of Images", "Drawing"): its caption may describe
# several images, and is not read for one kind
_NOT_ONE_IMAGE = re.compile(r"montage|drawing", re.I)


def _kind_from_caption(kind: FigureKind, modality: str, family: str, caption: str) -> FigureKind:
    """Where the image's label names its modality but no sequence ("MRI", "MR - Other Pulse Seq."), the kind its
    caption names, where the caption describes one image of one kind of that modality ("Axial T1W MR after
    Gadolinium. On the left, ..."); else ``kind`` as the label left it."""
    if not caption or _NOT_ONE_IMAGE.search(modality):
        return kind
    said = caption_kind(caption)
    if said.kind is None or said.modality != family.upper()[:2] \
            or (said.plane and kind.plane and said.plane != kind.plane):
        return kind  # (a caption of another modality or plane than the label's describes another image)
    return said.model_copy(update={"plane": kind.plane or said.plane})
