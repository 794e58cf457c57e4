"""Defacing of 3D head MRI: the face and ears are zeroed, the brain is left as it was.

The approach pydeface takes, without FSL: the pydeface head template and its face mask (MIT licence, shipped in the
``pydeface`` wheel) are registered to the image with SimpleITK (similarity, then affine; Mattes mutual information),
and the face mask, plus a box beside each ear of the template, is carried onto the image's voxels and zeroed.

A volume is refused rather than written half-done when the fit cannot be trusted: the template head must cover the
image's head, the removed region must lie in front of and below the head's centre, and, where a brain mask is known
(``--brain-mask``, or one the source ships), no removed voxel may lie inside it. Registrations run single-threaded
with regular sampling (:func:`curation.imaging.sitk.register_affine`), so a volume gives the same output on every run;
the registration is kept in the fit store (:mod:`curation.imaging.fitcache`) and read back for the same image.

Normalize is its pipeline caller (every 3D head series before anything is rendered); ``curate deid deface`` runs it
on one file.
"""

from __future__ import annotations

import functools
import importlib.resources
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from curation.errors import InputError
from curation.imaging import fitcache
from curation.imaging.sitk import coarse_copy, register_affine, to_sitk
from curation.io.volumes import save_nifti

VERSION = "3"  # 2: the affine stage capped at 30 steps on the working grid; 3: the similarity stage at 60 a level
WORK_SPACING = 3.0  # mm; registrations run on copies resampled to this spacing (sitk.coarse_copy)
MIN_HEAD_DICE = 0.6  # a gross check: a template that missed the head; a blob still passes it
# ear boxes in the template's voxel grid (fractions of its size): lateral to the skull, around the external meatus,
# at the level of the brainstem; they hold air and the ears, never brain
EAR_BOX = (0.10, (0.30, 0.56), (0.12, 0.42))


@dataclass(frozen=True)
class DefaceResult:
    keep: np.ndarray  # bool on the image's voxel grid, [x, y, z]: True where the voxel is kept
    removed_voxels: int
    head_dice: float
    brain_voxels: int | None
    brain_voxels_removed: int | None
    metric: float

    def summary(self) -> dict[str, Any]:
        return {"removed_voxels": self.removed_voxels, "head_dice": self.head_dice,
                "brain_voxels": self.brain_voxels, "brain_voxels_removed": self.brain_voxels_removed,
                "brain_check": "passed" if self.brain_voxels is not None else "no brain mask given",
                "template": "pydeface mean_reg2mean + facemask", "metric": round(self.metric, 4),
                "version": VERSION}


class DefaceError(InputError):
    """The volume cannot be defaced safely (not a 3D head, or the registration does not hold)."""


def _data_file(package: str, name: str) -> str:
    path = importlib.resources.files(package) / "data" / name
    if not path.is_file():
        raise DefaceError(f"{package}: template file {name} is missing; reinstall the project's dependencies")
    return str(path)


def templates() -> dict[str, str]:
    """Paths of the template head and its face mask (RAS NIfTI, 1 mm)."""
    return {"head": _data_file("pydeface", "mean_reg2mean.nii.gz"),
            "face_mask": _data_file("pydeface", "facemask.nii.gz")}


def _read(path: str) -> Any:
    import SimpleITK as sitk

    return sitk.Cast(sitk.ReadImage(path), sitk.sitkFloat32)


def _to_grid(mask: Any, reference: Any, transform: Any, default: float) -> np.ndarray:
    """``mask`` (template space) resampled onto ``reference``'s voxels, as an array in [x, y, z] order."""
    import SimpleITK as sitk

    out = sitk.Resample(mask, reference, transform, sitk.sitkLinear, default, sitk.sitkFloat32)
    return sitk.GetArrayFromImage(out).transpose(2, 1, 0)


