from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path

import pydicom
import pytest
from pydicom.dataset import Dataset
from pydicom.sequence import Sequence

from curation.deid.dicom import deidentify_file
from curation.deid.policy import load_table
from curation.deid.text import TextDeidentifier
from curation.deid.verify import verify_dir
from curation.params import DicomDeidParams, TextDeidParams

PHI = ["FLANDERS", "BOUVIER", "VAN HOUTEN", "Evergreen", "HIBBERT", "RIVIERA", "SMITHERS", "Springfield",
       "4410074", "4410511", "4410605", "541-555-0100"]


def _series(raw: Path) -> list[Path]:
    return sorted((raw / "adni" / "ADNI" / "033_S_0511").rglob("*.dcm"))


def test_annex_e_table_is_complete() -> None:
    table = load_table()
    assert "edition 2026c" in table.edition
    assert len(table.rules) >= 650
    assert table.rules[0x00100010].basic == "Z"  # Patient's Name
    assert table.rules[0x00080018].basic == "U"  # SOP Instance UID
    assert table.private is not None and table.private.basic == "X"


def test_dicom_phi_removed_dates_shifted_uids_consistent(demo_raw: Path, tmp_path: Path) -> None:
    files = _series(demo_raw)
    bl = [f for f in files if "/MPRAGE/" in f.as_posix()]
    outs = []
    later = [f for f in bl if f.parents[1] != bl[0].parents[1]]  # the follow-up visit's date folder
    for f in bl[:3] + later[:1]:
        out = tmp_path / f.name
        res = deidentify_file(str(f), str(out), DicomDeidParams(), b"k", "patient-1", "adni-aaaaaaaaaaaa")
        assert res.ok, res
        outs.append((f, out))
    for _src, out in outs:
        raw = out.read_bytes()
        for token in PHI:
            assert token.encode() not in raw, token
        ds = pydicom.dcmread(out)
        assert ds.PatientIdentityRemoved == "YES"
        assert ds.PatientName == "adni-aaaaaaaaaaaa"
        assert not any(e.tag.is_private for e in ds)
        assert "113100" in {i.CodeValue for i in ds.DeidentificationMethodCodeSequence}
    a, b = pydicom.dcmread(outs[0][1]), pydicom.dcmread(outs[1][1])
    assert a.SeriesInstanceUID == b.SeriesInstanceUID != pydicom.dcmread(outs[0][0]).SeriesInstanceUID
    assert a.file_meta.MediaStorageSOPInstanceUID == a.SOPInstanceUID
    # intervals between visits are kept
    src0, src1 = pydicom.dcmread(outs[0][0]), pydicom.dcmread(outs[3][0])
    d0, d1 = pydicom.dcmread(outs[0][1]), pydicom.dcmread(outs[3][1])
    days = lambda x, y: (datetime.strptime(y.StudyDate, "%Y%m%d") - datetime.strptime(x.StudyDate, "%Y%m%d")).days  # noqa: E731
    assert days(src0, src1) == days(d0, d1) > 300
    assert d0.StudyDate != src0.StudyDate


def _encoded(ds: Dataset, path: Path, syntax: str) -> Path:
    from pydicom.uid import UID

    ds = ds.copy()
    ds.file_meta = ds.file_meta.copy()
    ds.file_meta.TransferSyntaxUID = UID(syntax)
    little, implicit = syntax != "1.2.840.10008.1.2.2", syntax == "1.2.840.10008.1.2"
    pydicom.dcmwrite(path, ds, implicit_vr=implicit, little_endian=little, enforce_file_format=True)
    return path


