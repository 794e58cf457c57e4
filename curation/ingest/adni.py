"""ADNI: LONI IDA tree ``ADNI/<PTID>/<series description>/<date>/<image id>/*.dcm`` plus ADNIMERGE.csv."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Any

from curation.ingest.base import IngestContext, numeric_scores, read_csv_rows, to_float
from curation.ingest.dicomscan import ScannedDicom, inspect_dicom, instance_identity, uid_collisions
from curation.jsonio import batched
from curation.names import is_utf8_name
from curation.parallel import pmap
from curation.report import Outcome
from curation.schema import Case, Diagnosis, Patient, Provenance, Series, SourceName, Visit

PTID = re.compile(r"^\d{3}_S_\d{4}$")
STAMP = re.compile(r"^(\d{4}-\d{2}-\d{2})_\d{2}_\d{2}_\d{2}(\.\d+)?$")


def _date(value: str) -> date:
    return datetime.strptime(value[:10], "%Y-%m-%d").date()


def sequence_for(description: str, rules: list[dict[str, str]]) -> str | None:
    for rule in rules:
        if re.search(rule["pattern"], description, flags=re.IGNORECASE):
            return rule["sequence"]
    return None


def _scan_folder(task: tuple[str, list[str]]) -> tuple[str, list[tuple[str, Outcome[ScannedDicom]]]]:
    """One image folder's files (listed, and checked inside the raw folder, by the caller)."""
    folder, files = task
    return folder, [(f, inspect_dicom(f)) for f in sorted(files)]


def ingest(ctx: IngestContext) -> Iterator[Case]:
    spec = ctx.spec
    cols = spec["columns"]
    visits_by_ptid: dict[str, list[dict[str, Any]]] = defaultdict(list)
    csvs = ctx.find(spec["clinical_csv"])
    if not csvs:
        ctx.report.fail(".", "clinical_csv_missing", f"no file matching {spec['clinical_csv']}")
    for csv_path in csvs:
        ctx.report.inputs += 1
        validators: dict[str, Callable[[str], Any]] = {"exam_date": _date, "age": to_float, "education_years": to_float}
        for row in read_csv_rows(ctx, csv_path, cols, spec["required"], validators):
            if not PTID.match(row["subject_id"]):
                ctx.report.fail(f"{ctx.rel_raw(csv_path)}:{row['_line']}", "csv_bad_row",
                                f"PTID {row['subject_id'][:20]!r} is not NNN_S_NNNN")
                continue
            visits_by_ptid[row["subject_id"]].append(row)

    # image folders: ADNI/<PTID>/<desc>/<stamp>/<image id>/. Participants are read a batch at a time and their
    # cases yielded, so a large download never has all its paths or headers in memory at once.
    image_root = ctx.raw / "ADNI" if (ctx.raw / "ADNI").is_dir() else ctx.raw
    for path in sorted(image_root.iterdir()):
        if path.is_file() and ctx.inside_raw(path) and is_utf8_name(path.name) and path.suffix.lower() != ".csv":
            ctx.report.skip(ctx.rel_raw(path), "not_in_image_layout", "file outside <PTID>/<desc>/<date>/<id>/")
    ida = _ida_metadata(ctx)
    # a symlinked or badly named participant folder is quarantined by the walk, never read
    participants = sorted(p for p in image_root.iterdir() if p.is_dir() and not p.is_symlink()
                          and is_utf8_name(p.name))
    seen: set[str] = set()
    ida_used: set[str] = set()
    # a collision across participant batches must set aside both files, and a batch's cases are out before the next
    # is read: a larger download is checked in a header pass first; one batch is checked from its own scan
    collisions = _collisions(ctx, image_root, participants) if len(participants) > PARTICIPANTS_PER_BATCH else None
    for batch in batched(participants, PARTICIPANTS_PER_BATCH):
        series_by_ptid = _scan_participants(ctx, image_root, batch, collisions)
        for pdir in batch:
            ptid = pdir.name
            seen.add(ptid)
            yield _build_case(ctx, ptid, visits_by_ptid.get(ptid, []), series_by_ptid.get(ptid, []), ida, ida_used)
    for ptid in sorted(set(visits_by_ptid) - seen):  # clinical rows without images
        yield _build_case(ctx, ptid, visits_by_ptid[ptid], [], ida, ida_used)
    for image_id in sorted(set(ida) - ida_used):
        ctx.report.skip(ida[image_id]["_path"], "ida_xml_without_series", f"no image folder {image_id}")


PARTICIPANTS_PER_BATCH = 64