@functools.lru_cache(maxsize=1)
def _template_masks() -> tuple[Any, Any, Any]:
    """The template head, its removal mask (face, ears) and its head mask, as SimpleITK float images."""
    import SimpleITK as sitk

    t = templates()
    head = _read(t["head"])
    face = _read(t["face_mask"]) < 0.5
    arr = sitk.GetArrayFromImage(face).transpose(2, 1, 0)  # [x, y, z], RAS voxel order (the templates are RAS)
    nx, ny, nz = arr.shape
    ears = np.zeros_like(arr)
    for xs in (slice(0, int(EAR_BOX[0] * nx)), slice(int((1 - EAR_BOX[0]) * nx), nx)):
        ears[xs, int(EAR_BOX[1][0] * ny):int(EAR_BOX[1][1] * ny), int(EAR_BOX[2][0] * nz):int(EAR_BOX[2][1] * nz)] = 1
    remove = sitk.GetImageFromArray(np.ascontiguousarray((arr | ears).astype(np.float32).transpose(2, 1, 0)))
    remove.CopyInformation(head)
    head_mask = sitk.Cast(sitk.OtsuThreshold(coarse_copy(head, WORK_SPACING), 0, 1), sitk.sitkFloat32)
    return head, remove, head_mask


def deface(image: Any, *, brain_mask: np.ndarray | None = None) -> DefaceResult:
    """The voxels of the SimpleITK ``image`` to keep; raises DefaceError when the result cannot be trusted.

    Checks that can refuse a volume: the registered template head must overlap the image's head (Dice of Otsu head
    masks at least MIN_HEAD_DICE), the removed region must lie in front of and below the head's centre, and, when a
    ``brain_mask`` (bool, [x, y, z] order on the image's grid) is given, no removed voxel may lie inside it."""
    import SimpleITK as sitk

    if image.GetDimension() != 3 or min(image.GetSize()) < 16:
        raise DefaceError(f"not a 3D head volume (size {list(image.GetSize())})")
    head, remove_tpl, head_tpl = _template_masks()
    fixed = coarse_copy(sitk.Cast(image, sitk.sitkFloat32), WORK_SPACING)
    tx, metric = _register(fixed, head)
    removed = _to_grid(remove_tpl, image, tx, 0.0) >= 0.5
    # registration check at the working resolution: does the template head cover the image's head?
    subject_head = sitk.GetArrayFromImage(sitk.OtsuThreshold(fixed, 0, 1)).astype(bool)
    warped_head = sitk.GetArrayFromImage(sitk.Resample(head_tpl, fixed, tx, sitk.sitkLinear, 0.0)) >= 0.5
    dice = 2 * float((subject_head & warped_head).sum()) / max(1, int(subject_head.sum() + warped_head.sum()))
    if dice < MIN_HEAD_DICE:
        raise DefaceError(f"the head template does not fit this volume (head overlap Dice {dice:.2f} < "
                          f"{MIN_HEAD_DICE}); is it a head MRI?")
    if not removed.any():
        raise DefaceError("the face region falls outside this volume's field of view; nothing would be removed")
    # the head's centre from its mask on the working copy (a few mm at most from the full grid's, far below the
    # check's scale), the face's from the removed voxels themselves
    centre = _centroid_ras(subject_head.transpose(2, 1, 0), fixed)
    face_centre = _centroid_ras(removed, image)
    if not (face_centre[1] > centre[1] and face_centre[2] < centre[2]):
        raise DefaceError("the registered face region is not in front of and below the head's centre; refused")
    brain_removed = int((removed & brain_mask).sum()) if brain_mask is not None else None
    result = DefaceResult(keep=~removed, removed_voxels=int(removed.sum()), head_dice=round(dice, 4),
                          brain_voxels=int(brain_mask.sum()) if brain_mask is not None else None,
                          brain_voxels_removed=brain_removed, metric=metric)
    if brain_removed:
        raise DefaceError(f"defacing would remove {brain_removed} voxels inside the brain mask; refused")
    return result


