"""DICOM de-identification on real scanner/PACS files and on hard cases built from a real image: the differential
verifier (each output against its input) must find nothing, and must find what is planted back."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pydicom
import pytest
from pydicom.dataset import Dataset
from pydicom.sequence import Sequence

from curation.deid import dicom as deid_dicom
from curation.deid import engine as deid_engine
from curation.deid import policy as deid_policy
from curation.deid.compare import compare_datasets, compare_files, verify_against
from curation.deid.dicom import deidentify_file
from curation.deid.elements import remap_uid
from curation.deid.policy import load_defaults, load_table
from curation.deid.verify import verify_dir
from curation.params import DicomDeidParams
from tests.dicom_cases import FIXTURES, IDENTITY, UNTABLED_DATE, build_cases, untabled

ROOT = Path(__file__).resolve().parents[1]
needs_fixtures = pytest.mark.skipif(not FIXTURES.is_dir(), reason="../shared/fixtures/dicom-real absent")


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    src = tmp_path_factory.mktemp("cases-in")
    out = tmp_path_factory.mktemp("cases-out")
    built = build_cases(load_table().rules, src)
    pairs = {}
    for name, path in built.items():
        res = deidentify_file(str(path), str(out / path.name), DicomDeidParams(), b"k", "patient-1",
                              "ANON-aaaaaaaaaaaa")
        assert res.ok, (name, res)
        pairs[name] = (path, out / path.name)
    return pairs


@pytest.mark.integration  # runs the script in a subprocess
def test_table_is_2026c_regenerated_by_the_script(tmp_path: Path) -> None:
    table = load_table()
    assert "edition 2026c" in table.edition and len(table.rules) >= 650
    assert table.rules[0x00080012].basic == "X/D"  # Instance Creation Date: not in the 2020 table
    assert table.rules[0x00080020].options["retain_longitudinal_modified_dates"] == "C"  # option columns kept
    pytest.importorskip("dicomanonymizer")
    out = tmp_path / "annex_e.tsv"
    subprocess.run([sys.executable, "scripts/build_annex_e_table.py", "--out", str(out)], cwd=ROOT, check=True,
                   capture_output=True)
    assert out.read_text() == (ROOT / "curation" / "deid" / "annex_e.tsv").read_text()


def test_defaults_are_validated_data() -> None:
    d = load_defaults()
    assert d.by_vr["DA"] == "shift" and d.by_vr["PN"] == "replace" and d.by_vr["UI"] == "remap"
    assert {d.by_vr[v] for v in ("SH", "LO", "ST", "LT", "UT", "UC")} == {"remove"}


def test_edition_recorded_in_deidentification_method(cases: dict[str, tuple[Path, Path]]) -> None:
    ds = pydicom.dcmread(cases["explicit"][1])
    assert "PS3.15 Table E.1-1 edition 2026c" in list(ds.DeidentificationMethod)


@pytest.mark.parametrize("name", ["implicit", "explicit", "big_endian", "deflated", "all_un", "all_un_delimited",
                                  "rle", "jpeg_ls",
                                  "jpeg2000", "jpeg_baseline", "jpeg_lossless", "fragmented", "all_un_rle"])
def test_constructed_case_has_no_survivor(cases: dict[str, tuple[Path, Path]], name: str) -> None:
    if name not in cases:
        pytest.skip(f"{name}: no encoder installed (imagecodecs)")
    src, out = cases[name]
    check = compare_files(src, out, name)
    assert check.checked > 40
    assert check.findings == [], [f.line() for f in check.findings]
    raw = out.read_bytes()
    for token in ("QUIMBY", "Quimby", "QZ7734", "ACC99812", "Springfield", "RIVIERA", "Riviera", "19511203",
                  "SPS777123", "PPS12345", "anxious"):
        assert token.encode() not in raw, (name, token)
    # pixel data bytes exactly as read (native or encapsulated, any fragmenting)
    assert pydicom.dcmread(out).PixelData == pydicom.dcmread(src).PixelData
    assert pydicom.dcmread(out).file_meta.TransferSyntaxUID == pydicom.dcmread(src).file_meta.TransferSyntaxUID


def _values(path: Path) -> dict[str, str]:
    ds = pydicom.dcmread(path)
    return {f"{e.tag}": str(e.value) for e in ds.iterall() if e.VR not in ("OB", "OW", "SQ", "UN")
            and e.tag.group != 0x0028 and e.keyword != "LossyImageCompression"}


def test_every_encoding_gives_the_same_values(cases: dict[str, tuple[Path, Path]]) -> None:
    """Elements stored as UN are resolved to their dictionary VR first: all-UN, implicit, big endian, deflated and
    compressed files give the same de-identified values (the all-UN input really is UN on disk)."""
    raw = pydicom.dcmread(cases["all_un"][0])
    stored = [raw.get_item(t).VR for t in raw.keys()]
    assert stored.count("UN") >= 0.8 * len(stored) > 50  # pydicom writes back as decoded what it read to write
    for kw in ("StudyInstanceUID", "SeriesInstanceUID", "StudyDate", "PatientName", "RequestAttributesSequence"):
        assert raw.get_item(kw).VR == "UN", kw
    first = _values(cases["explicit"][1])
    for name in ("implicit", "big_endian", "deflated", "all_un", "all_un_delimited", "rle", "jpeg_ls", "jpeg2000",
                 "all_un_rle"):
        assert _values(cases[name][1]) == first, name
    got = pydicom.dcmread(cases["all_un"][1])
    assert {e.VR for e in got} - {"UN"} and not any(e.VR == "UN" for e in got.iterall())


def test_safe_defaults_at_every_depth(cases: dict[str, tuple[Path, Path]]) -> None:
    src, out = (pydicom.dcmread(p) for p in cases["all_un"])
    table = load_table().rules
    date_kw, dt_kw, pn_kw, ui_kw = (untabled(v, table) for v in ("DA", "DT", "PN", "UI"))
    src_study = datetime.strptime(src.StudyDate, "%Y%m%d")
    shift = (src_study - datetime.strptime(out.StudyDate, "%Y%m%d")).days
    assert shift > 0
    # a date no table row names (top level and two sequences down) moves by the patient's offset
    assert (datetime.strptime("20040101", "%Y%m%d") - datetime.strptime(out[date_kw].value, "%Y%m%d")).days == shift
    inner = out.RequestAttributesSequence[0].ReferencedImageSequence[0]
    assert (datetime.strptime("20040215", "%Y%m%d") - datetime.strptime(inner[date_kw].value, "%Y%m%d")).days == shift
    assert out[dt_kw].value.endswith("120000") and not out[dt_kw].value.startswith("20040101")
    assert (datetime.strptime("20031101", "%Y%m%d") - datetime.strptime(out[UNTABLED_DATE].value, "%Y%m%d")).days \
        == shift  # tabled only since 2026c: with the longitudinal option on, shifted like every date
    # names replaced, UIDs remapped (the nested reference follows the instance), free text removed
    assert out[pn_kw].value == "ANONYMIZED" and inner[pn_kw].value == "ANONYMIZED"
    assert out[ui_kw].value == remap_uid("1.2.826.0.1.3680043.99.1", b"k")
    assert inner.ReferencedSOPInstanceUID == out.SOPInstanceUID != src.SOPInstanceUID
    assert out.RequestAttributesSequence[0].StudyInstanceUID == out.StudyInstanceUID
    assert out.SOPClassUID == src.SOPClassUID  # the DICOM registry is never remapped
    for kw in (untabled("LO", table), untabled("UT", table), "CommentsOnThePerformedProcedureStep"):
        assert kw not in out
    assert "ScheduledProcedureStepID" not in out.RequestAttributesSequence[0] or \
        not out.RequestAttributesSequence[0].ScheduledProcedureStepID
    assert out.Manufacturer == src.Manufacturer  # on the keep list


def test_verifier_finds_what_is_planted_back(cases: dict[str, tuple[Path, Path]]) -> None:
    """The differential check is not vacuous: each kind of survivor, planted into a clean output, is found."""
    src_path, out_path = cases["explicit"]
    src = pydicom.dcmread(src_path)
    assert compare_datasets(src, pydicom.dcmread(out_path), "x").findings == []
    plants = {
        "UID": lambda d: setattr(d.ReferencedImageSequence[0], "ReferencedSOPInstanceUID", src.SOPInstanceUID),
        "date": lambda d: setattr(d, "ContentDate", "20040318\\20040319"),
        "name": lambda d: setattr(d, untabled("PN", load_table().rules), "QUIMBY^JOSEPH"),
        "id": lambda d: d.RequestAttributesSequence[0].__setattr__("ScheduledProcedureStepID", "SPS777123"),
        "identity string": lambda d: setattr(d, "Manufacturer", "scanned at Springfield General Hospital"),
        "private": lambda d: d.private_block(0x0029, "LEAK", create=True).add_new(0x10, "LO", "x"),
        "pixel data": lambda d: setattr(d, "PixelData", bytes(len(d.PixelData))),
    }
    for kind, plant in plants.items():
        out = pydicom.dcmread(out_path)
        plant(out)
        found = [f.kind for f in compare_datasets(src, out, "x").findings]
        assert any(kind.split()[0] in k for k in found), (kind, found)


@pytest.mark.integration  # a second Python process
def test_same_uid_same_output_across_runs_and_processes(cases: dict[str, tuple[Path, Path]], tmp_path: Path) -> None:
    src, out = cases["explicit"]
    deid_dicom._CACHED.clear()  # a fresh run: no memo
    again = tmp_path / "again.dcm"
    assert deidentify_file(str(src), str(again), DicomDeidParams(), b"k", "patient-1", "ANON-aaaaaaaaaaaa").ok
    assert again.read_bytes() == out.read_bytes()
    code = ("import sys; from curation.deid.dicom import deidentify_file; from curation.params import "
            "DicomDeidParams; print(deidentify_file(sys.argv[1], sys.argv[2], DicomDeidParams(), b'k', "
            "'patient-1', 'ANON-aaaaaaaaaaaa').ok)")
    other = tmp_path / "other.dcm"
    subprocess.run([sys.executable, "-c", code, str(src), str(other)], check=True, cwd=ROOT)
    assert other.read_bytes() == out.read_bytes()
    # padding is not part of a UID
    assert remap_uid("1.2.3\x00", b"k") == remap_uid("1.2.3", b"k") == remap_uid(" 1.2.3 ", b"k")


def test_stage_fails_a_file_the_comparison_flags(cases: dict[str, tuple[Path, Path]], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    src, _ = cases["explicit"]
    monkeypatch.setattr(deid_engine.Deidentifier, "_untabled", lambda self, *a, **k: None)  # a broken rule
    deid_dicom._CACHED.clear()
    out = tmp_path / "o.dcm"
    res = deidentify_file(str(src), str(out), DicomDeidParams(), b"k", "p", "ANON-aaaaaaaaaaaa", verify=True)
    deid_dicom._CACHED.clear()
    assert res.reason == "deid_verify_failed" and not out.exists()
    assert "QUIMBY" not in res.detail and "survived unchanged" in res.detail


@needs_fixtures
def test_real_scanner_and_pacs_files(tmp_path: Path) -> None:
    """Siemens XA30 exports and the same images after an Agfa PACS: every file written or quarantined with a
    reason, nothing of any input survives, no private tags, one series keeps one UID, the SR de-identified too."""
    from curation.deid.stage import deid_dicom_dir

    os.environ.setdefault("CURATION_SECRET", "test-secret")
    out = tmp_path / "out"
    report = deid_dicom_dir(DicomDeidParams(), FIXTURES, out)
    files = [p for p in FIXTURES.rglob("*") if p.is_file()]
    assert report.inputs == len(files) == report.outputs + len(report.quarantine)
    assert [(q.path, q.reason) for q in report.quarantine] == [("LICENSE-dcm_qa", "skipped:not_dicom")]
    from curation.pseudonyms import project_secret

    names = [p.name for p in out.rglob("*.dcm")]
    assert not any("1.3.12.2.1107" in n for n in names)  # file names carried the SOP Instance UID
    result = verify_against(out, FIXTURES, project_secret())  # pairs by the remapped SOP Instance UID
    assert result.checked > 5000
    assert result.findings == [], [f.line() for f in result.findings[:20]]
    t1 = sorted((out / "siemens-xa30" / "5001_anat-T1w_acq-tfl").glob("*.dcm"))
    assert len(t1) == 96
    series = {pydicom.dcmread(p, stop_before_pixels=True).SeriesInstanceUID for p in t1}
    assert len(series) == 1
    one = pydicom.dcmread(t1[0])
    assert one.InstanceCreationDate != "20230113" and one.StudyDate == one.InstanceCreationDate
    for name in ("011-0001.img", "011-0002.img"):
        agfa, siemens = (pydicom.dcmread(out / "agfa-pacs" / v / name) for v in ("Agfa", "Siemens"))
        assert not any(e.tag.is_private for e in agfa.iterall())
        assert not any(e.tag.is_private for e in siemens.iterall())
        assert agfa.PixelData == siemens.PixelData


@pytest.mark.integration  # the curate CLI in a subprocess
@needs_fixtures
def test_cli_verify_against(tmp_path: Path) -> None:
    env = {**os.environ, "CURATION_SECRET": "test-secret"}
    src = FIXTURES / "agfa-pacs"
    out = tmp_path / "out"
    curate = str(Path(sys.executable).with_name("curate"))
    subprocess.run([curate, "deid", "dicom", str(src), str(out)], check=True, env=env, capture_output=True)
    ok = subprocess.run([curate, "deid", "verify", str(out), "--against", str(src)], env=env, capture_output=True,
                        text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "input values checked" in ok.stdout
    bad = pydicom.dcmread(out / "Agfa" / "011-0001.img")
    bad.AccessionNumber = pydicom.dcmread(src / "Agfa" / "011-0001.img").AccessionNumber
    bad.save_as(out / "Agfa" / "011-0001.img")
    res = subprocess.run([curate, "deid", "verify", str(out), "--against", str(src)], env=env, capture_output=True,
                         text=True)
    assert res.returncode == 6
    assert "Agfa/011-0001.img: (0008,0050): id survived unchanged (AccessionNumber)" in res.stdout
    assert IDENTITY["AccessionNumber"] not in res.stdout + res.stderr


def test_nested_un_sequence_from_pydicom_test_files(tmp_path: Path) -> None:
    """A toolkit's own hard file (a sequence stored as UN), read from the installed pydicom package."""
    from tests.dicom_cases import PYDICOM_FILES

    src = PYDICOM_FILES / "UN_sequence.dcm"
    ds = pydicom.dcmread(src)
    if "PixelData" not in ds:
        ds.Rows, ds.Columns, ds.BitsAllocated, ds.SamplesPerPixel = 2, 2, 8, 1
        ds.PixelData = b"\x00\x01\x02\x03"
        ds["PixelData"].VR = "OB"
        ds.file_meta.TransferSyntaxUID = "1.2.840.10008.1.2.1"
        ds.BitsStored, ds.HighBit, ds.PixelRepresentation, ds.PhotometricInterpretation = 8, 7, 0, "MONOCHROME2"
        ds.SOPClassUID = "1.2.840.10008.5.1.4.1.1.4"
        item = Dataset()
        item.ReferencedSOPInstanceUID = "1.2.826.0.1.3680043.77.1"
        ds.ReferencedImageSequence = Sequence([item])
        src = tmp_path / "un.dcm"
        ds.save_as(src, enforce_file_format=True)
    out = tmp_path / "out.dcm"
    assert deidentify_file(str(src), str(out), DicomDeidParams(), b"k", "p", "ANON-aaaaaaaaaaaa").ok
    assert compare_files(src, out, "un").findings == []


