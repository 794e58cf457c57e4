"""The ``normalize`` stage: canonical NIfTI, intensity normalization, renders and QC, one series at a time."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from curation.errors import InputError
from curation.imaging.sitk import from_sitk, ras_matrix, register_rigid, threads, to_sitk
from curation.io.volumes import VolumeTooLarge, save_nifti
from curation.parallel import pmap
from curation.params import NormalizeParams
from curation.paths import OUTSIDE_INPUT, readable, safe_name
from curation.paths import input_rel as _in_rel
from curation.records import read_jsonl, relpath, staged_dir, write_jsonl, write_text
from curation.report import Outcome, Report
from curation.schema import Case, Render, Step

VERSION = "1"


class _FromMapping:
    """``of(task)``: a task dataclass from a mapping with its field names (the dicts tasks used to be)."""

    @classmethod
    def of(cls, task: Any) -> Any:
        if isinstance(task, cls):
            return task
        return cls(**{f.name: task[f.name] for f in fields(cls) if f.name in task})  # type: ignore[arg-type]


@dataclass(frozen=True)
class SeriesTask(_FromMapping):
    """One series to normalize: its files, where its outputs are staged (``out_dir``) and where they will lie once
    the stage commits (``final_dir``, the paths written into the records). Plain data, so it pickles to workers."""

    format: str
    files: list[str]
    params: NormalizeParams
    out_dir: str
    final_dir: str
    sequence: str | None = None
    threads: int | None = None  # SimpleITK's thread count while this task runs (None: as it is)

    @property
    def inputs(self) -> list[str]:
        return list(self.files)


@dataclass
class SeriesContext:
    """What the steps of one series hand on besides the image: what conversion read, the acquisition's sampling
    and what the later steps made (renders, QC)."""

    task: SeriesTask
    info: dict[str, Any] = field(default_factory=dict)
    src_affine: Any = None  # the acquisition's sampling, before any resampling
    defaced: bool = False
    fit: Any = None  # the anatomy fit (anatomy.Fit), made once and used by defacing and target location
    fit_failed: str | None = None
    fg: Any = None  # foreground mask of the volume before intensity normalization
    spacing: tuple[float, ...] = ()
    sidecar: dict[str, Any] = field(default_factory=dict)
    sampling: tuple[float, ...] = ()
    refused: dict[str, str] = field(default_factory=dict)
    located: dict[str, Any] = field(default_factory=lambda: {"targets": [], "anatomy": {}})
    renders: list[dict[str, Any]] = field(default_factory=list)
    qc: dict[str, Any] = field(default_factory=dict)

    @property
    def params(self) -> NormalizeParams:
        return self.task.params


class Refused(Exception):
    """A step that will not go on with this series; its outcome is the quarantine reason."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.detail)
        self.outcome = outcome


def _step(name: str, version: str = VERSION, /, **args: Any) -> Step:
    return Step(name=name, args=args, version=version)


# ------------------------------------------------------------------ the steps of one series, in order
# Each is ``(image, ctx) -> (image, Step | None)``: the nibabel image it hands on and what it records into the
# series' provenance (None: it did not apply, or it only writes). A step that refuses the series raises Refused.
def to_canonical(img: Any, ctx: SeriesContext) -> tuple[Any, Step | None]:
    """Read the series (DICOM, Analyze, NIfTI) as one canonical RAS+ volume; refuse an empty or blank one."""
    from curation.imaging.convert import load_volume

    t = ctx.task
    try:
        img, ctx.info = load_volume(t.format, t.files, ctx.params.bounds.max_volume_bytes)
    except VolumeTooLarge as exc:
        raise Refused(Outcome.failure("volume_too_large", str(exc))) from exc
    except Exception as exc:
        raise Refused(Outcome.failure("convert_failed", f"{type(exc).__name__}: {exc}")) from exc
    blank = _blank(img)
    if blank:
        raise Refused(Outcome.failure("volume_blank", blank))
    ctx.src_affine = np.asarray(img.affine, dtype=np.float64)
    return img, _step("to_canonical_ras", format=t.format)


def _wants_deface(ctx: SeriesContext) -> bool:
    p = ctx.params
    return bool(p.deface) and (p.deface_sequences is None or ctx.task.sequence in p.deface_sequences)


