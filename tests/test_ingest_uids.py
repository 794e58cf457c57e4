"""ADNI ingest of a download with a PACS export fault: instance UIDs shared across patients or series, a series
folder holding another patient's slice, and a copied file. Raw folders are written here from pydicom's MR_small."""

from __future__ import annotations

from pathlib import Path

import pydicom
import pytest
from pydicom.data import get_testdata_file

from curation.ingest import run as ingest
from curation.jsonio import read_jsonl
from curation.schema import Case

from .factories import project_params

ROOT_UID = "1.2.826.0.1.3680043.8.498"
CSV = ("PTID,VISCODE,EXAMDATE,DX,AGE,PTGENDER,PTEDUCAT,PTETHCAT,MMSE\n"
       + "".join(f"002_S_000{i},bl,2006-01-0{i},CN,70,Male,16,Not Hisp/Latino,29\n" for i in range(1, 5)))


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def slice_file(path: Path, *, sop: str, patient: str, series: str, z: float, sex: str = "M",
               age: str | None = None) -> Path:
    """One slice of pydicom's MR_small, its header made the CSV's participant (a man; age not stated unless asked)."""
    ds = pydicom.dcmread(get_testdata_file("MR_small.dcm"))
    ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID = sop
    ds.PatientID, ds.SeriesInstanceUID, ds.PatientSex = patient, series, sex
    if age is not None:
        ds.PatientAge = age
    ds.ImagePositionPatient = [0.0, 0.0, z]
    path.parent.mkdir(parents=True, exist_ok=True)
    ds.save_as(path)
    return path


def series_folder(raw: Path, ptid: str, image_id: str, n: int, *, series: str, first_sop: int,
                  **header: str | None) -> list[Path]:
    folder = raw / "ADNI" / ptid / "MPRAGE" / "2006-01-01_10_00_00.0" / image_id
    return [slice_file(folder / f"s{k}.dcm", sop=f"{ROOT_UID}.{first_sop + k}", patient=ptid, series=series, z=k,
                       **header) for k in range(n)]  # type: ignore[arg-type]


def run(raw: Path, out: Path) -> tuple[list[Case], dict[str, tuple[str, str]], dict]:
    p = project_params().ingest.model_copy(update={"max_failure_rate": 0.9})
    rep = ingest(p, "adni", raw, out, secret=b"uid-test")
    quarantine = {q["path"]: (q["reason"], q["detail"]) for q in read_jsonl(out / "quarantine.jsonl")}
    return list(read_jsonl(out / "cases.jsonl", Case)), quarantine, rep.as_dict()


