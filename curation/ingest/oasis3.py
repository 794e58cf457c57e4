"""OASIS-3: sessions ``OAS3xxxx_MR_dNNNN/anat*/sub-*_ses-*_<suffix>.nii.gz`` with JSON sidecars
plus the demographics and UDS/CDR visit CSVs keyed by ``days_to_visit``."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from curation.ingest.base import IngestContext, path_digest, read_csv_rows, read_sidecar, to_float
from curation.ingest.sequences import sequence_of_suffix
from curation.ingest.volumes import VolumeInfo, volumes_by_session
from curation.schema import Case, Diagnosis, Patient, Provenance, Series, SourceName, Visit

SUFFIX = re.compile(r"_(?P<suffix>[A-Za-z0-9]+)\.nii(\.gz)?$")


def ingest(ctx: IngestContext) -> list[Case]:
    spec = ctx.spec
    session_re = re.compile(spec["session_pattern"])
    demo: dict[str, dict[str, Any]] = {}
    for path in ctx.find(spec["demographics_csv"]):
        ctx.report.inputs += 1
        for row in read_csv_rows(ctx, path, spec["demographics_columns"], spec["required_demographics"],
                                 {"age": to_float, "education_years": to_float}):
            demo[row["subject_id"]] = row
    clinical: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for path in ctx.find(spec["clinical_csv"]):
        ctx.report.inputs += 1
        for row in read_csv_rows(ctx, path, spec["clinical_columns"], spec["required_clinical"],
                                 {"day": lambda v: int(float(v)), "mmse": to_float, "cdr": to_float,
                                  "cdr_sum": to_float}):
            clinical[row["subject_id"]].append(row)

    volumes: list[str] = []
    for path in ctx.files():
        if path.suffix in (".csv", ".json"):
            continue
        parts = path.relative_to(ctx.raw).parts
        if not (path.name.endswith(".nii.gz") or path.name.endswith(".nii")) or not session_re.match(parts[0]):
            ctx.report.skip(ctx.rel_raw(path), "not_in_image_layout", "not a NIfTI under OAS3xxxx_MR_dNNNN/")
            continue
        volumes.append(str(path))
    by_session = volumes_by_session(ctx, volumes)

    subjects: dict[str, list[str]] = defaultdict(list)
    for session in by_session:
        m = session_re.match(session)
        if m:
            subjects[m.group(1)].append(session)
    for subj in set(demo) | set(clinical):
        subjects.setdefault(subj, [])
    return [_case(ctx, s, sorted(sess), demo.get(s), clinical.get(s, []), by_session)
            for s, sess in sorted(subjects.items())]


def _case(ctx: IngestContext, subject: str, sessions: list[str], demo: dict[str, Any] | None,
          clinical: list[dict[str, Any]], images: dict[str, list[tuple[str, VolumeInfo]]]) -> Case:
    spec = ctx.spec
    session_re = re.compile(spec["session_pattern"])
    case_id = ctx.case_id(subject)
    clinical = sorted(clinical, key=lambda r: r["day"])
    window = int(spec["visit_match_window_days"])
    visits = []
    for session in sessions:
        day = int(session_re.match(session).group(2))  # type: ignore[union-attr]
        near = min(clinical, key=lambda r: abs(r["day"] - day), default=None)
        if near is not None and abs(near["day"] - day) > window:
            near = None
        scores: dict[str, float | str | None] = {}
        dx = None
        if near is not None:
            scores = {k: near[k] for k in ("mmse", "cdr", "cdr_sum") if near.get(k) is not None}
            scores = {{"mmse": "MMSE", "cdr": "CDR", "cdr_sum": "CDRSUM"}[k]: v for k, v in scores.items()}
            raw_dx = (near.get("dx") or "").lower()
            dx = spec["diagnosis"].get(raw_dx)
            if dx is None and near.get("cdr") is not None:
                dx = spec["diagnosis_from_cdr"].get(f"{near['cdr']:.1f}")
        visit = Visit(visit_id=f"d{day:04d}", days_from_baseline=day, diagnosis=dx, scores=scores)
        for vol, info in sorted(images.get(session, [])):
            vp = Path(vol)
            m = SUFFIX.search(vp.name)
            suffix = m.group("suffix") if m else ""
            rel_dir = Path(*vp.relative_to(ctx.raw).parts[:-1])
            files = [ctx.store(vp, case_id, f"{rel_dir.as_posix()}/{vp.name}")]
            sidecar_path = Path(str(vp).replace(".nii.gz", ".json").replace(".nii", ".json"))
            sidecar: dict[str, Any] = {}
            if sidecar_path.exists():
                read = read_sidecar(ctx, sidecar_path)
                if ctx.report.record(ctx.rel_raw(sidecar_path), read):
                    sidecar = read.value
                    files.append(ctx.store(sidecar_path, case_id, f"{rel_dir.as_posix()}/{sidecar_path.name}"))
            visit.series.append(Series(
                series_id=f"{visit.visit_id}-{rel_dir.parts[-1]}-{suffix}", format="nifti",
                sequence=sequence_of_suffix(suffix), description=suffix, files=files,
                shape=tuple(info.shape[:3]), sidecar=sidecar,
            ))
        visits.append(visit)
    patient = Patient()
    ehr: dict[str, float | str | None] = {}
    if demo:
        patient = Patient.with_age(demo.get("age"), sex=spec["sex"].get(str(demo.get("sex") or "")),
                                   education_years=demo.get("education_years"),
                                   handedness=demo["handedness"] if demo.get("handedness") in ("R", "L", "A") else None)
        apoe = str(demo.get("apoe") or "")
        if apoe.isdigit():
            ehr["APOE"] = apoe
            ehr["APOE4"] = float(apoe.count("4"))
    if visits and visits[0].scores:
        ehr.update(visits[0].scores)
    primary = next((v.diagnosis for v in reversed(visits) if v.diagnosis), None)
    return Case(case_id=case_id, source=SourceName("oasis3"), license=spec["license"], attribution=spec["attribution"],
                patient=patient, ehr=ehr, visits=visits, diagnosis=Diagnosis(primary=primary),
                provenance=Provenance(source_paths=sorted(path_digest(s) for s in sessions)))
