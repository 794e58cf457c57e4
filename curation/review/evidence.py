"""The ``evidence`` column of a release row: where the item's answer can be seen, as the item claims it and as its
reviewers marked it in the volume.

Coordinates only, never a path or an id: series are numbered in the order the item shows them (with their
sequence), so a reference-only source (ADNI, OASIS) ships no image id and no pixels; a pixel source also names
the release image that shows a claimed evidence when it is one of the item's own images.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from curation.schema import Item

CLAIMED = ("target", "plane", "slice_index", "position_mm", "target_fraction", "sequence")
MARKED = ("label", "shape", "reviewer", "plane", "slice_index", "position_mm", "image_box", "voxel_min", "voxel_max",
          "mm_min", "mm_max", "sequence")


def release_evidence(item: Item, mode: str, image_files: list[str]) -> str:
    series: dict[str, int] = {}

    def number(series_id: str | None) -> int | None:
        if series_id is None:
            return None
        return series.setdefault(series_id, len(series))

    images = [str(Path(p)) for p in item.images]
    out: list[dict[str, Any]] = []
    for ev in item.evidence:
        row: dict[str, Any] = {"kind": "claimed", "series": number(ev.series_id)}
        row.update({k: getattr(ev, k) for k in CLAIMED})
        if mode == "pixels" and str(Path(ev.image)) in images and images.index(str(Path(ev.image))) < len(image_files):
            row["image_file"] = image_files[images.index(str(Path(ev.image)))]
        out.append(row)
    for m in item.review.evidence if item.review else []:
        row = {"kind": "marked", "series": number(m.series_id)}
        row.update({k: getattr(m, k) for k in MARKED})
        out.append(row)
    return json.dumps(out, sort_keys=True, ensure_ascii=False)
