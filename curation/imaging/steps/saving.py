"""Step ``save``: write the normalized volume and its sidecar."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from curation.imaging.steps.base import SeriesContext, VolumeSidecar, declares
from curation.io.volumes import save_nifti
from curation.records import write_text
from curation.schema import Step


@declares(reads=("deface", "info"), writes=("spacing", "sidecar"))
def save(img: Any, ctx: SeriesContext) -> tuple[Any, Step | None]:
    """Write the normalized volume and its sidecar (acquisition metadata, sequence, orientation, spacing)."""
    out_dir = Path(ctx.task.out_dir)
    save_nifti(img, out_dir / "volume.nii.gz")
    ctx.spacing = tuple(round(float(z), 4) for z in img.header.get_zooms()[:3])
    ctx.sidecar = VolumeSidecar(dict(ctx.info.sidecar), ctx.task.sequence, ctx.spacing, ctx.defaced)
    write_text(out_dir / "volume.json", json.dumps(ctx.sidecar.record(), indent=2, sort_keys=True) + "\n")
    return img, None
