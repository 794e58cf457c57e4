"""Load DICOM series, Analyze and NIfTI into one canonical (RAS+) nibabel image."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nibabel as nib
import numpy as np

LPS_TO_RAS = np.diag([-1.0, -1.0, 1.0, 1.0])


def load_dicom_series(files: list[str]) -> tuple[nib.Nifti1Image, dict[str, Any]]:
    """Group by SeriesInstanceUID, sort by position along the slice normal (not by file name)."""
    import pydicom
    import SimpleITK as sitk

    headers = []
    for f in files:
        ds = pydicom.dcmread(f, stop_before_pixels=True)
        headers.append((f, ds))
    uids = {str(ds.get("SeriesInstanceUID", "")) for _, ds in headers}
    if len(uids) > 1:
        raise ValueError(f"{len(uids)} SeriesInstanceUIDs in one series")
    first = headers[0][1]
    iop = np.array([float(v) for v in first.ImageOrientationPatient])
    normal = np.cross(iop[:3], iop[3:])
    pos = [(float(np.dot(normal, [float(v) for v in ds.ImagePositionPatient])), f) for f, ds in headers]
    pos.sort()
    gaps = np.diff([p for p, _ in pos])
    info: dict[str, Any] = {"n_files": len(files)}
    if len(gaps):
        info["slice_gap_mm"] = round(float(np.median(gaps)), 4)
        info["duplicate_slices"] = int(np.sum(np.isclose(gaps, 0.0)))
        info["irregular_gaps"] = int(np.sum(~np.isclose(gaps, np.median(gaps), rtol=0.05)))
    reader = sitk.ImageSeriesReader()
    reader.SetFileNames([f for _, f in pos])
    img = reader.Execute()
    arr = sitk.GetArrayFromImage(img).transpose(2, 1, 0)  # (z,y,x) -> (i,j,k)
    direction = np.array(img.GetDirection()).reshape(3, 3)
    affine = np.eye(4)
    affine[:3, :3] = direction * np.array(img.GetSpacing())
    affine[:3, 3] = img.GetOrigin()
    nii = nib.Nifti1Image(arr.astype(np.float32), LPS_TO_RAS @ affine)
    info["sidecar"] = {k: _num(first.get(k)) for k in ("RepetitionTime", "EchoTime", "InversionTime",
                                                        "MagneticFieldStrength", "FlipAngle") if first.get(k) is not None}
    if first.get("Manufacturer"):
        info["sidecar"]["Manufacturer"] = str(first.Manufacturer)
    return nii, info


def _num(v: Any) -> float | str:
    try:
        return float(v)
    except (TypeError, ValueError):
        return str(v)


def load_volume(fmt: str, files: list[str]) -> tuple[nib.Nifti1Image, dict[str, Any]]:
    if fmt == "dicom":
        img, info = load_dicom_series(files)
    else:
        path = next(f for f in files if f.endswith((".hdr", ".nii", ".nii.gz")))
        src = nib.load(path)
        data = np.asanyarray(src.dataobj).astype(np.float32)
        while data.ndim > 3:
            data = data[..., 0]
        img = nib.Nifti1Image(data, src.affine)
        info = {"n_files": len(files), "sidecar": {}}
    canon = nib.as_closest_canonical(img)
    info["orientation"] = "".join(nib.aff2axcodes(canon.affine))
    return canon, info


def convert_path(src: Path) -> tuple[nib.Nifti1Image, dict[str, Any]]:
    """``curate imaging convert``: a DICOM file or folder, an Analyze .hdr, or a NIfTI."""
    src = Path(src)
    if src.is_dir():
        files = sorted(str(p) for p in src.iterdir() if p.is_file() and _is_dicom(p))
        if not files:
            raise ValueError("folder holds no DICOM files")
        return load_volume("dicom", files)
    if src.name.endswith((".nii", ".nii.gz", ".hdr")):
        return load_volume("nifti", [str(src)])
    if _is_dicom(src):
        return load_volume("dicom", [str(src)])
    raise ValueError("not a DICOM, Analyze or NIfTI file")


def _is_dicom(p: Path) -> bool:
    with p.open("rb") as fh:
        head = fh.read(132)
    return head[128:132] == b"DICM"