@pytest.mark.parametrize("name", ["test-SR.dcm", "rtplan.dcm", "reportsi.dcm", "waveform_ecg.dcm", "rtdose_rle.dcm",
                                  "rtdose_rle_1frame.dcm"])
def test_non_image_objects_deidentified_by_the_same_rules(tmp_path: Path, name: str) -> None:
    """Structured reports, RT objects (an RLE dose too) and a waveform from a toolkit's test files (the installed
    pydicom): written de-identified by the same rules, their content included."""
    from tests.dicom_cases import PYDICOM_FILES

    src = PYDICOM_FILES / name
    out = tmp_path / name
    res = deidentify_file(str(src), str(out), DicomDeidParams(), b"k", "p", "ANON-aaaaaaaaaaaa")
    assert res.ok, res
    check = compare_files(src, out, name)
    assert check.checked > 5 and check.findings == [], [f.line() for f in check.findings]
    got = pydicom.dcmread(out)
    assert got.PatientIdentityRemoved == "YES" and got.SOPClassUID == pydicom.dcmread(src).SOPClassUID
    assert not got.get("ContentSequence")  # SR content (text, names, dates): Annex E 2026c replaces it (D)


@needs_fixtures
def test_scanner_protocol_document(tmp_path: Path) -> None:
    """The Siemens Phoenix protocol document (Enhanced SR, protocol text in a private element, no pixels)."""
    for src in sorted((FIXTURES / "siemens-xa30" / "99_Phoenix_Document").glob("*.dcm")):
        out = tmp_path / src.name
        assert deidentify_file(str(src), str(out), DicomDeidParams(), b"k", "p", "ANON-aaaaaaaaaaaa").ok
        assert compare_files(src, out, src.name).findings == []
        got = pydicom.dcmread(out)
        assert not any(e.tag.is_private for e in got.iterall()) and b"XProtocol" not in out.read_bytes()
        assert got.InstitutionName == "" if "InstitutionName" in got else True


