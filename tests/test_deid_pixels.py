"""Burned-in text (issue 51): a secondary capture with a PACS overlay, built from a real brain (the MNI152 template
in nilearn's wheel) with text rendered onto it, loses its identifying overlay text and keeps its clinical labels;
the masking is recorded as boxes and tags only. The pattern rules are tested without OCR.

OCR runs Tesseract as a process: the OCR tests are integration tests, skipped where Tesseract is absent (the
Makefile's ``tesseract`` target installs it for ``make test``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from curation.deid.pixels import Line, Word, identifying, lines_of, pixel_policy
from curation.params import PixelDeidParams, TextDeidParams

needs_tesseract = pytest.mark.skipif(shutil.which("tesseract") is None, reason="tesseract is not installed")
SECRET = b"test-secret-not-for-production"

# what a PACS overlay says about the patient, the visit and the place; none of it may be read on the output
OVERLAY_PHI = ["DOE^JANE", "MRN: 4478213", "DOB: 03/14/1961", "ST MARY'S HOSPITAL", "ACC 20070130123",
               "2007-01-30 14:32:05"]
PHI_TOKENS = ["DOE", "JANE", "4478213", "1961", "MARY", "HOSPITAL", "20070130123", "14:32"]


def _line(*texts: str, conf: float = 95, y: int = 10, h: int = 10) -> Line:
    words, x = [], 0
    for t in texts:
        words.append(Word(t, conf, (x, y, x + 8 * len(t), y + h)))
        x += 8 * len(t) + 6
    return Line(words)


def _tags(line: Line) -> dict[str, str]:
    return {w.text: tag for w, tag in identifying([line], None)}


def test_policy_loads_with_a_closed_set_of_tags() -> None:
    assert set(pixel_policy()["patterns"]) <= {"DATE", "TIME", "ID", "LABEL"}
    assert {"R", "L", "W", "FLAIR"} <= set(pixel_policy()["clinical_labels"])


def test_footer_label_takes_the_rest_of_its_line() -> None:
    tags = _tags(_line("46bdf6a1-ca1b-4ad3-89d6-4023e9c59918,Uploader", ":", "Alice", "Boyd", "Smith"))
    assert set(tags) == {"46bdf6a1-ca1b-4ad3-89d6-4023e9c59918,Uploader", ":", "Alice", "Boyd", "Smith"}


def test_dates_times_and_long_ids_are_identifying() -> None:
    assert _tags(_line("Smith,03-25-2008"))["Smith,03-25-2008"] == "DATE"
    assert _tags(_line("14:32:05"))["14:32:05"] == "TIME"
    assert _tags(_line("4478213"))["4478213"] == "ID"
    assert _tags(_line("MR4478"))["MR4478"] == "ID"


def test_window_level_and_sequence_labels_stay() -> None:
    assert _tags(_line("W", "1438", ":", "L", "719")) == {}
    assert _tags(_line("W", "40000", ":", "L", "35000")) == {}  # a CT bone window's width is no id
    assert _tags(_line("AX", "T2", "FLAIR")) == {}
    assert _tags(_line("R")) == {} and _tags(_line("L")) == {}


def test_lines_group_words_by_row() -> None:
    words = [Word("W", 90, (0, 100, 10, 112)), Word("1438", 90, (14, 100, 50, 112)), Word("R", 90, (0, 10, 10, 22))]
    assert sorted(len(line.words) for line in lines_of(words)) == [1, 2]


# ------------------------------------------------------------------ OCR (Tesseract)
def pacs_capture(path: Path) -> Path:
    """A 512 px axial slice of a real brain (MNI152 2009a T1) with a PACS overlay: patient, ids, date and time,
    institution in the corners; R/L markers, window/level and the sequence name as a viewer burns them in."""
    import numpy as np
    from nilearn.datasets import load_mni152_template
    from PIL import Image, ImageDraw, ImageFont

    vol = np.asarray(load_mni152_template(resolution=1).get_fdata())
    sl = np.rot90(vol[:, :, vol.shape[2] // 2 + 10])
    sl = (255 * (sl - sl.min()) / (np.ptp(sl) or 1)).astype(np.uint8)
    img = Image.fromarray(sl).resize((440, 512), Image.Resampling.BILINEAR)
    canvas = Image.new("L", (512, 512), 0)
    canvas.paste(img, (36, 0))
    draw = ImageDraw.Draw(canvas)
    font = ImageFont.load_default(size=14)
    draw.multiline_text((6, 6), "\n".join(OVERLAY_PHI[:3]), fill=255, font=font, spacing=4)
    draw.multiline_text((330, 6), "\n".join(OVERLAY_PHI[3:5]), fill=255, font=font, spacing=4, align="right")
    draw.text((6, 470), OVERLAY_PHI[5], fill=255, font=font)
    draw.text((6, 490), "W 1438 : L 719", fill=255, font=font)
    draw.text((400, 490), "AX T2 FLAIR", fill=255, font=font)
    big = ImageFont.load_default(size=22)
    draw.text((8, 240), "R", fill=255, font=big)
    draw.text((490, 240), "L", fill=255, font=big)
    canvas.convert("RGB").save(path)
    return path


def _read(img: object) -> str:
    import pytesseract

    return str(pytesseract.image_to_string(img, config="--psm 11"))


@pytest.mark.integration
@needs_tesseract
def test_pacs_overlay_on_a_secondary_capture_is_masked(tmp_path: Path) -> None:
    from PIL import Image

    from curation.deid.pixels import mask_image, residual_text, text_tool

    src = Image.open(pacs_capture(tmp_path / "sc.png")).convert("RGB")
    before = _read(src)
    assert any(t in before for t in PHI_TOKENS), before  # the overlay is legible to begin with
    text = text_tool(TextDeidParams(), SECRET)
    out, res = mask_image(src, text, (), PixelDeidParams())
    after = _read(out)
    assert [t for t in PHI_TOKENS if t in after] == [], after
    assert residual_text(out, text) == []
    # clinical labels read on the input are still read on the output
    for label in ("FLAIR", "W 1438", "L 719"):
        if label in before:
            assert label in after, (label, after)
    assert res.masked and res.masked_fraction <= 0.05 and res.review == []
    qc = res.qc()
    assert {m["tag"] for m in qc["masked"]} >= {"DATE", "TIME", "ID", "OVERLAY"}
    assert qc["read_at"] == "original resolution"
    assert not any(t in json.dumps(qc) for t in PHI_TOKENS)  # boxes and tags only, never the text read


@pytest.mark.integration
@needs_tesseract
def test_deidentify_stage_masks_figures_and_records_it(tmp_path: Path) -> None:
    from curation.deid.stage import run
    from curation.jsonio import read_jsonl, write_jsonl
    from curation.params import DeidentifyParams
    from curation.schema import Case, Figure, SourceName

    ingest = tmp_path / "ingest" / "medpix"
    (ingest / "files").mkdir(parents=True)
    fig = pacs_capture(ingest / "files" / "sc.png")
    case = Case(case_id="medpix-0001", source=SourceName.medpix, license="l",
                figures=[Figure(figure_id="f01-flair", caption="Axial FLAIR", path=str(fig))])
    write_jsonl(ingest / "cases.jsonl", [case])
    report = run(DeidentifyParams(), tmp_path / "ingest", tmp_path / "deid", secret=SECRET)
    (out,) = read_jsonl(tmp_path / "deid" / "cases.jsonl", Case)
    pix = out.figures[0].qc.pixel_text
    assert pix is not None and pix.masked and pix.review == [] and report.counts["figures_pixels_masked"] == 1
    audit = [json.loads(line) for line in (tmp_path / "deid" / "audit.jsonl").read_text().splitlines()]
    assert audit[-1]["actions"]["pixels"]["masked"] == len(pix.masked)
    from PIL import Image

    written = Image.open(tmp_path / "deid" / "files" / "medpix-0001" / "f01-flair.png")
    assert written.size == (512, 512)  # masked at its original resolution
    assert [t for t in PHI_TOKENS if t in _read(written)] == []


@pytest.mark.integration
@needs_tesseract
def test_deid_verify_reads_pixels(tmp_path: Path) -> None:
    from PIL import Image

    from curation.deid.pixels import mask_image, text_tool
    from curation.deid.verify import verify_dir

    (tmp_path / "raw").mkdir()
    src = pacs_capture(tmp_path / "raw" / "sc.png")
    found = verify_dir(tmp_path / "raw", pixels=True)
    assert {f.where for f in found} == {"pixels"} and any("(ID)" in f.kind for f in found)
    assert verify_dir(tmp_path / "raw") == []  # pixels are read only when asked
    out, _ = mask_image(Image.open(src).convert("RGB"), text_tool(TextDeidParams(), SECRET))
    (tmp_path / "out").mkdir()
    out.save(tmp_path / "out" / "sc.png")
    assert verify_dir(tmp_path / "out", pixels=True) == []


def test_normalize_renders_no_figure_held_for_pixel_review(tmp_path: Path) -> None:
    """A figure deidentify could not read with confidence is not rendered, so no item shows it; the masking record
    of the others survives normalize."""
    import numpy as np
    from PIL import Image

    from curation.imaging.normalize import run as normalize
    from curation.jsonio import read_jsonl, write_jsonl
    from curation.params import NormalizeParams
    from curation.schema import Case, Figure, FigureQC, MaskBox, PixelText, SourceName

    deid = tmp_path / "deid"
    (deid / "files").mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in ("a.png", "b.png"):
        Image.fromarray(rng.integers(0, 255, (96, 96), dtype=np.uint8)).save(deid / "files" / name)
    ocr = {"tool": "tesseract", "psm": 11, "read_at": "original resolution", "size": [96, 96], "words_read": 1,
           "masked_fraction": 0.02}
    masked = PixelText(**ocr, masked=[MaskBox(box=[0, 90, 40, 96], tag="DATE")], review=[])
    held = PixelText(**ocr, masked=[], review=["text_not_read_with_confidence"])
    case = Case(case_id="medpix-0001", source=SourceName.medpix, license="l", figures=[
        Figure(figure_id="f01", path=str(deid / "files" / "a.png"), qc=FigureQC(pixel_text=masked)),
        Figure(figure_id="f02", path=str(deid / "files" / "b.png"), qc=FigureQC(pixel_text=held))])
    write_jsonl(deid / "cases.jsonl", [case])
    report = normalize(NormalizeParams(), deid, tmp_path / "norm")
    (out,) = read_jsonl(tmp_path / "norm" / "cases.jsonl", Case)
    assert out.figures[0].renders and out.figures[0].qc.pixel_text == masked and out.figures[0].qc.passed is not None
    assert out.figures[1].renders == [] and report.counts["figures_held_for_pixel_review"] == 1


MEDPIX_IMAGES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "medpix-dev" / "images"


@pytest.mark.integration
@needs_tesseract
@pytest.mark.skipif(not MEDPIX_IMAGES.is_dir(), reason="../shared/fixtures/medpix-dev is absent")
@pytest.mark.parametrize("name", [
    # skin, bone and sulci that Tesseract reads as lines of words nobody can read: no text, so no hold
    "MPX1060_synpic19251", "MPX1276_synpic54950", "MPX1410_synpic27472", "MPX1952_synpic21355",
    "MPX2336_synpic49841", "MPX2402_synpic21798",
    # a footer with an image UUID, "Uploader : <name>, Source : ..." and a date, beside its anatomy: masked, with the
    # fragments between its masked words ("Upl" of "Uploader")
    "MPX2558_synpic20826", "MPX1028_synpic24627", "MPX1942_synpic4381", "MPX1686_synpic41852",
])
def test_real_teaching_images_texture_is_not_text_and_footers_are_masked(name: str) -> None:
    from PIL import Image

    from curation.deid.pixels import mask_image, residual_text, text_tool

    src = Image.open(MEDPIX_IMAGES / f"{name}.png").convert("RGB")
    text = text_tool(TextDeidParams(), SECRET)
    out, res = mask_image(src, text, (), PixelDeidParams())
    assert res.review == [], res.qc()
    assert residual_text(out, text) == []
    if name in ("MPX2558_synpic20826", "MPX1028_synpic24627", "MPX1942_synpic4381", "MPX1686_synpic41852"):
        assert res.masked and res.masked_fraction <= 0.1


def _capture_dicom(png: Path, path: Path) -> Path:
    """The PACS capture as a DICOM Secondary Capture (12-bit MONOCHROME2, BurnedInAnnotation YES), with a patient
    in its header."""
    import numpy as np
    from PIL import Image
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, generate_uid

    arr = (np.asarray(Image.open(png).convert("L"), dtype=np.uint16) * 16).astype(np.uint16)
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = "1.2.840.10008.5.1.4.1.1.7"
    meta.MediaStorageSOPInstanceUID = generate_uid()
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = Dataset()
    ds.file_meta = meta
    ds.SOPClassUID, ds.SOPInstanceUID = meta.MediaStorageSOPClassUID, meta.MediaStorageSOPInstanceUID
    ds.StudyInstanceUID, ds.SeriesInstanceUID = generate_uid(), generate_uid()
    ds.PatientName, ds.PatientID, ds.Modality, ds.ConversionType = "DOE^JANE", "4478213", "OT", "WSD"
    ds.BurnedInAnnotation = "YES"
    ds.set_pixel_data(arr, "MONOCHROME2", 12)
    ds.save_as(path, enforce_file_format=True)
    return path


@pytest.mark.integration
@needs_tesseract
def test_burned_in_dicom_capture_has_its_overlay_masked_instead_of_being_refused(tmp_path: Path) -> None:
    import pydicom

    from curation.deid.pixels import frame_image
    from curation.deid.stage import deid_dicom_dir
    from curation.deid.verify import verify_dir
    from curation.params import DicomDeidParams

    raw = tmp_path / "raw"
    raw.mkdir()
    src = _capture_dicom(pacs_capture(tmp_path / "sc.png"), raw / "sc.dcm")
    before = _read(frame_image(pydicom.dcmread(src).pixel_array, "MONOCHROME2"))
    assert any(t in before for t in PHI_TOKENS), before
    assert {f.where for f in verify_dir(raw, pixels=True)} >= {"pixels"}  # verify reads DICOM pixels too
    # without the pixel settings the capture is refused whole, as before
    refused = deid_dicom_dir(DicomDeidParams(), raw, tmp_path / "plain", secret=SECRET)
    assert refused.outputs == 0 and "burned_in_annotation" in json.dumps(refused.as_dict())
    report = deid_dicom_dir(DicomDeidParams(), raw, tmp_path / "out", secret=SECRET, pixels=PixelDeidParams(),
                            text=TextDeidParams())
    assert report.outputs == 1, report.as_dict()
    out = pydicom.dcmread(tmp_path / "out" / "sc.dcm")
    assert out.BurnedInAnnotation == "NO" and out.Rows == 512 and out.Columns == 512  # its own resolution
    after = _read(frame_image(out.pixel_array, "MONOCHROME2"))
    assert [t for t in PHI_TOKENS if t in after] == [], after
    for label in ("FLAIR", "W 1438", "L 719"):
        if label in before:
            assert label in after, (label, after)
    (audit,) = [json.loads(line) for line in (tmp_path / "out" / "audit.jsonl").read_text().splitlines()]
    recorded = json.loads(audit["actions"]["pixel_text"])
    assert recorded["masked"] and 0 < recorded["masked_fraction"] <= 0.05
    assert not any(t in json.dumps(audit) for t in PHI_TOKENS)  # boxes and tags only, never the text read
    assert verify_dir(tmp_path / "out", pixels=True) == []


@pytest.mark.integration
@needs_tesseract
@pytest.mark.skipif(not MEDPIX_IMAGES.is_dir(), reason="../shared/fixtures/medpix-dev is absent")
@pytest.mark.parametrize(("name", "anatomy"), [
    ("MPX2236_synpic18692", (268, 184, 305, 215)),  # a caudate head OCR reads as "Fe"
    ("MPX1788_synpic27144", (224, 367, 292, 411)),  # an occipital lobe's edge read as "Wey"
])
def test_anatomy_read_as_a_name_is_not_masked_and_the_footer_still_is(name: str, anatomy: tuple) -> None:
    """A large word inside the image that only the name finder takes is the anatomy read as a word: its pixels stay
    (black boxes over a CJD caudate and an ADC map's occipital lobe, in clinical reads); the footer's name, date and
    id are still masked, and the check that re-reads the output finds nothing identifying."""
    import numpy as np
    from PIL import Image

    from curation.deid.pixels import mask_image, residual_text, text_tool

    src = Image.open(MEDPIX_IMAGES / f"{name}.png").convert("RGB")
    text = text_tool(TextDeidParams(), SECRET)
    out, res = mask_image(src, text, (), PixelDeidParams())
    x0, y0, x1, y1 = anatomy
    assert np.array_equal(np.asarray(out)[y0:y1, x0:x1], np.asarray(src)[y0:y1, x0:x1])
    assert res.masked and all(m["box"][1] >= 0.9 * src.height or m["box"][3] <= 0.1 * src.height
                              for m in res.masked)
    assert residual_text(out, text) == []
