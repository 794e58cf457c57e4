"""Step ``save``: write the normalized volume and its sidecar."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from curation.imaging.steps.base import SeriesContext, declares
from curation.io.volumes import save_nifti
from curation.records import write_text
from curation.schema import Step


@declares(reads=("deface", "info"), writes=("spacing", "sidecar"))
def save(img: Any, ctx: SeriesContext) -> tuple[Any, Step | None]:
    """Write the normalized volume and its sidecar (acquisition metadata, sequence, orientation, spacing)."""
    out_dir = Path(ctx.task.out_dir)
    save_nifti(img, out_dir / "volume.nii.gz")
    ctx.spacing = tuple(round(float(z), 4) for z in img.header.get_zooms()[:3])
    ctx.sidecar = dict(ctx.info.sidecar)
    ctx.sidecar.update({"Sequence": ctx.task.sequence, "Orientation": "RAS", "Spacing": list(ctx.spacing),
                        "Defaced": ctx.defaced})
    write_text(out_dir / "volume.json", json.dumps(ctx.sidecar, indent=2, sort_keys=True) + "\n")
    return img, None
