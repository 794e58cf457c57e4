"""Lesion change between two FLAIR examinations of one person: the follow-up registered (rigid) onto the
baseline, both flattened and scaled the same way, and the voxels that are lesion-bright on the follow-up and
brighter than on the baseline clustered. The largest change (by volume times contrast) is where a comparison item
looks; it is "new" where the baseline was not lesion-bright there, "enlarging" where it already was.

Only white matter away from the brain's surface is searched: at the cortex, the vertex and the skull base, two
acquisitions differ in partial volume, slice profile and flow, not in disease (on a real MS pair, changes found 10 mm
from the surface missed the expert's change mask by 14 mm; from 15 mm they lay on it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from nibabel.affines import voxel_sizes
from scipy import ndimage

from curation.params import ChangeParams

if TYPE_CHECKING:
    from curation.schema import Render, Step


@dataclass(frozen=True)
class Change:
    """The largest change: where it lies on the baseline's grid and in RAS mm, how big, new or enlarging."""

    kind: Literal["new", "enlarging"]
    centre_mm: list[float]
    slice_index: int  # axial, on the baseline's grid
    volume_mm3: float
    contrast: float  # mean rise over the change, in the robust spread
    count: int  # changes of at least min_mm3


def _robust_z(d: np.ndarray, mask: np.ndarray) -> np.ndarray:
    v = d[mask]
    q1, med, q3 = np.percentile(v, [25, 50, 75])
    return (d - med) / max((q3 - q1) / 1.349, 1e-6)


