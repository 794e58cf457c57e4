"""Step ``qc``: foreground, SNR and acquisition flags of the normalized volume."""

from __future__ import annotations

from typing import Any

import numpy as np

from curation.imaging.convert import VolumeInfo
from curation.imaging.steps.base import SeriesContext, declares, voxel_data
from curation.schema import SeriesQC, Step


@declares(reads=("deface", "fg", "info", "located", "refused", "sampling", "spacing"), writes=("qc",))
def qc(img: Any, ctx: SeriesContext) -> tuple[Any, Step | None]:
    qc = volume_qc(voxel_data(img), ctx.foreground, ctx.spacing, ctx.info)
    qc.source_sampling_mm = list(ctx.sampling)
    qc.planes_refused, qc.planes_refused_reason = sorted(ctx.refused), ctx.refused
    qc.anatomy, qc.targets = ctx.located.anatomy, ctx.located.targets
    if ctx.deface is not None:
        qc.deface = ctx.deface
    ctx.qc = qc
    return img, None


def volume_qc(data: np.ndarray, fg: np.ndarray, spacing: tuple[float, ...], info: VolumeInfo) -> SeriesQC:
    """The QC metrics of a volume: foreground fraction, SNR, intensity range, slice sampling, and its flags."""
    bg = ~fg
    snr = float(data[fg].mean() / max(float(data[bg].std()), 1e-6)) if fg.any() and bg.any() else 0.0
    flags = []
    frac = float(fg.mean())
    if frac < 0.05:
        flags.append("low_foreground")
    if snr < 3:
        flags.append("low_snr")
    if info.duplicate_slices:
        flags.append("duplicate_slices")
    if info.irregular_gaps:
        flags.append("irregular_slice_gaps")
    if min(data.shape) < 16:
        flags.append("too_few_slices")
    return SeriesQC(foreground_fraction=round(frac, 4), snr=round(snr, 3), intensity_min=round(float(data.min()), 4),
                    intensity_max=round(float(data.max()), 4), slice_gap_mm=info.slice_gap_mm,
                    duplicate_slices=info.duplicate_slices, irregular_gaps=info.irregular_gaps,
                    source_orientation=info.orientation, flags=flags, passed=not flags)
