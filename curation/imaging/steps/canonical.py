"""Step ``to_canonical``: read the series as one canonical RAS+ volume."""

from __future__ import annotations

from typing import Any

import numpy as np

from curation.imaging.steps.base import Refused, SeriesContext, declares, step_record
from curation.io.volumes import VolumeTooLarge
from curation.report import Outcome
from curation.schema import Step


@declares(writes=("info", "src_affine"))
def to_canonical(img: Any, ctx: SeriesContext) -> tuple[Any, Step | None]:
    """Read the series (DICOM, Analyze, NIfTI) as one canonical RAS+ volume; refuse an empty or blank one."""
    from curation.imaging.convert import MixedPatients, load_volume

    t = ctx.task
    try:
        img, ctx.info = load_volume(t.format, t.files, ctx.params.bounds.max_volume_bytes)
    except VolumeTooLarge as exc:
        raise Refused(Outcome.failure("volume_too_large", str(exc))) from exc
    except MixedPatients as exc:
        raise Refused(Outcome.failure("mixed_patients", str(exc))) from exc
    except Exception as exc:
        raise Refused(Outcome.failure("convert_failed", f"{type(exc).__name__}: {exc}")) from exc
    blank = _blank(img)
    if blank:
        raise Refused(Outcome.failure("volume_blank", blank))
    ctx.src_affine = np.asarray(img.affine, dtype=np.float64)
    return img, step_record("to_canonical_ras", format=t.format)


def _blank(img: Any) -> str | None:
    """Why a volume has nothing to render (every voxel the same value, or not finite), or None."""
    data = np.asanyarray(img.dataobj)
    if data.size == 0:
        return "no voxels"
    finite = np.isfinite(data)
    if not finite.any():
        return "no finite voxel values"
    lo, hi = float(data[finite].min()), float(data[finite].max())
    if lo == hi:
        return f"every voxel is {lo:g}: nothing to render"
    return None
