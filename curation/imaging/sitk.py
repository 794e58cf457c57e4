"""SimpleITK beside nibabel, low in imaging: conversion both ways, coarse working copies, the thread count, and the
one registration set-up that defacing, the anatomy template fit and the within-visit and longitudinal
registrations share.

Registrations are reproducible by construction: they run single-threaded (``threads(1)``) with regular metric
sampling and a fixed seed, so a volume registers to the same transform on every run and machine.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

LPS_FLIP = np.diag([-1.0, -1.0, 1.0])  # RAS (nibabel) <-> LPS (ITK) world axes


def to_sitk(img: Any) -> Any:
    """A RAS-oriented nibabel image as a SimpleITK image (LPS world), same voxels and geometry."""
    import SimpleITK as sitk

    data = np.asarray(img.dataobj, dtype=np.float32)
    out = sitk.GetImageFromArray(np.ascontiguousarray(data.transpose(2, 1, 0)))
    aff = img.affine
    zooms = np.sqrt((aff[:3, :3] ** 2).sum(axis=0))
    out.SetSpacing([float(z) for z in zooms])
    out.SetDirection([float(v) for v in (LPS_FLIP @ aff[:3, :3] / zooms).flatten()])
    out.SetOrigin([float(v) for v in LPS_FLIP @ aff[:3, 3]])
    return out


def array_to_sitk(data: np.ndarray, affine: np.ndarray) -> Any:
    """:func:`to_sitk` of a bare ``[x, y, z]`` array with its RAS ``affine``."""
    import nibabel as nib

    return to_sitk(nib.Nifti1Image(np.asarray(data, np.float32), affine))


def from_sitk(image: Any, like_affine: np.ndarray, spacing: tuple[float, ...]) -> Any:
    """A SimpleITK image back as a float32 nibabel image: axes as in ``like_affine``, voxel size ``spacing``."""
    import nibabel as nib
    import SimpleITK as sitk

    data = sitk.GetArrayFromImage(image).transpose(2, 1, 0)
    aff = np.eye(4)
    zooms = np.sqrt((like_affine[:3, :3] ** 2).sum(axis=0))
    aff[:3, :3] = like_affine[:3, :3] / zooms * np.asarray(spacing)
    aff[:3, 3] = LPS_FLIP @ np.asarray(image.GetOrigin())
    return nib.Nifti1Image(np.ascontiguousarray(data, dtype=np.float32), aff)


@contextlib.contextmanager
def threads(n: int | None) -> Iterator[None]:
    """SimpleITK's global default thread count set to ``n`` inside the block and restored after it (None: left as
    it is). The count is process-wide state, so nothing sets it without putting it back."""
    if not n:
        yield
        return
    import SimpleITK as sitk

    before = sitk.ProcessObject.GetGlobalDefaultNumberOfThreads()
    sitk.ProcessObject.SetGlobalDefaultNumberOfThreads(int(n))
    try:
        yield
    finally:
        sitk.ProcessObject.SetGlobalDefaultNumberOfThreads(before)


def coarse_copy(image: Any, spacing: float) -> Any:
    """``image`` resampled to ``spacing`` mm over the same field of view, intensities scaled to [0, 1000] (the 99.5th
    percentile at 1000): what registrations run on."""
    import SimpleITK as sitk

    sp, size = np.asarray(image.GetSpacing()), np.asarray(image.GetSize())
    new_size = [max(8, int(v)) for v in np.ceil(size * sp / spacing)]
    small = sitk.Resample(image, new_size, sitk.Transform(), sitk.sitkLinear, image.GetOrigin(), [spacing] * 3,
                          image.GetDirection(), 0.0, sitk.sitkFloat32)
    hi = float(np.percentile(sitk.GetArrayViewFromImage(small), 99.5)) or 1.0
    return sitk.Clamp(small * (1000.0 / hi), sitk.sitkFloat32, 0.0, 1000.0)


def registration(sampling: float, shrink: Sequence[int], smooth: Sequence[float],
                 moving_mask: Any | None = None, iterations: int = 200) -> Any:
    """The one registration set-up: Mattes mutual information (32 bins) on a regular ``sampling`` fraction of the
    voxels (seed 1), linear interpolation, regular-step gradient descent scaled by physical shift, a pyramid of
    ``shrink`` factors with ``smooth`` sigmas in mm, at most ``iterations`` steps per level. What differs between
    callers is the transform, the sampling fraction and the pyramid (see :func:`register_affine` and
    :func:`register_rigid`)."""
    import SimpleITK as sitk

    reg = sitk.ImageRegistrationMethod()
    reg.SetMetricAsMattesMutualInformation(numberOfHistogramBins=32)
    reg.SetMetricSamplingStrategy(reg.REGULAR)
    reg.SetMetricSamplingPercentage(sampling, seed=1)
    if moving_mask is not None:
        reg.SetMetricMovingMask(moving_mask)
    reg.SetInterpolator(sitk.sitkLinear)
    reg.SetOptimizerAsRegularStepGradientDescent(learningRate=1.0, minStep=1e-4, numberOfIterations=iterations,
                                                 relaxationFactor=0.6)
    reg.SetOptimizerScalesFromPhysicalShift()
    reg.SetShrinkFactorsPerLevel(list(shrink))
    reg.SetSmoothingSigmasPerLevel(list(smooth))
    reg.SmoothingSigmasAreSpecifiedInPhysicalUnitsOn()
    return reg


AFFINE_SAMPLING = 0.2  # template fits (defacing, anatomy): a 1 mm template on 3-4 mm copies, 12 parameters
RIGID_SAMPLING = 0.5  # series to series (same head): 6 parameters, a denser sample for sub-voxel alignment


# register_affine's stages: (affine?, shrink factors, smoothing sigmas in mm, most steps per level). The similarity
# stage converges in 20-60 steps at the working grid on real heads; the affine stage refines it, at the finest grid
# for at most 30 steps: on real heads it stops before that (17-41 steps in all), on heads unlike the template (the
# demo's, with no real face) it wandered for 100-120 steps at 60% of the whole cost and no better result (the brain
# voxels removed on the six real heads were the same or fewer with the cap). The similarity stage is capped at 60
# steps a level: on the three real heads with a face it halved the steps, and the removed region agreed with
# the uncapped one to Dice 0.996-0.999; on a demo head it wandered for 641 steps, 3.3 s, and now stops at 310, 1.8 s.
AFFINE_STAGES: tuple[tuple[bool, tuple[int, ...], tuple[float, ...], int], ...] = (
    (False, (4, 2, 1), (2.0, 1.0, 0.0), 60),
    (True, (2,), (1.0,), 100),
    (True, (1,), (0.0,), 30),
)


def register_affine(fixed: Any, moving: Any, moving_mask: Any | None = None) -> tuple[Any, float]:
    """Affine transform mapping points of ``fixed`` into ``moving`` (a template onto a head of another shape):
    a similarity transform first, then affine from it, each optimised in place (AFFINE_STAGES)."""
    import SimpleITK as sitk

    with threads(1):
        tx: Any = sitk.CenteredTransformInitializer(fixed, moving, sitk.Similarity3DTransform(),
                                                    sitk.CenteredTransformInitializerFilter.MOMENTS)
        metric = 0.0
        for affine, shrink, smooth, iterations in AFFINE_STAGES:
            reg = registration(AFFINE_SAMPLING, shrink, smooth, moving_mask, iterations)
            if affine and not isinstance(tx, sitk.AffineTransform):
                full = sitk.AffineTransform(3)
                full.SetMatrix(tx.GetMatrix())
                full.SetTranslation(tx.GetTranslation())
                full.SetCenter(tx.GetCenter())
                tx = full
            reg.SetInitialTransform(tx, inPlace=True)
            reg.Execute(fixed, moving)
            metric = float(reg.GetMetricValue())
        return tx, metric


def register_rigid(fixed: Any, moving: Any, spacing: float, *, resample: bool = True) -> tuple[Any, float, Any]:
    """Rigid transform (fixed points -> moving points; on copies at ``spacing`` mm, shrink 2, 1), its final metric,
    and ``moving`` resampled onto ``fixed`` (linear, float32; None without ``resample``). Two scans of one head: no
    scaling or shear.

    The transform is a pure function of the two images, ``spacing`` and this module's code, so it is kept in the
    fit store (:mod:`curation.imaging.fitcache`) and read back for the same pair: a re-run pays the resampling, not
    the registration. Fresh or read back, the transform is rebuilt from its stored numbers, so both give the same
    bytes."""
    import SimpleITK as sitk

    from curation.imaging import fitcache

    k = fitcache.key(sitk.GetArrayViewFromImage(fixed), _geometry(fixed), "rigid",
                     (sitk.GetArrayViewFromImage(moving).tobytes(), _geometry(moving).tobytes(),
                      f"spacing={spacing!r}".encode(), *_rigid_code()))
    with threads(1), fitcache.claimed(k):
        hit = fitcache.load(k, Path("."))  # the entry has no files: only the transform's numbers
        if hit is not None and hit.kind == "rigid":
            numbers, metric = hit.matrix, hit.metric
        else:
            cf, cm = coarse_copy(fixed, spacing), coarse_copy(moving, spacing)
            init = sitk.CenteredTransformInitializer(cf, cm, sitk.Euler3DTransform(),
                                                     sitk.CenteredTransformInitializerFilter.MOMENTS)
            reg = registration(RIGID_SAMPLING, [2, 1], [1.0, 0.0])
            reg.SetInitialTransform(init, inPlace=False)
            found = reg.Execute(cf, cm)
            metric = float(reg.GetMetricValue())
            euler = sitk.Euler3DTransform(found.GetNthTransform(0) if hasattr(found, "GetNthTransform") else found)
            numbers = [[float(v) for v in euler.GetParameters()], [float(v) for v in euler.GetFixedParameters()]]
            fitcache.store(k, fitcache.Entry(numbers, metric, "rigid", [], []), {})
        tx = sitk.Euler3DTransform()
        tx.SetFixedParameters(numbers[1])
        tx.SetParameters(numbers[0])
        out = sitk.Resample(moving, fixed, tx, sitk.sitkLinear, 0.0, sitk.sitkFloat32) if resample else None
    return tx, metric, out


def _geometry(image: Any) -> np.ndarray:
    """An image's origin, spacing and direction, as one array (what its voxels mean in space)."""
    return np.asarray([*image.GetOrigin(), *image.GetSpacing(), *image.GetDirection()], dtype=np.float64)


def _rigid_code() -> tuple[bytes, ...]:
    """The code parts of a rigid registration's key: this module and the SimpleITK version."""
    import SimpleITK as sitk

    from curation.imaging import fitcache

    return fitcache.fingerprint([Path(__file__)], [], [sitk.Version_VersionString()])


def ras_matrix(tx: Any) -> np.ndarray:
    """A SimpleITK matrix-offset transform (LPS points) as the 4x4 map of the same points in RAS mm."""
    tfm = tx.GetNthTransform(0) if hasattr(tx, "GetNthTransform") else tx
    m = np.eye(4)
    m[:3, :3] = np.asarray(tfm.GetMatrix()).reshape(3, 3)
    centre = np.asarray(tfm.GetCenter())
    m[:3, 3] = np.asarray(tfm.GetTranslation()) + centre - m[:3, :3] @ centre
    flip = np.diag([-1.0, -1.0, 1.0, 1.0])
    return flip @ m @ flip