def fit_anatomy(img: Any, ctx: SeriesContext) -> tuple[Any, Step | None]:
    """Register the labelled template to the series once (anatomy.fit_template, ANTs); defacing and target location
    both use it. A volume the fit breaks on keeps its reason; the steps after it go on without the fit."""
    if not (ctx.params.key_slices or _wants_deface(ctx)):
        return img, None
    from curation.imaging import anatomy

    try:
        ctx.fit = anatomy.fit_template(_data(img), np.asarray(img.affine, dtype=np.float64), ctx.task.sequence)
    except Exception as exc:  # ITK raises many types on degenerate volumes
        ctx.fit_failed = f"template registration failed ({type(exc).__name__}: {str(exc)[:200]})"
        return img, None
    return img, _step("fit_anatomy", anatomy.registration_presets().version, **ctx.fit.record())


def _face_free(img: Any, ctx: SeriesContext) -> dict[str, Any] | None:
    """Why the series has no face to remove (a brain without its head, or a field of view that stops above the
    face), or None. Only a series the fit shows to be a brain can be face-free; anything else goes to the defacer,
    which refuses what is not a head."""
    if ctx.fit is None:
        return None
    from curation.imaging import anatomy
    from curation.imaging.targets import brain_check

    data, affine = _data(img), np.asarray(img.affine, dtype=np.float64)
    in_view, tissue = anatomy.face_tissue(ctx.fit, data, affine)
    if in_view < anatomy.MIN_FACE_IN_VIEW:
        reason = f"the face is outside the field of view ({in_view:.1%} of the template's face region in view)"
    elif tissue <= anatomy.MAX_FACE_TISSUE:
        reason = (f"no tissue where the face would be ({tissue:.1%} of the face region in view): a brain without "
                  "its head")
    else:
        return None  # a face to remove (every whole head): the brain check below is not needed
    if brain_check(data, affine, ctx.fit) is not None:
        return None  # no brain where the fit puts it: not shown to be a brain, so the defacer decides
    return {"outcome": "face_free", "reason": reason, "face_region_in_view": in_view, "face_region_tissue": tissue,
            "series_kind": ctx.fit.kind}


def deface(img: Any, ctx: SeriesContext) -> tuple[Any, Step | None]:
    """Zero face and ears (curation.imaging.deface) of the sequences ``deface_sequences`` names (None: all); a
    face-free series (a brain without its head) passes unchanged, recorded as such."""
    if not _wants_deface(ctx):
        return img, None
    from curation.imaging.deface import VERSION as DEFACE_VERSION
    from curation.imaging.deface import DefaceError, deface_image

    free = _face_free(img, ctx)
    if free is not None:
        return img, _step("deface", DEFACE_VERSION, **free)
    try:
        img, summary = deface_image(img)
    except DefaceError as exc:  # a face that cannot be removed safely is never rendered
        raise Refused(Outcome.failure("deface_refused", str(exc))) from exc
    ctx.defaced = True
    return img, _step("deface", DEFACE_VERSION, outcome="defaced",
                      **{k: v for k, v in summary.items() if k != "version"})


def n4_bias_correction(img: Any, ctx: SeriesContext) -> tuple[Any, Step | None]:
    if not ctx.params.bias_correction:
        return img, None
    return _n4(img), _step("n4_bias_correction", shrink=N4_SHRINK, iterations=list(N4_ITERATIONS))


def resample(img: Any, ctx: SeriesContext) -> tuple[Any, Step | None]:
    spacing = ctx.params.target_spacing
    if not spacing:
        return img, None
    return _resample(img, tuple(float(v) for v in spacing)), _step("resample", spacing=list(spacing), order=1)


def intensity(img: Any, ctx: SeriesContext) -> tuple[Any, Step | None]:
    """Percentile rescale to [0, 1] or foreground z-score; the foreground (above the mean) is taken before it."""
    import nibabel as nib

    p = ctx.params
    data = np.asarray(img.dataobj, dtype=np.float32)
    lo, hi = np.percentile(data, p.percentiles)
    fg = ctx.fg = data > float(data.mean())
    record = None
    if p.intensity == "percentile":
        data = np.clip((data - lo) / max(hi - lo, 1e-6), 0, 1).astype(np.float32)
        record = _step("percentile_rescale", percentiles=list(p.percentiles))
    elif p.intensity == "zscore" and fg.any():
        data = ((data - data[fg].mean()) / max(float(data[fg].std()), 1e-6)).astype(np.float32)
        record = _step("zscore_foreground")
    out = nib.Nifti1Image(data, img.affine)
    out.header.set_xyzt_units("mm")
    return out, record