@pytest.mark.parametrize(("charset", "name", "description", "kept", "leaks"), [
    ("", "MULLER^JOSE", "MULLER T1 axial", "T1 axial", [b"MULLER"]),
    ("ISO_IR 100", "MÜLLER^JOSÉ", "MÜLLER T1 axial", "T1 axial", ["MÜLLER".encode("latin-1"), b"LLER"]),
    ("ISO_IR 192", "MÜLLER^JOSÉ", "MÜLLER T1 axial", "T1 axial", ["MÜLLER".encode(), b"LLER"]),
    # the given name inside a longer run of kanji ("Taro-sama"): only decoding finds it
    (["", "ISO 2022 IR 87"], "Yamada^Tarou=山田^太郎", "太郎様 T1 axial", "様 T1 axial",
     ["太郎".encode("iso2022_jp")[:-3], b"Tarou"]),
])
def test_every_encoding_gives_the_same_deidentified_values(demo_raw: Path, tmp_path: Path, charset: str | list[str],
                                                           name: str, description: str, kept: str,
                                                           leaks: list[bytes]) -> None:
    """Implicit VR, explicit little and big endian; ASCII, Latin-1, UTF-8 and ISO 2022 (Japanese) text: values are
    replaced from the element bytes as read where that is safe and through pydicom otherwise; the results must not
    differ, and the patient's name must not survive in a descriptor in any of them."""
    ds = pydicom.dcmread(_series(demo_raw)[0])
    if charset:
        ds.SpecificCharacterSet = charset
    ds.PatientName = name
    ds.SeriesDescription = description
    ds.ContentDate = "20060314\\20060315"  # two values: each is shifted
    nested = Dataset()
    nested.ReferencedSOPClassUID = ds.SOPClassUID
    nested.ReferencedSOPInstanceUID = ds.SOPInstanceUID
    ds.ReferencedImageSequence = Sequence([nested])
    results = {}
    for syntax in ("1.2.840.10008.1.2", "1.2.840.10008.1.2.1", "1.2.840.10008.1.2.2"):
        src = _encoded(ds, tmp_path / f"in-{syntax}.dcm", syntax)
        out = tmp_path / f"out-{syntax}.dcm"
        assert deidentify_file(str(src), str(out), DicomDeidParams(), b"k", "p", "adni-aaaaaaaaaaaa").ok
        raw = out.read_bytes()
        for token in ("FLANDERS", "4410074", "Springfield", "HIBBERT"):
            assert token.encode() not in raw, (syntax, token)
        for leak in leaks:
            assert leak not in raw, (syntax, leak)
        got = pydicom.dcmread(out)
        assert got.file_meta.TransferSyntaxUID == syntax
        assert got.PixelData == pydicom.dcmread(src).PixelData
        assert got.SeriesDescription == kept
        assert got.file_meta.MediaStorageSOPInstanceUID == got.SOPInstanceUID
        assert got.ReferencedImageSequence[0].ReferencedSOPInstanceUID == got.SOPInstanceUID != ds.SOPInstanceUID
        results[syntax] = {e.keyword: "\\".join(map(str, e.value)) if e.VM > 1 else str(e.value)
                           for e in got if e.keyword and e.VR not in ("OB", "OW", "SQ")}
    first, *rest = results.values()
    assert all(r == first for r in rest)
    assert first["ContentDate"].count("\\") == 1 and "20060314" not in first["ContentDate"]
    shift = (datetime.strptime(ds.StudyDate, "%Y%m%d") - datetime.strptime(first["StudyDate"], "%Y%m%d")).days
    later = datetime.strptime(first["ContentDate"].split("\\")[1], "%Y%m%d")
    assert (datetime.strptime("20060315", "%Y%m%d") - later).days == shift > 0


def test_incomplete_file_meta_is_completed(demo_raw: Path, tmp_path: Path) -> None:
    ds = pydicom.dcmread(_series(demo_raw)[0])
    del ds.file_meta.ImplementationClassUID
    src = tmp_path / "in.dcm"
    ds.save_as(src)
    assert "ImplementationClassUID" not in pydicom.dcmread(src).file_meta
    assert deidentify_file(str(src), str(tmp_path / "out.dcm"), DicomDeidParams(), b"k", "p", "x").ok
    meta = pydicom.dcmread(tmp_path / "out.dcm").file_meta
    assert meta.ImplementationClassUID and meta.FileMetaInformationGroupLength > 0


def test_burned_in_and_junk_are_quarantined(demo_raw: Path, tmp_path: Path) -> None:
    f = _series(demo_raw)[0]
    ds = pydicom.dcmread(f)
    ds.BurnedInAnnotation = "YES"
    burned = tmp_path / "burned.dcm"
    ds.save_as(burned)
    assert deidentify_file(str(burned), str(tmp_path / "o1.dcm"), DicomDeidParams(), b"k", None, None).reason \
        == "burned_in_annotation"
    junk = tmp_path / "junk.dcm"
    junk.write_bytes(b"hello")
    assert deidentify_file(str(junk), str(tmp_path / "o2.dcm"), DicomDeidParams(), b"k", None, None).reason \
        == "skipped:not_dicom"


