"""Step ``fit_anatomy``: register the labelled template to the series once."""

from __future__ import annotations

from typing import Any

import numpy as np

from curation.imaging.steps.base import SeriesContext, declares, step_record, voxel_data, wants_deface
from curation.schema import Step


@declares(writes=("fit", "fit_failed"))
def fit_anatomy(img: Any, ctx: SeriesContext) -> tuple[Any, Step | None]:
    """Register the labelled template to the series once (templatefit.fit_template, ANTs); defacing and target location
    both use it. A volume the fit breaks on keeps its reason; the steps after it go on without the fit."""
    if not (ctx.params.key_slices or wants_deface(ctx)):
        return img, None
    from curation.imaging import templatefit

    try:
        ctx.fit = templatefit.fit_template(voxel_data(img), np.asarray(img.affine, dtype=np.float64), ctx.task.sequence)
    except Exception as exc:  # ITK raises many types on degenerate volumes
        ctx.fit_failed = f"template registration failed ({type(exc).__name__}: {str(exc)[:200]})"
        return img, None
    return img, step_record("fit_anatomy", templatefit.registration_presets().version, **ctx.fit.record().model_dump())
