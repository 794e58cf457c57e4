"""BIDS datasets (OpenNeuro and the like): ``sub-*/[ses-*/]anat/*.nii[.gz]`` with their JSON sidecars, read with
pybids. ``participants.tsv`` gives age and sex; each subject's ``sub-*_sessions.tsv`` (``acq_time``) the days
between its sessions (the dates themselves are not kept); ``dataset_description.json`` the licence and the credit
(name, authors, DOI). A lesion mask under ``derivatives/`` (the spec's ``lesion_masks``) goes with the raw images of
its subject and session on the same voxel grid, as the truth of where their lesions are; other derivatives are
counted and left out."""

from __future__ import annotations

import csv
import json
from datetime import date
from pathlib import Path
from typing import Any

from curation.ingest.base import IngestContext, path_digest, read_sidecar, to_float
from curation.ingest.sequences import sequence_of_suffix
from curation.ingest.volumes import inspect_volume
from curation.parallel import pmap
from curation.paths import safe_name
from curation.schema import Case, Diagnosis, Patient, Provenance, Series, SourceName, Visit


def ingest(ctx: IngestContext) -> list[Case]:
    from bids import BIDSLayout

    spec = ctx.spec
    try:
        layout = BIDSLayout(str(ctx.raw), validate=False)
    except Exception as exc:  # pybids raises its own errors on a folder that is no BIDS dataset
        ctx.report.fail(".", "not_bids", f"{type(exc).__name__}: {str(exc)[:200]}")
        return []
    licence, attribution, origin = _credit(ctx, spec)
    participants = _table(ctx, ctx.raw / "participants.tsv", "participant_id")
    images = [f for f in layout.get(datatype="anat", extension=[".nii", ".nii.gz"], return_type="object")]
    masks = _lesion_masks(ctx, spec["lesion_masks"])
    # the files ingest may read (a symlink out of the raw folder is reported by the walk, once)
    known = set(ctx.files())
    usable = [(f, path) for f in images if (path := _under_raw(ctx, f.path)) in known]
    infos = pmap(inspect_volume, [(str(p), ctx.bounds.max_volume_bytes) for _, p in usable], workers=ctx.workers,
                 scheduler=ctx.scheduler)
    by_subject: dict[str, list[tuple[Any, Path, Any]]] = {}
    for (f, path), info in zip(usable, infos, strict=True):
        ctx.report.inputs += 1
        if ctx.report.record(ctx.rel_raw(path), info):
            by_subject.setdefault(f.entities["subject"], []).append((f, path, info.value))
    matched = _match_masks(ctx, masks, by_subject)
    return [_case(ctx, sub, files, participants.get(f"sub-{sub}") or participants.get(sub), licence, attribution,
                  origin, matched) for sub, files in sorted(by_subject.items())]


def _lesion_masks(ctx: IngestContext, rule: dict[str, list[str]]) -> list[tuple[Path, dict[str, Any]]]:
    """The lesion masks under ``derivatives/`` with their BIDS entities; every other derivative volume is counted as
    not read, with why."""
    from bids.layout import parse_file_entities

    found = []
    for path in ctx.files():
        rel = ctx.rel_raw(path)
        if not (rel.startswith("derivatives/") and path.name.endswith((".nii", ".nii.gz"))):
            continue
        ent = parse_file_entities("/" + rel)
        named = " ".join(str(ent.get(k) or "") for k in ("desc", "label")).lower()
        if ent.get("suffix") not in rule["suffixes"] or not any(w in named for w in rule["words"]):
            ctx.report.skip(rel, "derivative_not_read", "not a lesion mask (its suffix, desc or label)")
        elif any(w in named for w in rule["not_words"]):
            ctx.report.skip(rel, "derivative_not_read", "a mask of a change between sessions, not of one image")
        elif not ent.get("subject") or ent.get("space") not in (None, "orig", "individual", "native"):
            ctx.report.skip(rel, "derivative_not_read", "no subject, or in a template space, not the image's own")
        else:
            found.append((path, ent))
    return found


def _match_masks(ctx: IngestContext, masks: list[tuple[Path, dict[str, Any]]],
                 by_subject: dict[str, list[tuple[Any, Path, Any]]]) -> dict[Path, Path]:
    """Raw image -> its lesion mask: of its subject, of its session (a mask without one: of a subject with one
    session), of the same acquisition and run where the mask names them, and on the image's voxel grid. A mask that
    fits none of them, or two masks that fit one image, are counted and left out."""
    import nibabel as nib
    import numpy as np

    out: dict[Path, Path] = {}
    for path, ent in masks:
        rel = ctx.rel_raw(path)
        images = by_subject.get(str(ent["subject"]), [])
        sessions = {f.entities.get("session") for f, _, _ in images}
        if ent.get("session") is None and len(sessions) > 1:
            ctx.report.skip(rel, "mask_unmatched", "no session named, and its subject has several")
            continue
        try:
            grid: Any = nib.load(str(path))  # a NIfTI image (nibabel types it as any file-based one)
            shape, affine = tuple(grid.shape[:3]), grid.affine
        except Exception as exc:  # nibabel raises many types on a damaged header
            ctx.report.fail(rel, "mask_unreadable", type(exc).__name__)
            continue
        fits = []
        for f, img_path, _ in images:
            if any(ent.get(k) is not None and f.entities.get(k) != ent.get(k)
                   for k in ("session", "acquisition", "run")):
                continue
            raw: Any = nib.load(str(img_path))
            if tuple(raw.shape[:3]) == shape and np.allclose(raw.affine, affine, atol=1e-3):
                fits.append(img_path)
        if not fits:
            ctx.report.skip(rel, "mask_unmatched", "no raw image of its subject and session on its voxel grid")
            continue
        ctx.report.inputs += 1
        for img_path in fits:
            if img_path in out:
                ctx.report.skip(rel, "mask_unmatched", f"a second lesion mask for {ctx.rel_raw(img_path)}")
                continue
            out[img_path] = path
    return out