def _ida_metadata(ctx: IngestContext) -> dict[str, dict[str, Any]]:
    """Per-image IDA metadata XML -> {"I<uid>": {field: value, term: value, "_path": rel}}; bad XML is quarantined."""
    spec = ctx.spec.get("ida_xml")
    if not spec:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for path in ctx.find(spec["pattern"]):
        rel = ctx.rel_raw(path)
        root = ctx.read_xml(path)
        if root is None:
            continue
        uid = (root.findtext(spec["image_uid"]) or "").strip()
        if not uid:
            ctx.report.fail(rel, "ida_xml_no_image_uid", f"no {spec['image_uid']}")
            continue
        meta: dict[str, Any] = {"_path": rel}
        for name, xpath in spec["fields"].items():
            value = (root.findtext(xpath) or "").strip()
            if value:
                meta[name] = value
        for term in root.findall(spec["protocol_terms"]):
            name = term.get("term") or ""
            if name in spec["keep_terms"] and (term.text or "").strip():
                meta[name] = (term.text or "").strip()
        out["I" + uid.removeprefix("I")] = meta
    return out


def _image_folders(ctx: IngestContext, image_root: Path, participants: list[Path],
                   report: bool = True) -> dict[str, list[str]]:
    """``{image folder: its files}`` at ``<PTID>/<desc>/<date>/<id>/``; other files are listed (when ``report``)."""
    folders: dict[str, list[str]] = defaultdict(list)
    for pdir in participants:
        for path in sorted(ctx.walk(pdir)):
            depth = len(path.relative_to(image_root).parts)
            if depth != 5:
                if report:
                    ctx.report.skip(ctx.rel_raw(path), "not_in_image_layout",
                                    "file outside <PTID>/<desc>/<date>/<id>/")
            else:
                folders[str(path.parent)].append(str(path))
    return folders


def _identities(task: tuple[str, list[str]]) -> list[tuple[str, tuple[str, str, str] | None]]:
    return [(f, instance_identity(f)) for f in sorted(task[1])]


def _collisions(ctx: IngestContext, image_root: Path, participants: list[Path]) -> dict[str, tuple[str, str]]:
    """Files whose SOPInstanceUID another file of the download also carries (``dicomscan.uid_collisions``), keyed by
    path relative to the raw folder, from a pass over the headers of every participant before any case is built."""
    owners: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    folders = _image_folders(ctx, image_root, participants, report=False)
    for result in pmap(_identities, sorted(folders.items()), workers=ctx.workers, scheduler=ctx.scheduler):
        for f, ident in result:
            if ident is not None and ident[0]:
                owners[ident[0]].append((ctx.rel_raw(Path(f)), ident[1], ident[2]))
    return _counted(ctx, uid_collisions(owners))


