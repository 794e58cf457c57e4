"""Step ``intensity``: percentile rescale to [0, 1] or foreground z-score."""

from __future__ import annotations

from typing import Any

import numpy as np

from curation.imaging.steps.base import SeriesContext, declares, step_record
from curation.schema import Step


@declares(writes=("fg",))
def intensity(img: Any, ctx: SeriesContext) -> tuple[Any, Step | None]:
    """Percentile rescale to [0, 1] or foreground z-score; the foreground (above the mean) is taken before it."""
    import nibabel as nib

    p = ctx.params
    data = np.asarray(img.dataobj, dtype=np.float32)
    lo, hi = np.percentile(data, p.percentiles)
    fg = ctx.fg = data > float(data.mean())
    record = None
    if p.intensity == "percentile":
        data = np.clip((data - lo) / max(hi - lo, 1e-6), 0, 1).astype(np.float32)
        record = step_record("percentile_rescale", percentiles=list(p.percentiles))
    elif p.intensity == "zscore" and fg.any():
        data = ((data - data[fg].mean()) / max(float(data[fg].std()), 1e-6)).astype(np.float32)
        record = step_record("zscore_foreground")
    out = nib.Nifti1Image(data, img.affine)
    out.header.set_xyzt_units("mm")
    return out, record