def _under_raw(ctx: IngestContext, found: str) -> Path:
    """A path pybids gives (absolute) as the same file under the raw folder as ingest names it."""
    p = Path(found)
    for root in (ctx.raw.absolute(), ctx.raw.resolve()):
        try:
            return ctx.raw / p.relative_to(root)
        except ValueError:
            continue
    return p


def _case(ctx: IngestContext, sub: str, files: list[tuple[Any, Path, Any]], row: dict[str, str] | None, licence: str,
          attribution: str, origin: str, masks: dict[Path, Path]) -> Case:
    spec = ctx.spec
    case_id = ctx.case_id(sub)
    days = _session_days(ctx, sub)
    visits: dict[str, Visit] = {}
    for f, path, info in sorted(files, key=lambda x: str(x[1])):
        ses = f.entities.get("session") or "1"
        visit = visits.setdefault(ses, Visit(visit_id=f"ses-{safe_name(ses)}", days_from_baseline=days.get(ses)))
        suffix = f.entities.get("suffix") or ""
        rel = Path(ctx.rel_raw(path))
        stored = [ctx.store(path, case_id, rel.as_posix())]
        sidecar: dict[str, Any] = {}
        side = Path(str(path).replace(".nii.gz", ".json").replace(".nii", ".json"))
        if side.exists():
            read = read_sidecar(ctx, side)
            if ctx.report.record(ctx.rel_raw(side), read):
                sidecar = read.value
                stored.append(ctx.store(side, case_id, rel.with_name(side.name).as_posix()))
        extra = "-".join(f"{k}-{f.entities[k]}" for k in ("acquisition", "run") if f.entities.get(k))
        mask = masks.get(path)
        stored_mask = (ctx.store(mask, case_id, ctx.rel_raw(mask)) if mask is not None else None)
        visit.series.append(Series(
            series_id="-".join(x for x in (visit.visit_id, "anat", safe_name(suffix), extra) if x), format="nifti",
            sequence=sequence_of_suffix(suffix), description=suffix, files=stored, shape=tuple(info.shape[:3]),
            sidecar=sidecar, lesion_mask=stored_mask))
    patient = Patient()
    if row:
        try:
            age: float | None = to_float(row.get("age") or "")
        except ValueError:
            age = None
        patient = Patient.with_age(age, sex=spec["sex"].get(str(row.get("sex") or "").strip()))
    ordered = sorted(visits.values(), key=lambda v: (v.days_from_baseline is None, v.days_from_baseline or 0,
                                                     v.visit_id))
    return Case(case_id=case_id, source=SourceName("bids"), license=licence, attribution=attribution, origin=origin,
                patient=patient, visits=ordered, diagnosis=Diagnosis(),
                provenance=Provenance(source_paths=sorted({path_digest(f"sub-{sub}")})))


def _credit(ctx: IngestContext, spec: dict[str, Any]) -> tuple[str, str, str]:
    """Licence, attribution and origin from ``dataset_description.json`` (name, authors, DOI, licence)."""
    path = ctx.raw / "dataset_description.json"
    doc: dict[str, Any] = {}
    if path.is_file() and ctx.inside_raw(path):
        ctx.report.inputs += 1
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
            doc = loaded if isinstance(loaded, dict) else {}
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            ctx.report.fail("dataset_description.json", "description_invalid", f"{type(exc).__name__}")
    name = doc["Name"] if isinstance(doc.get("Name"), str) and doc["Name"].strip() else ctx.raw.name
    listed = doc.get("Authors")
    authors = [a for a in listed if isinstance(a, str)] if isinstance(listed, list) else []
    doi = doc["DatasetDOI"].strip() if isinstance(doc.get("DatasetDOI"), str) else ""
    origin = doi if doi.startswith("http") else (f"https://doi.org/{doi.removeprefix('doi:')}" if doi else name)
    licence = doc["License"] if isinstance(doc.get("License"), str) and doc["License"].strip() else spec["license"]
    attribution = spec["attribution"].format(name=name, authors="; ".join(authors) or "not stated",
                                             origin=origin)
    return licence, attribution, origin


def _table(ctx: IngestContext, path: Path, key: str) -> dict[str, dict[str, str]]:
    """A BIDS TSV's rows by ``key`` (empty where the file is absent or unreadable, counted)."""
    if not path.is_file() or not ctx.inside_raw(path):
        return {}
    ctx.report.inputs += 1
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            rows = list(csv.DictReader(fh, delimiter="\t"))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        ctx.report.fail(ctx.rel_raw(path), "tsv_unreadable", type(exc).__name__)
        return {}
    return {r[key]: r for r in rows if r.get(key)}


def _session_days(ctx: IngestContext, sub: str) -> dict[str, int]:
    """Days from the subject's first session, by session label, from ``acq_time`` in its sessions table."""
    rows = _table(ctx, ctx.raw / f"sub-{sub}" / f"sub-{sub}_sessions.tsv", "session_id")
    when: dict[str, date] = {}
    for sid, r in rows.items():
        try:
            when[sid.removeprefix("ses-")] = date.fromisoformat((r.get("acq_time") or "")[:10])
        except ValueError:
            ctx.report.skip(f"sub-{sub}/sub-{sub}_sessions.tsv#{sid}", "acq_time_unreadable",
                            "no ISO date in acq_time: the session's interval is not known")
    if not when:
        return {}
    first = min(when.values())
    return {k: (d - first).days for k, d in when.items()}
