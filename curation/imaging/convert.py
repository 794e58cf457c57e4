"""Load DICOM series, Analyze and NIfTI into one canonical (RAS+) nibabel image."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nibabel as nib
import numpy as np

from curation.io.dicom import SERIES_ARCHIVE, is_dicom, unpacked_series
from curation.io.volumes import VOLUME_SUFFIXES, VolumeTooLarge, check_volume_header

LPS_TO_RAS = np.diag([-1.0, -1.0, 1.0, 1.0])


# the header elements a series is grouped, sized, ordered and described by: only these are parsed from each file
# (the rest of a header is skipped, not decoded); a whole-volume file is read again whole by _load_volume_file
SERIES_TAGS = ["SeriesInstanceUID", "ImageOrientationPatient", "ImagePositionPatient", "AcquisitionNumber",
               "InstanceNumber", "Rows", "Columns", "SamplesPerPixel", "NumberOfFrames", "BitsAllocated", "ImageType",
               "RepetitionTime", "EchoTime", "InversionTime", "MagneticFieldStrength", "FlipAngle", "Manufacturer",
               "PatientID", "PatientName", "PatientBirthDate"]
# the patient a slice belongs to: every slice of one volume must name the same one (``MixedPatients``)
PATIENT_TAGS = ("PatientID", "PatientName", "PatientBirthDate")


@dataclass
class VolumeInfo:
    """What reading a series found besides its voxels: its files, slice spacing faults, acquisition parameters (the
    sidecar's start) and its orientation as stored."""

    n_files: int = 0
    sidecar: dict[str, float | str] = field(default_factory=dict)  # TR, TE, TI, field strength, flip angle, maker
    orientation: str | None = None  # axis codes of the stored volume before canonical reorientation
    slice_gap_mm: float | None = None  # median gap between sorted slices
    duplicate_slices: int = 0  # slices at the same position
    irregular_gaps: int = 0  # gaps more than 5% from the median
    volume_file: str | None = None  # the nibabel DICOM wrapper of a file that holds a whole volume
    volumes_in_file: int | None = None  # a 4D multi-frame's volumes (the first is kept)
    volumes_in_series: int | None = None  # whole-volume files in the series (the first by acquisition is kept)


class MixedPatients(ValueError):
    """Slices of one series that disagree on the patient: a PACS export fault (one SOP Instance UID or one series
    given to two people), refused rather than made into one volume of two people (ingest quarantines such files as
    ``sop_instance_uid_collision``)."""


def load_dicom_series(files: list[str], max_bytes: int | None = None) -> tuple[nib.Nifti1Image, VolumeInfo]:
    """Group by SeriesInstanceUID, sort by position along the slice normal (not by file name).

    A file that holds a whole volume (Enhanced MR multi-frame, Siemens mosaic) is read on its own; where a series is
    several such volumes (a time series), the first one by acquisition order is taken."""
    import pydicom
    import SimpleITK as sitk

    headers = []
    for f in files:
        ds = pydicom.dcmread(f, stop_before_pixels=True, specific_tags=SERIES_TAGS)
        headers.append((f, ds))
    _check_one_patient(headers)
    if max_bytes is not None:
        need = sum(_pixel_bytes(ds) for _, ds in headers)
        if need > max_bytes:
            raise VolumeTooLarge(f"{len(files)} DICOM file(s) promise {need} decoded bytes, over "
                                 f"bounds.max_volume_bytes {max_bytes}")
    volume_files = [(f, ds) for f, ds in headers if _holds_volume(ds)]
    if volume_files:
        volume_files.sort(key=lambda h: (int(h[1].get("AcquisitionNumber") or 0), int(h[1].get("InstanceNumber") or 0)))
        img, info = _load_volume_file(volume_files[0][0])
        info.n_files, info.volumes_in_series = len(files), len(volume_files)
        return img, info
    uids = {str(ds.get("SeriesInstanceUID", "")) for _, ds in headers}
    if len(uids) > 1:
        raise ValueError(f"{len(uids)} SeriesInstanceUIDs in one series")
    first = headers[0][1]
    iop = np.array([float(v) for v in first.ImageOrientationPatient])
    normal = np.cross(iop[:3], iop[3:])
    pos = [(float(np.dot(normal, [float(v) for v in ds.ImagePositionPatient])), f) for f, ds in headers]
    pos.sort()
    gaps = np.diff([p for p, _ in pos])
    info = VolumeInfo(n_files=len(files))
    if len(gaps):
        info.slice_gap_mm = round(float(np.median(gaps)), 4)
        info.duplicate_slices = int(np.sum(np.isclose(gaps, 0.0)))
        info.irregular_gaps = int(np.sum(~np.isclose(gaps, np.median(gaps), rtol=0.05)))
    reader = sitk.ImageSeriesReader()
    reader.SetFileNames([f for _, f in pos])
    img = reader.Execute()
    arr = sitk.GetArrayFromImage(img).transpose(2, 1, 0)  # (z,y,x) -> (i,j,k)
    direction = np.array(img.GetDirection()).reshape(3, 3)
    affine = np.eye(4)
    affine[:3, :3] = direction * np.array(img.GetSpacing())
    affine[:3, 3] = img.GetOrigin()
    nii = nib.Nifti1Image(arr.astype(np.float32), LPS_TO_RAS @ affine)
    keys = ("RepetitionTime", "EchoTime", "InversionTime", "MagneticFieldStrength", "FlipAngle")
    info.sidecar = {k: _num(first.get(k)) for k in keys if first.get(k) is not None}
    if first.get("Manufacturer"):
        info.sidecar["Manufacturer"] = str(first.Manufacturer)
    return nii, info


def _check_one_patient(headers: list[tuple[str, Any]]) -> None:
    """Refuse slices that disagree on the patient: Patient ID compared as read (a slice without one is not the
    patient of a slice with one), name and birth date where a slice has them (de-identification may blank them).
    The error names the files and the element, never the values (they identify someone)."""
    for tag in PATIENT_TAGS:
        seen: dict[str, str] = {}  # value -> the first file carrying it
        for f, ds in headers:
            value = _patient_value(ds, tag)
            if value or tag == "PatientID":
                seen.setdefault(value, f)
        if len(seen) > 1:
            first, other = sorted(seen.values())[:2]
            raise MixedPatients(f"slices of {len(seen)} patients in one series ({tag} differs: {Path(first).name} "
                                f"vs {Path(other).name}); refusing to make one volume of them")


def _patient_value(ds: Any, tag: str) -> str:
    """The element's value as text, with the padding and empty trailing name components (``DOE^JOHN^^``) that do
    not change who it names removed."""
    text = str(ds.get(tag, "") or "").strip()
    return text.rstrip("^ ").upper() if tag == "PatientName" else text


def _pixel_bytes(ds: Any) -> int:
    """Decoded pixel bytes a DICOM header promises (rows x columns x samples x frames x bytes per sample)."""
    rows, cols = int(ds.get("Rows") or 0), int(ds.get("Columns") or 0)
    samples, frames = int(ds.get("SamplesPerPixel") or 1), int(ds.get("NumberOfFrames") or 1)
    return rows * cols * samples * frames * max(1, int(ds.get("BitsAllocated") or 16) // 8)


def _holds_volume(ds: Any) -> bool:
    """Enhanced (multi-frame) images and Siemens mosaics hold a whole volume in one file."""
    image_type = [str(v).upper() for v in (ds.get("ImageType") or [])]
    return int(ds.get("NumberOfFrames") or 1) > 1 or "MOSAIC" in image_type


def _load_volume_file(path: str) -> tuple[nib.Nifti1Image, VolumeInfo]:
    """One multi-frame or mosaic file as a volume, geometry from its functional groups or its Siemens CSA header
    (nibabel's DICOM wrappers); a 4D multi-frame keeps its first volume."""
    import warnings

    import pydicom

    ds = pydicom.dcmread(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nibabel flags its DICOM readers as experimental on import and use
        from nibabel.nicom import dicomwrappers

        wrapper = dicomwrappers.wrapper_from_data(ds)
        data = np.asarray(wrapper.get_data(), dtype=np.float32)
        affine = np.asarray(wrapper.affine, dtype=np.float64)
    info = VolumeInfo(volume_file=type(wrapper).__name__)
    if data.ndim == 4:
        info.volumes_in_file = int(data.shape[3])
        data = data[..., 0]
    if data.ndim != 3:
        raise ValueError(f"a single DICOM file with {data.ndim} dimensions is not a volume")
    shared = (ds.get("SharedFunctionalGroupsSequence") or [None])[0]
    timing = (shared.get("MRTimingAndRelatedParametersSequence") or [None])[0] if shared is not None else None
    sources = [ds] + ([timing] if timing is not None else [])
    sidecar: dict[str, float | str] = {}
    for key in ("RepetitionTime", "EchoTime", "InversionTime", "MagneticFieldStrength", "FlipAngle"):
        for src in sources:
            if src.get(key) is not None:
                sidecar[key] = _num(src.get(key))
                break
    if ds.get("Manufacturer"):
        sidecar["Manufacturer"] = str(ds.Manufacturer)
    info.sidecar = sidecar
    return nib.Nifti1Image(data, LPS_TO_RAS @ affine), info


def _num(v: Any) -> float | str:
    try:
        return float(v)
    except (TypeError, ValueError):
        return str(v)


def load_volume(fmt: str, files: list[str], max_bytes: int | None = None) -> tuple[nib.Nifti1Image, VolumeInfo]:
    """``max_bytes``: refuse (``VolumeTooLarge``), from the headers alone, a volume that decodes to more."""
    if fmt == "dicom" and any(f.endswith(SERIES_ARCHIVE) for f in files):
        if len(files) != 1:
            raise ValueError(f"a packed series is one archive, not {len(files)} files")
        with unpacked_series(files[0]) as members:  # deidentify's output: one zip per series
            img, info = load_dicom_series(members, max_bytes)
    elif fmt == "dicom":
        img, info = load_dicom_series(files, max_bytes)
    else:
        path = next(f for f in files if f.endswith(VOLUME_SUFFIXES))
        src = nib.load(path)
        check_volume_header(src, max_bytes)
        data = np.asanyarray(src.dataobj).astype(np.float32)
        while data.ndim > 3:
            data = data[..., 0]
        img = nib.Nifti1Image(data, src.affine)
        info = VolumeInfo(n_files=len(files))
    canon = nib.as_closest_canonical(img)
    info.orientation = "".join(nib.aff2axcodes(canon.affine))
    return canon, info


def convert_path(src: Path, max_bytes: int | None = None) -> tuple[nib.Nifti1Image, VolumeInfo]:
    """``curate imaging convert``: a DICOM file, folder or packed series (.zip), an Analyze .hdr, a NIfTI, or a .gz
    of any of these.
    ``max_bytes`` bounds the decoded volume and every gzip stream decompressed on the way."""
    src = Path(src)
    if src.is_file() and src.suffix == ".gz" and not src.name.endswith(".nii.gz"):
        return _convert_gz(src, max_bytes)
    if src.is_dir():
        files = sorted(str(p) for p in src.iterdir() if p.is_file() and is_dicom(p))
        if not files:
            raise ValueError("folder holds no DICOM files")
        return load_volume("dicom", files, max_bytes)
    if src.name.endswith(VOLUME_SUFFIXES):
        return load_volume("nifti", [str(src)], max_bytes)
    if src.name.endswith(SERIES_ARCHIVE) or is_dicom(src):
        return load_volume("dicom", [str(src)], max_bytes)
    raise ValueError("not a DICOM, Analyze or NIfTI file")


def _convert_gz(src: Path, max_bytes: int | None = None) -> tuple[nib.Nifti1Image, VolumeInfo]:
    """Decompress into a private temporary folder (an Analyze .hdr.gz brings its .img.gz sibling) and convert.
    Each stream is copied a chunk at a time and abandoned past ``max_bytes`` (a gzip bomb never fills the disk)."""
    import gzip
    import tempfile

    with tempfile.TemporaryDirectory(prefix="curate-convert-") as tmp:
        inner = Path(tmp) / src.name[: -len(".gz")]
        siblings = [src]
        if inner.suffix == ".hdr":
            siblings.append(src.with_name(src.name.replace(".hdr.gz", ".img.gz")))
        for gz in siblings:
            if not gz.exists():
                raise ValueError(f"{gz.name} is missing beside {src.name}")
            with gzip.open(gz, "rb") as fin, (Path(tmp) / gz.name[: -len(".gz")]).open("wb") as fout:
                _copy_capped(fin, fout, max_bytes, gz.name)
        img, info = convert_path(inner, max_bytes)
        return nib.Nifti1Image(np.asarray(img.dataobj, dtype=np.float32), img.affine), info


def _copy_capped(fin: Any, fout: Any, max_bytes: int | None, name: str) -> None:
    # a header and its pixel data: the stream may exceed the pixel bound by a header's worth (16 MiB allowance)
    cap = None if max_bytes is None else max_bytes + (16 << 20)
    total = 0
    while chunk := fin.read(1 << 20):
        total += len(chunk)
        if cap is not None and total > cap:
            raise VolumeTooLarge(f"{name} decompresses to more than {cap} bytes (bounds.max_volume_bytes "
                                 f"{max_bytes}); abandoned")
        fout.write(chunk)
