"""De-identification of non-DICOM files: Analyze/NIfTI headers, BIDS sidecars, figure images."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curation.io.images import PILLOW_ERRORS, ImageTooLarge, figure_pixels
from curation.report import Outcome

# Sidecar keys that describe the acquisition, not the person or the place
SIDECAR_KEEP = {
    "Modality", "MagneticFieldStrength", "RepetitionTime", "EchoTime", "InversionTime", "FlipAngle",
    "SliceThickness", "SpacingBetweenSlices", "PhaseEncodingDirection", "EchoTrainLength", "ScanningSequence",
    "SequenceVariant", "MRAcquisitionType", "ImageType", "PulseSequenceType", "BodyPart",
}
SIDECAR_DEVICE = {"Manufacturer", "ManufacturerModelName", "SoftwareVersions"}
HEADER_TEXT_FIELDS = ("descrip", "aux_file", "db_name", "intent_name")


@dataclass(frozen=True)
class Cleaned:
    """What cleaning one volume or figure removed (header fields, ``extensions(n)``, ``metadata``)."""

    removed: list[str]


def clean_sidecar(sidecar: dict[str, Any], retain_device: bool) -> tuple[dict[str, Any], list[str]]:
    keep = SIDECAR_KEEP | (SIDECAR_DEVICE if retain_device else set())
    cleaned = {k: v for k, v in sidecar.items() if k in keep}
    return cleaned, sorted(k for k in sidecar if k not in keep)


def clean_volume(src: str, dst: str, max_bytes: int | None = None) -> Outcome[Cleaned]:
    """Rewrite an Analyze/NIfTI volume with its free-text header fields and extensions removed.

    A header that promises more than ``max_bytes`` decoded bytes is refused before anything is read. An ok outcome
    lists the header fields removed; a failure keeps ``src`` as its raw input."""
    import nibabel as nib

    from curation.io.volumes import VolumeTooLarge, check_volume_header

    try:
        img: Any = nib.load(src)  # a NIfTI/Analyze image (nibabel types it as any file-based one)
        try:
            check_volume_header(img, max_bytes)
        except VolumeTooLarge as exc:
            return Outcome.failure("volume_too_large", str(exc), src)
        hdr = img.header
        removed = []
        for field in HEADER_TEXT_FIELDS:
            if field in hdr and bytes(hdr[field]).strip(b"\x00 "):
                hdr[field] = b""
                removed.append(field)
        if hasattr(hdr, "extensions") and len(hdr.extensions):
            removed.append(f"extensions({len(hdr.extensions)})")
            del hdr.extensions[:]
        out = img.__class__(img.dataobj, img.affine, hdr)
        Path(dst).parent.mkdir(parents=True, exist_ok=True)
        nib.save(out, dst)
        return Outcome.success(Cleaned(removed))
    except Exception as exc:
        from curation.records import raise_if_resource

        raise_if_resource(exc, dst)  # a full disk stops the run; it is not this volume's fault
        return Outcome.failure("volume_deid_failed", f"{type(exc).__name__}: {exc}", src)


def clean_image(src: str, dst: str, max_pixels: int | None = None) -> Outcome[Cleaned]:
    """Re-encode a figure as PNG from its pixels only: EXIF, XMP and text chunks do not survive."""
    from curation.records import write_bytes

    try:
        pixels = figure_pixels(src, max_pixels)
        buf = io.BytesIO()
        pixels.save(buf, format="PNG", optimize=False)
        write_bytes(dst, buf.getvalue())
        return Outcome.success(Cleaned(["metadata"]))
    except ImageTooLarge as exc:
        return Outcome.failure("image_too_large", str(exc), src)
    except PILLOW_ERRORS as exc:
        return Outcome.failure("image_unreadable", f"{type(exc).__name__}: {exc}", src)
