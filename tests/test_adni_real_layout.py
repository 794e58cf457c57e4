"""A LONI IDA download layout holding real scanner DICOM and real heads of other people (../shared/fixtures), through
ingest, de-identification, normalize, extraction and generation: every real head gives items with its images; a
real scanner's quality-control bottle (the dcm_qa XA30 "T1w MPRAGE") is refused as not a brain, at both of its
visits, which both arrive (the second's Patient's Name is "HFS", the Patient Position code). Skipped when ../shared
is absent."""

from __future__ import annotations

import csv
import locale
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pydicom
import pytest

from .factories import project_params, through_generate

SHARED = Path(__file__).resolve().parents[2] / "shared" / "fixtures"
MPRAGE = SHARED / "dicom-real" / "siemens-xa30" / "5001_anat-T1w_acq-tfl"
HEADS = SHARED / "heads"
pytestmark = [pytest.mark.e2e,  # every stage, on real heads
              pytest.mark.skipif(not (MPRAGE.is_dir() and HEADS.is_dir()), reason="../shared/fixtures is absent")]

UID = "1.2.826.0.1.3680043.8.498.7741"
# participant -> (sex, age at baseline, diagnosis, MMSE, baseline FreeSurfer volumes (mm3) plausible for them)
PEOPLE = {
    "941_S_0001": ("Female", 24.0, "CN", 30, {"Hippocampus": 8100, "Ventricles": 9000, "WholeBrain": 1150000}),
    "941_S_0002": ("Male", 51.0, "CN", 29, {"Hippocampus": 7600, "Ventricles": 21000, "WholeBrain": 1080000}),
    "941_S_0003": ("Female", 46.0, "CN", 29, {"Hippocampus": 7700, "Ventricles": 16000, "WholeBrain": 1090000}),
    "941_S_0004": ("Male", 68.0, "MCI", 25, {"Hippocampus": 6600, "Ventricles": 38000, "WholeBrain": 990000}),
    # the healthy adult's T2 again, joined to another person's row: a dementia patient's volumes (a wrong join)
    "941_S_0005": ("Female", 46.0, "Dementia", 21, {"Hippocampus": 5100, "Ventricles": 95000, "WholeBrain": 900000}),
}
BASELINE = {"941_S_0002": "2022-05-01", "941_S_0003": "2022-06-06", "941_S_0004": "2022-08-01",
            "941_S_0005": "2022-09-05"}


def _stamp(day: str) -> str:
    return f"{day}_09_30_00.0"


def _copy_series(src: Path, folder: Path, *, series: str, day: str, age: str, name: str | None = None) -> None:
    """The scanner's files under a new series (new instance UIDs), acquired on ``day`` (YYYY-MM-DD)."""
    folder.mkdir(parents=True, exist_ok=True)
    for n, f in enumerate(sorted(src.iterdir())):
        ds = pydicom.dcmread(f)
        ds.SeriesInstanceUID = f"{UID}.{series}"
        ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID = f"{UID}.{series}.{n + 1}"
        ds.StudyDate = ds.SeriesDate = ds.AcquisitionDate = ds.ContentDate = day.replace("-", "")
        ds.PatientAge = age
        if name is not None:
            ds.PatientName = name
        ds.save_as(folder / f.name)


def _write_volume(vol_path: Path, folder: Path, *, series: str, day: str, sex: str, age: str,
                  description: str) -> None:
    """A NIfTI head written as one DICOM file per slice by SimpleITK, its geometry (positions, orientation,
    spacing) the volume's own, the identity a participant's."""
    import SimpleITK as sitk

    img = sitk.ReadImage(str(vol_path))
    arr = sitk.GetArrayFromImage(img).astype(np.float64)
    arr = np.clip(arr / max(float(np.percentile(arr, 99.9)), 1e-6) * 3000.0, 0, 4095).astype(np.int16)
    img16 = sitk.GetImageFromArray(arr)
    img16.CopyInformation(img)
    folder.mkdir(parents=True, exist_ok=True)
    writer = sitk.ImageFileWriter()
    writer.KeepOriginalImageUIDOn()
    ctype = locale.setlocale(locale.LC_CTYPE)  # GDCM's DICOM writer sets the C locale process-wide; put it back
    try:
        _write_slices(img16, writer, folder, series=series, day=day, sex=sex, age=age, description=description)
    finally:
        locale.setlocale(locale.LC_CTYPE, ctype)


