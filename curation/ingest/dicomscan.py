"""Ingest's scan of one DICOM file: its header fields for grouping into series, without aborting on junk.

The reading and the checks (preamble, truncated pixels, DICOMDIR, no pixel data) are ``curation.io.dicom``'s."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from curation.io.dicom import DicomHeader, read_unbounded
from curation.report import Outcome

IDENTITY_TAGS = ("SOPInstanceUID", "PatientID", "SeriesInstanceUID")


@dataclass(frozen=True)
class ScannedDicom(DicomHeader):
    """What ingest's scan reads from one DICOM file: the header fields, the instance UID and the patient's sex and
    age as the header gives them."""

    sop_uid: str
    patient_sex: str
    patient_age: float | None


def inspect_dicom(path: str) -> Outcome[ScannedDicom]:
    """The file's header fields, or why the file is not used (``skipped:not_dicom``, ``dicom_truncated``...)."""
    ds, info = read_unbounded(path)
    if not info.ok:
        return info.passed_on()
    header = info.value
    return Outcome.success(ScannedDicom(
        **vars(header), sop_uid=str(ds.get("SOPInstanceUID", "") or ""),
        patient_sex=str(ds.get("PatientSex", "") or "").strip().upper(),
        patient_age=header_age(str(ds.get("PatientAge", "") or ""), str(ds.get("PatientBirthDate", "") or ""),
                               header.study_date)))


def header_age(age: str, birth: str, study: str) -> float | None:
    """The patient's age in years at the study from the header: Patient's Age (an AS value, ``071Y``, ``006M``), or
    else Patient's Birth Date against the Study Date; None when neither is there or valid."""
    m = re.fullmatch(r"\s*(\d{3})([DWMY])\s*", age)
    if m:
        return round(int(m.group(1)) / {"D": 365.25, "W": 52.18, "M": 12.0, "Y": 1.0}[m.group(2)], 2)
    try:
        return round((datetime.strptime(study[:8], "%Y%m%d") - datetime.strptime(birth[:8], "%Y%m%d")).days / 365.25, 2)
    except ValueError:
        return None


def instance_identity(path: str) -> tuple[str, str, str] | None:
    """``(SOPInstanceUID, PatientID, SeriesInstanceUID)`` from the header alone (pixels unread), for the collision
    check before series are built; None when the file is not readable DICOM (the full scan says why)."""
    import pydicom

    try:
        ds = pydicom.dcmread(path, stop_before_pixels=True, specific_tags=list(IDENTITY_TAGS))
        return tuple(str(ds.get(t, "") or "") for t in IDENTITY_TAGS)  # type: ignore[return-value]
    except Exception:  # pydicom raises many types on junk; the full scan quarantines it with its reason
        return None


def uid_collisions(owners: dict[str, list[tuple[str, str, str]]]) -> dict[str, tuple[str, str]]:
    """Files to set aside, from ``{SOPInstanceUID: [(file, patient, series), ...]}``: ``{file: (code, detail)}``.

    An instance UID is unique to one image in the world; two files that carry one and differ in patient or series are
    a PACS export fault, and both are quarantined (``sop_instance_uid_collision``): kept, they would make one series
    (and one volume) of two people's slices, or two outputs with one remapped UID. Copies within one series of one
    patient are one image: the first (by path) is kept, the rest skipped (``duplicate_instance``)."""
    out: dict[str, tuple[str, str]] = {}
    for uid, files in owners.items():
        if len(files) < 2 or not uid:
            continue
        files = sorted(files)
        if len({(patient, series) for _, patient, series in files}) > 1:
            for f, patient, _ in files:
                others = sorted((o[1] == patient, o) for o in files if o[0] != f)  # another patient's first
                other = others[0][1]
                why = "another patient" if other[1] != patient else "another series"
                out[f] = ("sop_instance_uid_collision",
                          f"SOPInstanceUID {uid[:64]} is also in {other[0]} ({why}; {len(files)} files share it)")
        else:
            for f, _, _ in files[1:]:
                out[f] = ("duplicate_instance", f"a copy of {files[0][0]} (same SOPInstanceUID, patient and series)")
    return out
