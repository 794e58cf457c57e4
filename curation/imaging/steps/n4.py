"""Step ``n4_bias_correction``: N4 bias-field correction (SimpleITK); its provenance is the constants it runs with."""

from __future__ import annotations

from typing import Any

from curation.imaging.sitk import from_sitk, to_sitk
from curation.imaging.steps.base import SeriesContext, declares, step_record
from curation.schema import Step

N4_SHRINK = 2  # N4 is fitted on the image shrunk by this factor, then applied at full resolution
N4_ITERATIONS = (20, 20)  # per fitting level; the provenance records these, not a copy of them


@declares()
def n4_bias_correction(img: Any, ctx: SeriesContext) -> tuple[Any, Step | None]:
    if not ctx.params.bias_correction:
        return img, None
    return n4_correct(img), step_record("n4_bias_correction", shrink=N4_SHRINK, iterations=list(N4_ITERATIONS))


def n4_correct(img: Any) -> Any:
    """N4 bias-field correction (SimpleITK), fitted on a shrunk image (N4_SHRINK) with an Otsu foreground mask."""
    import SimpleITK as sitk

    src = to_sitk(img)
    src = sitk.Cast(sitk.RescaleIntensity(src, 0, 1000), sitk.sitkFloat32)
    mask = sitk.OtsuThreshold(src, 0, 1, 200)
    small, small_mask = sitk.Shrink(src, [N4_SHRINK] * 3), sitk.Shrink(mask, [N4_SHRINK] * 3)
    n4 = sitk.N4BiasFieldCorrectionImageFilter()
    n4.SetMaximumNumberOfIterations(list(N4_ITERATIONS))
    n4.Execute(small, small_mask)
    log_field = n4.GetLogBiasFieldAsImage(src)
    corrected = src / sitk.Exp(log_field)
    return from_sitk(corrected, img.affine, tuple(src.GetSpacing()))
