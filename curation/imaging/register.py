"""Registration of normalized series: a sequence onto its visit's T1w (resampled, or only its targets carried), a
follow-up T1w onto the baseline's."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from curation.imaging.convert import VolumeInfo
from curation.imaging.render import render_volume
from curation.imaging.sitk import from_sitk, ras_matrix, register_rigid, to_sitk
from curation.imaging.steps.base import step_record
from curation.imaging.steps.qc_metrics import volume_qc
from curation.io.volumes import save_nifti
from curation.params import NormalizeParams
from curation.report import Outcome
from curation.schema import Placement, Render, SeriesQC, Step


@dataclass(frozen=True)
class RegisterTask:
    """A normalized series (``moving``, staged in ``out_dir``) to register onto ``fixed``, the normalized series
    of ``reference``."""

    params: NormalizeParams
    fixed: str
    moving: str
    out_dir: str
    final_dir: str
    reference: str
    sequence: str | None = None
    refused: dict[str, str] = field(default_factory=dict)  # planes the acquisitions cannot show


@dataclass(frozen=True)
class PairTask(RegisterTask):
    """A follow-up T1w onto the baseline's (``reference`` of ``reference_visit``), rendered at the baseline's
    ``targets`` with its ``window``."""

    reference_visit: str = ""
    targets: list[Placement] = field(default_factory=list)
    window: tuple[float, float] | None = None  # the baseline's (lo, hi)


@dataclass(frozen=True)
class Registered:
    """A series registered onto its visit's T1w: its new renders, grid, provenance step and QC."""

    renders: list[Render]
    spacing: tuple[float, ...]
    shape: tuple[int, ...]
    step: Step
    qc: SeriesQC


@dataclass(frozen=True)
class Paired:
    """A follow-up T1w rendered at the baseline's targets: the paired renders and the provenance step."""

    renders: list[Render]
    step: Step


@dataclass(frozen=True)
class Carried:
    """The visit's T1w targets carried onto another sequence: the new target renders, the targets placed and those
    missed (target -> why), and the provenance step."""

    renders: list[Render]
    targets: list[Placement]
    missed: dict[str, str]
    step: Step


def _registered(job: RegisterTask, spacing_mm: float) -> tuple[Any, float, Any, tuple[float, ...]] | Outcome[Any]:
    """``job.moving`` registered rigidly onto ``job.fixed`` (on copies at ``spacing_mm``) and resampled onto the
    fixed grid: (transform, final metric, NIfTI image, the fixed image's spacing), or the failure."""
    import nibabel as nib

    try:
        fixed_img: Any = nib.load(job.fixed)  # a NIfTI/Analyze image (nibabel types it as any file-based one)
        moving_img: Any = nib.load(job.moving)
        tx, metric, out = register_rigid(to_sitk(fixed_img), to_sitk(moving_img), spacing_mm)
    except Exception as exc:
        return Outcome.failure("registration_failed", f"{type(exc).__name__}: {exc}", job)
    spacing = tuple(round(float(z), 4) for z in fixed_img.header.get_zooms()[:3])
    return tx, metric, from_sitk(out, fixed_img.affine, spacing), spacing


def register_series(job: RegisterTask) -> Outcome[Registered]:
    """Rigid registration of a normalized series to its visit's T1w (Mattes MI), resampled onto the T1w grid,
    then rendered again. Single-threaded with regular sampling, so the result is the same on every run."""
    p = job.params
    out_dir, final_dir = Path(job.out_dir), Path(job.final_dir)
    done = _registered(job, REGISTER_SPACING)
    if isinstance(done, Outcome):
        return done.passed_on()
    tx, metric, img, spacing = done
    data = np.asarray(img.dataobj, dtype=np.float32)
    save_nifti(img, out_dir / "volume.nii.gz")
    for old in out_dir.glob("*.png"):
        old.unlink()
    fg = data > float(data.mean())
    from curation.imaging.targets import Located, locate

    located = locate(data, img.affine, job.sequence, p) if p.key_slices else Located()
    refused = job.refused
    renders = render_volume(data, fg, spacing, p, out_dir, final_dir, targets=located.targets, refused=refused)
    params = [round(float(v), 4) for v in tx.GetParameters()] if hasattr(tx, "GetParameters") else []
    step = step_record("register_rigid", reference=job.reference, metric="MattesMI", final_metric=round(metric, 4),
                       transform=params)
    qc = volume_qc(data, fg, spacing, VolumeInfo())
    qc.planes_refused, qc.planes_refused_reason = sorted(refused), refused
    qc.anatomy, qc.targets = located.anatomy, located.targets
    return Outcome.success(Registered(renders=renders, spacing=spacing, shape=tuple(int(v) for v in data.shape),
                                      step=step, qc=qc))