def _counted(ctx: IngestContext, found: dict[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
    ctx.report.counts["sop_instance_uid_collisions"] += sum(code == "sop_instance_uid_collision"
                                                            for code, _ in found.values())
    return found


def _scan_participants(ctx: IngestContext, image_root: Path, participants: list[Path],
                       collisions: dict[str, tuple[str, str]] | None = None) -> dict[str, list[dict[str, Any]]]:
    """The series of a batch of participants. ``collisions``: the download's instance UID collisions (None: found in
    this batch's scan, when the batch is the whole download)."""
    folders = _image_folders(ctx, image_root, participants)
    scanned = list(pmap(_scan_folder, sorted(folders.items()), workers=ctx.workers, scheduler=ctx.scheduler))
    if collisions is None:
        owners: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
        for _, results in scanned:
            for f, info in results:
                if info.ok and info.value.sop_uid:
                    d = info.value
                    owners[d.sop_uid].append((ctx.rel_raw(Path(f)), d.patient_id, d.series_uid))
        collisions = _counted(ctx, uid_collisions(owners))
    series_by_ptid: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for folder, results in scanned:
        fpath = Path(folder)
        ptid, desc, stamp, image_id = fpath.relative_to(image_root).parts
        good: dict[str, list[tuple[str, ScannedDicom]]] = defaultdict(list)
        for f, info in results:
            ctx.report.inputs += 1
            rel = ctx.rel_raw(Path(f))
            if info.ok and rel in collisions:
                code, detail = collisions[rel]
                info = (Outcome.skip if code == "duplicate_instance" else Outcome.failure)(code, detail, f)
            if ctx.report.record(rel, info):
                good[info.value.series_uid].append((f, info.value))
        m = STAMP.match(stamp)
        for uid, members in sorted(good.items()):
            patients = sorted({d.patient_id for _, d in members})
            if len(patients) > 1:  # one volume of two people's slices: none of them is used
                for f, _ in members:
                    ctx.report.fail(ctx.rel_raw(Path(f)), "series_mixes_patients",
                                    f"series {uid[:64]} holds files of {len(patients)} PatientIDs")
                continue
            first = members[0][1]
            acq = _date(m.group(1)) if m else (
                datetime.strptime(first.study_date, "%Y%m%d").date() if first.study_date else None
            )
            series_by_ptid[ptid].append({
                "image_id": image_id, "uid": uid, "description": desc.replace("_", " "),
                "date": acq, "files": [f for f, _ in members], "modality": first.modality or "MR",
                "sex": {d.patient_sex for _, d in members if d.patient_sex in ("M", "F")},
                "age": next((d.patient_age for _, d in members if d.patient_age is not None), None),
            })
    return series_by_ptid


def _build_case(ctx: IngestContext, ptid: str, rows: list[dict[str, Any]], series: list[dict[str, Any]],
                ida: dict[str, dict[str, Any]] | None = None, ida_used: set[str] | None = None) -> Case:
    spec = ctx.spec
    case_id = ctx.case_id(ptid)
    rows = sorted(rows, key=lambda r: r["exam_date"])
    baseline = next((r for r in rows if r["visit"] == "bl"), rows[0] if rows else None)
    visits: list[Visit] = []
    for r in rows:
        dx = spec["diagnosis"].get(r.get("diagnosis") or "", None)
        visits.append(Visit(
            visit_id=r["visit"],
            days_from_baseline=(r["exam_date"] - baseline["exam_date"]).days if baseline else None,
            diagnosis=dx,
            scores=numeric_scores(r["_raw"], spec["scores"]),
        ))
    window = int(spec["visit_match_window_days"])
    unmatched: dict[str, Visit] = {}
    for s in sorted(series, key=lambda s: (s["date"] or date.min, s["image_id"])):
        mismatch = identity_mismatch(s, baseline, spec)
        if mismatch:  # the image is of someone other than the person the clinical rows describe: no item from it
            for f in s["files"]:
                ctx.report.fail(ctx.rel_raw(Path(f)), "identity_mismatch", mismatch)
            continue
        best, best_gap = None, window + 1
        for r, v in zip(rows, visits, strict=True):
            if s["date"] is not None:
                gap = abs((r["exam_date"] - s["date"]).days)
                if gap < best_gap:
                    best, best_gap = v, gap
        if best is None:
            key = s["date"].isoformat() if s["date"] else "undated"
            if key not in unmatched:
                days = (s["date"] - baseline["exam_date"]).days if (baseline and s["date"]) else None
                unmatched[key] = Visit(visit_id=f"unmatched-{len(unmatched) + 1}", days_from_baseline=days)
            best = unmatched[key]
            ctx.report.counts["series_without_visit"] += 1
        files = [ctx.store(Path(f), case_id, f"{s['image_id']}/{Path(f).name}") for f in s["files"]]
        meta = (ida or {}).get(s["image_id"])
        sidecar: dict[str, Any] = {}
        if meta:
            if ida_used is not None:
                ida_used.add(s["image_id"])
            sidecar["ida"] = {k: v for k, v in meta.items() if not k.startswith("_")}
            ctx.report.counts["series_with_ida_xml"] += 1
        best.series.append(Series(
            series_id=s["image_id"], modality=s["modality"], format="dicom",
            sequence=_seq(s["description"], spec), description=s["description"], files=files, sidecar=sidecar,
        ))
    visits.extend(unmatched.values())
    last_dx = next((v.diagnosis for v in reversed(visits) if v.diagnosis), None)
    patient = Patient()
    ehr: dict[str, float | str | None] = {}
    if baseline:
        sex = spec["sex"].get(baseline.get("sex") or "", None)
        patient = Patient.with_age(baseline.get("age"), sex=sex, education_years=baseline.get("education_years"),
                                   ethnicity=baseline.get("ethnicity"))
        ehr = numeric_scores(baseline["_raw"], spec["scores"])
        ehr["DX_bl"] = (baseline["_raw"].get("DX_bl") or None)
    return Case(
        case_id=case_id, source=SourceName("adni"), license=spec["license"], attribution=spec["attribution"],
        patient=patient, ehr=ehr, visits=visits, diagnosis=Diagnosis(primary=last_dx),
        provenance=Provenance(source_paths=sorted({_digest(ptid)})),
    )


def identity_mismatch(series: dict[str, Any], baseline: dict[str, Any] | None, spec: dict[str, Any]) -> str | None:
    """Why a series' header and the clinical table joined to it cannot be the same person, or None: the header's
    Patient's Sex against the table's, and its age at the acquisition against the table's baseline age carried to
    that date (``identity_age_tolerance_years`` apart at most). A value missing on either side is not compared."""
    if baseline is None:
        return None
    said: list[str] = []
    table_sex = spec["sex"].get(baseline.get("sex") or "", None)
    header_sex = series.get("sex") or set()
    if table_sex in ("M", "F") and header_sex and header_sex != {table_sex}:
        said.append(f"sex {'/'.join(sorted(header_sex))} in the DICOM header, {table_sex} in the clinical table")
    age, when = baseline.get("age"), series.get("date")
    if series.get("age") is not None and age is not None and when is not None:
        expected = float(age) + (when - baseline["exam_date"]).days / 365.25
        tolerance = float(spec.get("identity_age_tolerance_years", 2.0))
        if abs(series["age"] - expected) > tolerance:
            said.append(f"age {series['age']:g} in the DICOM header, {expected:.1f} from the clinical table "
                        f"(more than {tolerance:g} years apart)")
    return "; ".join(said) or None


def _seq(desc: str, spec: dict[str, Any]) -> str | None:
    return sequence_for(desc, spec["sequences"])


def _digest(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:16]
