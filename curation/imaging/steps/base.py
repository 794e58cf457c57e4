"""What every imaging step shares: the series task and context, the refusal, and the provenance record.

A step is ``(image, ctx) -> (image, Step | None)``: the nibabel image it hands on and what it records into the
series' provenance (None: it did not apply, or it only writes). A step that refuses the series raises Refused.
What a step records comes from the constants it runs with (``step_record(name, **params)``), never a copy of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np

from curation.imaging.convert import VolumeInfo
from curation.imaging.targets import Located
from curation.params import NormalizeParams
from curation.report import Outcome
from curation.schema import Deface, Render, SeriesQC, Step

if TYPE_CHECKING:
    from curation.imaging.templatefit import Fit

VERSION = "1"


@dataclass(frozen=True)
class SeriesTask:
    """One series to normalize: its files, where its outputs are staged (``out_dir``) and where they will lie once
    the stage commits (``final_dir``, the paths written into the records). Plain data, so it pickles to workers."""

    format: str
    files: list[str]
    params: NormalizeParams
    out_dir: str
    final_dir: str
    sequence: str | None = None
    threads: int | None = None  # SimpleITK's thread count while this task runs (None: as it is)
    lesion_mask: str | None = None  # the source's lesion mask of this volume (Series.lesion_mask): the lesion's truth

    @property
    def inputs(self) -> list[str]:
        return [*self.files, *([self.lesion_mask] if self.lesion_mask else [])]


@dataclass(frozen=True)
class VolumeSidecar:
    """What the save step writes beside the volume (``volume.json``) and into the series' sidecar: the acquisition
    parameters conversion read (``VolumeInfo.sidecar``: whichever the source's headers carry, so a mapping) and the
    volume as saved."""

    acquisition: dict[str, float | str]
    sequence: str | None
    spacing: tuple[float, ...]
    defaced: bool
    orientation: str = "RAS"

    def record(self) -> dict[str, Any]:
        """The sidecar as written: the acquisition's keys, then the volume's (BIDS-style names)."""
        return {**self.acquisition, "Sequence": self.sequence, "Orientation": self.orientation,
                "Spacing": list(self.spacing), "Defaced": self.defaced}


@dataclass
class SeriesContext:
    """What the steps of one series hand on besides the image: what conversion read, the acquisition's sampling
    and what the later steps made (renders, QC)."""

    task: SeriesTask
    info: VolumeInfo = field(default_factory=VolumeInfo)
    src_affine: np.ndarray | None = None  # the acquisition's sampling, before any resampling
    deface: Deface | None = None  # the deface step's outcome (and why), for the series' QC
    fit: Fit | None = None  # the anatomy fit (templatefit.Fit), made once and used by defacing and target location
    fit_failed: str | None = None
    fg: np.ndarray | None = None  # foreground mask of the volume before intensity normalization
    spacing: tuple[float, ...] = ()
    sidecar: VolumeSidecar | None = None
    sampling: tuple[float, ...] = ()
    refused: dict[str, str] = field(default_factory=dict)
    located: Located = field(default_factory=Located)
    renders: list[Render] = field(default_factory=list)
    qc: SeriesQC = field(default_factory=SeriesQC)

    @property
    def params(self) -> NormalizeParams:
        return self.task.params

    @property
    def defaced(self) -> bool:
        """Whether the deface step removed a face (not a face-free series, nor one the step skipped)."""
        return self.deface is not None and self.deface.outcome == "defaced"

    @property
    def foreground(self) -> np.ndarray:
        """``fg``, for a step that declares it reads it (check_order puts such a step after the one writing it)."""
        if self.fg is None:
            raise RuntimeError("ctx.fg read before a step wrote it")
        return self.fg

    @property
    def source_affine(self) -> np.ndarray:
        """``src_affine``, for a step that declares it reads it."""
        if self.src_affine is None:
            raise RuntimeError("ctx.src_affine read before a step wrote it")
        return self.src_affine


class Refused(Exception):
    """A step that will not go on with this series; its outcome is the quarantine reason."""

    def __init__(self, outcome: Outcome[Any]) -> None:
        super().__init__(outcome.detail)
        self.outcome = outcome


def step_record(name: str, version: str = VERSION, /, **args: Any) -> Step:
    """The provenance record of a step: its name, its version and the parameters it ran with."""
    return Step(name=name, args=args, version=version)


class SeriesStepFn(Protocol):
    """A step: ``(image, ctx) -> (image, Step | None)``, with the context's fields it takes from the steps before it
    (``reads``) and hands on (``writes``), declared by :func:`declares`."""

    __name__: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]

    def __call__(self, img: Any, ctx: SeriesContext, /) -> tuple[Any, Step | None]: ...


def declares(*, reads: tuple[str, ...] = (), writes: tuple[str, ...] = ()) -> Callable[[Callable[..., Any]],
                                                                                     SeriesStepFn]:
    """Mark a step with the SeriesContext fields it reads from earlier steps and writes for later ones (``task``, and
    ``params`` through it, are every step's): ``check_order`` holds STEPS to them, and a test traces a series through
    the steps to hold each declaration to what the step does."""
    known = {f.name for f in fields(SeriesContext)}
    unknown = sorted((set(reads) | set(writes)) - known)
    if unknown:
        raise TypeError(f"no SeriesContext field {', '.join(unknown)}")

    def mark(fn: Callable[..., Any]) -> SeriesStepFn:
        fn.reads, fn.writes = tuple(reads), tuple(writes)  # type: ignore[attr-defined]
        return cast(SeriesStepFn, fn)

    return mark


def check_order(steps: tuple[SeriesStepFn, ...]) -> None:
    """Raise where a step reads a field that a later step writes, or that no step writes: the order is checked where
    STEPS is written, not remembered."""
    written: set[str] = set()
    for n, step in enumerate(steps):
        if not hasattr(step, "reads") or not hasattr(step, "writes"):
            raise TypeError(f"step {step.__name__} declares no reads and writes (steps.base.declares)")
        for name in step.reads:
            if name not in written:
                later = next((s.__name__ for s in steps[n + 1:] if name in s.writes), None)
                raise TypeError(f"step {step.__name__} reads ctx.{name}, which "
                                + (f"{later} writes after it" if later else "no step before it writes"))
        written.update(step.writes)


def voxel_data(img: Any) -> np.ndarray:
    """The image's voxels as a float32 array."""
    return np.asarray(img.dataobj, dtype=np.float32)


def wants_deface(ctx: SeriesContext) -> bool:
    """Whether this series is to be defaced: ``deface`` on, and its sequence among ``deface_sequences`` (None: all)."""
    p = ctx.params
    return bool(p.deface) and (p.deface_sequences is None or ctx.task.sequence in p.deface_sequences)


def lesion_mask_on(path: str, img: Any) -> np.ndarray:
    """The source's lesion mask (``SeriesTask.lesion_mask``) on the series' present grid: nearest neighbour through
    world coordinates (the earlier steps reoriented and resampled the image, not the mask); any label above 0."""
    import nibabel as nib
    from nilearn.image import resample_to_img

    on = resample_to_img(nib.load(path), img, interpolation="nearest", force_resample=True, copy_header=True)
    return np.asarray(on.dataobj) > 0
