"""Step ``deface``: zero face and ears, or record why the series has no face to remove."""

from __future__ import annotations

from typing import Any

import numpy as np

from curation.imaging.steps.base import (
    Refused,
    SeriesContext,
    declares,
    lesion_mask_on,
    step_record,
    voxel_data,
    wants_deface,
)
from curation.report import Outcome
from curation.schema import Deface, Step


def _face_free(img: Any, ctx: SeriesContext) -> dict[str, Any] | None:
    """Why the series has no face to remove (a brain without its head, or a field of view that stops above the
    face), or None. Only a series the fit shows to be a brain can be face-free; anything else goes to the defacer,
    which refuses what is not a head."""
    if ctx.fit is None:
        return None
    from curation.imaging import face
    from curation.imaging.targets import brain_check

    data, affine = voxel_data(img), np.asarray(img.affine, dtype=np.float64)
    in_view, tissue = face.face_tissue(ctx.fit, data, affine)
    if in_view < face.MIN_FACE_IN_VIEW:
        reason = f"the face is outside the field of view ({in_view:.1%} of the template's face region in view)"
    elif tissue <= face.MAX_FACE_TISSUE:
        reason = (f"no tissue where the face would be ({tissue:.1%} of the face region in view): a brain without "
                  "its head")
    else:
        return None  # a face to remove (every whole head): the brain check below is not needed
    # a lesion the source's own mask shows is no anatomy to check the fit against (a glioma's mass effect and
    # oedema blur the grey and white matter around it: a real post-contrast T1 read 0.11 with it, above 0.15 without)
    lesion = lesion_mask_on(ctx.task.lesion_mask, img) if ctx.task.lesion_mask else None
    if brain_check(data, affine, ctx.fit, exclude=lesion) is not None:
        return None  # no brain where the fit puts it: not shown to be a brain, so the defacer decides
    return {"outcome": "face_free", "reason": reason, "face_region_in_view": in_view, "face_region_tissue": tissue,
            "series_kind": ctx.fit.kind}


@declares(reads=("fit",), writes=("deface",))
def deface(img: Any, ctx: SeriesContext) -> tuple[Any, Step | None]:
    """Zero face and ears (curation.imaging.deface) of the sequences ``deface_sequences`` names (None: all); a
    face-free series (a brain without its head) passes unchanged, recorded as such."""
    if not wants_deface(ctx):
        return img, None
    from curation.imaging.deface import VERSION as DEFACE_VERSION
    from curation.imaging.deface import DefaceError, deface_image

    free = _face_free(img, ctx)
    if free is not None:
        ctx.deface = Deface(outcome="face_free", reason=free["reason"])
        return img, step_record("deface", DEFACE_VERSION, **free)
    try:
        img, summary = deface_image(img)
    except DefaceError as exc:  # a face that cannot be removed safely is never rendered
        raise Refused(Outcome.failure("deface_refused", str(exc))) from exc
    ctx.deface = Deface(outcome="defaced", removed_voxels=summary["removed_voxels"])
    return img, step_record("deface", DEFACE_VERSION, outcome="defaced",
                            **{k: v for k, v in summary.items() if k != "version"})