def _register(fixed: Any, head: Any) -> tuple[Any, float]:
    """The template head registered to ``fixed`` (the image's coarse copy), or the same registration read back from
    the fit store (curation.imaging.fitcache) when this image was defaced before with this code."""
    import SimpleITK as sitk

    origin_spacing_direction = np.r_[fixed.GetOrigin(), fixed.GetSpacing(), fixed.GetDirection()]
    k = fitcache.key(sitk.GetArrayViewFromImage(fixed), origin_spacing_direction, "deface", _code())
    with fitcache.claimed(k):
        hit = fitcache.load(k, Path("."))  # the entry has no files: only the affine's numbers
        if hit is not None and len(hit.matrix) == 3:
            tx = sitk.AffineTransform(3)
            tx.SetMatrix(hit.matrix[0])
            tx.SetTranslation(hit.matrix[1])
            tx.SetCenter(hit.matrix[2])
            return tx, hit.metric
        tx, metric = register_affine(fixed, coarse_copy(head, WORK_SPACING))
        numbers = [list(tx.GetMatrix()), list(tx.GetTranslation()), list(tx.GetCenter())]
        fitcache.store(k, fitcache.Entry(numbers, metric, "deface", [], []), {})
    return tx, metric


@functools.lru_cache(maxsize=1)
def _code() -> tuple[bytes, ...]:
    """What the defacing registration depends on besides the image: this module, the registration set-up, the
    templates and SimpleITK."""
    import SimpleITK as sitk

    from curation.imaging import sitk as sitk_setup

    return fitcache.fingerprint([Path(__file__), Path(sitk_setup.__file__)], [Path(t) for t in templates().values()],
                                [f"SimpleITK {sitk.Version_VersionString()}"])


def _centroid_ras(mask: np.ndarray, image: Any) -> np.ndarray:
    """World RAS position (mm) of the centroid of ``mask`` ([x, y, z] on the image's grid)."""
    from scipy import ndimage

    lps = image.TransformContinuousIndexToPhysicalPoint([float(v) for v in ndimage.center_of_mass(mask)])
    return np.asarray(lps) * np.array([-1.0, -1.0, 1.0])


def deface_image(img: Any, brain_mask: np.ndarray | None = None) -> tuple[Any, dict[str, Any]]:
    """Deface a 3D nibabel image: the same header, voxel grid and data type, face and ears zeroed."""
    import nibabel as nib

    data = np.asanyarray(img.dataobj)
    if data.ndim == 4 and data.shape[3] == 1:
        data = data[..., 0]
    if data.ndim != 3:
        raise DefaceError(f"not a 3D volume (shape {data.shape})")
    result = deface(to_sitk(nib.Nifti1Image(np.asarray(data, dtype=np.float32), img.affine)), brain_mask=brain_mask)
    out = np.where(result.keep, data, np.zeros((), dtype=data.dtype)).astype(data.dtype)
    klass = type(img) if isinstance(img, nib.Nifti1Image | nib.Nifti2Image) else nib.Nifti1Image
    return klass(out, img.affine, img.header.copy()), result.summary()


def deface_file(src: str | Path, dst: str | Path, *, brain_mask: str | Path | None = None) -> dict[str, Any]:
    """Deface the NIfTI ``src`` into ``dst`` (same header and voxel grid, atomic write); returns the report."""
    import nibabel as nib

    src, dst = Path(src), Path(dst)
    try:
        img = nib.load(str(src))
        shape = img.shape[:3]
    except Exception as exc:
        raise DefaceError(f"{src}: cannot read as NIfTI ({type(exc).__name__}: {exc})") from exc
    given = None
    if brain_mask is not None:
        try:
            m = nib.load(str(brain_mask))
        except Exception as exc:
            raise DefaceError(f"{brain_mask}: cannot read as NIfTI ({type(exc).__name__}: {exc})") from exc
        if m.shape[:3] != shape:
            raise DefaceError(f"{brain_mask}: brain mask shape {m.shape} differs from the image's {img.shape}")
        given = np.asanyarray(m.dataobj).reshape(shape) > 0
    try:
        out, summary = deface_image(img, brain_mask=given)
    except DefaceError as exc:
        raise DefaceError(f"{src}: {exc}") from exc
    save_nifti(out, dst)
    return {"input": str(src), "output": str(dst), **summary}
