"""Step ``render``: the PNG renders of the normalized volume (curation.imaging.render.render_volume)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from curation.imaging.steps.base import SeriesContext, declares, step_record, voxel_data
from curation.schema import Step


@declares(reads=("fg", "located", "refused", "spacing"), writes=("renders",))
def render(img: Any, ctx: SeriesContext) -> tuple[Any, Step | None]:
    from curation.imaging.render import WINDOW_PERCENTILES, render_volume

    t, p = ctx.task, ctx.params
    ctx.renders = render_volume(voxel_data(img), ctx.foreground, ctx.spacing, p, Path(t.out_dir), Path(t.final_dir),
                                targets=ctx.located.targets, refused=ctx.refused)
    return img, step_record("render", size=p.render_size, window_percentiles=list(WINDOW_PERCENTILES))
