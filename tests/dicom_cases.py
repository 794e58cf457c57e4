"""Hard DICOM cases built with pydicom from a real image: every transfer syntax pydicom can write, every element
re-encoded as UN, implicit VR, big endian, deflated, identity in nested sequences, dates and UIDs no table row
names. Used by tests/test_deid_real.py and the de-identification benchmark (surviving values)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pydicom
from pydicom.dataelem import DataElement, RawDataElement
from pydicom.dataset import Dataset
from pydicom.filebase import DicomBytesIO
from pydicom.filewriter import write_data_element
from pydicom.sequence import Sequence
from pydicom.uid import (
    DeflatedExplicitVRLittleEndian,
    ExplicitVRBigEndian,
    ExplicitVRLittleEndian,
    ImplicitVRLittleEndian,
    JPEG2000Lossless,
    JPEGBaseline8Bit,
    JPEGLSLossless,
    RLELossless,
)

PYDICOM_FILES = Path(pydicom.__file__).parent / "data" / "test_files"
FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "dicom-real"
# identity planted in the cases: each must be gone from every output
IDENTITY = {"PatientName": "QUIMBY^JOSEPH^ARTHUR", "PatientID": "QZ7734", "AccessionNumber": "ACC99812",
            "InstitutionName": "Springfield General Hospital", "PatientBirthDate": "19511203",
            "OtherPatientIDs": "MRN5550199", "ReferringPhysicianName": "NICK^RIVIERA"}
# attributes no Annex E row names (checked against the table by the tests)
UNTABLED_DATE = "DateOfLastCalibration"  # tabled since 2026c: a row the 2020 table did not have


def untabled(vr: str, table: dict[int, object]) -> str:
    """The first dictionary keyword of ``vr`` that the table does not name (a stable pick for the tests)."""
    from pydicom.datadict import DicomDictionary

    from curation.deid.policy import load_defaults

    kept = load_defaults().keep_text_tags | load_defaults().keep_uid_tags
    for tag, entry in sorted(DicomDictionary.items()):
        group = tag >> 16
        if entry[0] == vr and entry[1] == "1" and tag not in table and tag not in kept and not entry[3] and \
                group not in (0x0002, 0x0000) and not 0x5000 <= group <= 0x60FF and entry[4]:
            return str(entry[4])
    raise LookupError(vr)


def base_dataset(table: dict[int, object]) -> Dataset:
    """A real MR image (pydicom's MR_small, 64x64, 16 bit) with planted identity: in the table's attributes, in
    nested sequences, in attributes no row names, in descriptors."""
    ds = pydicom.dcmread(PYDICOM_FILES / "MR_small.dcm")
    for k, v in IDENTITY.items():
        setattr(ds, k, v)
    ds.SeriesDescription = "QUIMBY brain axial"
    ds.CommentsOnThePerformedProcedureStep = "patient Joseph Quimby, QZ7734, anxious"
    ds.PerformedProcedureStepID = "PPS12345"
    ds.ContentDate = "20040318\\20040319"
    setattr(ds, UNTABLED_DATE, "20031101")
    date_kw, dt_kw, pn_kw, ui_kw = (untabled(v, table) for v in ("DA", "DT", "PN", "UI"))
    lo_kw, ut_kw = untabled("LO", table), untabled("UT", table)
    setattr(ds, date_kw, "20040101")
    setattr(ds, dt_kw, "20040101120000")
    setattr(ds, pn_kw, "QUIMBY^JOSEPH")
    setattr(ds, ui_kw, "1.2.826.0.1.3680043.99.1")
    setattr(ds, lo_kw, "Seen by Dr Riviera")
    setattr(ds, ut_kw, "free text about Joseph Quimby")
    inner = Dataset()  # dates and UIDs two levels down, in a sequence the table keeps walking
    inner.ReferencedSOPClassUID = ds.SOPClassUID
    inner.ReferencedSOPInstanceUID = ds.SOPInstanceUID
    setattr(inner, date_kw, "20040215")
    setattr(inner, ui_kw, "1.2.826.0.1.3680043.99.2")
    setattr(inner, pn_kw, "RIVIERA^NICK")
    mid = Dataset()
    mid.ReferencedImageSequence = Sequence([inner])
    mid.StudyInstanceUID = ds.StudyInstanceUID
    mid.ScheduledProcedureStepID = "SPS777123"
    mid.ScheduledProcedureStepStartDate = "20040317"
    ds.RequestAttributesSequence = Sequence([mid])
    ref = Dataset()
    ref.ReferencedSOPClassUID = ds.SOPClassUID
    ref.ReferencedSOPInstanceUID = ds.SOPInstanceUID
    ds.ReferencedImageSequence = Sequence([ref])
    ds.NetworkID = "NET-MRI-04" if "NetworkID" in pydicom.datadict.keyword_dict else None
    return ds


def _as_un(ds: Dataset, undefined: bool = False) -> None:
    """Every element re-encoded as UN (explicit VR LE, the way some PACS and converters write them): the value
    bytes as implicit VR little endian gives them, sequences included; ``undefined``: sequences and items of
    undefined length (delimited), else of defined length."""
    for elem in list(ds):
        fp = DicomBytesIO()
        fp.is_implicit_VR, fp.is_little_endian = True, True
        if elem.VR == "SQ" and undefined:
            elem.is_undefined_length = True
            for item in elem.value:
                item.is_undefined_length_sequence_item = True
        write_data_element(fp, elem, ds.get("SpecificCharacterSet", "ISO_IR 6"))
        raw = fp.getvalue()[8:]  # tag (4) and 32-bit length (4)
        length = len(raw)
        if elem.VR == "SQ":
            if undefined:
                raw, length = raw[:-8], 0xFFFFFFFF  # the writer adds the sequence delimiter itself
            else:
                raw = b"".join(_defined_items(elem))
                length = len(raw)
        # raw, so pydicom writes it as it stands (a UN DataElement of a known tag would be given its VR back)
        ds._dict[elem.tag] = RawDataElement(elem.tag, "UN", length, raw, 0, False, True)


def _defined_items(seq_elem: DataElement) -> list[bytes]:
    """Sequence items with defined lengths (a UN value cannot hold a delimited sequence without its end)."""
    out = []
    for item in seq_elem.value:
        fp = DicomBytesIO()
        fp.is_implicit_VR, fp.is_little_endian = True, True
        for elem in item:
            write_data_element(fp, elem)
        body = fp.getvalue()
        out.append(b"\xfe\xff\x00\xe0" + len(body).to_bytes(4, "little") + body)
    return out


def _write(ds: Dataset, path: Path, syntax: str) -> Path:
    ds.file_meta.TransferSyntaxUID = syntax
    pydicom.dcmwrite(path, ds, implicit_vr=syntax == ImplicitVRLittleEndian,
                     little_endian=syntax != ExplicitVRBigEndian, enforce_file_format=True)
    return path


def build_cases(table: dict[int, object], out: Path) -> dict[str, Path]:
    """name -> file: the same planted dataset in each encoding and pixel encapsulation."""
    out.mkdir(parents=True, exist_ok=True)
    cases: dict[str, Path] = {}
    for name, syntax in (("implicit", ImplicitVRLittleEndian), ("explicit", ExplicitVRLittleEndian),
                         ("big_endian", ExplicitVRBigEndian), ("deflated", DeflatedExplicitVRLittleEndian)):
        cases[name] = _write(base_dataset(table), out / f"{name}.dcm", syntax)
    ds = base_dataset(table)
    _as_un(ds)
    cases["all_un"] = _write(ds, out / "all_un.dcm", ExplicitVRLittleEndian)
    ds = base_dataset(table)
    _as_un(ds, undefined=True)
    cases["all_un_delimited"] = _write(ds, out / "all_un_delimited.dcm", ExplicitVRLittleEndian)
    for name, syntax, kwargs in (("rle", RLELossless, {}), ("jpeg_ls", JPEGLSLossless, {}),
                                 ("jpeg2000", JPEG2000Lossless, {})):
        ds = base_dataset(table)
        ds.compress(syntax, generate_instance_uid=False, **kwargs)
        cases[name] = out / f"{name}.dcm"
        ds.save_as(cases[name], enforce_file_format=True)
    cases["jpeg_baseline"] = _jpeg(base_dataset(table), out / "jpeg_baseline.dcm", fragments=1)
    try:  # JPEG Lossless SV1 (process 14): pydicom has no encoder; imagecodecs has one
        import imagecodecs

        ds = base_dataset(table)
        from pydicom.encaps import encapsulate

        ds.PixelData = encapsulate([imagecodecs.ljpeg_encode(ds.pixel_array.astype(np.uint16), bitspersample=16)])
        ds["PixelData"].is_undefined_length, ds["PixelData"].VR = True, "OB"
        ds.file_meta.TransferSyntaxUID = "1.2.840.10008.1.2.4.70"
        cases["jpeg_lossless"] = out / "jpeg_lossless.dcm"
        ds.save_as(cases["jpeg_lossless"], enforce_file_format=True)
    except ImportError:
        pass
    cases["fragmented"] = _jpeg(base_dataset(table), out / "fragmented.dcm", fragments=3)
    ds = base_dataset(table)
    _as_un(ds)
    ds.file_meta.TransferSyntaxUID = RLELossless  # UN header over encapsulated pixel data
    rle = base_dataset(table)
    rle.compress(RLELossless)
    ds[0x7FE00010] = DataElement(0x7FE00010, "OB", rle.PixelData, is_undefined_length=True)
    cases["all_un_rle"] = out / "all_un_rle.dcm"
    ds.save_as(cases["all_un_rle"], enforce_file_format=True)
    return cases


def _jpeg(ds: Dataset, path: Path, fragments: int) -> Path:
    """8-bit JPEG baseline through Pillow, encapsulated in ``fragments`` fragments."""
    import io

    from PIL import Image
    from pydicom.encaps import encapsulate

    arr = ds.pixel_array.astype(np.float32)
    arr = (255 * (arr - arr.min()) / max(float(arr.max() - arr.min()), 1)).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="JPEG", quality=90)
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 8, 8, 7, 0
    for kw in ("SmallestImagePixelValue", "LargestImagePixelValue"):
        if kw in ds:
            del ds[kw]
    ds.PixelData = encapsulate([buf.getvalue()], fragments_per_frame=fragments)
    ds["PixelData"].is_undefined_length = True
    ds["PixelData"].VR = "OB"
    ds.file_meta.TransferSyntaxUID = JPEGBaseline8Bit
    ds.save_as(path, enforce_file_format=True)
    return path