def _write_slices(img16: Any, writer: Any, folder: Path, *, series: str, day: str, sex: str, age: str,
                  description: str) -> None:
    direction = img16.GetDirection()
    iop = "\\".join(f"{v:.6f}" for v in (direction[0], direction[3], direction[6], direction[1], direction[4],
                                         direction[7]))
    for k in range(img16.GetDepth()):
        sl = img16[:, :, k]
        tags = {"0008|0016": "1.2.840.10008.5.1.4.1.1.4", "0008|0018": f"{UID}.{series}.{k + 1}",
                "0008|0060": "MR", "0008|0020": day.replace("-", ""), "0008|0021": day.replace("-", ""),
                "0008|103e": description, "0010|0010": "DOE^JANE", "0010|0020": "MRN-5521", "0010|0040": sex,
                "0010|1010": age, "0018|5100": "HFS", "0020|000d": f"{UID}.{series}.0",
                "0020|000e": f"{UID}.{series}", "0020|0011": "3", "0020|0013": str(k + 1), "0020|0037": iop,
                "0020|0032": "\\".join(f"{v:.4f}" for v in img16.TransformIndexToPhysicalPoint((0, 0, k))),
                "0028|0030": f"{img16.GetSpacing()[1]:.6f}\\{img16.GetSpacing()[0]:.6f}",
                "0018|0050": f"{img16.GetSpacing()[2]:.6f}"}
        for key, value in tags.items():
            sl.SetMetaData(key, value)
        writer.SetFileName(str(folder / f"slice{k + 1:04d}.dcm"))
        writer.Execute(sl)