REGISTER_SPACING = 2.0  # mm: within-visit registrations run on copies at this spacing
PAIR_SPACING = 3.0  # mm: longitudinal registrations run on copies at this spacing, then resample the 1 mm volume


def pair_series(job: PairTask) -> Outcome[Paired]:
    """A follow-up T1w registered (rigid, Mattes MI on 3 mm copies) to the baseline T1w and rendered at the
    baseline's target slices (same grid, so the same position in mm) with the baseline's window."""
    p = job.params
    done = _registered(job, PAIR_SPACING)
    if isinstance(done, Outcome):
        return done.passed_on()
    tx, metric, img, spacing = done
    data = np.asarray(img.dataobj, dtype=np.float32)
    fg = data > float(data.mean())
    renders = render_volume(data, fg, spacing, p, Path(job.out_dir), Path(job.final_dir),
                            targets=job.targets, refused=job.refused, window_override=job.window,
                            role="paired", prefix="paired_")
    renders = [r.model_copy(update={"located_by": f"registered_to:{job.reference}"}) for r in renders]
    ras = ras_matrix(tx)  # the same map in RAS mm: baseline point -> follow-up point
    step = step_record("register_to_baseline", reference=job.reference, reference_visit=job.reference_visit,
                       metric="MattesMI", final_metric=round(metric, 4), spacing_mm=PAIR_SPACING,
                       baseline_to_followup_ras=[[round(float(v), 5) for v in row] for row in ras])
    return Outcome.success(Paired(renders, step))


@dataclass(frozen=True)
class CarryTask(RegisterTask):
    """Another sequence of a visit (``moving``, left on its own grid) that takes the point targets of the visit's
    T1w (``reference``): its ``targets``, and its own ``own`` placements and ``window``, as the normalize step made
    them."""

    targets: list[Placement] = field(default_factory=list)
    own: list[Placement] = field(default_factory=list)
    window: tuple[float, float] | None = None


def carry_series(job: CarryTask) -> Outcome[Carried]:
    """The visit's T1w point targets on another of its sequences: a rigid registration (Mattes MI on 2 mm copies)
    maps each T1w centre into the series, which is rendered there on its own grid and with its own window. A carried
    centre more than CARRY_MAX_OFFSET_MM from the series' own placement means the registration failed: the series
    keeps its own. Returns the new target renders and placements, and which targets were carried."""
    import nibabel as nib

    from curation.imaging.targets import CARRY_MAX_OFFSET_MM, carry_targets

    try:
        fixed_img: Any = nib.load(job.fixed)  # a NIfTI/Analyze image (nibabel types it as any file-based one)
        moving_img: Any = nib.load(job.moving)
        tx, metric, _ = register_rigid(to_sitk(fixed_img), to_sitk(moving_img), REGISTER_SPACING, resample=False)
    except Exception as exc:
        return Outcome.failure("registration_failed", f"{type(exc).__name__}: {exc}", job)
    data = np.asarray(moving_img.dataobj, dtype=np.float32)
    to_series = ras_matrix(tx)
    located_by = f"registered_to:{job.reference}"
    placed, missed = carry_targets(job.targets, to_series, moving_img.affine, data.shape, job.refused, located_by)
    own = {t.target: t.centre_mm for t in job.own if t.centre_mm}
    offsets = {t.target: round(float(np.linalg.norm(np.subtract(t.centre_mm, own[t.target]))), 2)
               for t in placed if t.target in own and t.centre_mm}  # every carried target has its centre
    disagree = {k: v for k, v in offsets.items() if v > CARRY_MAX_OFFSET_MM}
    placed = [t for t in placed if t.target not in disagree]
    spacing = tuple(round(float(z), 4) for z in moving_img.header.get_zooms()[:3])
    renders = render_volume(data, data > float(data.mean()), spacing, job.params, Path(job.out_dir),
                            Path(job.final_dir), targets=placed, refused=job.refused, window_override=job.window,
                            only_targets=True)
    step = step_record("carry_targets", reference=job.reference, metric="MattesMI", final_metric=round(metric, 4),
                       spacing_mm=REGISTER_SPACING, carried=sorted(t.target for t in placed),
                       offset_from_own_mm=offsets, kept_own=sorted(disagree),
                       reference_to_series_ras=[[round(float(v), 5) for v in row] for row in to_series])
    return Outcome.success(Carried(renders, placed, missed, step))
