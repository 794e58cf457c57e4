"""The ``normalize`` stage: canonical NIfTI, intensity normalization, renders and QC, one series at a time."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from curation.errors import InputError
from curation.ingest.base import relpath
from curation.parallel import pmap
from curation.params import NormalizeParams
from curation.paths import OUTSIDE_INPUT, readable, safe_name
from curation.paths import input_rel as _in_rel
from curation.records import read_jsonl, staged_dir, write_jsonl, write_text
from curation.report import Report
from curation.schema import Case, Render, Step

VERSION = "1"


def process_series(task: dict[str, Any]) -> dict[str, Any]:
    """Pure function of one series: everything it writes lies under ``task['out_dir']``. Whatever one bad volume
    raises becomes its quarantine reason; it never stops the stage."""
    try:
        return _process_series(task)
    except Exception as exc:  # ITK, nibabel and numpy raise many types on odd volumes
        return {"ok": False, "reason": "normalize_failed", "detail": f"{type(exc).__name__}: {exc}"}


def _process_series(task: dict[str, Any]) -> dict[str, Any]:
    import nibabel as nib

    from curation.imaging.convert import load_volume, save_nifti
    from curation.ingest.volumes import VolumeTooLarge

    p: NormalizeParams = task["params"]
    if task.get("threads"):
        import SimpleITK as sitk

        sitk.ProcessObject.SetGlobalDefaultNumberOfThreads(int(task["threads"]))
    out_dir = Path(task["out_dir"])
    final_dir = Path(task["final_dir"])
    steps: list[dict[str, Any]] = []
    try:
        img, info = load_volume(task["format"], task["files"], p.bounds.max_volume_bytes)
    except VolumeTooLarge as exc:
        return {"ok": False, "reason": "volume_too_large", "detail": str(exc)}
    except Exception as exc:
        return {"ok": False, "reason": "convert_failed", "detail": f"{type(exc).__name__}: {exc}"}
    blank = _blank(img)
    if blank:
        return {"ok": False, "reason": "volume_blank", "detail": blank}
    steps.append({"name": "to_canonical_ras", "args": {"format": task["format"]}, "version": VERSION})
    src_affine = np.asarray(img.affine, dtype=np.float64)  # the acquisition's sampling, before any resampling
    defaced = None
    if p.deface and (p.deface_sequences is None or task.get("sequence") in p.deface_sequences):
        from curation.deid.deface import VERSION as DEFACE_VERSION
        from curation.deid.deface import DefaceError, deface_image

        try:
            img, defaced = deface_image(img)
        except DefaceError as exc:  # a face that cannot be removed safely is never rendered
            return {"ok": False, "reason": "deface_refused", "detail": str(exc)}
        steps.append({"name": "deface", "args": {k: v for k, v in defaced.items() if k != "version"},
                      "version": DEFACE_VERSION})
    if p.bias_correction:
        img = _n4(img)
        steps.append({"name": "n4_bias_correction", "args": {"shrink": 2, "iterations": [20, 20]}, "version": VERSION})
    if p.target_spacing:
        img = _resample(img, tuple(float(v) for v in p.target_spacing))
        steps.append({"name": "resample", "args": {"spacing": list(p.target_spacing), "order": 1}, "version": VERSION})
    data = np.asarray(img.dataobj, dtype=np.float32)
    lo, hi = np.percentile(data, p.percentiles)
    fg_thresh = float(data.mean())
    fg = data > fg_thresh
    if p.intensity == "percentile":
        data = np.clip((data - lo) / max(hi - lo, 1e-6), 0, 1).astype(np.float32)
        steps.append({"name": "percentile_rescale", "args": {"percentiles": list(p.percentiles)}, "version": VERSION})
    elif p.intensity == "zscore" and fg.any():
        data = ((data - data[fg].mean()) / max(float(data[fg].std()), 1e-6)).astype(np.float32)
        steps.append({"name": "zscore_foreground", "args": {}, "version": VERSION})
    out = nib.Nifti1Image(data, img.affine)
    out.header.set_xyzt_units("mm")
    save_nifti(out, out_dir / "volume.nii.gz")
    spacing = tuple(round(float(z), 4) for z in out.header.get_zooms()[:3])
    sidecar = dict(info.get("sidecar") or {})
    sidecar.update({"Sequence": task.get("sequence"), "Orientation": "RAS", "Spacing": list(spacing),
                    "Defaced": defaced is not None})
    write_text(out_dir / "volume.json", json.dumps(sidecar, indent=2, sort_keys=True) + "\n")

    from curation.imaging.targets import locate, refused_planes, sampling_mm

    sampling = sampling_mm(src_affine)
    refused = refused_planes(sampling, p.max_reformat_spacing_mm)
    located = locate(data, out.affine, task.get("sequence"), p) if p.key_slices else {"targets": [], "anatomy": {}}
    if p.key_slices:
        steps.append({"name": "locate_targets", "args": {k: v for k, v in located["anatomy"].items()},
                      "version": VERSION})
    renders = render_volume(data, fg, spacing, p, out_dir, final_dir, targets=located["targets"], refused=refused)
    steps.append({"name": "render", "args": {"size": p.render_size, "window_percentiles": [1.0, 99.5]},
                  "version": VERSION})
    qc = _qc(data, fg, spacing, info)
    qc.update({"source_sampling_mm": list(sampling), "planes_refused": sorted(refused),
               "planes_refused_reason": refused, "anatomy": located["anatomy"], "targets": located["targets"]})
    return {"ok": True, "nifti": relpath(final_dir / "volume.nii.gz"), "spacing": spacing,
            "shape": tuple(int(s) for s in data.shape), "orientation": "RAS", "renders": renders, "qc": qc,
            "steps": steps, "sidecar": sidecar}


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


def register_series(task: dict[str, Any]) -> dict[str, Any]:
    """Rigid registration of a normalized series to its visit's T1w (Mattes MI), resampled onto the T1w grid,
    then rendered again. Single-threaded with regular sampling, so the result is the same on every run."""
    import nibabel as nib

    from curation.imaging.convert import save_nifti

    p: NormalizeParams = task["params"]
    out_dir, final_dir = Path(task["out_dir"]), Path(task["final_dir"])
    try:
        fixed_img, moving_img = nib.load(task["fixed"]), nib.load(task["moving"])
        tx, metric, out = _rigid(_to_sitk(fixed_img), _to_sitk(moving_img), REGISTER_SPACING)
    except Exception as exc:
        return {"ok": False, "reason": "registration_failed", "detail": f"{type(exc).__name__}: {exc}"}
    spacing = tuple(round(float(z), 4) for z in fixed_img.header.get_zooms()[:3])
    img = _from_sitk(out, fixed_img.affine, spacing)
    data = np.asarray(img.dataobj, dtype=np.float32)
    save_nifti(img, out_dir / "volume.nii.gz")
    for old in out_dir.glob("*.png"):
        old.unlink()
    fg = data > float(data.mean())
    from curation.imaging.targets import locate

    located = locate(data, img.affine, task.get("sequence"), p) if p.key_slices else {"targets": [], "anatomy": {}}
    refused = task.get("refused") or {}
    renders = render_volume(data, fg, spacing, p, out_dir, final_dir, targets=located["targets"], refused=refused)
    params = [round(float(v), 4) for v in tx.GetParameters()] if hasattr(tx, "GetParameters") else []
    step = {"name": "register_rigid", "args": {"reference": task["reference"], "metric": "MattesMI",
                                               "final_metric": round(metric, 4), "transform": params},
            "version": VERSION}
    return {"ok": True, "renders": renders, "spacing": spacing, "shape": tuple(int(v) for v in data.shape),
            "step": step, "qc": {**_qc(data, fg, spacing, {}), "planes_refused": sorted(refused),
                                 "planes_refused_reason": refused, "anatomy": located["anatomy"],
                                 "targets": located["targets"]}}


REGISTER_SPACING = 2.0  # mm: within-visit registrations run on copies at this spacing


def _rigid(fixed: Any, moving: Any, spacing: float) -> tuple[Any, float, Any]:
    """Rigid transform (fixed points -> moving points; Mattes MI on copies at ``spacing`` mm, coarse to fine),
    its final metric, and ``moving`` resampled onto ``fixed``. Single-threaded with regular sampling, so the
    result is the same on every run."""
    import SimpleITK as sitk

    from curation.imaging.anatomy import _coarse

    threads = sitk.ProcessObject.GetGlobalDefaultNumberOfThreads()
    sitk.ProcessObject.SetGlobalDefaultNumberOfThreads(1)
    try:
        cf, cm = _coarse(fixed, spacing), _coarse(moving, spacing)
        init = sitk.CenteredTransformInitializer(cf, cm, sitk.Euler3DTransform(),
                                                 sitk.CenteredTransformInitializerFilter.MOMENTS)
        reg = sitk.ImageRegistrationMethod()
        reg.SetMetricAsMattesMutualInformation(numberOfHistogramBins=32)
        reg.SetMetricSamplingStrategy(reg.REGULAR)
        reg.SetMetricSamplingPercentage(0.5, seed=1)
        reg.SetInterpolator(sitk.sitkLinear)
        reg.SetOptimizerAsRegularStepGradientDescent(learningRate=1.0, minStep=1e-4, numberOfIterations=200,
                                                     relaxationFactor=0.6)
        reg.SetOptimizerScalesFromPhysicalShift()
        reg.SetShrinkFactorsPerLevel([2, 1])
        reg.SetSmoothingSigmasPerLevel([1.0, 0.0])
        reg.SmoothingSigmasAreSpecifiedInPhysicalUnitsOn()
        reg.SetInitialTransform(init, inPlace=False)
        tx = reg.Execute(cf, cm)
        metric = float(reg.GetMetricValue())
        out = sitk.Resample(moving, fixed, tx, sitk.sitkLinear, 0.0, sitk.sitkFloat32)
    finally:
        sitk.ProcessObject.SetGlobalDefaultNumberOfThreads(threads)
    return tx, metric, out


PAIR_SPACING = 3.0  # mm: longitudinal registrations run on copies at this spacing, then resample the 1 mm volume


def pair_series(task: dict[str, Any]) -> dict[str, Any]:
    """A follow-up T1w registered (rigid, Mattes MI on 3 mm copies) to the baseline T1w and rendered at the
    baseline's target slices (same grid, so the same position in mm) with the baseline's window."""
    import nibabel as nib


    p: NormalizeParams = task["params"]
    try:
        fixed_img, moving_img = nib.load(task["fixed"]), nib.load(task["moving"])
        tx, metric, out = _rigid(_to_sitk(fixed_img), _to_sitk(moving_img), PAIR_SPACING)
    except Exception as exc:
        return {"ok": False, "reason": "registration_failed", "detail": f"{type(exc).__name__}: {exc}"}
    spacing = tuple(round(float(z), 4) for z in fixed_img.header.get_zooms()[:3])
    data = np.asarray(_from_sitk(out, fixed_img.affine, spacing).dataobj, dtype=np.float32)
    fg = data > float(data.mean())
    renders = render_volume(data, fg, spacing, p, Path(task["out_dir"]), Path(task["final_dir"]),
                            targets=task["targets"], refused=task["refused"], window_override=task["window"],
                            role="paired", prefix="paired_")
    for r in renders:
        r["located_by"] = f"registered_to:{task['reference']}"
    # the same map in RAS mm: baseline point -> follow-up point
    tfm = tx.GetNthTransform(0) if hasattr(tx, "GetNthTransform") else tx
    m = np.eye(4)
    m[:3, :3] = np.asarray(tfm.GetMatrix()).reshape(3, 3)
    centre = np.asarray(tfm.GetCenter())
    m[:3, 3] = np.asarray(tfm.GetTranslation()) + centre - m[:3, :3] @ centre
    flip = np.diag([-1.0, -1.0, 1.0, 1.0])
    ras = flip @ m @ flip
    step = {"name": "register_to_baseline", "args": {
        "reference": task["reference"], "reference_visit": task["reference_visit"], "metric": "MattesMI",
        "final_metric": round(metric, 4), "spacing_mm": PAIR_SPACING,
        "baseline_to_followup_ras": [[round(float(v), 5) for v in row] for row in ras]}, "version": VERSION}
    return {"ok": True, "renders": renders, "step": step}


def _to_sitk(img: Any) -> Any:
    """A RAS-oriented nibabel image as a SimpleITK image (LPS world), same voxels and geometry."""
    import SimpleITK as sitk

    data = np.asarray(img.dataobj, dtype=np.float32)
    out = sitk.GetImageFromArray(np.ascontiguousarray(data.transpose(2, 1, 0)))
    aff = img.affine
    zooms = np.sqrt((aff[:3, :3] ** 2).sum(axis=0))
    flip = np.diag([-1.0, -1.0, 1.0])
    out.SetSpacing([float(z) for z in zooms])
    out.SetDirection([float(v) for v in (flip @ aff[:3, :3] / zooms).flatten()])
    out.SetOrigin([float(v) for v in flip @ aff[:3, 3]])
    return out


def _from_sitk(image: Any, like_affine: np.ndarray, spacing: tuple[float, ...]) -> Any:
    import nibabel as nib
    import SimpleITK as sitk

    data = sitk.GetArrayFromImage(image).transpose(2, 1, 0)
    aff = np.eye(4)
    zooms = np.sqrt((like_affine[:3, :3] ** 2).sum(axis=0))
    aff[:3, :3] = like_affine[:3, :3] / zooms * np.asarray(spacing)
    aff[:3, 3] = np.diag([-1.0, -1.0, 1.0]) @ np.asarray(image.GetOrigin())
    return nib.Nifti1Image(np.ascontiguousarray(data, dtype=np.float32), aff)


def _resample(img: Any, spacing: tuple[float, ...]) -> Any:
    """Linear resampling to ``spacing`` with SimpleITK over the same field of view (multi-threaded C++)."""
    import SimpleITK as sitk

    src = _to_sitk(img)
    old_sp, old_size = np.asarray(src.GetSpacing()), np.asarray(src.GetSize())
    size = [max(1, int(v)) for v in np.ceil(old_size * old_sp / np.asarray(spacing) - 1e-6)]
    out = sitk.Resample(src, size, sitk.Transform(), sitk.sitkLinear, src.GetOrigin(), spacing, src.GetDirection(),
                        0.0, sitk.sitkFloat32)
    return _from_sitk(out, img.affine, spacing)


def _n4(img: Any) -> Any:
    """N4 bias-field correction (SimpleITK), fitted on a 2x shrunk image with an Otsu foreground mask."""
    import SimpleITK as sitk

    src = _to_sitk(img)
    src = sitk.Cast(sitk.RescaleIntensity(src, 0, 1000), sitk.sitkFloat32)
    mask = sitk.OtsuThreshold(src, 0, 1, 200)
    small, small_mask = sitk.Shrink(src, [2, 2, 2]), sitk.Shrink(mask, [2, 2, 2])
    n4 = sitk.N4BiasFieldCorrectionImageFilter()
    n4.SetMaximumNumberOfIterations([20, 20])
    n4.Execute(small, small_mask)
    log_field = n4.GetLogBiasFieldAsImage(src)
    corrected = src / sitk.Exp(log_field)
    return _from_sitk(corrected, img.affine, tuple(src.GetSpacing()))


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


def process_figure(task: dict[str, Any]) -> dict[str, Any]:
    from PIL import Image

    from curation.deid.files import ImageTooLarge, open_bounded
    from curation.imaging.render import save_png

    try:
        with open_bounded(task["path"], task.get("max_pixels")) as im:
            im.load()
            img = im.convert("RGB") if im.mode not in ("L", "RGB") else im.copy()
    except ImageTooLarge as exc:
        return {"ok": False, "reason": "image_too_large", "detail": str(exc)}
    except Exception as exc:
        return {"ok": False, "reason": "image_unreadable", "detail": f"{type(exc).__name__}: {exc}"}
    size = task["size"]
    scale = size / max(img.size)
    if scale < 1:
        size = (max(1, round(img.width * scale)), max(1, round(img.height * scale)))
        img = img.resize(size, Image.Resampling.BILINEAR)
    out = Path(task["out"])
    save_png(img, out)
    arr = np.asarray(img.convert("L"), dtype=np.float32)
    flags = ["tiny_image"] if min(img.size) < 64 else []
    return {"ok": True, "render": {"plane": "figure", "slice_index": None, "window": None,
                                   "path": relpath(Path(task["final"])), "role": "figure"},
            "qc": {"width": img.width, "height": img.height, "mean": round(float(arr.mean()), 3), "flags": flags,
                   "pass": not flags}}


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
        series_tasks, figure_tasks = [], []
        for case in cases:
            for visit in case.visits:
                for s in visit.series:
                    rel = Path("files") / safe_name(case.case_id) / safe_name(s.series_id)
                    series_tasks.append(({"format": s.format, "files": s.files, "params": params,
                                          "out_dir": str(staging / rel), "final_dir": str(dst / rel),
                                          "sequence": s.sequence, "threads": threads}, s))
            for fig in case.figures:
                if fig.path:
                    rel = Path("files") / safe_name(case.case_id) / f"{safe_name(fig.figure_id)}.png"
                    figure_tasks.append(({"path": fig.path, "size": params.render_size, "out": str(staging / rel),
                                          "final": str(dst / rel), "max_pixels": params.bounds.max_image_pixels},
                                         fig))
        qc_rows = []
        def contained(task: dict[str, Any]) -> dict[str, Any] | None:
            files = task.get("files") or ([task["path"]] if task.get("path") else [])
            return None if all(readable(f, src) for f in files) else OUTSIDE_INPUT

        def run_contained(fn: Any, tasks: list[dict[str, Any]]) -> Any:
            """Results in task order; a task naming a file outside the input is answered without running it."""
            inside_tasks = [t for t in tasks if contained(t) is None]
            results = iter(pmap(fn, inside_tasks, workers=workers, scheduler=scheduler))
            for t in tasks:
                yield contained(t) or next(results)

        for (_task, s), res in zip(series_tasks, run_contained(process_series, [t for t, _ in series_tasks]),
                                   strict=True):
            report.inputs += 1
            if not res["ok"]:
                report.fail(_in_rel(s.files[0], src) if s.files else s.series_id, res["reason"], res["detail"])
                s.qc = {"pass": False, "flags": [res["reason"]]}
                continue
            s.nifti, s.spacing, s.shape, s.orientation = res["nifti"], res["spacing"], res["shape"], res["orientation"]
            s.renders = [Render(**r) for r in res["renders"]]
            s.qc = res["qc"]
            s.sidecar = {**s.sidecar, **res["sidecar"]}  # acquisition metadata from ingest (e.g. IDA XML) is kept
            s.provenance.extend(Step(**st) for st in res["steps"])
            report.outputs += 1
            report.counts["series_qc_flagged"] += int(not res["qc"]["pass"])
        if params.register_to_t1:
            _register_visits(cases, series_tasks, params, workers, scheduler, report)
        if params.longitudinal and params.key_slices:
            _pair_visits(cases, series_tasks, params, workers, scheduler, report)
        for _, s in series_tasks:
            if s.renders:
                qc_rows.append({"kind": "series", "id": s.series_id, **s.qc, "thumbnail": s.renders[0].path})
        for (_task, fig), res in zip(figure_tasks, run_contained(process_figure, [t for t, _ in figure_tasks]),
                                     strict=True):
            report.inputs += 1
            if not res["ok"]:
                report.fail(_in_rel(fig.path, src) if fig.path else fig.figure_id, res["reason"], res["detail"])
                fig.missing, fig.path = True, None
                continue
            fig.renders = [Render(**res["render"])]
            fig.qc = res["qc"]
            report.outputs += 1
            qc_rows.append({"kind": "figure", "id": fig.figure_id, **res["qc"], "thumbnail": res["render"]["path"]})
        for case in cases:
            case.provenance.stages["normalize"] = VERSION
        write_jsonl(staging / "cases.jsonl", cases)
        write_jsonl(staging / "qc.jsonl", qc_rows)
        _contact_sheet(qc_rows, staging / "qc_contact_sheet.png", dst)
        report.write_quarantine(staging / "quarantine.jsonl")
        report.check_failure_rate(params.max_failure_rate, report_path, dst)
    report.write(report_path)
    return report


def _register_visits(cases: list[Case], series_tasks: list[tuple[dict[str, Any], Any]], params: NormalizeParams,
                     workers: int, scheduler: str | None, report: Report) -> None:
    """Line up the other sequences of each visit with its T1w (the first T1w series of the visit)."""
    staged = {id(s): t for t, s in series_tasks}
    jobs = []
    for case in cases:
        for visit in case.visits:
            ref = next((s for s in visit.series if s.sequence == "T1w" and s.nifti), None)
            if ref is None:
                continue
            for s in visit.series:
                if s is ref or not s.nifti or s.format not in ("dicom", "nifti", "analyze"):
                    continue
                t, r = staged[id(s)], staged[id(ref)]
                jobs.append(({"params": params, "fixed": str(Path(r["out_dir"]) / "volume.nii.gz"),
                              "moving": str(Path(t["out_dir"]) / "volume.nii.gz"), "out_dir": t["out_dir"],
                              "final_dir": t["final_dir"], "reference": ref.series_id, "sequence": s.sequence,
                              "refused": s.qc.get("planes_refused_reason") or {}}, s))
    for (job, s), res in zip(jobs, pmap(register_series, [j for j, _ in jobs], workers=workers, scheduler=scheduler),
                             strict=True):
        if not res["ok"]:
            report.counts[f"registration_failed:{s.series_id}"] += 1
            s.qc = {**s.qc, "flags": [*s.qc.get("flags", []), "registration_failed"]}
            continue
        s.renders = [Render(**r) for r in res["renders"]]
        s.spacing, s.shape = res["spacing"], res["shape"]
        s.provenance.append(Step(**res["step"]))
        s.qc = {**res["qc"], "registered_to": job["reference"]}
        report.counts["series_registered"] += 1


def _pair_visits(cases: list[Case], series_tasks: list[tuple[dict[str, Any], Any]], params: NormalizeParams,
                 workers: int, scheduler: str | None, report: Report) -> None:
    """Line up each follow-up T1w with the case's baseline T1w (the T1w of its earliest visit) and render it at
    the baseline's target positions, so the two time points show the same anatomy at the same mm."""
    staged = {id(s): t for t, s in series_tasks}
    jobs = []
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
            jobs.append(({"params": params, "fixed": str(Path(r["out_dir"]) / "volume.nii.gz"),
                          "moving": str(Path(t["out_dir"]) / "volume.nii.gz"), "out_dir": t["out_dir"],
                          "final_dir": t["final_dir"], "reference": base.series_id,
                          "reference_visit": base_visit.visit_id, "targets": targets, "window": tuple(window),
                          "refused": refused}, s))
    for (job, s), res in zip(jobs, pmap(pair_series, [j for j, _ in jobs], workers=workers, scheduler=scheduler),
                             strict=True):
        if not res["ok"]:
            report.counts["longitudinal_registration_failed"] += 1
            s.qc = {**s.qc, "flags": [*s.qc.get("flags", []), "longitudinal_registration_failed"]}
            continue
        s.renders.extend(Render(**r) for r in res["renders"])
        s.provenance.append(Step(**res["step"]))
        s.qc = {**s.qc, "paired_with": job["reference"]}
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
