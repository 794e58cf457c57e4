"""Step ``resample``: linear resampling to ``target_spacing`` over the same field of view."""

from __future__ import annotations

from typing import Any

import numpy as np

from curation.imaging.sitk import from_sitk, to_sitk
from curation.imaging.steps.base import SeriesContext, declares, step_record
from curation.schema import Step

RESAMPLE_ORDER = 1  # linear interpolation (SimpleITK's sitkLinear); the provenance records it


@declares()
def resample(img: Any, ctx: SeriesContext) -> tuple[Any, Step | None]:
    spacing = ctx.params.target_spacing
    if not spacing:
        return img, None
    return (resample_to_spacing(img, tuple(float(v) for v in spacing)),
            step_record("resample", spacing=list(spacing), order=RESAMPLE_ORDER))


def resample_to_spacing(img: Any, spacing: tuple[float, ...]) -> Any:
    """Resampling (RESAMPLE_ORDER: linear) to ``spacing`` with SimpleITK over the same field of view (multi-threaded
    C++)."""
    import SimpleITK as sitk

    src = to_sitk(img)
    old_sp, old_size = np.asarray(src.GetSpacing()), np.asarray(src.GetSize())
    size = [max(1, int(v)) for v in np.ceil(old_size * old_sp / np.asarray(spacing) - 1e-6)]
    interpolator = {0: sitk.sitkNearestNeighbor, 1: sitk.sitkLinear}[RESAMPLE_ORDER]
    out = sitk.Resample(src, size, sitk.Transform(), interpolator, src.GetOrigin(), spacing, src.GetDirection(),
                        0.0, sitk.sitkFloat32)
    return from_sitk(out, img.affine, spacing)