@pytest.mark.parametrize("batch", [64, 1], ids=["one-batch", "batch-per-participant"])
def test_instance_uids_shared_across_patients_and_series_quarantine_every_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int) -> None:
    """One batch: found in the batch's own scan; a batch a participant: found by the header pass before any case."""
    from curation.ingest import adni

    monkeypatch.setattr(adni, "PARTICIPANTS_PER_BATCH", batch)
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "ADNIMERGE.csv").write_text(CSV)
    a = series_folder(raw, "002_S_0001", "I1", 3, series=f"{ROOT_UID}.100", first_sop=1000)
    b = series_folder(raw, "002_S_0002", "I2", 3, series=f"{ROOT_UID}.200", first_sop=2000)
    # patient 2's first slice carries patient 1's first instance UID (the PACS fault)
    slice_file(b[0], sop=f"{ROOT_UID}.1000", patient="002_S_0002", series=f"{ROOT_UID}.200", z=0)
    # patient 3: two series of one patient share an instance UID, and one file is a copy of another
    c = series_folder(raw, "002_S_0003", "I3", 3, series=f"{ROOT_UID}.300", first_sop=3000)
    d = series_folder(raw, "002_S_0003", "I4", 2, series=f"{ROOT_UID}.400", first_sop=3002)
    copy = c[0].with_name("s9-copy.dcm")
    copy.write_bytes(c[0].read_bytes())
    # patient 4: a series folder that also holds a slice of someone else (unique UID, other PatientID)
    e = series_folder(raw, "002_S_0004", "I5", 3, series=f"{ROOT_UID}.500", first_sop=5000)
    slice_file(e[2], sop=f"{ROOT_UID}.5002", patient="002_S_9999", series=f"{ROOT_UID}.500", z=2)

    cases, quarantine, report = run(raw, tmp_path / "out")
    rel = {p: p.relative_to(raw).as_posix() for p in [*a, *b, *c, *d, *e, copy]}
    assert quarantine[rel[a[0]]][0] == quarantine[rel[b[0]]][0] == "sop_instance_uid_collision"
    assert f"also in {rel[b[0]]} (another patient" in quarantine[rel[a[0]]][1]
    assert f"also in {rel[a[0]]} (another patient" in quarantine[rel[b[0]]][1]
    assert quarantine[rel[c[2]]][0] == quarantine[rel[d[0]]][0] == "sop_instance_uid_collision"
    assert "(another series" in quarantine[rel[d[0]]][1]
    assert quarantine[rel[copy]] == ("skipped:duplicate_instance", f"a copy of {rel[c[0]]} (same SOPInstanceUID, "
                                                                   "patient and series)")
    assert {quarantine[rel[f]][0] for f in e} == {"series_mixes_patients"}
    assert report["counts"]["sop_instance_uid_collisions"] == 4
    assert report["failures_by_reason"] == {"sop_instance_uid_collision": 4, "series_mixes_patients": 3}
    kept = {s.series_id: len(s.files) for case in cases for s in case.all_series()}
    assert kept == {"I1": 2, "I2": 2, "I3": 2, "I4": 1}  # I5 (two people) is gone whole
    stored = [f for case in cases for s in case.all_series() for f in s.files]
    sops = [str(pydicom.dcmread(f, stop_before_pixels=True).SOPInstanceUID) for f in stored]
    assert len(sops) == len(set(sops))  # no instance UID reaches the next stage twice


def test_a_series_whose_header_is_another_person_than_its_clinical_row_is_quarantined(tmp_path: Path) -> None:
    """The DICOM header's sex and age at acquisition against the ADNIMERGE row joined to the series (a man of 70 at
    baseline, here): a contradiction quarantines the series with both values named, and makes no case image; a
    header that states no sex or age is not contradicted; an age a year on at a later visit is the same man."""
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "ADNIMERGE.csv").write_text(CSV)
    ok = series_folder(raw, "002_S_0001", "I1", 2, series=f"{ROOT_UID}.100", first_sop=1000, age="070Y")
    woman = series_folder(raw, "002_S_0002", "I2", 2, series=f"{ROOT_UID}.200", first_sop=2000, sex="F")
    young = series_folder(raw, "002_S_0003", "I3", 2, series=f"{ROOT_UID}.300", first_sop=3000, age="041Y")
    unstated = series_folder(raw, "002_S_0004", "I4", 2, series=f"{ROOT_UID}.400", first_sop=4000, sex="")
    later = raw / "ADNI" / "002_S_0001" / "MPRAGE" / "2007-01-03_10_00_00.0" / "I5" / "s0.dcm"
    slice_file(later, sop=f"{ROOT_UID}.5000", patient="002_S_0001", series=f"{ROOT_UID}.500", z=0, age="071Y")

    cases, quarantine, report = run(raw, tmp_path / "out")
    rel = {p: p.relative_to(raw).as_posix() for p in [*ok, *woman, *young, *unstated]}
    assert {quarantine[rel[f]] for f in woman} == {
        ("identity_mismatch", "sex F in the DICOM header, M in the clinical table")}
    assert {quarantine[rel[f]] for f in young} == {
        ("identity_mismatch", "age 41 in the DICOM header, 70.0 from the clinical table (more than 2 years apart)")}
    assert not {rel[f] for f in [*ok, *unstated]} & set(quarantine)
    assert report["failures_by_reason"] == {"identity_mismatch": 4}
    kept = {s.series_id for case in cases for s in case.all_series()}
    assert kept == {"I1", "I4", "I5"}
