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


def read_checked(path: str) -> tuple[Any, dict[str, Any]]:
    """Read a file once: ``(dataset, header info)`` or ``(None, {"ok": False, "reason", "detail"})``."""
    import pydicom
    from pydicom.errors import InvalidDicomError

    try:
        with Path(path).open("rb") as fh:
            head = fh.read(132)
    except OSError as exc:
        return None, {"ok": False, "reason": "unreadable", "detail": str(exc)}
    if len(head) < 132 or head[128:132] != b"DICM":
        return None, {"ok": False, "reason": "skipped:not_dicom", "detail": "no DICM preamble"}
    try:
        ds = pydicom.dcmread(path)
    except InvalidDicomError as exc:
        return None, {"ok": False, "reason": "dicom_invalid", "detail": str(exc)}
    except Exception as exc:  # pydicom raises many types on broken files
        return None, {"ok": False, "reason": "dicom_unreadable", "detail": f"{type(exc).__name__}: {exc}"}
    info = check_dataset(ds)
    return (ds if info["ok"] else None), info


def check_dataset(ds: Any) -> dict[str, Any]:
    """Header fields of a read dataset, or why it cannot be used (no meta, DICOMDIR, truncated pixels...)."""
    meta = getattr(ds, "file_meta", None)
    if meta is None or "TransferSyntaxUID" not in meta:
        return {"ok": False, "reason": "dicom_no_meta", "detail": "file meta information missing"}
    if str(meta.get("MediaStorageSOPClassUID", "")) == DICOMDIR_UID:
        return {"ok": False, "reason": "skipped:dicomdir", "detail": "DICOMDIR index file"}
    try:
        if "PixelData" not in ds:
            return {"ok": False, "reason": "skipped:no_pixel_data", "detail": "no PixelData (not an image)"}
        if not meta.TransferSyntaxUID.is_compressed:
            frames = int(ds.get("NumberOfFrames", 1) or 1)
            expected = int(ds.Rows) * int(ds.Columns) * int(ds.get("SamplesPerPixel", 1)) * frames * (
                int(ds.BitsAllocated) // 8
            )
            if len(ds.PixelData) < expected:
                return {
                    "ok": False,
                    "reason": "dicom_truncated",
                    "detail": f"pixel data has {len(ds.PixelData)} of {expected} bytes",
                }
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
