"""OASIS-1: ``OAS1_xxxx_MR1/RAW/*.hdr|.img`` (Analyze 7.5) plus oasis_cross-sectional.csv.

``_MR2`` sessions are the reliability rescans: they join their subject's case as a second visit
(days from baseline from the ``Delay`` column) marked ``reliability_rescan`` so temporal templates
do not mistake them for disease progression.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from curation.ingest.base import IngestContext, numeric_scores, path_digest, read_csv_rows, to_float
from curation.ingest.volumes import VolumeInfo, volumes_by_session
from curation.schema import Case, Diagnosis, Patient, Provenance, Series, SourceName, Visit


def ingest(ctx: IngestContext) -> list[Case]:
    spec = ctx.spec
    session_re = re.compile(spec["session_pattern"])
    rows: dict[str, dict[str, Any]] = {}
    csvs = ctx.find(spec["clinical_csv"])
    if not csvs:
        ctx.report.fail(".", "clinical_csv_missing", f"no file matching {spec['clinical_csv']}")
    for csv_path in csvs:
        ctx.report.inputs += 1
        validators: dict[str, Callable[[str], Any]] = {"age": to_float, "education_years": to_float,
                                                        "cdr": to_float, "mmse": to_float, "delay": to_float}
        for row in read_csv_rows(ctx, csv_path, spec["columns"], spec["required"], validators):
            if not session_re.match(row["session_id"]):
                ctx.report.fail(f"{ctx.rel_raw(csv_path)}:{row['_line']}", "csv_bad_row",
                                f"ID {row['session_id'][:20]!r} is not OAS1_NNNN_MRn")
                continue
            rows[row["session_id"]] = row

    headers: list[str] = []
    for path in ctx.files():
        rel = ctx.rel_raw(path)
        parts = path.relative_to(ctx.raw).parts
        if path.suffix == ".csv" or path.suffix == ".xlsx":
            continue
        if path.suffix == ".img":
            continue  # read with its header
        if path.suffix != ".hdr" or len(parts) < 3 or not session_re.match(parts[0]):
            ctx.report.skip(rel, "not_in_image_layout", "not an Analyze header under OAS1_xxxx_MRn/")
            continue
        if parts[1] != "RAW":
            ctx.report.skip(rel, "derived_image", "only RAW scans are ingested")
            continue
        img_part = path.with_suffix(".img")
        if (img_part.exists() or img_part.is_symlink()) and not ctx.inside_raw(img_part):
            ctx.report.inputs += 1
            ctx.report.fail(rel, "outside_raw", f"its image {img_part.name} resolves outside the raw folder; not read")
            continue
        headers.append(str(path))

    by_session = volumes_by_session(ctx, headers)

    subjects: dict[str, list[str]] = defaultdict(list)
    for session in sorted(set(rows) | set(by_session)):
        m = session_re.match(session)
        if m:
            subjects[m.group(1)].append(session)
    return [_case(ctx, subj, sessions, rows, by_session) for subj, sessions in sorted(subjects.items())]


def _case(ctx: IngestContext, subject: str, sessions: list[str], rows: dict[str, dict[str, Any]],
          images: dict[str, list[tuple[str, VolumeInfo]]]) -> Case:
    spec = ctx.spec
    case_id = ctx.case_id(subject)
    visits = []
    base_row = rows.get(sessions[0])
    for session in sorted(sessions):
        row = rows.get(session)
        rescan = not session.endswith("MR1")
        delay = row.get("delay") if row else None
        scores = numeric_scores(row["_raw"], spec["scores"]) if row else {}
        if rescan:
            scores["reliability_rescan"] = "yes"
        cdr = row.get("cdr") if row else None
        dx = spec["diagnosis_from_cdr"].get(f"{cdr:.1f}") if cdr is not None else None
        visit = Visit(visit_id=session.rsplit("_", 1)[1], days_from_baseline=int(delay) if rescan and delay else 0,
                      diagnosis=dx, scores=scores)
        for n, (hdr, info) in enumerate(sorted(images.get(session, []))):
            hdr_p = Path(hdr)
            files = [ctx.store(hdr_p, case_id, f"{session}/{hdr_p.name}")]
            img = hdr_p.with_suffix(".img")
            if img.exists() and ctx.inside_raw(img):
                files.append(ctx.store(img, case_id, f"{session}/{img.name}"))
            visit.series.append(Series(
                series_id=f"{visit.visit_id}-mpr{n + 1}", format="analyze", sequence="T1w",
                description="MPRAGE", files=files, shape=tuple(info.shape[:3]),
            ))
        visits.append(visit)
    patient = Patient()
    ehr: dict[str, float | str | None] = {}
    if base_row:
        sex, hand = base_row.get("sex"), base_row.get("handedness")
        patient = Patient.with_age(base_row.get("age"), sex=sex if sex in ("M", "F") else None,
                                   handedness=hand if hand in ("R", "L", "A") else None,
                                   education_years=base_row.get("education_years"))
        ehr = numeric_scores(base_row["_raw"], spec["scores"])
    primary = next((v.diagnosis for v in visits if v.diagnosis), None)
    return Case(case_id=case_id, source=SourceName("oasis1"), license=spec["license"], attribution=spec["attribution"],
                patient=patient, ehr=ehr, visits=visits, diagnosis=Diagnosis(primary=primary),
                provenance=Provenance(source_paths=sorted(path_digest(s) for s in sessions)))