def save(img: Any, ctx: SeriesContext) -> tuple[Any, Step | None]:
    """Write the normalized volume and its sidecar (acquisition metadata, sequence, orientation, spacing)."""
    out_dir = Path(ctx.task.out_dir)
    save_nifti(img, out_dir / "volume.nii.gz")
    ctx.spacing = tuple(round(float(z), 4) for z in img.header.get_zooms()[:3])
    ctx.sidecar = dict(ctx.info.get("sidecar") or {})
    ctx.sidecar.update({"Sequence": ctx.task.sequence, "Orientation": "RAS", "Spacing": list(ctx.spacing),
                        "Defaced": ctx.defaced})
    write_text(out_dir / "volume.json", json.dumps(ctx.sidecar, indent=2, sort_keys=True) + "\n")
    return img, None


def locate_targets(img: Any, ctx: SeriesContext) -> tuple[Any, Step | None]:
    """The planes the acquisition's sampling cannot show, and the target slices (anatomy, lesions) to render."""
    from curation.imaging.targets import locate, refused_planes, sampling_mm

    p = ctx.params
    ctx.sampling = sampling_mm(ctx.src_affine)
    ctx.refused = refused_planes(ctx.sampling, p.max_reformat_spacing_mm)
    if not p.key_slices:
        return img, None
    ctx.located = locate(_data(img), img.affine, ctx.task.sequence, p, ctx.refused, fit=ctx.fit)
    if ctx.fit_failed:
        ctx.located["anatomy"].update(fit="failed", not_located={t: ctx.fit_failed for t in sorted(p.targets)})
        ctx.located["targets"] = []
    return img, _step("locate_targets", **dict(ctx.located["anatomy"].items()))


def render(img: Any, ctx: SeriesContext) -> tuple[Any, Step | None]:
    t, p = ctx.task, ctx.params
    ctx.renders = render_volume(_data(img), ctx.fg, ctx.spacing, p, Path(t.out_dir), Path(t.final_dir),
                                targets=ctx.located["targets"], refused=ctx.refused)
    return img, _step("render", size=p.render_size, window_percentiles=[1.0, 99.5])


def qc(img: Any, ctx: SeriesContext) -> tuple[Any, Step | None]:
    ctx.qc = _qc(_data(img), ctx.fg, ctx.spacing, ctx.info)
    ctx.qc.update({"source_sampling_mm": list(ctx.sampling), "planes_refused": sorted(ctx.refused),
                   "planes_refused_reason": ctx.refused, "anatomy": ctx.located["anatomy"],
                   "targets": ctx.located["targets"]})
    return img, None


SeriesStepFn = Callable[[Any, SeriesContext], tuple[Any, "Step | None"]]
# targets are located before the intensity rescale: its percentile clip would flatten a bright lesion
STEPS: tuple[SeriesStepFn, ...] = (to_canonical, fit_anatomy, deface, n4_bias_correction, resample, locate_targets,
                                   intensity, save, render, qc)


def _data(img: Any) -> np.ndarray:
    return np.asarray(img.dataobj, dtype=np.float32)


def process_series(task: SeriesTask | Mapping[str, Any]) -> Outcome:
    """Pure function of one series: everything it writes lies under ``task.out_dir``. Whatever one bad volume
    raises becomes its quarantine reason; it never stops the stage."""
    try:
        return _process_series(SeriesTask.of(task))
    except Refused as exc:
        return exc.outcome
    except Exception as exc:  # ITK, nibabel and numpy raise many types on odd volumes
        return Outcome.failure("normalize_failed", f"{type(exc).__name__}: {exc}")


def _process_series(task: SeriesTask) -> Outcome:
    """The STEPS in order, SimpleITK's thread count set for them and restored after."""
    ctx = SeriesContext(task)
    img: Any = None
    steps: list[Step] = []
    with threads(task.threads):
        for fn in STEPS:
            img, record = fn(img, ctx)
            if record is not None:
                steps.append(record)
    return Outcome.success(nifti=relpath(Path(task.final_dir) / "volume.nii.gz"), spacing=ctx.spacing,
                           shape=tuple(int(s) for s in img.shape), orientation="RAS", renders=ctx.renders,
                           qc=ctx.qc, steps=steps, sidecar=ctx.sidecar)


def _blank(img: Any) -> str | None:
    """Why a volume has nothing to render (every voxel the same value, or not finite), or None."""
    data = np.asanyarray(img.dataobj)
    if data.size == 0:
        return "no voxels"
    finite = np.isfinite(data)
    if not finite.any():
        return "no finite voxel values"
    lo, hi = float(data[finite].min()), float(data[finite].max())
    if lo == hi:
        return f"every voxel is {lo:g}: nothing to render"
    return None


