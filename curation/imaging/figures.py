"""Case-report figures: each rendered to a PNG of bounded size, with its QC."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from curation.records import relpath
from curation.report import Outcome
from curation.schema import FigureQC, Render


@dataclass(frozen=True)
class FigureTask:
    """One case-report figure to render: its file, the render's longest side, where it is staged (``out``) and
    where it will lie (``final``)."""

    path: str
    size: int
    out: str
    final: str
    max_pixels: int | None = None

    @property
    def inputs(self) -> list[str]:
        return [self.path]


@dataclass(frozen=True)
class FigureResult:
    """A rendered figure: its render (``schema.Render`` fields) and its QC row."""

    render: Render
    qc: FigureQC


def process_figure(task: FigureTask) -> Outcome[FigureResult]:
    """The figure rendered, or why not (the failure keeps the task as its raw input)."""
    from PIL import Image

    from curation.imaging.render import save_png
    from curation.io.images import ImageTooLarge, open_bounded

    try:
        with open_bounded(task.path, task.max_pixels) as im:
            im.load()
            img = im.convert("RGB") if im.mode not in ("L", "RGB") else im.copy()
    except ImageTooLarge as exc:
        return Outcome.failure("image_too_large", str(exc), task)
    except Exception as exc:
        return Outcome.failure("image_unreadable", f"{type(exc).__name__}: {exc}", task)
    size: Any = task.size
    scale = size / max(img.size)
    if scale < 1:
        size = (max(1, round(img.width * scale)), max(1, round(img.height * scale)))
        img = img.resize(size, Image.Resampling.BILINEAR)
    out = Path(task.out)
    save_png(img, out)
    arr = np.asarray(img.convert("L"), dtype=np.float32)
    flags = ["tiny_image"] if min(img.size) < 64 else []
    return Outcome.success(FigureResult(
        render=Render(plane="figure", path=relpath(Path(task.final)), role="figure"),
        qc=FigureQC(width=img.width, height=img.height, mean=round(float(arr.mean()), 3), flags=flags,
                    passed=not flags)))