def test_verifier_catches_seeded_phi_everywhere(demo_raw: Path, tmp_path: Path) -> None:
    src = _series(demo_raw)[0]
    clean = tmp_path / "clean"
    clean.mkdir()
    assert deidentify_file(str(src), str(clean / "a.dcm"), DicomDeidParams(), b"k", "p", "adni-aaaaaaaaaaaa").ok
    assert verify_dir(clean) == []
    # seed identifiers: a table attribute, a nested sequence, a private tag, a note
    ds = pydicom.dcmread(clean / "a.dcm")
    ds.InstitutionName = "Springfield Memory Clinic"
    nested = Dataset()
    nested.ReferringPhysicianName = "HIBBERT^JULIUS"
    ds.ReferencedStudySequence = Sequence([nested])
    ds.private_block(0x0029, "LEAK", create=True).add_new(0x10, "LO", "x")
    ds.save_as(clean / "a.dcm")
    (clean / "note.txt").write_text("Seen by Dr. Julius Hibbert, MRN 4410511, phone 541-555-0100.")
    kinds = {(f.path, f.kind) for f in verify_dir(clean)}
    assert any(p == "a.dcm" and k.startswith("Institution Name should be removed") for p, k in kinds)
    assert ("a.dcm", "person name present") in kinds
    assert ("a.dcm", "private attribute present") in kinds
    assert {("note.txt", "TITLED_NAME"), ("note.txt", "MRN"), ("note.txt", "PHONE")} <= kinds


def test_verifier_finds_all_raw_demo_phi(demo_raw: Path, tmp_path: Path) -> None:
    shutil.copytree(demo_raw / "oasis3", tmp_path / "o3")
    kinds = {f.kind for f in verify_dir(tmp_path / "o3")}
    assert "sidecar key outside the acquisition allowlist" in kinds
    assert "free text in volume header" in kinds


# A small annotated note set: each PHI span the de-identifier must remove, and clinical words it must keep.
NOTES = [
    ("Mr. Walter Bishop (MRN 22-781-443) was seen on January 5, 2021 with aphasia for 3 hours.",
     ["Walter Bishop", "22-781-443", "January 5, 2021"], ["aphasia", "3 hours"]),
    ("Ms. Clara Oswald, phone 503-555-0199, email clara.oswald@example.org, lives at 42 Wallaby Way, Portland.",
     ["Clara Oswald", "503-555-0199", "clara.oswald@example.org", "42 Wallaby Way"], []),
    ("His wife Amy reported two weeks of headache; DOB 04/11/1957.",
     ["Amy", "04/11/1957"], ["two weeks of headache"]),
    ("A 93-year-old woman with Alzheimer's disease and Dawson fingers on FLAIR; see http://hospital.example.org/r/77.",
     ["93-year-old", "http://hospital.example.org/r/77"], ["Alzheimer's disease", "Dawson fingers", "FLAIR"]),
    ("Referred by Dr. Nick Riviera on 14 March 2019; account number AC-99812; 3-month follow-up was stable.",
     ["Nick Riviera", "14 March 2019", "AC-99812"], ["3-month follow-up"]),
]


def test_text_deid_recall_and_precision_on_annotated_notes() -> None:
    tool = TextDeidentifier(TextDeidParams(), b"k")
    phi_total = phi_removed = keep_total = keep_kept = 0
    for text, phi, keep in NOTES:
        out, _ = tool.deidentify(text, date_shift_days=30)
        for p in phi:
            phi_total += 1
            phi_removed += p not in out
        for k in keep:
            keep_total += 1
            keep_kept += k in out
    recall = phi_removed / phi_total
    precision_proxy = keep_kept / keep_total
    assert recall == 1.0, recall
    assert precision_proxy >= 0.8, precision_proxy


def test_text_dates_shift_consistently() -> None:
    tool = TextDeidentifier(TextDeidParams(), b"k")
    out, _ = tool.deidentify("Seen on 2020-01-10 and again on 2020-01-20.", date_shift_days=100)
    assert out == "Seen on 2019-10-02 and again on 2019-10-12."


@pytest.mark.parametrize("field", ["presentation", "notes", "history"])
def test_pipeline_deid_outputs_verify_clean(pipeline: Path, field: str) -> None:
    text = (pipeline / "deid" / "cases.jsonl").read_text()
    for token in ["Clara Oswald", "Rory Williams", "Walter Bishop", "8830215", "22-781-443", "Harvard Lane"]:
        assert token not in text
    assert verify_dir(pipeline / "deid") == []


def test_pipeline_dicom_outputs_match_no_input_value(pipeline: Path) -> None:
    """The deidentify stage's DICOM outputs against the ingested inputs (paired by remapped SOP Instance UID, the
    stage's own layout): nothing survived; the audit names the Annex E edition."""
    import json

    from curation.deid.compare import verify_against
    from curation.pseudonyms import project_secret

    result = verify_against(pipeline / "deid", pipeline / "ingest", project_secret())
    assert result.checked > 10_000 and result.findings == [], [f.line() for f in (result.findings or [])[:10]]
    audit = [json.loads(line) for line in (pipeline / "deid" / "audit.jsonl").read_text().splitlines()]
    assert {a["annex_e"] for a in audit if "actions" in a and "annex_e" in a} == {"2026c"}