def render_volume(data: np.ndarray, fg: np.ndarray, spacing: tuple[float, ...], p: NormalizeParams, out_dir: Path,
                  final_dir: Path, *, targets: list[dict[str, Any]] | None = None,
                  refused: dict[str, str] | None = None, window_override: tuple[float, float] | None = None,
                  role: str = "target",
                  prefix: str = "") -> list[dict[str, Any]]:
    """The PNG renders of a normalized volume (mid planes, target slices, montages); deterministic byte for byte.
    Planes in ``refused`` (acquisition QC) are not rendered. With ``prefix`` only the targets are rendered (the
    follow-up of a longitudinal pair, at the baseline's slices and window)."""
    refused = refused or {}
    if window_override is not None:
        wlo, whi = window_override
    else:  # windowing on the normalized volume: fixed percentiles of the foreground
        wlo, whi = (float(v) for v in np.percentile(data[fg] if fg.any() else data, [1.0, 99.5]))
    win = [round(wlo, 6), round(whi, 6)]
    renders: list[dict[str, Any]] = []
    if not prefix:
        for plane in p.planes:
            if plane in refused:
                continue
            n = data.shape[PLANE_AXIS_[plane]]
            for f in p.slice_fractions:
                idx = min(n - 1, int(round(f * (n - 1))))
                renders.append(_render_slice(data, plane, idx, wlo, whi, spacing, p, out_dir, final_dir,
                                             {"role": "mid"}, f"{plane}_{idx:03d}.png"))
        if p.montage and "axial" not in refused:
            n = data.shape[2]
            idxs = [int(round(f * (n - 1))) for f in np.linspace(0.25, 0.8, 9)]
            renders.append(_render_montage(data, idxs, wlo, whi, spacing, out_dir, final_dir, "montage_axial.png",
                                           {"role": "montage", "window": win}))
    for t in targets or []:
        plane = "axial" if t["plane"] == "montage" else t["plane"]
        if plane in refused:
            continue
        meta = {"role": role, "target": t["target"], "located_by": t["located_by"]}
        if t["plane"] == "montage":
            meta["position_mm"] = t["positions_mm"][len(t["positions_mm"]) // 2]
            renders.append(_render_montage(data, t["slices"], wlo, whi, spacing, out_dir, final_dir,
                                           f"{prefix}{t['target']}_montage.png", {**meta, "window": win}))
            continue
        meta["position_mm"] = t["position_mm"]
        renders.append(_render_slice(data, plane, t["slice_index"], wlo, whi, spacing, p, out_dir, final_dir, meta,
                                     f"{prefix}{t['target']}_{plane}_{t['slice_index']:03d}.png"))
    return renders


PLANE_AXIS_ = {"sagittal": 0, "coronal": 1, "axial": 2}


def _render_slice(data: np.ndarray, plane: str, idx: int, wlo: float, whi: float, spacing: tuple[float, ...],
                  p: NormalizeParams, out_dir: Path, final_dir: Path, meta: dict[str, Any],
                  name: str) -> dict[str, Any]:
    from curation.imaging.render import save_png, slice_2d, to_png, window

    axis = PLANE_AXIS_[plane]
    sp = [s for i, s in enumerate(spacing) if i != axis][::-1]
    save_png(to_png(window(slice_2d(data, plane, idx), wlo, whi), p.render_size, (sp[0], sp[1])), out_dir / name)
    return {"plane": plane, "slice_index": idx, "window": [round(wlo, 6), round(whi, 6)],
            "path": relpath(final_dir / name), **meta}


def _render_montage(data: np.ndarray, idxs: list[int], wlo: float, whi: float, spacing: tuple[float, ...],
                    out_dir: Path, final_dir: Path, name: str, meta: dict[str, Any]) -> dict[str, Any]:
    from curation.imaging.render import montage, save_png, slice_2d, to_png, window

    tiles = [to_png(window(slice_2d(data, "axial", i), wlo, whi), 128, (spacing[1], spacing[0])) for i in idxs]
    save_png(montage(tiles, 3, ("R", "L", "A", "P")), out_dir / name)
    return {"plane": "montage", "slice_index": None, "path": relpath(final_dir / name), **meta}


@dataclass(frozen=True)
class RegisterTask(_FromMapping):
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
    targets: list[dict[str, Any]] = field(default_factory=list)
    window: tuple[float, ...] | None = None  # the baseline's (lo, hi)


def _registered(job: RegisterTask, spacing_mm: float) -> tuple[Any, float, Any, tuple[float, ...]] | Outcome:
    """``job.moving`` registered rigidly onto ``job.fixed`` (on copies at ``spacing_mm``) and resampled onto the
    fixed grid: (transform, final metric, NIfTI image, the fixed image's spacing), or the failure."""
    import nibabel as nib

    try:
        fixed_img, moving_img = nib.load(job.fixed), nib.load(job.moving)
        tx, metric, out = register_rigid(to_sitk(fixed_img), to_sitk(moving_img), spacing_mm)
    except Exception as exc:
        return Outcome.failure("registration_failed", f"{type(exc).__name__}: {exc}")
    spacing = tuple(round(float(z), 4) for z in fixed_img.header.get_zooms()[:3])
    return tx, metric, from_sitk(out, fixed_img.affine, spacing), spacing


def register_series(task: RegisterTask | Mapping[str, Any]) -> Outcome:
    """Rigid registration of a normalized series to its visit's T1w (Mattes MI), resampled onto the T1w grid,
    then rendered again. Single-threaded with regular sampling, so the result is the same on every run."""
    job = RegisterTask.of(task)
    p = job.params
    out_dir, final_dir = Path(job.out_dir), Path(job.final_dir)
    done = _registered(job, REGISTER_SPACING)
    if isinstance(done, Outcome):
        return done
    tx, metric, img, spacing = done
    data = np.asarray(img.dataobj, dtype=np.float32)
    save_nifti(img, out_dir / "volume.nii.gz")
    for old in out_dir.glob("*.png"):
        old.unlink()
    fg = data > float(data.mean())
    from curation.imaging.targets import locate

    located = locate(data, img.affine, job.sequence, p) if p.key_slices else {"targets": [], "anatomy": {}}
    refused = job.refused
    renders = render_volume(data, fg, spacing, p, out_dir, final_dir, targets=located["targets"], refused=refused)
    params = [round(float(v), 4) for v in tx.GetParameters()] if hasattr(tx, "GetParameters") else []
    step = _step("register_rigid", reference=job.reference, metric="MattesMI", final_metric=round(metric, 4),
                 transform=params)
    return Outcome.success(renders=renders, spacing=spacing, shape=tuple(int(v) for v in data.shape), step=step,
                           qc={**_qc(data, fg, spacing, {}), "planes_refused": sorted(refused),
                               "planes_refused_reason": refused, "anatomy": located["anatomy"],
                               "targets": located["targets"]})


REGISTER_SPACING = 2.0  # mm: within-visit registrations run on copies at this spacing
PAIR_SPACING = 3.0  # mm: longitudinal registrations run on copies at this spacing, then resample the 1 mm volume


def pair_series(task: PairTask | Mapping[str, Any]) -> Outcome:
    """A follow-up T1w registered (rigid, Mattes MI on 3 mm copies) to the baseline T1w and rendered at the
    baseline's target slices (same grid, so the same position in mm) with the baseline's window."""
    job = PairTask.of(task)
    p = job.params
    done = _registered(job, PAIR_SPACING)
    if isinstance(done, Outcome):
        return done
    tx, metric, img, spacing = done
    data = np.asarray(img.dataobj, dtype=np.float32)
    fg = data > float(data.mean())
    renders = render_volume(data, fg, spacing, p, Path(job.out_dir), Path(job.final_dir),
                            targets=job.targets, refused=job.refused, window_override=job.window,
                            role="paired", prefix="paired_")
    for r in renders:
        r["located_by"] = f"registered_to:{job.reference}"
    ras = ras_matrix(tx)  # the same map in RAS mm: baseline point -> follow-up point
    step = _step("register_to_baseline", reference=job.reference, reference_visit=job.reference_visit,
                 metric="MattesMI", final_metric=round(metric, 4), spacing_mm=PAIR_SPACING,
                 baseline_to_followup_ras=[[round(float(v), 5) for v in row] for row in ras])
    return Outcome.success(renders=renders, step=step)


def _resample(img: Any, spacing: tuple[float, ...]) -> Any:
    """Linear resampling to ``spacing`` with SimpleITK over the same field of view (multi-threaded C++)."""
    import SimpleITK as sitk

    src = to_sitk(img)
    old_sp, old_size = np.asarray(src.GetSpacing()), np.asarray(src.GetSize())
    size = [max(1, int(v)) for v in np.ceil(old_size * old_sp / np.asarray(spacing) - 1e-6)]
    out = sitk.Resample(src, size, sitk.Transform(), sitk.sitkLinear, src.GetOrigin(), spacing, src.GetDirection(),
                        0.0, sitk.sitkFloat32)
    return from_sitk(out, img.affine, spacing)


N4_SHRINK = 2  # N4 is fitted on the image shrunk by this factor, then applied at full resolution
N4_ITERATIONS = (20, 20)  # per fitting level; the provenance records these, not a copy of them


def _n4(img: Any) -> Any:
    """N4 bias-field correction (SimpleITK), fitted on a shrunk image (N4_SHRINK) with an Otsu foreground mask."""
    import SimpleITK as sitk

    src = to_sitk(img)
    src = sitk.Cast(sitk.RescaleIntensity(src, 0, 1000), sitk.sitkFloat32)
    mask = sitk.OtsuThreshold(src, 0, 1, 200)
    small, small_mask = sitk.Shrink(src, [N4_SHRINK] * 3), sitk.Shrink(mask, [N4_SHRINK] * 3)
    n4 = sitk.N4BiasFieldCorrectionImageFilter()
    n4.SetMaximumNumberOfIterations(list(N4_ITERATIONS))
    n4.Execute(small, small_mask)
    log_field = n4.GetLogBiasFieldAsImage(src)
    corrected = src / sitk.Exp(log_field)
    return from_sitk(corrected, img.affine, tuple(src.GetSpacing()))


def _qc(data: np.ndarray, fg: np.ndarray, spacing: tuple[float, ...], info: dict[str, Any]) -> dict[str, Any]:
    bg = ~fg
    snr = float(data[fg].mean() / max(float(data[bg].std()), 1e-6)) if fg.any() and bg.any() else 0.0
    flags = []
    frac = float(fg.mean())
    if frac < 0.05:
        flags.append("low_foreground")
    if snr < 3:
        flags.append("low_snr")
    if info.get("duplicate_slices"):
        flags.append("duplicate_slices")
    if info.get("irregular_gaps"):
        flags.append("irregular_slice_gaps")
    if min(data.shape) < 16:
        flags.append("too_few_slices")
    return {"foreground_fraction": round(frac, 4), "snr": round(snr, 3), "intensity_min": round(float(data.min()), 4),
            "intensity_max": round(float(data.max()), 4), "slice_gap_mm": info.get("slice_gap_mm"),
            "duplicate_slices": info.get("duplicate_slices", 0), "irregular_gaps": info.get("irregular_gaps", 0),
            "source_orientation": info.get("orientation"), "flags": flags, "pass": not flags}


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


def process_figure(task: FigureTask) -> Outcome:
    from PIL import Image

    from curation.imaging.render import save_png
    from curation.io.images import ImageTooLarge, open_bounded

    try:
        with open_bounded(task.path, task.max_pixels) as im:
            im.load()
            img = im.convert("RGB") if im.mode not in ("L", "RGB") else im.copy()
    except ImageTooLarge as exc:
        return Outcome.failure("image_too_large", str(exc))
    except Exception as exc:
        return Outcome.failure("image_unreadable", f"{type(exc).__name__}: {exc}")
    size: Any = task.size
    scale = size / max(img.size)
    if scale < 1:
        size = (max(1, round(img.width * scale)), max(1, round(img.height * scale)))
        img = img.resize(size, Image.Resampling.BILINEAR)
    out = Path(task.out)
    save_png(img, out)
    arr = np.asarray(img.convert("L"), dtype=np.float32)
    flags = ["tiny_image"] if min(img.size) < 64 else []
    return Outcome.success(render={"plane": "figure", "slice_index": None, "window": None,
                                   "path": relpath(Path(task.final)), "role": "figure"},
                           qc={"width": img.width, "height": img.height, "mean": round(float(arr.mean()), 3),
                               "flags": flags, "pass": not flags})


def run(params: NormalizeParams, src: Path, dst: Path, *, workers: int = 1, scheduler: str | None = None,
        report_path: Path | None = None) -> Report:
    src, dst = Path(src), Path(dst)
    cases_path = src / "cases.jsonl"
    if not cases_path.exists():
        raise InputError("no cases.jsonl (run the deidentify stage first)", src)
    # the imaging libraries are imported once here, so local worker processes (forked) start with them loaded
    import nibabel  # noqa: F401
    import SimpleITK  # noqa: F401

    import curation.imaging.convert  # noqa: F401
    import curation.imaging.render  # noqa: F401

    report = Report(stage="normalize")
    # local workers share the cores instead of each running as many ITK threads as there are cores
    threads = max(1, (os.cpu_count() or 1) // workers) if workers > 1 and scheduler is None else None
    cases = list(read_jsonl(cases_path, Case))
    with staged_dir(dst) as staging:
        series_tasks: list[tuple[SeriesTask, Any]] = []
        figure_tasks: list[tuple[FigureTask, Any]] = []
        for case in cases:
            for visit in case.visits:
                for s in visit.series:
                    rel = Path("files") / safe_name(case.case_id) / safe_name(s.series_id)
                    series_tasks.append((SeriesTask(s.format, s.files, params, str(staging / rel), str(dst / rel),
                                                    s.sequence, threads), s))
            for fig in case.figures:
                if fig.path:
                    rel = Path("files") / safe_name(case.case_id) / f"{safe_name(fig.figure_id)}.png"
                    figure_tasks.append((FigureTask(fig.path, params.render_size, str(staging / rel),
                                                    str(dst / rel), params.bounds.max_image_pixels), fig))
        qc_rows = []
        def contained(task: SeriesTask | FigureTask) -> Outcome | None:
            return None if all(readable(f, src) for f in task.inputs) else OUTSIDE_INPUT

        def run_contained(fn: Any, tasks: list[Any]) -> Iterator[Outcome]:
            """Results in task order; a task naming a file outside the input is answered without running it."""
            inside_tasks = [t for t in tasks if contained(t) is None]
            results = iter(pmap(fn, inside_tasks, workers=workers, scheduler=scheduler))
            for t in tasks:
                yield contained(t) or next(results)

        for (_task, s), res in zip(series_tasks, run_contained(process_series, [t for t, _ in series_tasks]),
                                   strict=True):
            report.inputs += 1
            if not report.record(_in_rel(s.files[0], src) if s.files else s.series_id, res):
                s.qc = {"pass": False, "flags": [res.reason]}
                continue
            made = res.data
            s.nifti, s.spacing, s.shape = made["nifti"], made["spacing"], made["shape"]
            s.orientation = made["orientation"]
            s.renders = [Render(**r) for r in made["renders"]]
            s.qc = made["qc"]
            s.sidecar = {**s.sidecar, **made["sidecar"]}  # acquisition metadata from ingest (e.g. IDA XML) is kept
            s.provenance.extend(made["steps"])
            report.outputs += 1
            report.counts["series_qc_flagged"] += int(not made["qc"]["pass"])
        if params.register_to_t1:
            _register_visits(cases, series_tasks, params, workers, scheduler, report)
        if params.longitudinal and params.key_slices:
            _pair_visits(cases, series_tasks, params, workers, scheduler, report)
        for _, s in series_tasks:
            if s.renders:
                qc_rows.append({"kind": "series", "id": s.series_id, **s.qc, "thumbnail": s.renders[0].path})
        for (_fig_task, fig), res in zip(figure_tasks, run_contained(process_figure, [t for t, _ in figure_tasks]),
                                     strict=True):
            report.inputs += 1
            if not report.record(_in_rel(fig.path, src) if fig.path else fig.figure_id, res):
                fig.missing, fig.path = True, None
                continue
            fig.renders = [Render(**res.data["render"])]
            fig.qc = res.data["qc"]
            report.outputs += 1
            qc_rows.append({"kind": "figure", "id": fig.figure_id, **fig.qc, "thumbnail": res.data["render"]["path"]})
        for case in cases:
            case.provenance.stages["normalize"] = VERSION
        write_jsonl(staging / "cases.jsonl", cases)
        write_jsonl(staging / "qc.jsonl", qc_rows)
        _contact_sheet(qc_rows, staging / "qc_contact_sheet.png", dst)
        report.write_quarantine(staging / "quarantine.jsonl")
        report.check_failure_rate(params.max_failure_rate, report_path, dst)
    report.write(report_path)
    return report


def _register_visits(cases: list[Case], series_tasks: list[tuple[SeriesTask, Any]], params: NormalizeParams,
                     workers: int, scheduler: str | None, report: Report) -> None:
    """Line up the other sequences of each visit with its T1w (the first T1w series of the visit)."""
    staged = {id(s): t for t, s in series_tasks}
    jobs: list[tuple[RegisterTask, Any]] = []
    for case in cases:
        for visit in case.visits:
            ref = next((s for s in visit.series if s.sequence == "T1w" and s.nifti), None)
            if ref is None:
                continue
            for s in visit.series:
                if s is ref or not s.nifti or s.format not in ("dicom", "nifti", "analyze"):
                    continue
                t, r = staged[id(s)], staged[id(ref)]
                jobs.append((RegisterTask(params, str(Path(r.out_dir) / "volume.nii.gz"),
                                          str(Path(t.out_dir) / "volume.nii.gz"), t.out_dir, t.final_dir,
                                          ref.series_id, s.sequence, s.qc.get("planes_refused_reason") or {}), s))
    for (job, s), res in zip(jobs, pmap(register_series, [j for j, _ in jobs], workers=workers, scheduler=scheduler),
                             strict=True):
        if not res.ok:
            report.counts[f"registration_failed:{s.series_id}"] += 1
            s.qc = {**s.qc, "flags": [*s.qc.get("flags", []), "registration_failed"]}
            continue
        s.renders = [Render(**r) for r in res.data["renders"]]
        s.spacing, s.shape = res.data["spacing"], res.data["shape"]
        s.provenance.append(res.data["step"])
        s.qc = {**res.data["qc"], "registered_to": job.reference}
        report.counts["series_registered"] += 1


def _pair_visits(cases: list[Case], series_tasks: list[tuple[SeriesTask, Any]], params: NormalizeParams,
                 workers: int, scheduler: str | None, report: Report) -> None:
    """Line up each follow-up T1w with the case's baseline T1w (the T1w of its earliest visit) and render it at
    the baseline's target positions, so the two time points show the same anatomy at the same mm."""
    staged = {id(s): t for t, s in series_tasks}
    jobs: list[tuple[PairTask, Any]] = []
    for case in cases:
        visits = sorted((v for v in case.visits if any(s.sequence == "T1w" and s.nifti for s in v.series)),
                        key=lambda v: (v.days_from_baseline is None, v.days_from_baseline or 0))
        if len(visits) < 2:
            continue
        base_visit = visits[0]
        base = next(s for s in base_visit.series if s.sequence == "T1w" and s.nifti)
        targets = base.qc.get("targets") or []  # the baseline's placements (the montage's slices included)
        if not targets:
            continue
        window = next(r.window for r in base.renders if r.role == "target" and r.window)
        for visit in visits[1:]:
            s = next(x for x in visit.series if x.sequence == "T1w" and x.nifti)
            t, r = staged[id(s)], staged[id(base)]
            refused = {**(base.qc.get("planes_refused_reason") or {}), **(s.qc.get("planes_refused_reason") or {})}
            jobs.append((PairTask(params, str(Path(r.out_dir) / "volume.nii.gz"),
                                  str(Path(t.out_dir) / "volume.nii.gz"), t.out_dir, t.final_dir, base.series_id,
                                  refused=refused, reference_visit=base_visit.visit_id, targets=targets,
                                  window=tuple(window)), s))
    for (job, s), res in zip(jobs, pmap(pair_series, [j for j, _ in jobs], workers=workers, scheduler=scheduler),
                             strict=True):
        if not res.ok:
            report.counts["longitudinal_registration_failed"] += 1
            s.qc = {**s.qc, "flags": [*s.qc.get("flags", []), "longitudinal_registration_failed"]}
            continue
        s.renders.extend(Render(**r) for r in res.data["renders"])
        s.provenance.append(res.data["step"])
        s.qc = {**s.qc, "paired_with": job.reference}
        report.counts["series_paired_to_baseline"] += 1


def _contact_sheet(rows: list[dict[str, Any]], out: Path, final: Path) -> None:
    """One PNG a curator opens to eyeball a whole run: thumbnails labelled pass/flag."""
    from PIL import Image, ImageDraw

    from curation.imaging.render import save_png

    tile = 128
    cols = 6
    n = max(len(rows), 1)
    sheet = Image.new("RGB", (cols * tile, ((n + cols - 1) // cols) * (tile + 14)), (0, 0, 0))
    draw = ImageDraw.Draw(sheet)
    for i, row in enumerate(rows):
        thumb_path = Path(row["thumbnail"])
        staged = out.parent / thumb_path.relative_to(final) if thumb_path.is_relative_to(final) else thumb_path
        try:
            with Image.open(staged) as im:
                im = im.convert("RGB")
                im.thumbnail((tile, tile))
                x, y = (i % cols) * tile, (i // cols) * (tile + 14)
                sheet.paste(im, (x, y))
        except OSError:
            x, y = (i % cols) * tile, (i // cols) * (tile + 14)
        colour = (80, 220, 80) if row.get("pass") else (240, 80, 80)
        draw.text((x + 2, y + tile), f"{row['id'][:18]}", fill=colour)
    save_png(sheet, out)