def test_retained_private_elements_get_the_safe_defaults(cases: dict[str, tuple[Path, Path]], tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Retain Safe Private keeps the private elements its list names, but a date, name or UID in one is still
    shifted, replaced or remapped (in any group, at any depth); file meta AE titles and private information go.
    Unlisted, the same elements are removed."""
    src = pydicom.dcmread(cases["explicit"][0])
    block = src.private_block(0x0019, "ACME MR 1", create=True)
    block.add_new(0x10, "DA", "20040318")
    block.add_new(0x11, "UI", src.StudyInstanceUID)
    block.add_new(0x12, "PN", "QUIMBY^JOSEPH")
    block.add_new(0x13, "LO", "coil 4")
    src.file_meta.SourceApplicationEntityTitle = "MRC35062"
    path = tmp_path / "priv.dcm"
    src.save_as(path, enforce_file_format=True)
    params = DicomDeidParams(retain_safe_private=True)
    out = tmp_path / "out.dcm"
    deid_dicom._CACHED.clear()
    assert deidentify_file(str(path), str(out), params, b"k", "patient-1", "ANON-aaaaaaaaaaaa").ok
    assert not any(e.tag.is_private for e in pydicom.dcmread(out).iterall())  # not on the shipped list
    listed = {**deid_policy.load_safe_private(),
              (0x0019, "ACME MR 1"): {0x10: "DA", 0x11: "UI", 0x12: "PN", 0x13: "LO"}}
    monkeypatch.setattr(deid_policy, "load_safe_private", lambda: listed)
    assert deidentify_file(str(path), str(out), params, b"k", "patient-1", "ANON-aaaaaaaaaaaa").ok
    deid_dicom._CACHED.clear()
    got = pydicom.dcmread(out)
    kept = got.private_block(0x0019, "ACME MR 1")
    assert kept[0x10].value != "20040318" and kept[0x11].value == got.StudyInstanceUID
    assert kept[0x12].value == "ANONYMIZED" and kept[0x13].value == "coil 4"
    assert "SourceApplicationEntityTitle" not in got.file_meta
    assert compare_files(path, out, "priv").findings == []


@needs_fixtures
@pytest.mark.parametrize("name", ["HFS", "MR^HFS"])
def test_identity_string_that_is_also_a_code_quarantines_nothing(tmp_path: Path, name: str) -> None:
    """A patient named "HFS" (an ADNI visit) scanned head first supine: the verifier does not take Patient Position
    HFS (or Modality MR) for the name, so the file is written; the same string anywhere it is not a valid code of
    its attribute is still found."""
    src = sorted((FIXTURES / "siemens-xa30" / "5001_anat-T1w_acq-tfl").glob("*.dcm"))[0]
    ds = pydicom.dcmread(src)
    assert (ds.PatientPosition, ds.Modality) == ("HFS", "MR")
    ds.PatientName = name
    planted = tmp_path / "in.dcm"
    ds.save_as(planted)
    out = tmp_path / "out.dcm"
    res = deidentify_file(str(planted), str(out), DicomDeidParams(), b"k", "p", "ANON-aaaaaaaaaaaa", verify=True)
    assert res.ok, res
    written = pydicom.dcmread(out)
    assert (written.PatientPosition, written.Modality) == ("HFS", "MR")
    for plant in (lambda d: setattr(d, "SeriesDescription", "t1 HFS"),
                  lambda d: setattr(d, "ImageType", ["ORIGINAL", "PRIMARY", "HFS"]),
                  lambda d: setattr(d, "PatientOrientation", ["HFS", "A"])):  # CS, but not a code of that attribute
        again = pydicom.dcmread(out)
        plant(again)
        found = [f.kind for f in compare_datasets(pydicom.dcmread(planted), again, "x").findings]
        assert any("identity string of the input found" in k for k in found), found


PE_HEADER = b"MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff" + bytes(50) + b"This program cannot be run"


def _deidentify_planted(ds: Dataset, tmp_path: Path, params: DicomDeidParams) -> tuple[Any, Path, Path]:
    """``ds`` saved as in.dcm and de-identified (verified) into out/x.dcm; (result, planted file, output file)."""
    planted = tmp_path / "in.dcm"
    ds.save_as(planted)
    out = tmp_path / "out" / "x.dcm"
    res = deidentify_file(str(planted), str(out), params, b"k", "p", "ANON-aaaaaaaaaaaa", verify=True)
    assert res.ok, res
    return res, planted, out


def _real_slice() -> Path:
    return sorted((FIXTURES / "siemens-xa30" / "5001_anat-T1w_acq-tfl").glob("*.dcm"))[0]


@needs_fixtures
@pytest.mark.parametrize("preamble", [b"PATIENT JOHN DOE 1955", PE_HEADER], ids=["name", "pe-polyglot"])
def test_preamble_zeroed_and_checked(tmp_path: Path, preamble: bytes) -> None:
    """The 128 bytes before DICM: zeroed in every file written (the audit says so); both verifiers report a
    preamble that is not, the standalone scan and the differential one."""
    raw = _real_slice().read_bytes()
    planted = tmp_path / "in" / "x.dcm"
    planted.parent.mkdir()
    planted.write_bytes(preamble.ljust(128, b"\x00") + raw[128:])
    out = tmp_path / "out" / "x.dcm"
    res = deidentify_file(str(planted), str(out), DicomDeidParams(), b"k", "p", "ANON-aaaaaaaaaaaa", verify=True)
    assert res.ok and res.value.actions["preamble"] == "Z", res
    written = out.read_bytes()
    assert written[:128] == bytes(128) and written[128:132] == b"DICM"
    assert preamble[:8] not in written
    assert verify_dir(out.parent) == []
    out.write_bytes(preamble.ljust(128, b"\x00") + written[128:])  # planted back
    assert [f.kind for f in verify_dir(out.parent)] == ["preamble not zeroed"]
    assert "preamble not zeroed" in [f.kind for f in compare_files(planted, out, "x").findings]


@needs_fixtures
def test_file_meta_cleaned_and_checked(tmp_path: Path) -> None:
    """File meta: a surname in Implementation Version Name, a sender's AE title and a private meta element are
    gone; the writer is the de-identifier; the verifiers report each one planted back."""
    ds = pydicom.dcmread(_real_slice())
    ds.file_meta.ImplementationVersionName = "QUIMBY_V1"
    ds.file_meta.SourceApplicationEntityTitle = "QUIMBYWS"
    ds.file_meta.PrivateInformationCreatorUID = "1.2.3.4"
    ds.file_meta.PrivateInformation = b"QUIMBY JOSEPH"
    res, planted, out = _deidentify_planted(ds, tmp_path, DicomDeidParams())
    out_dir = out.parent
    assert b"QUIMBY" not in out.read_bytes()
    meta = pydicom.dcmread(out).file_meta
    assert meta.ImplementationVersionName.startswith("PYDICOM ")
    assert {int(e.tag) for e in meta} == {0x00020000, 0x00020001, 0x00020002, 0x00020003, 0x00020010, 0x00020012,
                                          0x00020013}
    assert verify_dir(out_dir) == []
    for plant, kind in ((lambda m: setattr(m, "ImplementationVersionName", "QUIMBY_V1"), "writer other"),
                        (lambda m: setattr(m, "SourceApplicationEntityTitle", "QUIMBYWS"), "file meta element")):
        again = pydicom.dcmread(out)
        plant(again.file_meta)
        again.save_as(out)
        assert any(kind in f.kind for f in verify_dir(out_dir)), kind
        assert any(kind in f.kind for f in compare_files(planted, out, "x").findings), kind


PII = "PII_TO_REMOVE"


@needs_fixtures
def test_patient_codes_kept_only_when_valid_and_identity_gone_from_every_vr(tmp_path: Path) -> None:
    """A phantom session whose identity fields read PII_TO_REMOVE (as in a TCIA evaluation set), under Retain
    Patient Characteristics: Ethnic Group, Smoking Status and Patient's Sex Neutered are kept only when valid,
    Patient's Alternative Calendar and Responsible Person Role (no table row) only as a listed code; a surname in
    a CS value (Image Type), a UR value and an OB value holding text is gone; valid values stay."""
    table = load_table().rules
    ds = pydicom.dcmread(_real_slice())
    ds.PatientName = f"{PII}^QUIMBY"
    ds.PatientID = PII
    for kw in ("EthnicGroup", "SmokingStatus", "PatientSexNeutered", "PatientAlternativeCalendar",
               "ResponsiblePersonRole"):
        setattr(ds, kw, PII)
    ds.ImageType = ["ORIGINAL", "PRIMARY", "QUIMBY", "M"]
    setattr(ds, untabled("UR", table), "http://pacs.example.org/patients/QUIMBY")
    setattr(ds, untabled("OB", table), b"name=QUIMBY ")
    params = DicomDeidParams(retain_patient_characteristics=True)
    res, planted, out = _deidentify_planted(ds, tmp_path, params)
    out_dir = out.parent
    raw = out.read_bytes()
    assert PII.encode() not in raw and b"QUIMBY" not in raw
    written = pydicom.dcmread(out)
    assert list(written.ImageType) == ["ORIGINAL", "PRIMARY", "M"]
    assert written.PatientSex == ds.PatientSex  # a valid value under the option stays
    assert verify_dir(out_dir) == []

    ds.SmokingStatus, ds.PatientSexNeutered, ds.ResponsiblePersonRole = "NO", "UNALTERED", "PARENT"
    ds.EthnicGroup = "Caucasian"
    ds.save_as(planted)
    assert deidentify_file(str(planted), str(out), params, b"k", "p", "ANON-aaaaaaaaaaaa", verify=True).ok
    written = pydicom.dcmread(out)
    assert (written.SmokingStatus, written.PatientSexNeutered, written.ResponsiblePersonRole,
            written.EthnicGroup) == ("NO", "UNALTERED", "PARENT", "Caucasian")
    assert "PatientAlternativeCalendar" not in written
    for kw, kind in (("SmokingStatus", "not a valid value"), ("PatientAlternativeCalendar", "no table row")):
        again = pydicom.dcmread(out)
        setattr(again, kw, PII)
        again.save_as(out)
        assert any(kind in f.kind for f in verify_dir(out_dir)), kw


@needs_fixtures
def test_safe_private_only_from_the_list_per_creator_and_element(tmp_path: Path) -> None:
    """Retain Safe Private keeps what the safe-private list names under its creator (a real Siemens DWI's
    diffusion directionality, a b-value) and nothing else: not the scanner's other private groups (one holds the
    patient's sex and position as text), not an unknown creator's text with a surname, not a listed element number
    under another creator; both verifiers report an unlisted private element planted back."""
    src = sorted((FIXTURES / "siemens-xa30" / "12001_DWI_dir80_AP").glob("*.dcm"))[0]
    ds = pydicom.dcmread(src)
    ds.PatientName = "QUIMBY^JOSEPH"
    ds.private_block(0x0019, "SIEMENS MR HEADER").add_new(0x0C, "IS", "1000")
    ds.private_block(0x0029, "EVIL CORP", create=True).add_new(0x01, "LT", "patient QUIMBY, ward 4")
    ds.private_block(0x0019, "EVIL CORP", create=True).add_new(0x0C, "IS", "77")
    params = DicomDeidParams(retain_safe_private=True)
    res, planted, out = _deidentify_planted(ds, tmp_path, params)
    out_dir = out.parent
    written = pydicom.dcmread(out)
    private = {(int(e.tag), str(e.value)) for e in written.iterall() if e.tag.is_private}
    assert private == {(0x00190010, "SIEMENS MR HEADER"), (0x0019100D, "ISOTROPIC"), (0x0019100C, "1000")}
    assert b"QUIMBY" not in out.read_bytes() and b"EVIL" not in out.read_bytes()
    assert res.value.actions["00291001"] == "X(private, not on the safe list)"
    assert verify_dir(out_dir) == []
    written.private_block(0x0029, "EVIL CORP", create=True).add_new(0x01, "LT", "patient QUIMBY")
    written.save_as(out)
    assert "private attribute not on the safe list" in [f.kind for f in verify_dir(out_dir)]
    assert any("not on the safe list" in f.kind for f in compare_files(planted, out, "x").findings)


@needs_fixtures
def test_element_longer_than_the_file_is_refused(tmp_path: Path) -> None:
    """A private element declaring 3 GB just before the pixel data swallows them; what is left would read as an
    object without pixels and be written as if fine: refused with its reason instead."""
    import struct

    raw = _real_slice().read_bytes()
    at = raw.rfind(b"\xe0\x7f\x10\x00OW")  # explicit VR little endian Pixel Data
    bomb = (struct.pack("<HH", 0x7001, 0x0010) + b"LO" + struct.pack("<H", 4) + b"EVIL"
            + struct.pack("<HH", 0x7001, 0x1001) + b"UN\x00\x00" + struct.pack("<I", 3 << 30))
    planted = tmp_path / "in.dcm"
    planted.write_bytes(raw[:at] + bomb + raw[at:])
    for retain in (False, True):
        out = tmp_path / f"out-{retain}.dcm"
        res = deidentify_file(str(planted), str(out), DicomDeidParams(retain_safe_private=retain), b"k", "p",
                              "ANON-aaaaaaaaaaaa")
        assert res.reason == "impossible_length" and not out.exists(), res
        assert res.detail == f"(7001,1001) declares {3 << 30} bytes; the file has {planted.stat().st_size}"


@needs_fixtures
def test_names_in_dicom_name_form_removed_from_descriptors(tmp_path: Path) -> None:
    """Under Clean Descriptors a person's name written in DICOM name form (as in a dcm2niix validation session's
    Study Description) is removed from the descriptors that are kept; the rest of the descriptor stays; the output
    scan reports such a name planted back."""
    ds = pydicom.dcmread(_real_slice())
    ds.StudyDescription = "Rorden^Rorden_Prisma"
    ds.PerformedProcedureStepDescription = "Rorden^Rorden_Prisma brain"
    res, planted, out = _deidentify_planted(ds, tmp_path, DicomDeidParams(clean_descriptors=True))
    out_dir = out.parent
    written = pydicom.dcmread(out)
    assert b"Rorden" not in out.read_bytes()
    assert written.get("PerformedProcedureStepDescription") == "brain"
    assert written.SeriesDescription == "anat-T1w_acq-tfl"  # a protocol's name is not a person's
    assert verify_dir(out_dir) == []
    written.StudyDescription = "DOE^JANE"
    written.save_as(out)
    assert "person name in DICOM name form" in [f.kind for f in verify_dir(out_dir)]