@pytest.fixture(scope="module")
def download(tmp_path_factory: pytest.TempPathFactory) -> Path:
    raw = tmp_path_factory.mktemp("adni-real") / "adni"
    adni = raw / "ADNI"
    # the Siemens Prisma "T1w MPRAGE" of dcm_qa XA30 (real scanner files of a QC bottle) at two visits a year
    # apart; the second's Patient's Name reads "HFS"
    _copy_series(MPRAGE, adni / "941_S_0001" / "MPRAGE" / _stamp("2023-01-13") / "I880001", series="1",
                 day="2023-01-13", age="024Y")
    _copy_series(MPRAGE, adni / "941_S_0001" / "MPRAGE" / _stamp("2024-01-16") / "I880002", series="2",
                 day="2024-01-16", age="025Y", name="HFS")
    # a clinical T1 with skull and a far scanner origin; a healthy adult's T2 with skull; a stroke patient's
    # brain-extracted T1 and FLAIR at one visit (real heads of other people and scanners, written as DICOM)
    for ptid, desc, head, image_id in (("941_S_0002", "MPRAGE", "seg3d_mr", "I880003"),
                                       ("941_S_0003", "Axial_T2_TSE", "register_t2w", "I880004"),
                                       ("941_S_0004", "MPRAGE", "stroke_T1", "I880005"),
                                       ("941_S_0004", "Axial_T2-FLAIR", "stroke_FLAIR", "I880006"),
                                       ("941_S_0005", "Axial_T2_TSE", "register_t2w", "I880007")):
        sex, age = PEOPLE[ptid][0][0], f"{int(PEOPLE[ptid][1]):03d}Y"
        day = BASELINE[ptid]
        _write_volume(HEADS / f"{head}.nii.gz", adni / ptid / desc / _stamp(day) / image_id, series=image_id[1:],
                      day=day, sex=sex, age=age, description=desc.replace("_", " "))
    rows = []
    for ptid, (sex, age, dx, mmse, vols) in PEOPLE.items():
        visits = [("bl", "2023-01-10"), ("m12", "2024-01-12")] if ptid == "941_S_0001" else [("bl", BASELINE[ptid])]
        for viscode, exam in visits:
            rows.append({"PTID": ptid, "VISCODE": viscode, "EXAMDATE": exam, "DX_bl": dx, "DX": dx, "AGE": age,
                         "PTGENDER": sex, "PTEDUCAT": 16, "PTETHCAT": "Not Hisp/Latino", "MMSE": mmse, "CDRSB": 0,
                         **vols, "ICV": 1500000})
    with (raw / "ADNIMERGE.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return raw


@pytest.fixture(scope="module")
def curated(download: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    work = tmp_path_factory.mktemp("adni-real-work")
    p = project_params()
    p.ingest.copy_files = True  # the download lies outside the work folder: copied, not pointed into
    out = through_generate(p, "adni", download, work)
    shutil.rmtree(work / "ingest", ignore_errors=True)
    return out


def test_every_real_head_gives_items_with_images(curated: dict) -> None:
    """Every real head the fit accepts is rendered at its targets and gives items, except the one whose table row
    its own image contradicts."""
    by_series = {s.series_id: (c, s) for c in curated["cases"] for s in c.all_series()}
    assert len(by_series) == 7, sorted(by_series)  # both visits of 941_S_0001 arrived: none was quarantined
    assert not curated["reports"]["deid"]["failures_by_reason"], curated["reports"]["deid"]
    heads = [(c, s) for c, s in by_series.values() if s.qc.anatomy.fit == "ok"]
    assert sorted(s.description or "" for _, s in heads) == ["Axial T2 TSE", "Axial T2 TSE", "Axial T2-FLAIR", "MPRAGE",
                                                             "MPRAGE"]
    for case, s in heads:
        mine = [i for i in curated["items"] if any(e.series_id == s.series_id for e in i.evidence)]
        # the healthy head joined to another person's row keys nothing from that row (the test below), and a
        # one-series visit has no other item
        wrong = any(v.scores.get("Ventricles") == 95000 for v in case.visits)
        assert bool(mine) != wrong, (case.case_id, s.series_id, s.sequence, [r.target for r in s.renders])
        assert all(all(curated["images"][i.item_id]) for i in mine)
        assert {r.target for r in s.renders if r.role == "target"} >= {"hippocampus", "lateral_ventricles"}


def test_the_scanner_qc_bottle_is_refused_at_both_visits_with_its_reason(curated: dict) -> None:
    refused = [s for c in curated["cases"] for s in c.all_series()
               if s.qc.anatomy.fit != "ok"]
    assert len(refused) == 2 and {s.sequence for s in refused} == {"T1w"}
    for s in refused:
        reason = s.qc.anatomy.fit_reason or ""
        assert "no brain anatomy where the registered template expects it" in reason, reason
        assert not [i for i in curated["items"] if any(e.series_id == s.series_id for e in i.evidence)]


def test_a_table_volume_the_image_contradicts_is_not_a_key(curated: dict) -> None:
    """Each head's lateral ventricles are measured on the head itself; a table's grade two or more grades from the
    image's is refused with its reason, and counted. The healthy adult's T2 joined to a dementia patient's row (95 mL,
    "severely enlarged" at 46) gives no ventricle item, nor a hippocampal one from that row; the rows that are
    plausible for their heads still do."""
    measured = {s.series_id: s.qc.anatomy.measures.lateral_ventricles_ml for c in curated["cases"]
                for s in c.all_series() if s.qc.anatomy.fit == "ok" and s.sequence != "FLAIR" and s.qc.anatomy.measures}
    assert len(measured) == 4 and all(5 < ml < 60 for ml in measured.values()), measured  # adults' ventricles
    skipped = curated["reports"]["generate"]["counts"]
    assert skipped.get("template_skipped:refused_ventricle_grade:image_disagrees", 0) >= 1, skipped
    wrong = next(c.case_id for c in curated["cases"] if any(v.scores.get("Ventricles") == 95000 for v in c.visits))
    graded = [i for i in curated["items"] if "ventricle_grade" in i.facts.get("answer_facts", [])]
    assert graded and not [i for i in graded if i.case_id == wrong], [(i.case_id, i.answer) for i in graded]
    # the same row's hippocampi (5.1 mL at 46: "marked atrophy") are not measured on the image; the row the image
    # contradicts gives no hippocampal key, while the confirmed rows of the other heads still do
    assert skipped.get("template_skipped:refused_hippocampal_grade:row_image_disagrees", 0) >= 1, skipped
    hippocampal = [i for i in curated["items"] if "hippocampal_grade" in i.facts.get("answer_facts", [])]
    assert {i.case_id for i in hippocampal} - {wrong} and not [i for i in hippocampal if i.case_id == wrong], \
        [(i.case_id, i.answer) for i in hippocampal]
