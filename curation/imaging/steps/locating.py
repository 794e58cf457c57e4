"""Step ``locate_targets``: the planes the sampling cannot show, and the target slices to render."""

from __future__ import annotations

from typing import Any

from curation.imaging.steps.base import SeriesContext, declares, lesion_mask_on, step_record, voxel_data
from curation.schema import MASK_LOCATED, Step


@declares(reads=("fit", "fit_failed", "src_affine"), writes=("sampling", "refused", "located"))
def locate_targets(img: Any, ctx: SeriesContext) -> tuple[Any, Step | None]:
    """The planes the acquisition's sampling cannot show, and the target slices (anatomy, lesions) to render."""
    from curation.imaging.targets import locate, refused_planes, sampling_mm

    p = ctx.params
    ctx.sampling = sampling_mm(ctx.source_affine)
    ctx.refused = refused_planes(ctx.sampling, p.max_reformat_spacing_mm, p.max_isotropic_reformat_mm)
    if not p.key_slices:
        return img, None
    mask = lesion_mask_on(ctx.task.lesion_mask, img) if ctx.task.lesion_mask and "lesion" in p.targets else None
    ctx.located = locate(voxel_data(img), img.affine, ctx.task.sequence, p, ctx.refused, fit=ctx.fit, mask=mask)
    if mask is not None and ctx.fit is not None:  # the lobe the mask's lesion lies in, through the anatomy fit
        from curation.imaging.targets import tell_mask_lobe

        for placed in ctx.located.targets:
            if placed.located_by == MASK_LOCATED:
                tell_mask_lobe(placed, mask, voxel_data(img), img.affine, ctx.fit)
    if ctx.fit_failed:  # what the source's mask placed needs no fit
        kept = [t for t in ctx.located.targets if t.located_by == MASK_LOCATED]
        ctx.located.anatomy.fit = "failed"
        ctx.located.anatomy.not_located = {t: ctx.fit_failed for t in sorted(p.targets) if not (t == "lesion" and kept)}
        ctx.located.targets = kept
    return img, step_record("locate_targets", **ctx.located.anatomy.model_dump())