def _level(a: np.ndarray, sigma_vox: list[float]) -> np.ndarray:
    """``a`` smoothed by a wide Gaussian (``sigma_vox``), on a grid decimated to a quarter of the width along each
    axis where it spans 8 voxels or more, and interpolated back: a level so smooth loses nothing on the coarser grid,
    and on the full grid this filter costs a fifth of a demo series' normalize."""
    step = [max(1, int(s // 4)) for s in sigma_vox]
    if step == [1] * len(step):
        return ndimage.gaussian_filter(a, sigma_vox)
    coarse = ndimage.uniform_filter(a, step)[tuple(slice(k // 2, None, k) for k in step)]
    coarse = ndimage.gaussian_filter(coarse, [s / k for s, k in zip(sigma_vox, step, strict=True)])
    return ndimage.zoom(coarse, np.array(a.shape) / np.array(coarse.shape), order=1, grid_mode=True, mode="nearest")


def _flattened(d: np.ndarray, fg: np.ndarray, sigma_vox: list[float]) -> np.ndarray:
    """``d`` divided by its own smoothed level inside the head: slow drifts between acquisitions cancel."""
    m = fg.astype(np.float32)
    level = _level(d * m, sigma_vox) / np.maximum(_level(m, sigma_vox), 1e-3)
    return np.where(fg, d / np.maximum(level, 1e-3), 0.0).astype(np.float32)


def find_change(baseline: np.ndarray, followup: np.ndarray, affine: np.ndarray,
                p: ChangeParams) -> Change | None:
    """The largest new or enlarging lesion between ``baseline`` and ``followup`` (already on the baseline's grid,
    ``affine``); None where nothing reaches ``p.min_mm3``."""
    zooms = [float(v) for v in voxel_sizes(affine)]
    fg = ndimage.binary_fill_holes((baseline > baseline.mean()) & (followup > followup.mean()))
    deep = ndimage.distance_transform_edt(fg, sampling=zooms) >= p.min_depth_mm
    if deep.sum() < 1000:
        return None
    sigma = [p.flatten_mm / z for z in zooms]
    smooth = [1.0 if z < 2 else 0.0 for z in zooms]  # in-plane only where slices are thick
    zb = _robust_z(ndimage.gaussian_filter(_flattened(baseline, fg, sigma), smooth), deep)
    zf = _robust_z(ndimage.gaussian_filter(_flattened(followup, fg, sigma), smooth), deep)
    rise = zf - zb
    found = deep & (zf > p.lesion_z) & (rise > p.rise_z)
    labels, n = ndimage.label(found)
    if n == 0:
        return None
    voxel = float(np.prod(zooms))
    ids = np.arange(1, n + 1)
    volume = ndimage.sum(found, labels, ids) * voxel
    weight = ndimage.sum(rise * found, labels, ids) * voxel
    big = volume >= p.min_mm3
    if not big.any():
        return None
    best = int(ids[big][np.argmax(weight[big])])
    where = labels == best
    centre_vox = np.array(ndimage.center_of_mass(where))
    centre = (affine @ np.append(centre_vox, 1.0))[:3]
    # a lesion the baseline already had, beside or inside the change: it grew (the change is its new rim)
    ring = ndimage.binary_dilation(where, iterations=max(1, int(round(3.0 / min(zooms)))))
    was = float((ring & (zb > p.lesion_z)).sum()) * voxel
    return Change(kind="enlarging" if was >= max(p.min_mm3, 0.1 * float(volume[best - 1])) else "new",
                  centre_mm=[round(float(v), 2) for v in centre], slice_index=int(round(centre_vox[2])),
                  volume_mm3=round(float(volume[best - 1]), 1), contrast=round(float(np.mean(rise[where])), 2),
                  count=int(big.sum()))


def change_between(baseline_img: Any, followup_img: Any, p: ChangeParams) -> tuple[Change | None, np.ndarray, Any]:
    """Register ``followup_img`` (rigid) onto ``baseline_img`` (nibabel images), then :func:`find_change`. Returns
    the change, the follow-up on the baseline's grid and the transform (baseline points -> follow-up points)."""
    import SimpleITK as sitk

    from curation.imaging.sitk import register_rigid, to_sitk

    tx, _, moved = register_rigid(to_sitk(baseline_img), to_sitk(followup_img), p.register_spacing_mm)
    follow = sitk.GetArrayFromImage(moved).transpose(2, 1, 0).astype(np.float32)
    base = np.asarray(baseline_img.dataobj, dtype=np.float32)
    return find_change(base, follow, baseline_img.affine, p), follow, tx


@dataclass(frozen=True)
class ChangeTask:
    """A follow-up FLAIR (``moving``, the normalized volume staged in ``out_dir``) against the baseline FLAIR
    (``fixed``, of series ``reference`` at visit ``reference_visit``), both rendered where they differ."""

    params: Any  # NormalizeParams
    fixed: str
    moving: str
    out_dir: str
    final_dir: str
    reference: str
    reference_visit: str


@dataclass(frozen=True)
class Changed:
    """The change found (None where there is none), the two renders at its slice and the provenance step."""

    change: Change | None
    renders: list[Render]
    step: Step


def change_series(job: ChangeTask) -> Any:
    """Outcome of comparing one follow-up FLAIR with its baseline: the change, and the baseline's and the registered
    follow-up's axial slices through it (same grid, so the same position in mm; each in its own window: two
    acquisitions months apart need not share a scale), or the failure."""
    from pathlib import Path

    import nibabel as nib

    from curation.imaging.render import render_volume
    from curation.imaging.sitk import ras_matrix
    from curation.imaging.steps.base import step_record
    from curation.imaging.targets import slice_position
    from curation.report import Outcome
    from curation.schema import Placement

    p = job.params
    try:
        base_img: Any = nib.load(job.fixed)
        follow_img: Any = nib.load(job.moving)
        change, moved, tx = change_between(base_img, follow_img, p.change)
    except Exception as exc:  # ITK raises on degenerate images
        return Outcome.failure("change_registration_failed", f"{type(exc).__name__}: {exc}", job)
    step = step_record("lesion_change", reference=job.reference, reference_visit=job.reference_visit,
                       found=change.kind if change else None,
                       volume_mm3=change.volume_mm3 if change else None,
                       baseline_to_followup_ras=[[round(float(v), 5) for v in row] for row in ras_matrix(tx)])
    if change is None:
        return Outcome.success(Changed(None, [], step))
    base = np.asarray(base_img.dataobj, dtype=np.float32)
    spacing = tuple(round(float(z), 4) for z in base_img.header.get_zooms()[:3])
    target = Placement(target="lesion", plane="axial", slice_index=change.slice_index,
                       position_mm=slice_position(base_img.affine, base.shape, 2, change.slice_index,
                                                  np.asarray(change.centre_mm)),
                       located_by=f"lesion_change:{job.reference}")
    renders = []
    for data, role, prefix in ((base, "change_baseline", "change_baseline_"), (moved, "change", "change_")):
        renders += render_volume(data, data > float(data.mean()), spacing, p, Path(job.out_dir), Path(job.final_dir),
                                 targets=[target], role=role, prefix=prefix,
                                 only_targets=True)
    return Outcome.success(Changed(change, renders, step))
