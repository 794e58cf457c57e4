"""Hostile and real-world inputs (issue 22): each test builds its hostile input, runs the real stage, and checks
that the stage completes, the quarantine entry and its reason, and that nothing was written or read outside the
folders the stage may use."""

from __future__ import annotations

import gzip
import io
import json
import os
import struct
import uuid
import zlib
from datetime import date
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from curation.ingest import run as ingest
from curation.jsonio import read_jsonl
from curation.params import DeidentifyParams, IngestParams, NormalizeParams, PixelDeidParams
from curation.schema import Case

from .conftest import SHARED

# OCR of figures runs Tesseract, a process: these unit tests are about paths and bounds, not pixels
# (tests/test_deid_pixels.py reads pixels)
NO_OCR = DeidentifyParams(max_failure_rate=1.0, pixels=PixelDeidParams(ocr=False))

SECRET = b"SECRET-OUTSIDE-THE-RAW-FOLDER"


# ------------------------------------------------------------------ builders
def _png(path: Path, size: int = 64, value: int = 128) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    arr = np.full((size, size), value, dtype=np.uint8)
    arr[size // 4: size // 2, size // 4: size // 2] = 255
    Image.fromarray(arr, mode="L").save(path)
    return path


def _jats(pmcid: str, figs: list[tuple[str, str]]) -> str:
    fig_xml = "".join(
        f'<fig id="{fid}"><label>Figure {n}.</label><caption><p>MRI of the brain.</p></caption>'
        f'<graphic xlink:href="{href}"/></fig>' for n, (fid, href) in enumerate(figs, 1))
    return (
        '<?xml version="1.0"?>\n<article xmlns:xlink="http://www.w3.org/1999/xlink" article-type="case-report">'
        f'<front><article-meta><article-id pub-id-type="pmcid">{pmcid}</article-id>'
        '<title-group><article-title>A case</article-title></title-group></article-meta></front>'
        '<body><sec><title>Case Report</title><p>A 60-year-old man had headaches.</p>'
        f'{fig_xml}</sec></body></article>\n')


def _radiopaedia(folder: Path, series: list[dict], **fields: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"id": folder.name, "title": "Glioma", "author": "A", "studies": [{"modality": "MRI", "series": series}]}
    doc.update(fields)
    (folder / "case.json").write_text(json.dumps(doc))
    return folder / "case.json"


def _tree(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


def _assert_only_under(before: set[Path], root: Path, allowed: list[Path]) -> None:
    """Every path that appeared under ``root`` lies inside one of ``allowed``."""
    new = _tree(root) - before
    stray = sorted(p for p in new if not any(p.is_relative_to(a) for a in allowed))
    assert not stray, f"written outside the stage folders: {stray}"


def _quarantine(out: Path) -> list[dict]:
    return list(read_jsonl(out / "quarantine.jsonl"))


def _ingest(source: str, raw: Path, out: Path, **kw: object) -> tuple[list[Case], list[dict], dict]:
    report = ingest(IngestParams(max_failure_rate=1.0, **kw), source, raw, out)
    return list(read_jsonl(out / "cases.jsonl", Case)), _quarantine(out), report.as_dict()


def _no_secret_under(root: Path) -> None:
    for p in root.rglob("*"):
        if p.is_file():
            assert SECRET not in p.read_bytes(), f"{p} holds bytes read from outside the raw folder"


# ------------------------------------------------------------------ containment: names from input are names
def test_jats_fig_id_traversal_stays_inside_every_stage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``<fig id>`` of ``../../../../x`` and one ending in ``/`` (graphic ``payload.bashrc``) through ingest, deid and
    normalize: every file lands under the stage's output folder, none is hidden or named by the input."""
    from curation.deid.stage import run as deid
    from curation.imaging.normalize import run as normalize

    monkeypatch.chdir(tmp_path)
    raw = tmp_path / "raw"
    _png(raw / "f1.png")
    _png(raw / "f2.png", value=60)
    (raw / "payload.bashrc").write_bytes(b"echo owned\n")
    far = f"medbench-hostile-{uuid.uuid4().hex}"
    (raw / "a.xml").write_text(_jats("PMC1", [("../../../../escaped", "f1.png"), ("../" * 12 + f"tmp/{far}", "f2.png"),
                                              ("evil/", "payload.bashrc")]))
    before = _tree(tmp_path)
    cases, quarantine, rep = _ingest("case-reports", raw, tmp_path / "ingest" / "case-reports")
    assert len(cases) == 1 and rep["failed"] == 0
    ids = [f.figure_id for f in cases[0].figures]
    assert all("/" not in i and not i.startswith(".") and ".." != i for i in ids), ids
    assert all(f.path and Path(f.path).resolve().is_relative_to(tmp_path / "ingest" / "case-reports")
               for f in cases[0].figures)
    deid(NO_OCR, tmp_path / "ingest", tmp_path / "deid")
    normalize(NormalizeParams(max_failure_rate=1.0), tmp_path / "deid", tmp_path / "normalize")
    _assert_only_under(before, tmp_path, [tmp_path / "ingest", tmp_path / "deid", tmp_path / "normalize",
                                          tmp_path / ".curation"])
    assert not Path(f"/tmp/{far}.png").exists() and not Path(f"/tmp/{far}").exists()
    assert not [p for p in tmp_path.rglob("*") if p.name.startswith(".") and "bashrc" in p.name]
    dq = _quarantine(tmp_path / "deid")
    # the .bashrc "figure" is not an image: de-identification quarantines it instead of copying it on
    assert [q["reason"] for q in dq] == ["image_unreadable"]
    assert not Path(dq[0]["path"]).is_absolute() and dq[0]["path"].startswith("case-reports/files/")


def test_radiopaedia_series_name_and_image_paths_are_contained(tmp_path: Path) -> None:
    """A series ``name`` holding ``../``, an image path ``../../secret``, an image symlinked out of the raw folder:
    the names become safe file names, the outside files are quarantined ``outside_raw`` and never read."""
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.png"
    secret.write_bytes(SECRET)
    raw = tmp_path / "raw"
    case = raw / "case-1"
    _png(case / "images" / "001.png")
    (case / "images" / "link.png").symlink_to(secret)
    (raw / "linked-folder").symlink_to(outside, target_is_directory=True)
    _radiopaedia(case, [{"name": "../../../../escaped", "images": ["images/001.png"]},
                        {"name": "T2", "images": ["../../outside/secret.png", "images/link.png",
                                                  str(secret)]}])
    before = _tree(tmp_path)
    cases, quarantine, rep = _ingest("radiopaedia", raw, tmp_path / "out")
    _assert_only_under(before, tmp_path, [tmp_path / "out"])
    _no_secret_under(tmp_path / "out")
    assert len(cases) == 1
    figs = cases[0].figures
    assert [f.missing for f in figs] == [False, True, True, True]
    assert "/" not in figs[0].figure_id and Path(figs[0].path).resolve().is_relative_to(tmp_path / "out")
    reasons = sorted((q["path"], q["reason"]) for q in quarantine)
    assert reasons == [
        ("case-1/case.json#s1-T2-001", "outside_raw"), ("case-1/case.json#s1-T2-002", "outside_raw"),
        ("case-1/case.json#s1-T2-003", "outside_raw"), ("case-1/images/link.png", "outside_raw"),
        ("linked-folder", "outside_raw")]
    assert rep["failures_by_reason"] == {"outside_raw": 5}


def test_jats_absolute_hrefs_outside_and_missing(tmp_path: Path) -> None:
    """An absolute href to a file outside the raw folder is quarantined ``outside_raw`` (not copied); one to a missing
    file is an incomplete figure, not a traceback."""
    outside = tmp_path / "elsewhere.png"
    outside.write_bytes(SECRET)
    raw = tmp_path / "raw"
    _png(raw / "ok.png")
    (raw / "a.xml").write_text(_jats("PMC2", [("f1", str(outside)), ("f2", "/nonexistent/dir/missing.png"),
                                              ("f3", "ok.png")]))
    before = _tree(tmp_path)
    cases, quarantine, rep = _ingest("case-reports", raw, tmp_path / "out")
    _assert_only_under(before, tmp_path, [tmp_path / "out"])
    _no_secret_under(tmp_path / "out")
    assert [f.missing for f in cases[0].figures] == [True, True, False]
    assert {(q["path"], q["reason"]) for q in quarantine} == {
        ("a.xml#f1", "outside_raw"), ("a.xml#f2", "incomplete:figure_missing")}


def test_non_utf8_file_names_are_quarantined(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    case = raw / "case-1"
    _png(case / "images" / "001.png")
    _radiopaedia(case, [{"name": "FLAIR", "images": ["images/001.png"]}])
    bad = os.fsencode(case / "images") + b"/caf\xe9-\xff.png"
    with open(bad, "wb") as fh:
        fh.write(b"not read")
    os.mkdir(os.fsencode(raw) + b"/dir-\xfe")
    cases, quarantine, rep = _ingest("radiopaedia", raw, tmp_path / "out")
    assert len(cases) == 1 and not cases[0].figures[0].missing
    text = (tmp_path / "out" / "quarantine.jsonl").read_bytes().decode("utf-8")  # the quarantine is valid UTF-8
    assert {(q["path"], q["reason"]) for q in quarantine} == {
        ("case-1/images/caf\\xe9-\\xff.png", "filename_not_utf8"), ("dir-\\xfe", "filename_not_utf8")}, text


def test_huge_fig_id_is_bounded(tmp_path: Path) -> None:
    """A 50 MB ``fig id``: the figure keeps its number as id, one quarantine line says why, the case is ingested."""
    raw = tmp_path / "raw"
    _png(raw / "f1.png")
    (raw / "a.xml").write_text(_jats("PMC3", [("A" * 50_000_000, "f1.png")]))
    cases, quarantine, rep = _ingest("case-reports", raw, tmp_path / "out")
    assert [f.figure_id for f in cases[0].figures] == ["fig1"] and cases[0].figures[0].path
    assert quarantine == [{"path": "a.xml#fig1", "reason": "incomplete:figure_id_too_long",
                           "detail": "fig id of 50000000 characters (bounds.max_id_chars 200); the figure is kept "
                                     "as fig1"}]
    assert (tmp_path / "out" / "cases.jsonl").stat().st_size < 100_000


# ------------------------------------------------------------------ one bad input never aborts a stage
@pytest.mark.parametrize(("field", "value", "detail"), [
    ("images", [1, 2], "study 1 series 1 images is not a list of file names"),
    ("series", ["FLAIR"], "study 1 series 1 is str, not an object"),
    ("title", ["x"], "title is list, not text"),
])
def test_radiopaedia_json_of_the_wrong_shape(tmp_path: Path, field: str, value: object, detail: str) -> None:
    raw = tmp_path / "raw"
    _png(raw / "good" / "001.png")
    _radiopaedia(raw / "good", [{"name": "FLAIR", "images": ["001.png"]}])
    if field == "images":
        _radiopaedia(raw / "bad", [{"name": "FLAIR", "images": value}])
    elif field == "series":
        (raw / "bad").mkdir()
        (raw / "bad" / "case.json").write_text(json.dumps({"title": "x", "studies": [{"series": value}]}))
    else:
        _radiopaedia(raw / "bad", [], title=value)
    cases, quarantine, rep = _ingest("radiopaedia", raw, tmp_path / "out")
    assert len(cases) == 1
    assert quarantine == [{"path": "bad/case.json", "reason": "case_malformed", "detail": detail}]
    assert rep["failures_by_reason"] == {"case_malformed": 1}


def test_radiopaedia_differential_as_text_is_one_diagnosis(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    _png(raw / "c" / "001.png")
    _radiopaedia(raw / "c", [{"name": "FLAIR", "images": ["001.png"]}], differential="metastasis")
    cases, _, _ = _ingest("radiopaedia", raw, tmp_path / "out")
    assert cases[0].diagnosis.differential == ["metastasis"]


def test_oasis3_sidecars_not_utf8_or_not_an_object(raw_copy: Path, tmp_path: Path) -> None:
    src = raw_copy / "oasis3"
    sidecars = sorted(src.rglob("*_T1w.json"))
    assert len(sidecars) >= 2
    sidecars[0].write_bytes(b'{"Manufacturer": "Caf\xe9"}')
    sidecars[1].write_text("[1, 2, 3]")
    cases, quarantine, rep = _ingest("oasis3", src, tmp_path / "out")
    reasons = {(q["path"], q["reason"]) for q in quarantine}
    assert (sidecars[0].relative_to(src).as_posix(), "sidecar_not_utf8") in reasons
    assert (sidecars[1].relative_to(src).as_posix(), "sidecar_not_object") in reasons
    series = [s for c in cases for s in c.all_series()]
    names = {Path(f).name for s in series for f in s.files}
    assert sidecars[0].name not in names and sidecars[1].name not in names  # the series stay, without the sidecar
    assert {sidecars[0].name.replace(".json", ".nii.gz"), sidecars[1].name.replace(".json", ".nii.gz")} <= names


# ------------------------------------------------------------------ resource bounds
def _png_claiming(path: Path, width: int, height: int) -> Path:
    """A PNG whose header claims ``width`` x ``height`` grey pixels, with a few bytes of data (a decompression bomb
    as far as any reader that trusts the header is concerned)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00" * 1024))
                     + chunk(b"IEND", b""))
    return path


def _jpeg_claiming(path: Path, width: int, height: int) -> Path:
    buf = io.BytesIO()
    Image.new("L", (16, 16), 100).save(buf, format="JPEG")
    data = bytearray(buf.getvalue())
    sof = data.index(b"\xff\xc0")
    data[sof + 5: sof + 9] = struct.pack(">HH", height, width)
    path.write_bytes(bytes(data))
    return path


def test_decompression_bomb_figures_are_quarantined_in_deid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PNG and JPEG figures claiming 60000x60000 pixels: each one quarantined ``image_too_large`` from its header,
    the good figure is de-identified, the stage completes."""
    from curation.deid.stage import run as deid

    monkeypatch.chdir(tmp_path)
    raw = tmp_path / "raw"
    _png(raw / "good.png")
    _png_claiming(raw / "bomb.png", 60000, 60000)
    _jpeg_claiming(raw / "bomb.jpg", 60000, 60000)
    for bomb in ("bomb.png", "bomb.jpg"):  # what escaped deid/files.py before: Pillow's own bomb error
        with pytest.raises(Image.DecompressionBombError):
            Image.open(raw / bomb)
    (raw / "a.xml").write_text(_jats("PMC4", [("f1", "good.png"), ("f2", "bomb.png"), ("f3", "bomb.jpg")]))
    _ingest("case-reports", raw, tmp_path / "ingest" / "case-reports")
    before = _tree(tmp_path)
    rep = deid(NO_OCR, tmp_path / "ingest", tmp_path / "deid").as_dict()
    _assert_only_under(before, tmp_path, [tmp_path / "deid"])
    q = _quarantine(tmp_path / "deid")
    case_id = next(read_jsonl(tmp_path / "ingest" / "case-reports" / "cases.jsonl", Case)).case_id
    assert [(e["path"], e["reason"]) for e in q] == [
        (f"case-reports/files/{case_id}/f2.png", "image_too_large"),
        (f"case-reports/files/{case_id}/f3.jpg", "image_too_large")]
    assert all("60000x60000 = 3600000000 pixels, over bounds.max_image_pixels" in e["detail"] for e in q)
    assert rep["failures_by_reason"] == {"image_too_large": 2}
    case = next(read_jsonl(tmp_path / "deid" / "cases.jsonl", Case))
    assert [f.missing for f in case.figures] == [False, True, True]


def _nifti_claiming(path: Path, shape: tuple[int, ...], payload: int = 4096) -> Path:
    """A .nii.gz of a few KB whose header promises ``shape`` int16 voxels (GiBs decoded)."""
    import nibabel as nib

    hdr = nib.Nifti1Header()
    hdr.set_data_shape(shape)
    hdr.set_data_dtype(np.int16)
    hdr.set_zooms((1.0,) * len(shape))
    raw = hdr.binaryblock + b"\x00" * 4 + b"\x00" * payload
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(raw))
    return path


def test_nifti_that_expands_to_gibs_is_refused_from_its_header(raw_copy: Path, tmp_path: Path) -> None:
    """A 4 KB .nii.gz promising 8 GiB: ingest quarantines it ``volume_too_large`` without reading it (the run stays
    small), and the de-identification and normalize steps refuse it the same way."""
    import resource

    from curation.deid.files import clean_volume
    from curation.imaging.normalize import process_series
    from curation.imaging.steps.base import SeriesTask

    src = raw_copy / "oasis3"
    session = sorted(p for p in src.iterdir() if p.is_dir())[0]
    bomb = _nifti_claiming(session / "anat9" / f"sub-{session.name[:8]}_ses-d0000_FLAIR.nii.gz", (2048, 2048, 1024))
    assert bomb.stat().st_size < 100_000
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cases, quarantine, rep = _ingest("oasis3", src, tmp_path / "out")
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before < 1_000_000  # KiB: under 1 GiB grown
    entry = next(q for q in quarantine if q["path"] == bomb.relative_to(src).as_posix())
    assert entry["reason"] == "volume_too_large" and "8589934592 decoded bytes" in entry["detail"]
    assert len(cases) >= 1 and rep["failures_by_reason"] == {"volume_too_large": 1}
    res = clean_volume(str(bomb), str(tmp_path / "deid" / "x.nii.gz"), DeidentifyParams().bounds.max_volume_bytes)
    assert not res.ok and res.reason == "volume_too_large" and not (tmp_path / "deid").exists()
    res = process_series(SeriesTask("nifti", [str(bomb)], NormalizeParams(), str(tmp_path / "n"), str(tmp_path / "n")))
    assert not res.ok and res.reason == "volume_too_large" and not (tmp_path / "n").exists()


def test_imaging_convert_of_a_gzip_bomb_stops_at_the_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``curate imaging convert`` of a .dcm.gz that inflates past the bound: one line, exit 3, and the temporary
    folder holds nothing afterwards (it never held more than the bound)."""
    import tempfile

    from typer.testing import CliRunner

    from curation.cli import app

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    bomb = tmp_path / "series.dcm.gz"
    with gzip.open(bomb, "wb", compresslevel=1) as fh:
        fh.write(b"\x00" * 128 + b"DICM")
        block = b"\x00" * (1 << 20)
        for _ in range(40):
            fh.write(block)
    assert bomb.stat().st_size < 1_000_000
    params = tmp_path / "params.yaml"
    params.write_text("normalize:\n  bounds:\n    max_volume_bytes: 1048576\n")
    result = CliRunner().invoke(app, ["imaging", "convert", str(bomb), str(tmp_path / "out.nii.gz"),
                                      "--params", str(params)])
    assert result.exit_code == 3
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {bomb}: volume_too_large")
    assert "decompresses to more than 17825792 bytes" in lines[0]
    assert list(scratch.iterdir()) == [] and not (tmp_path / "out.nii.gz").exists()


# ------------------------------------------------------------------ one series, two patients (issue 51)
def _patients_series(folder: Path, person: object, slices: range) -> list[Path]:
    """The demo's DICOM writer: one series key, so two people's files share the Series and SOP Instance UIDs."""
    from curation.demo.dicom import write_dicom_series

    vol = np.random.default_rng(51).integers(0, 4000, size=(12, 10, 6)).astype(np.uint16)
    write_dicom_series(folder, vol, person=person, study_key="study-51", series_key="t1", series_description="T1",
                       sequence="T1w", acq=date(2024, 5, 2), series_number=2)  # type: ignore[arg-type]
    return [folder / f"t1_{k + 1:03d}.dcm" for k in slices]


def _mixed_series(tmp_path: Path, case: str) -> Path:
    """A folder of one series whose slices belong to two patients: ``split`` (slices 1-3 of one, 4-6 of the other),
    ``sop_uid`` (every slice of one, and another patient's copy of slice 3: one SOP Instance UID, two Patient IDs),
    ``birth_date`` (one Patient ID and name, two birth dates), or ``one`` (a control: one patient's six slices)."""
    from dataclasses import replace as dc_replace

    from curation.demo.dicom import FakePerson

    a = FakePerson("QUIMBY^JOSEPH", date(1951, 12, 3), "M", "QZ7734", "1 Main St", "555-0101")
    b = {"birth_date": dc_replace(a, birth=date(1962, 1, 9))}.get(
        case, FakePerson("FLANDERS^MAUDE", date(1960, 4, 1), "F", "MF2291", "2 Elm St", "555-0102"))
    folder = tmp_path / "series"
    folder.mkdir()
    picks = {"split": (range(3), range(3, 6)), "sop_uid": (range(6), range(2, 3)),
             "birth_date": (range(3), range(3, 6)), "one": (range(6), range(0))}[case]
    for person, slices, tag in ((a, picks[0], "a"), (b, picks[1], "b")):
        for f in _patients_series(tmp_path / tag, person, slices):
            f.rename(folder / f"{tag}_{f.name}")
    return folder


@pytest.mark.parametrize(("case", "element"), [("split", "PatientID"), ("sop_uid", "PatientID"),
                                               ("birth_date", "PatientBirthDate")])
def test_imaging_convert_refuses_a_series_of_two_patients(tmp_path: Path, case: str, element: str) -> None:
    """Issue 51: ``curate imaging convert`` of a folder whose slices belong to two patients wrote one volume of both.
    Refused in one line naming the folder, the element and two files (never the values), exit 3, nothing written."""
    from typer.testing import CliRunner

    from curation.cli import app

    folder, out = _mixed_series(tmp_path, case), tmp_path / "out.nii.gz"
    result = CliRunner().invoke(app, ["imaging", "convert", str(folder), str(out)])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 3 and len(lines) == 1, result.output
    assert lines[0].startswith(f"error: {folder}: mixed_patients (slices of 2 patients in one series ({element} "
                               "differs: a_t1_001.dcm vs b_t1_"), lines[0]
    assert lines[0].endswith("refusing to make one volume of them)")
    assert not any(v in lines[0] for v in ("QZ7734", "MF2291", "QUIMBY", "FLANDERS", "1951", "1962", "1960"))
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "series"]


def test_imaging_convert_takes_one_patients_series(tmp_path: Path) -> None:
    """The control for the test above: the same writer, one patient, converts (names padded differently still name
    one patient)."""
    import pydicom
    from typer.testing import CliRunner

    from curation.cli import app

    folder, out = _mixed_series(tmp_path, "one"), tmp_path / "out.nii.gz"
    first = sorted(folder.iterdir())[0]
    ds = pydicom.dcmread(first)
    ds.PatientName = "QUIMBY^JOSEPH^^^"
    ds.save_as(first)
    result = CliRunner().invoke(app, ["imaging", "convert", str(folder), str(out)])
    assert result.exit_code == 0, result.output
    assert out.is_file() and "shape (12, 10, 6)" in result.output


def test_normalize_quarantines_a_series_of_two_patients(tmp_path: Path) -> None:
    """The normalize stage reads series through the same loader: the series is refused ``mixed_patients``."""
    from curation.imaging.normalize import process_series
    from curation.imaging.steps.base import SeriesTask

    folder = _mixed_series(tmp_path, "split")
    files = sorted(str(p) for p in folder.iterdir())
    res = process_series(SeriesTask("dicom", files, NormalizeParams(), str(tmp_path / "n"), str(tmp_path / "n")))
    assert not res.ok and res.reason == "mixed_patients" and "PatientID differs" in res.detail
    assert not (tmp_path / "n").exists()


@pytest.mark.skipif(not (SHARED / "fixtures" / "dicom-real" / "siemens-xa30").is_dir(), reason="needs ../shared")
def test_imaging_convert_refuses_a_real_series_with_another_patients_slice(tmp_path: Path) -> None:
    """A real scanner series (Siemens XA30) where one slice is given another Patient ID."""
    import shutil

    import pydicom
    from typer.testing import CliRunner

    from curation.cli import app

    real = SHARED / "fixtures" / "dicom-real" / "siemens-xa30" / "2001_AAHead_Scout"
    folder = tmp_path / "scout"
    shutil.copytree(real, folder)
    files = sorted(folder.iterdir())
    ds = pydicom.dcmread(files[-1])
    ds.PatientID = str(ds.get("PatientID", "") or "") + "-OTHER"
    ds.save_as(files[-1])
    result = CliRunner().invoke(app, ["imaging", "convert", str(folder), str(tmp_path / "out.nii.gz")])
    assert result.exit_code == 3, result.output
    assert result.output.startswith(f"error: {folder}: mixed_patients (slices of 2 patients in one series "
                                    f"(PatientID differs: ")
    assert files[-1].name in result.output and not (tmp_path / "out.nii.gz").exists()


# ------------------------------------------------------------------ quarantine bookkeeping
def test_failed_stage_keeps_its_quarantine(tmp_path: Path) -> None:
    from curation.errors import FailureRateExceeded

    raw = tmp_path / "raw"
    _png(raw / "good" / "001.png")
    _radiopaedia(raw / "good", [{"name": "FLAIR", "images": ["001.png"]}])
    (raw / "bad").mkdir()
    (raw / "bad" / "case.json").write_text("{not json")
    out = tmp_path / "out"
    with pytest.raises(FailureRateExceeded) as err:
        ingest(IngestParams(max_failure_rate=0.0), "radiopaedia", raw, out)
    kept = tmp_path / "out.failed" / "quarantine.jsonl"
    assert str(kept) in str(err.value) and not out.exists()
    assert [(q["path"], q["reason"]) for q in read_jsonl(kept)] == [("bad/case.json", "json_invalid")]
    assert json.loads((tmp_path / "out.failed" / "report.json").read_text())["failures_by_reason"] == {
        "json_invalid": 1}
    (raw / "bad" / "case.json").unlink()
    ingest(IngestParams(max_failure_rate=0.0), "radiopaedia", raw, out)  # a success clears the old evidence
    assert out.is_dir() and not (tmp_path / "out.failed").exists()


def test_radiopaedia_used_images_are_not_reported_unreferenced(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The raw folder given as a relative path (as `dvc repro` does): the used images are not 'unreferenced'."""
    monkeypatch.chdir(tmp_path)
    _png(tmp_path / "raw" / "c" / "images" / "001.png")
    _png(tmp_path / "raw" / "c" / "images" / "stray.png")
    _radiopaedia(tmp_path / "raw" / "c", [{"name": "FLAIR", "images": ["images/001.png"]}])
    cases, quarantine, rep = _ingest("radiopaedia", Path("raw"), Path("out"))
    assert quarantine == [{"path": "c/images/stray.png", "reason": "skipped:unreferenced_image",
                           "detail": "image not listed in any case.json"}]


def test_edit_not_applied_is_counted(tmp_path: Path) -> None:
    from curation.jsonio import write_jsonl
    from curation.params import ReviewParams
    from curation.review.merge import run as merge
    from curation.schema import Generator, Item

    item = Item(item_id="i1", case_id="c1", source="radiopaedia", task_type="direct_diagnosis", format="mcq",
                question="What is the diagnosis?", options=["glioma", "abscess"], answer="glioma", answer_index=0,
                generator=Generator(kind="template"), status="kept")
    write_jsonl(tmp_path / "in" / "items.jsonl", [item])
    ann = [{"data": {"item_id": "i1"}, "annotations": [{"completed_by": 1, "result": [
        {"from_name": "verdict", "value": {"choices": ["accept_with_edits"]}},
        {"from_name": "answer", "value": {"text": ["metastasis"]}}]}]}]
    (tmp_path / "ann.json").write_text(json.dumps(ann))
    rep = merge(ReviewParams(), tmp_path / "in", tmp_path / "ann.json", tmp_path / "out").as_dict()
    assert _quarantine(tmp_path / "out") == [{"path": "i1", "reason": "edit_not_applied:answer_not_in_options",
                                              "detail": "the item is kept as generated"}]
    assert rep["failures_by_reason"] == {"edit_not_applied:answer_not_in_options": 1} and rep["failed"] == 1


def _blank_case(tmp_path: Path) -> Path:
    import nibabel as nib

    from curation.jsonio import write_jsonl
    from curation.schema import Series, Visit

    src = tmp_path / "deid"
    vol = src / "files" / "c1" / "s1" / "blank.nii.gz"
    vol.parent.mkdir(parents=True)
    nib.save(nib.Nifti1Image(np.zeros((32, 32, 32), dtype=np.int16), np.eye(4)), str(vol))
    case = Case(case_id="c1", source="oasis3", license="x", visits=[Visit(visit_id="v1", series=[
        Series(series_id="s1", format="nifti", files=[str(vol)])])])
    write_jsonl(src / "cases.jsonl", [case])
    return vol


def test_blank_volume_is_quarantined_with_a_path_relative_to_the_input(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from curation.imaging.normalize import run as normalize

    monkeypatch.chdir(tmp_path)
    _blank_case(tmp_path)
    rep = normalize(NormalizeParams(max_failure_rate=1.0), tmp_path / "deid", tmp_path / "normalize").as_dict()
    assert _quarantine(tmp_path / "normalize") == [{"path": "files/c1/s1/blank.nii.gz", "reason": "volume_blank",
                                                    "detail": "every voxel is 0: nothing to render"}]
    assert rep["failures_by_reason"] == {"volume_blank": 1}


def test_imaging_render_of_an_all_zero_volume_is_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from curation.cli import app

    vol = _blank_case(tmp_path)
    result = CliRunner().invoke(app, ["imaging", "render", str(vol), str(tmp_path / "r"),
                                      "--params", str(tmp_path / "none.yaml")])
    assert result.exit_code == 3, result.output
    assert result.output.strip().splitlines() == [
        f"error: {vol}: volume_blank (every voxel is 0: nothing to render)"]


# ------------------------------------------------------------------ real scanner files: every lossless syntax
REAL = SHARED / "fixtures" / "dicom-real"
needs_real = pytest.mark.skipif(not REAL.is_dir(), reason="shared DICOM fixtures absent")


def _encode(ds: object, syntax: str, fragments: int = 1) -> None:
    """Re-encode a dataset in place: JPEG-LS and JPEG 2000 with pydicom's encoders (pyjpegls, pylibjpeg-openjpeg);
    JPEG Lossless SV1 (process 14, first-order prediction) with libjpeg-turbo through imagecodecs, pydicom having
    no encoder for it; ``fragments`` > 1 splits every frame over that many fragments."""
    import imagecodecs
    from pydicom.encaps import encapsulate, generate_frames
    from pydicom.uid import JPEG2000Lossless, JPEGLosslessSV1, JPEGLSLossless

    uid = {"jpeg-ls": JPEGLSLossless, "jpeg-lossless": JPEGLosslessSV1, "jpeg2000": JPEG2000Lossless}[syntax]
    if uid == JPEGLosslessSV1:
        arr = ds.pixel_array  # type: ignore[attr-defined]
        frames = arr if int(ds.get("NumberOfFrames") or 1) > 1 else arr[None]  # type: ignore[attr-defined]
        bits = int(ds.BitsStored)  # type: ignore[attr-defined]
        encoded = [imagecodecs.jpeg8_encode(np.ascontiguousarray(f.astype(np.uint16)), lossless=True, predictor=1,
                                            bitspersample=bits) for f in frames]
        assert all(b"\xff\xc3" in e[:2000] for e in encoded)  # SOF3: lossless Huffman
        ds.PixelData = encapsulate(encoded)  # type: ignore[attr-defined]
        ds["PixelData"].VR = "OB"  # type: ignore[index]
        ds.file_meta.TransferSyntaxUID = uid  # type: ignore[attr-defined]
        ds.PixelRepresentation = 0  # type: ignore[attr-defined]
    else:
        ds.compress(uid)  # type: ignore[attr-defined]
    if fragments > 1:
        n = int(ds.get("NumberOfFrames") or 1)  # type: ignore[attr-defined]
        frames = list(generate_frames(ds.PixelData, number_of_frames=n))  # type: ignore[attr-defined]
        ds.PixelData = encapsulate(frames, fragments_per_frame=fragments)  # type: ignore[attr-defined]


@needs_real
@pytest.mark.parametrize(("syntax", "fragments"), [("jpeg-lossless", 1), ("jpeg-ls", 1), ("jpeg2000", 1),
                                                   ("jpeg-ls", 3), ("jpeg-lossless", 2)])
def test_lossless_series_convert_like_the_uncompressed_one(tmp_path: Path, syntax: str, fragments: int) -> None:
    """A real Siemens T1w series (16 slices) and a real enhanced multi-frame file re-encoded losslessly convert to
    exactly the voxels of the uncompressed originals (pylibjpeg, pylibjpeg-libjpeg, pylibjpeg-openjpeg, pyjpegls)."""
    import pydicom

    from curation.imaging.convert import convert_path

    series = sorted((REAL / "siemens-xa30" / "5001_anat-T1w_acq-tfl").iterdir())[:16]
    multi = REAL / "agfa-pacs" / "Agfa" / "011-0001.img"
    ref_dir = tmp_path / "ref"
    ref_dir.mkdir()
    out_dir = tmp_path / syntax
    out_dir.mkdir()
    for f in series:
        ds = pydicom.dcmread(f)
        ds.save_as(ref_dir / f.name)
        if ds.PixelRepresentation and syntax == "jpeg-lossless":
            pytest.skip("signed pixels")
        _encode(ds, syntax, fragments)
        ds.save_as(out_dir / f.name)
    ref, _ = convert_path(ref_dir)
    got, info = convert_path(out_dir)
    assert pydicom.dcmread(next(out_dir.iterdir())).file_meta.TransferSyntaxUID.is_compressed
    assert np.array_equal(np.asarray(got.dataobj), np.asarray(ref.dataobj)) and np.allclose(got.affine, ref.affine)
    ds = pydicom.dcmread(multi)
    _encode(ds, syntax, fragments)
    ds.save_as(tmp_path / "multi.dcm")
    ref_m, _ = convert_path(multi)
    got_m, info_m = convert_path(tmp_path / "multi.dcm")
    assert info_m.volume_file and got_m.shape == ref_m.shape
    assert np.array_equal(np.asarray(got_m.dataobj), np.asarray(ref_m.dataobj))


# ------------------------------------------------------------------ worker pools end with their parent
def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        out.extend(int(t) for t in text)
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


@pytest.mark.integration  # subprocess and process pool
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc")
def test_kill_9_of_a_run_leaves_no_worker_behind(tmp_path: Path) -> None:
    """The process pool ``--workers 2`` uses (curation.parallel.pmap, as normalize calls it), its parent killed with
    SIGKILL mid-run: both workers are gone within seconds instead of blocking for ever."""
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "run.py"
    script.write_text(
        "import time\nfrom curation.parallel import pmap\n\n\ndef slow(x):\n    time.sleep(120)\n    return x\n\n\n"
        "if __name__ == '__main__':\n    print(list(pmap(slow, range(6), workers=2)))\n")
    proc = subprocess.Popen([sys.executable, str(script)], cwd=Path(__file__).resolve().parents[1])
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(workers) < 2:
            time.sleep(0.1)
            workers = [c for c in _children(proc.pid) if _alive(c)]
        assert len(workers) >= 2, "the pool never started"
        time.sleep(0.5)  # the workers are inside their tasks
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(w) for w in workers):
            time.sleep(0.1)
        left = [w for w in workers if _alive(w)]
        assert not left, f"workers {left} outlived their killed parent"
    finally:  # whatever happened, nothing this test started outlives it
        for w in workers:
            if _alive(w):
                os.kill(w, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()


# ------------------------------------------------------------------ release integrity
def _git(cwd: Path, *args: str) -> str:
    import subprocess

    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout


@pytest.fixture
def release_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str, Path]:
    """A release built through `curate release build` in a small git project; returns (release, printed digest,
    project)."""
    from typer.testing import CliRunner

    from curation.cli import app
    from curation.jsonio import write_jsonl
    from curation.schema import Generator, Item

    proj = tmp_path / "proj"
    proj.mkdir()
    monkeypatch.chdir(proj)
    (proj / "params.yaml").write_text("release:\n  name: hostile\n  version: 0.1.0\n  arrow_copy: false\n")
    (proj / "dvc.lock").write_text("schema: '2.0'\n")
    _git(proj, "init", "-q")
    _git(proj, "add", "params.yaml", "dvc.lock")
    _git(proj, "commit", "-q", "-m", "init")
    items = []
    for n in range(2):
        img = _png(proj / "renders" / f"r{n}.png", value=40 + 50 * n)
        items.append(Item(item_id=f"item{n}", case_id=f"case{n}", source="radiopaedia", task_type="direct_diagnosis",
                          format="mcq", question="What is the most likely diagnosis?", options=["glioma", "abscess"],
                          answer="glioma", answer_index=0, images=[str(img.relative_to(proj))],
                          generator=Generator(kind="template"), status="reviewed", license="CC BY-NC-SA 3.0"))
    write_jsonl(proj / "review" / "items.jsonl", items)
    result = CliRunner().invoke(app, ["release", "build", "review", "releases"])
    assert result.exit_code == 0, result.output
    digest = result.output.strip().splitlines()[-1].removeprefix("manifest sha256: ")
    assert len(digest) == 64
    return proj / "releases" / "hostile-0.1.0", digest, proj


def _verify(root: Path, digest: str | None = None) -> tuple[int, list[str]]:
    from typer.testing import CliRunner

    from curation.cli import app

    args = ["release", "verify", str(root)] + (["--digest", digest] if digest else [])
    result = CliRunner().invoke(app, args)
    return result.exit_code, result.output.strip().splitlines()


def _manifest(root: Path) -> dict:
    return json.loads((root / "manifest.json").read_text())


def _rewrite_manifest(root: Path, m: dict, card_too: bool = False) -> None:
    """What a careful tamperer does: rewrite the manifest to match, and optionally the digest the card names."""
    import hashlib

    from curation.jsonio import write_json
    from curation.release.card import DIGEST_PLACEHOLDER, stated_digest, with_digest

    old = stated_digest((root / "README.md").read_text())
    if card_too:
        card = with_digest((root / "README.md").read_text(), DIGEST_PLACEHOLDER)
        m["files"]["README.md"] = hashlib.sha256(card.encode()).hexdigest()
    write_json(root / "manifest.json", m)
    if card_too:
        new = hashlib.sha256((root / "manifest.json").read_bytes()).hexdigest()
        (root / "README.md").write_text((root / "README.md").read_text().replace(old, new))


@pytest.mark.integration  # git
def test_release_digest_printed_written_in_the_card_and_pinned(release_dir: tuple[Path, str, Path]) -> None:
    import hashlib

    root, digest, _ = release_dir
    assert digest == hashlib.sha256((root / "manifest.json").read_bytes()).hexdigest()
    assert f"**Manifest SHA-256:** `{digest}`" in (root / "README.md").read_text()
    code, lines = _verify(root, digest)
    assert code == 0 and lines == [f"{root}: verified (manifest sha256 {digest}, matches the pinned digest)"]
    code, lines = _verify(root, "0" * 64)
    assert code == 6 and lines[0] == f"manifest.json: SHA-256 {digest} is not the pinned digest {'0' * 64}"


@pytest.mark.integration  # git
@pytest.mark.parametrize("tamper", ["swap_image", "delete_image", "rewrite_created_from"])
def test_release_changed_with_its_manifest_fails_against_the_pinned_digest(
        release_dir: tuple[Path, str, Path], tamper: str) -> None:
    """A file and its manifest entry changed together (or an image and its entry deleted, or created_from
    rewritten): the card's digest no longer matches; and even with the card rewritten too, the pinned digest fails."""
    from curation.jsonio import sha256_file

    root, digest, _ = release_dir
    m = _manifest(root)
    image = sorted(r for r in m["files"] if r.startswith("images/"))[0]
    if tamper == "swap_image":
        _png(root / image, value=250)
        m["files"][image] = sha256_file(root / image)
    elif tamper == "delete_image":
        (root / image).unlink()
        del m["files"][image]
    else:
        m["created_from"]["git_revision"] = "f" * 40
    _rewrite_manifest(root, m)
    code, lines = _verify(root)
    assert code == 6 and any(ln.startswith("README.md: names manifest SHA-256 " + digest) for ln in lines), lines
    _rewrite_manifest(root, _manifest(root), card_too=True)
    assert _verify(root)[0] == 0  # consistent forgery: only a digest published elsewhere can catch it
    code, lines = _verify(root, digest)
    assert code == 6 and lines[0].startswith("manifest.json: SHA-256 ") and lines[0].endswith(digest)


@pytest.mark.integration  # git
def test_release_verify_refuses_paths_outside_and_symlinks(release_dir: tuple[Path, str, Path]) -> None:
    from curation.jsonio import sha256_file

    root, digest, proj = release_dir
    outside = root.parent / "outside.txt"
    outside.write_text("not part of the release\n")
    m = _manifest(root)
    m["files"]["../outside.txt"] = sha256_file(outside)  # a true checksum: the old verify passed it
    m["files"]["/etc/hostname"] = "0" * 64
    image = sorted(r for r in m["files"] if r.startswith("images/"))[0]
    copy = proj / "elsewhere.png"
    copy.write_bytes((root / image).read_bytes())
    (root / image).unlink()
    (root / image).symlink_to(copy)  # same bytes, same checksum, but outside the release
    _rewrite_manifest(root, m, card_too=True)
    code, lines = _verify(root)
    assert code == 6
    assert f"{image}: is a symlink; a release holds plain files only" in lines
    assert "../outside.txt: path outside the release; not read" in lines
    assert "/etc/hostname: path outside the release; not read" in lines


@pytest.mark.integration  # git
def test_release_from_a_dirty_tree_records_it(release_dir: tuple[Path, str, Path]) -> None:
    import hashlib
    import subprocess

    from curation.params import ReleaseParams
    from curation.release.build import run as build

    root, _, proj = release_dir
    assert _manifest(root)["created_from"]["git_tree"] == "clean"
    assert _manifest(root)["created_from"]["uncommitted_sha256"] is None
    (proj / "params.yaml").write_text((proj / "params.yaml").read_text().replace("0.1.0", "0.2.0"))
    build(ReleaseParams(name="hostile", version="0.2.0", arrow_copy=False), proj / "review", proj / "releases")
    made = _manifest(proj / "releases" / "hostile-0.2.0")["created_from"]
    diff = subprocess.run(["git", "diff", "HEAD", "--binary", "--no-ext-diff", "--no-color"], cwd=proj,
                          capture_output=True, check=True).stdout
    assert made["git_tree"] == "dirty" and made["uncommitted_sha256"] == hashlib.sha256(diff).hexdigest()
    assert made["git_revision"] == _git(proj, "rev-parse", "HEAD").strip()


def test_document_over_the_bound_is_quarantined_not_read(tmp_path: Path) -> None:
    from curation.params import Bounds

    raw = tmp_path / "raw"
    _png(raw / "c" / "001.png")
    _radiopaedia(raw / "c", [{"name": "FLAIR", "images": ["001.png"]}], body="x" * 5000)
    _png(raw / "d" / "001.png")
    _radiopaedia(raw / "d", [{"name": "FLAIR", "images": ["001.png"]}])
    cases, quarantine, rep = _ingest("radiopaedia", raw, tmp_path / "out", bounds=Bounds(max_document_bytes=2000))
    size = (raw / "c" / "case.json").stat().st_size
    assert len(cases) == 1
    assert {(q["path"], q["reason"], q["detail"]) for q in quarantine} == {
        ("c/case.json", "file_too_large", f"{size} bytes (bounds.max_document_bytes 2000)"),
        ("c/001.png", "skipped:unreferenced_image", "image not listed in any case.json")}


@pytest.mark.integration  # git
def test_release_build_refuses_item_images_from_outside(release_dir: tuple[Path, str, Path]) -> None:
    """Items naming an image outside the project folder, or a symlink, are left out with a counted reason; the
    release holds nothing read from there."""
    from curation.jsonio import read_jsonl, write_jsonl
    from curation.params import ReleaseParams
    from curation.release.build import run as build
    from curation.schema import Item

    root, _, proj = release_dir
    items = list(read_jsonl(proj / "review" / "items.jsonl", Item))
    secret = proj.parent / "secret.png"
    secret.write_bytes(SECRET)
    link = proj / "renders" / "link.png"
    link.symlink_to(secret)
    items[0].images = [str(secret)]
    items[1].images = [str(link.relative_to(proj))]
    write_jsonl(proj / "review" / "items.jsonl", items)
    rep = build(ReleaseParams(name="hostile", version="0.3.0", arrow_copy=False), proj / "review",
                proj / "releases").as_dict()
    assert rep["failures_by_reason"] == {"image_outside_project": 2} and rep["outputs"] == 0
    _no_secret_under(proj / "releases" / "hostile-0.3.0")


def test_deid_dicom_folder_does_not_follow_symlinks_out(tmp_path: Path) -> None:
    from curation.deid.stage import deid_dicom_dir
    from curation.params import DicomDeidParams

    outside = tmp_path / "outside.dcm"
    outside.write_bytes(b"\x00" * 128 + b"DICM" + SECRET)
    src = tmp_path / "in"
    src.mkdir()
    (src / "link.dcm").symlink_to(outside)
    (src / "readme.txt").write_text("not DICOM\n")
    rep = deid_dicom_dir(DicomDeidParams(), src, tmp_path / "out")
    assert {(q.path, q.reason) for q in rep.quarantine} == {("link.dcm", "outside_raw"),
                                                           ("readme.txt", "skipped:not_dicom")}
    _no_secret_under(tmp_path / "out")


def test_oversize_text_fields_quarantine_the_record(tmp_path: Path) -> None:
    """A case section or a series name over its bound: the record is quarantined with the field named, never
    truncated silently; the others are ingested."""
    from curation.params import Bounds

    raw = tmp_path / "raw"
    _png(raw / "jats" / "f.png")
    (raw / "jats" / "ok.xml").write_text(_jats("PMC5", [("f1", "f.png")]))
    (raw / "jats" / "big.xml").write_text(_jats("PMC6", [("f1", "f.png")]).replace(
        "had headaches.", "had headaches. " + "word " * 3000))
    cases, quarantine, _ = _ingest("case-reports", raw / "jats", tmp_path / "o1",
                                   bounds=Bounds(max_field_chars=10_000))
    assert len(cases) == 1 and quarantine == [
        {"path": "big.xml", "reason": "field_too_long",
         "detail": "case section has 15032 characters (bounds.max_field_chars 10000)"}]
    _png(raw / "rp" / "c" / "001.png")
    _radiopaedia(raw / "rp" / "c", [{"name": "N" * 500, "images": ["001.png"]}])
    cases, quarantine, _ = _ingest("radiopaedia", raw / "rp", tmp_path / "o2")
    failed = [(q["path"], q["reason"], q["detail"]) for q in quarantine if "skipped" not in q["reason"]]
    assert not cases and failed == [
        ("c/case.json", "case_malformed", "study 1 series 1 name has 500 characters (bounds.max_id_chars 200)")]


def test_safe_name_properties() -> None:
    from curation.paths import safe_name

    assert safe_name("fig1") == "fig1" and safe_name("s1-FLAIR-001") == "s1-FLAIR-001"
    hostile = ["../../../../tmp/x", "a/", ".bashrc", "..", "", "a\x00b", "x" * 5000, "C:\\evil", "caf\udce9"]
    names = [safe_name(h) for h in hostile]
    assert all(n and "/" not in n and "\\" not in n and "\x00" not in n and not n.startswith(".") and len(n) <= 96
               for n in names), names
    assert len(set(names)) == len(names) and safe_name("../a") != safe_name("__a")
    hdr, img = safe_name("scan 1.hdr"), safe_name("scan 1.img")
    assert hdr.endswith(".hdr") and img.endswith(".img") and hdr[:-4] == img[:-4]
    assert safe_name("my volume.nii.gz").endswith(".nii.gz")


@pytest.mark.integration  # subprocess and process pool
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc")
def test_kill_9_of_curate_normalize_workers_2(tmp_path: Path) -> None:
    """`curate normalize --workers 2` killed with SIGKILL while its workers normalize: no process is left."""
    import signal
    import subprocess
    import sys
    import time

    import nibabel as nib

    from curation.jsonio import write_jsonl
    from curation.schema import Series, Visit

    x, y, z = np.mgrid[:96, :96, :96]
    vol = (1000 * np.exp(-((x - 48) ** 2 + (y - 48) ** 2 + (z - 48) ** 2) / 800)).astype(np.int16)
    series = []
    for n in range(6):
        path = tmp_path / "deid" / "files" / "c1" / f"s{n}" / "v.nii.gz"
        path.parent.mkdir(parents=True)
        nib.save(nib.Nifti1Image(vol, np.eye(4)), str(path))
        series.append(Series(series_id=f"s{n}", format="nifti", files=[str(path.relative_to(tmp_path))]))
    write_jsonl(tmp_path / "deid" / "cases.jsonl", [Case(case_id="c1", source="oasis3", license="x",
                                                         visits=[Visit(visit_id="v1", series=series)])])
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen([sys.executable, "-m", "curation.cli", "normalize", "deid", "normalize", "--workers", "2",
                             "--params", "none.yaml"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(workers) < 2 and proc.poll() is None:
            time.sleep(0.1)
            workers = [c for c in _children(proc.pid) if _alive(c)] if _alive(proc.pid) else workers
        assert len(workers) >= 2 and proc.poll() is None, "normalize ended before its pool was seen"
        time.sleep(1.0)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(w) for w in workers):
            time.sleep(0.1)
        assert not [w for w in workers if _alive(w)], "workers outlived the killed curate normalize"
        assert not (tmp_path / "normalize").exists()  # a killed stage leaves no half output
    finally:
        for w in workers:
            if _alive(w):
                os.kill(w, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()


# ------------------------------------------------------------------ found by a second hostile pass
def test_repeated_figure_ids_and_series_names_never_overwrite(tmp_path: Path) -> None:
    raw = tmp_path / "raw-cr"
    for n, value in enumerate((10, 20, 30)):
        _png(raw / f"g{n}.png", value=value)
    (raw / "PMC1.xml").write_text(_jats("PMC1", [("a-3", "g0.png"), ("a", "g1.png"), ("a", "g2.png"),
                                                 ("dup", "g0.png"), ("DUP", "g1.png")]))
    cases, _, _ = _ingest("case-reports", raw, tmp_path / "out-cr")
    ids = [f.figure_id for f in cases[0].figures]
    assert len({i.lower() for i in ids}) == len(ids) == 5
    assert len({f.path for f in cases[0].figures}) == 5
    rp = tmp_path / "raw-rp"
    _png(rp / "c1" / "a.png", value=40)
    _png(rp / "c1" / "b.png", value=50)
    _radiopaedia(rp / "c1", [{"name": "FLAIR", "images": ["a.png"]}, {"name": "FLAIR", "images": ["b.png"]}])
    cases, _, _ = _ingest("radiopaedia", rp, tmp_path / "out-rp")
    figs = cases[0].figures
    assert len({f.figure_id for f in figs}) == 2 and len({f.path for f in figs}) == 2


def test_huge_numbers_in_json_are_quarantined_not_a_traceback(tmp_path: Path, raw_copy: Path) -> None:
    rp = tmp_path / "raw-rp"
    (rp / "c1").mkdir(parents=True)
    (rp / "c1" / "case.json").write_text('{"id": ' + "9" * 5000 + ', "title": "t", "studies": []}')
    _radiopaedia(rp / "c2", [], age="9" * 400)
    cases, quarantine, _ = _ingest("radiopaedia", rp, tmp_path / "out-rp")
    assert ("c1/case.json", "json_invalid") in {(q["path"], q["reason"]) for q in quarantine}
    assert [c.patient.age for c in cases] == [None]  # an absurd age is unknown
    sidecar = sorted((raw_copy / "oasis3").rglob("*_T1w.json"))[0]
    sidecar.write_text('{"RepetitionTime": ' + "9" * 5000 + "}")
    _, quarantine, _ = _ingest("oasis3", raw_copy / "oasis3", tmp_path / "out-o3")
    assert (sidecar.relative_to(raw_copy / "oasis3").as_posix(), "sidecar_invalid_json") in {
        (q["path"], q["reason"]) for q in quarantine}


def test_a_sidecar_that_is_a_fifo_is_not_read(raw_copy: Path, tmp_path: Path) -> None:
    sidecar = sorted((raw_copy / "oasis3").rglob("*_T1w.json"))[0]
    sidecar.unlink()
    os.mkfifo(sidecar)  # reading it would block for ever
    _, quarantine, _ = _ingest("oasis3", raw_copy / "oasis3", tmp_path / "out")
    assert (sidecar.relative_to(raw_copy / "oasis3").as_posix(), "not_a_regular_file") in {
        (q["path"], q["reason"]) for q in quarantine}


def test_dates_and_ids_typed_into_descriptors_are_removed_and_verified(tmp_path: Path) -> None:
    import pydicom

    from curation.deid.compare import compare_files
    from curation.deid.dicom import deidentify_file
    from curation.params import DicomDeidParams

    src = Path(pydicom.__file__).parent / "data" / "test_files" / "MR_small.dcm"
    ds = pydicom.dcmread(src)
    ds.StudyDate, ds.PatientID = "20060420", "ZQ-778812"
    ds.SeriesDescription = "MPRAGE 2006-04-20"
    ds.StudyDescription = "MRI 20-APR-2006 ZQ778812"
    ds.ProtocolName = "brain Apr 20 2006"
    planted = tmp_path / "in.dcm"
    ds.save_as(planted)
    out = tmp_path / "out.dcm"
    assert deidentify_file(str(planted), str(out), DicomDeidParams(), b"k", "p", "ANON-aaaaaaaaaaaa", verify=True).ok
    got = pydicom.dcmread(out)
    text = " ".join(str(got.get(k, "")) for k in ("SeriesDescription", "StudyDescription", "ProtocolName"))
    assert "2006" not in text and "778812" not in text and "MPRAGE" in text
    # the differential check sees a retyped input date, whatever its style
    ds.SeriesDescription = "MPRAGE 20.04.2006"
    ds.save_as(planted)
    leaky = tmp_path / "leaky.dcm"
    ds.StudyDate = "20050101"  # as if shifted
    ds.save_as(leaky)
    kinds = {f.kind for f in compare_files(planted, leaky, "leaky.dcm").findings}
    assert any(k.startswith("date of the input found in text") for k in kinds)


def test_a_deflated_dicom_that_inflates_past_the_bound_is_refused(tmp_path: Path) -> None:
    import pydicom
    from pydicom.uid import DeflatedExplicitVRLittleEndian

    from curation.io.dicom import read_checked

    ds = pydicom.dcmread(Path(pydicom.__file__).parent / "data" / "test_files" / "MR_small.dcm")
    ds.add_new(0x00291010, "OB", bytes(8 << 20))  # 8 MB of zeros: a few KB once deflated
    ds.file_meta.TransferSyntaxUID = DeflatedExplicitVRLittleEndian
    bomb = tmp_path / "bomb.dcm"
    ds.save_as(bomb, enforce_file_format=True)
    assert bomb.stat().st_size < 200_000
    got, info = read_checked(str(bomb), max_inflated=4 << 20)
    assert got is None and info.reason == "dicom_inflates_too_large"
    got, info = read_checked(str(bomb), max_inflated=64 << 20)  # under the bound it reads as before
    assert got is not None and info.ok


def test_a_record_naming_a_file_outside_the_input_is_never_read(tmp_path: Path) -> None:
    """deidentify and normalize answer a series whose file lies outside their input (and the project) with
    ``outside_input``, counted as a failure under its kind, without opening the file."""
    from curation.deid.stage import run as deidentify
    from curation.imaging.normalize import run as normalize
    from curation.jsonio import write_jsonl
    from curation.report import Kind
    from curation.schema import Series, SourceName, Visit

    outside = tmp_path / "elsewhere" / "x.dcm"
    outside.parent.mkdir()
    outside.write_bytes(b"\0" * 128 + b"DICM")
    case = Case(case_id="adni-0000000000000001", source=SourceName.adni, license="test", visits=[
        Visit(visit_id="bl", series=[Series(series_id="s1", format="dicom", files=[str(outside)])])])
    write_jsonl(tmp_path / "in" / "adni" / "cases.jsonl", [case])
    write_jsonl(tmp_path / "deid-in" / "cases.jsonl", [case])
    rep = deidentify(DeidentifyParams(max_failure_rate=1.0), tmp_path / "in", tmp_path / "deid")
    assert [(q.reason, q.kind) for q in rep.quarantine] == [("outside_input", Kind.failed)]
    assert rep.as_dict()["failures_by_reason"] == {"outside_input": 1}
    rep = normalize(NormalizeParams(max_failure_rate=1.0), tmp_path / "deid-in", tmp_path / "norm")
    assert [(q.reason, q.kind) for q in rep.quarantine] == [("outside_input", Kind.failed)]
    assert rep.as_dict()["failures_by_reason"] == {"outside_input": 1}
