"""Read one DICOM file's header and check its pixel data is complete, without aborting on junk."""

from __future__ import annotations

from pathlib import Path
from typing import Any

DICOMDIR_UID = "1.2.840.10008.1.3.10"


def inspect_dicom(path: str) -> dict[str, Any]:
    """Returns ``{"ok": True, ...header fields}`` or ``{"ok": False, "reason", "detail"}``."""
    import pydicom
    from pydicom.errors import InvalidDicomError

    p = Path(path)
    try:
        with p.open("rb") as fh:
            head = fh.read(132)
    except OSError as exc:
        return {"ok": False, "reason": "unreadable", "detail": str(exc)}
    if len(head) < 132 or head[128:132] != b"DICM":
        return {"ok": False, "reason": "skipped:not_dicom", "detail": "no DICM preamble"}
    try:
        ds = pydicom.dcmread(path)
    except InvalidDicomError as exc:
        return {"ok": False, "reason": "dicom_invalid", "detail": str(exc)}
    except Exception as exc:  # pydicom raises many types on broken files
        return {"ok": False, "reason": "dicom_unreadable", "detail": f"{type(exc).__name__}: {exc}"}
    return check_dataset(ds)


DEFLATED = "1.2.840.10008.1.2.1.99"
CHUNK = 1 << 20


def _default_max_inflated() -> int:
    from curation.params import Bounds

    return int(Bounds.model_fields["max_volume_bytes"].default)


def inflated_size_over(fh: Any, limit: int) -> int | None:
    """For a Deflated Explicit VR file: its inflated dataset size when over ``limit`` (counted by streaming, nothing
    kept), else None. pydicom inflates such a dataset whole in memory: a few MB on disk can declare GBs."""
    import struct
    import zlib

    fh.seek(132)
    tag = fh.read(8)
    if len(tag) < 8 or tag[:4] != b"\x02\x00\x00\x00":
        return None  # no group length: pydicom decides
    group_len = struct.unpack("<I", fh.read(4))[0]
    meta = fh.read(group_len)
    if DEFLATED.encode() not in meta:
        return None
    inflater, total = zlib.decompressobj(-zlib.MAX_WBITS), 0
    while not inflater.eof and (chunk := fh.read(CHUNK)):
        while chunk and not inflater.eof and total <= limit:
            total += len(inflater.decompress(chunk, CHUNK))
            chunk = inflater.unconsumed_tail
        if total > limit:
            return total
    return None


def read_checked(path: str, header: bool = True, max_inflated: int | None = None) -> tuple[Any, dict[str, Any]]:
    """Read a file once: ``(dataset, header info)`` or ``(None, {"ok": False, "reason", "detail"})``.
    ``header=False`` checks the file is usable without collecting the header fields."""
    import pydicom
    from pydicom.errors import InvalidDicomError

    try:
        with Path(path).open("rb") as fh:
            head = fh.read(132)
            if len(head) < 132 or head[128:132] != b"DICM":
                return None, {"ok": False, "reason": "skipped:not_dicom", "detail": "no DICM preamble"}
            limit = max_inflated if max_inflated is not None else _default_max_inflated()
            over = inflated_size_over(fh, limit)
            if over is not None:
                return None, {"ok": False, "reason": "dicom_inflates_too_large",
                              "detail": f"deflated dataset inflates past {over} bytes (bound {limit})"}
            fh.seek(0)
            try:
                ds = pydicom.dcmread(fh)
            except InvalidDicomError as exc:
                return None, {"ok": False, "reason": "dicom_invalid", "detail": str(exc)}
            except Exception as exc:  # pydicom raises many types on broken files
                return None, {"ok": False, "reason": "dicom_unreadable", "detail": f"{type(exc).__name__}: {exc}"}
    except OSError as exc:
        return None, {"ok": False, "reason": "unreadable", "detail": str(exc)}
    info = check_dataset(ds, header=header)
    return (ds if info["ok"] else None), info


def check_dataset(ds: Any, header: bool = True) -> dict[str, Any]:
    """Header fields of a read dataset, or why it cannot be used (no meta, DICOMDIR, truncated pixels...).
    ``header=False``: only whether it can be used."""
    meta = getattr(ds, "file_meta", None)
    if meta is None or "TransferSyntaxUID" not in meta:
        return {"ok": False, "reason": "dicom_no_meta", "detail": "file meta information missing"}
    if str(meta.get("MediaStorageSOPClassUID", "")) == DICOMDIR_UID:
        return {"ok": False, "reason": "skipped:dicomdir", "detail": "DICOMDIR index file"}
    try:
        if "PixelData" not in ds:
            return {"ok": False, "reason": "skipped:no_pixel_data", "detail": "no PixelData (not an image)"}
        if not meta.TransferSyntaxUID.is_compressed:
            frames = _number(ds, 0x00280008, 1) or 1  # NumberOfFrames
            expected = _number(ds, 0x00280010) * _number(ds, 0x00280011) * _number(ds, 0x00280002, 1) * frames * (
                _number(ds, 0x00280100) // 8
            )  # Rows, Columns, SamplesPerPixel, BitsAllocated
            pixels = ds.get_item("PixelData").value  # as read: the bytes stay undecoded
            if len(pixels) < expected:
                return {
                    "ok": False,
                    "reason": "dicom_truncated",
                    "detail": f"pixel data has {len(pixels)} of {expected} bytes",
                }
        if not header:
            return {"ok": True}
        ipp = ds.get("ImagePositionPatient")
        return {
            "ok": True,
            "series_uid": str(ds.get("SeriesInstanceUID", "")),
            "study_date": str(ds.get("StudyDate", "") or ds.get("SeriesDate", "") or ""),
            "description": str(ds.get("SeriesDescription", "") or ""),
            "modality": str(ds.get("Modality", "") or ""),
            "patient_id": str(ds.get("PatientID", "") or ""),
            "position": [float(v) for v in ipp] if ipp else None,
            "instance": int(ds.get("InstanceNumber", 0) or 0),
            "frames": int(ds.get("NumberOfFrames", 1) or 1),
            "burned_in": str(ds.get("BurnedInAnnotation", "") or ""),
            "sop_class": str(ds.get("SOPClassUID", "")),
        }
    except Exception as exc:
        return {"ok": False, "reason": "dicom_malformed", "detail": f"{type(exc).__name__}: {exc}"}


def _number(ds: Any, tag: int, default: int | None = None) -> int:
    """A US or IS element's value, read from its bytes as stored when it is still undecoded (the element is then
    written back as it was read). A missing element without a default raises, as a missing attribute does."""
    import struct

    elem = ds.get_item(tag)
    if elem is None or (elem.is_raw and not elem.value):
        if default is None:
            raise AttributeError(f"missing ({tag >> 16:04X},{tag & 0xFFFF:04X})")
        return default
    if elem.is_raw:
        value = elem.value
        if len(value) == 2 and elem.VR in ("US", None) and tag != 0x00280008:
            return struct.unpack("<H" if elem.is_little_endian else ">H", value)[0]
        if tag == 0x00280008:  # IS: ASCII digits
            return int(value.decode("ascii").strip(" \x00") or default or 0)
    value = ds[tag].value
    return default if value in (None, "") and default is not None else int(value)
