"""The ``normalize`` stage: canonical NIfTI, intensity normalization, renders and QC, one series at a time.

The steps of one series are in ``curation.imaging.steps`` (one module each, run in the order of ``steps.STEPS``);
registration in ``curation.imaging.register``, figures in ``curation.imaging.figures``, renders in
``curation.imaging.render``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curation.errors import InputError
from curation.imaging import steps
from curation.imaging.figures import FigureResult, FigureTask, process_figure
from curation.imaging.register import (
    Carried,
    CarryTask,
    Paired,
    PairTask,
    Registered,
    RegisterTask,
    carry_series,
    pair_series,
    register_series,
)
from curation.imaging.sitk import threads
from curation.imaging.steps.base import VERSION, Refused, SeriesContext, SeriesTask
from curation.jsonio import read_jsonl, write_jsonl
from curation.parallel import pmap
from curation.params import NormalizeParams
from curation.paths import OUTSIDE_INPUT, readable, safe_name
from curation.paths import input_rel as _in_rel
from curation.records import relpath, staged_dir
from curation.report import Outcome, Report
from curation.schema import Case, LesionChange, Render, Series, SeriesQC, Step


@dataclass(frozen=True)
class SeriesResult:
    """A normalized series: its volume (``nifti``, where it will lie), grid, renders (``schema.Render`` fields), QC,
    the provenance steps that made it and its acquisition metadata."""

    nifti: str
    spacing: tuple[float, ...]
    shape: tuple[int, ...]
    orientation: str
    renders: list[Render]
    qc: SeriesQC
    steps: list[Step]
    sidecar: dict[str, Any]  # steps.base.VolumeSidecar.record(): the acquisition's keys are the source's


def process_series(task: SeriesTask) -> Outcome[SeriesResult]:
    """Pure function of one series: everything it writes lies under ``task.out_dir``. Whatever one bad volume
    raises becomes its quarantine reason, the task kept as the failure's raw input; it never stops the stage."""
    try:
        return _process_series(task)
    except Refused as exc:
        return exc.outcome.passed_on(task)
    except Exception as exc:  # ITK, nibabel and numpy raise many types on odd volumes
        return Outcome.failure("normalize_failed", f"{type(exc).__name__}: {exc}", task)


def _process_series(task: SeriesTask) -> Outcome[SeriesResult]:
    """steps.STEPS in order, SimpleITK's thread count set for them and restored after."""
    ctx = SeriesContext(task)
    img: Any = None
    records: list[Step] = []
    try:
        with threads(task.threads):
            for fn in steps.STEPS:
                img, record = fn(img, ctx)
                if record is not None:
                    records.append(record)
    finally:
        if ctx.fit is not None:
            ctx.fit.close()
    return Outcome.success(SeriesResult(nifti=relpath(Path(task.final_dir) / "volume.nii.gz"), spacing=ctx.spacing,
                                        shape=tuple(int(s) for s in img.shape), orientation="RAS",
                                        renders=ctx.renders, qc=ctx.qc, steps=records,
                                        sidecar=ctx.sidecar.record() if ctx.sidecar is not None else {}))


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
        series_tasks, figure_tasks = _tasks(cases, params, staging, dst, threads, report)
        qc_rows = []
        def contained(task: SeriesTask | FigureTask) -> Outcome[Any] | None:
            return None if all(readable(f, src) for f in task.inputs) else OUTSIDE_INPUT

        def run_contained(fn: Any, tasks: list[Any]) -> Iterator[Outcome[Any]]:
            """Results in task order; a task naming a file outside the input is answered without running it."""
            inside_tasks = [t for t in tasks if contained(t) is None]
            results = iter(pmap(fn, inside_tasks, workers=workers, scheduler=scheduler))
            for t in tasks:
                yield contained(t) or next(results)

        for (_task, s), res in zip(series_tasks, run_contained(process_series, [t for t, _ in series_tasks]),
                                   strict=True):
            report.inputs += 1
            if not report.record(_in_rel(s.files[0], src) if s.files else s.series_id, res):
                s.qc = SeriesQC(passed=False, flags=[res.reason])
                continue
            _take_series(s, res.value)
            report.outputs += 1
            report.counts["series_qc_flagged"] += int(not s.qc.passed)
        if params.register_to_t1:
            _register_visits(cases, series_tasks, params, workers, scheduler, report)
        elif params.key_slices and params.targets_from_t1:
            _carry_visits(cases, series_tasks, params, workers, scheduler, report)
        if params.longitudinal and params.key_slices:
            _pair_visits(cases, series_tasks, params, workers, scheduler, report)
        if params.change.enabled:
            _change_visits(cases, series_tasks, params, workers, scheduler, report)
        for _, s in series_tasks:
            if s.renders:
                qc_rows.append({"kind": "series", "id": s.series_id, **s.qc.model_dump(),
                                "thumbnail": s.renders[0].path})
        for (_fig_task, fig), res in zip(figure_tasks, run_contained(process_figure, [t for t, _ in figure_tasks]),
                                     strict=True):
            report.inputs += 1
            if not report.record(_in_rel(fig.path, src) if fig.path else fig.figure_id, res):
                fig.missing, fig.path = True, None
                continue
            shown: FigureResult = res.value
            fig.renders = [shown.render]
            # what rendering measured, with deidentify's masking and the figure a panel was cut from (ingest)
            kept = {k: getattr(fig.qc, k) for k in ("pixel_text", "panel_of") if k in fig.qc.model_fields_set}
            fig.qc = shown.qc.model_copy(update=kept)
            report.outputs += 1
            qc_rows.append({"kind": "figure", "id": fig.figure_id, **shown.qc.model_dump(),
                            "thumbnail": shown.render.path})
        for case in cases:
            case.provenance.stages["normalize"] = VERSION
        write_jsonl(staging / "cases.jsonl", cases)
        write_jsonl(staging / "qc.jsonl", qc_rows)
        _contact_sheet(qc_rows, staging / "qc_contact_sheet.png", dst)
        report.write_quarantine(staging / "quarantine.jsonl")
        report.check_failure_rate(params.max_failure_rate, report_path, dst)
    report.write(report_path)
    return report


def _tasks(cases: list[Case], params: NormalizeParams, staging: Path, dst: Path, threads: int | None,
           report: Report) -> tuple[list[tuple[SeriesTask, Any]], list[tuple[FigureTask, Any]]]:
    """A task for each series and each figure, with the record it fills in; a figure held for pixel review has
    none."""
    series_tasks: list[tuple[SeriesTask, Any]] = []
    figure_tasks: list[tuple[FigureTask, Any]] = []
    for case in cases:
        for visit in case.visits:
            for s in visit.series:
                rel = Path("files") / safe_name(case.case_id) / safe_name(s.series_id)
                series_tasks.append((SeriesTask(s.format, s.files, params, str(staging / rel), str(dst / rel),
                                                s.sequence, threads, s.lesion_mask), s))
        for fig in case.figures:
            if fig.path and fig.qc.pixel_text is not None and fig.qc.pixel_text.review:
                # burned-in text deidentify could not read with confidence: no render, so no item shows it
                # until a reviewer has looked (deidentify's quarantine lists it as skipped:pixel_text_review)
                report.counts["figures_held_for_pixel_review"] += 1
                continue
            if fig.path:
                rel = Path("files") / safe_name(case.case_id) / f"{safe_name(fig.figure_id)}.png"
                figure_tasks.append((FigureTask(fig.path, params.figure_size, str(staging / rel),
                                                str(dst / rel), params.bounds.max_image_pixels), fig))
    return series_tasks, figure_tasks


def _take_series(s: Series, made: SeriesResult) -> None:
    """What normalizing a series made, onto its record; the acquisition metadata ingest read is kept."""
    s.nifti, s.spacing, s.shape = made.nifti, made.spacing, made.shape
    s.orientation = made.orientation
    s.renders = list(made.renders)
    s.qc = made.qc
    s.sidecar = {**s.sidecar, **made.sidecar}  # acquisition metadata from ingest (e.g. IDA XML) is kept
    s.provenance.extend(made.steps)


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
                                          ref.series_id, s.sequence, s.qc.planes_refused_reason), s))
    for (job, s), res in zip(jobs, pmap(register_series, [j for j, _ in jobs], workers=workers, scheduler=scheduler),
                             strict=True):
        if not res.ok:
            report.counts[f"registration_failed:{s.series_id}"] += 1
            s.qc.flag("registration_failed")
            continue
        reg: Registered = res.value
        s.renders = list(reg.renders)
        s.spacing, s.shape = reg.spacing, reg.shape
        s.provenance.append(reg.step)
        s.qc = reg.qc
        s.qc.registered_to = job.reference
        report.counts["series_registered"] += 1


def _carry_visits(cases: list[Case], series_tasks: list[tuple[SeriesTask, Any]], params: NormalizeParams,
                  workers: int, scheduler: str | None, report: Report) -> None:
    """Give the other sequences of each visit the hippocampus and ventricle positions of its T1w (the first T1w
    series of the visit whose anatomy fit placed them), carried through a rigid registration (register.carry_series);
    their renders there replace the ones their own fit placed."""
    staged = {id(s): t for t, s in series_tasks}
    jobs: list[tuple[CarryTask, Any]] = []
    for case in cases:
        for visit in case.visits:
            ref = next((s for s in visit.series if s.sequence == "T1w" and s.nifti and s.qc.targets), None)
            if ref is None:
                continue
            for s in visit.series:
                if s is ref or s.sequence == "T1w" or not s.nifti or not s.renders:
                    continue
                t, r = staged[id(s)], staged[id(ref)]
                window = next((x.window for x in s.renders if x.window), None)
                jobs.append((CarryTask(params, str(Path(r.out_dir) / "volume.nii.gz"),
                                       str(Path(t.out_dir) / "volume.nii.gz"), t.out_dir, t.final_dir, ref.series_id,
                                       s.sequence, s.qc.planes_refused_reason,
                                       targets=ref.qc.targets, own=s.qc.targets,
                                       window=window), s))
    for (job, s), res in zip(jobs, pmap(carry_series, [j for j, _ in jobs], workers=workers, scheduler=scheduler),
                             strict=True):
        if not res.ok:
            report.counts["target_carry_failed"] += 1
            s.qc.flag("target_carry_failed")
            continue
        got: Carried = res.value
        placed, missed = got.targets, got.missed
        carried = {t.target for t in placed} | set(missed)
        new = list(got.renders)
        kept = {Path(r.path).name for r in new}
        for r in s.renders:  # the own fit's renders of a carried target go, unless the carried one is the same file
            if r.role == "target" and r.target in carried and Path(r.path).name not in kept:
                (Path(job.out_dir) / Path(r.path).name).unlink(missing_ok=True)
        s.renders = [r for r in s.renders if not (r.role == "target" and r.target in carried)] + new
        anatomy = s.qc.anatomy.model_copy()
        anatomy.not_located = {**{k: v for k, v in anatomy.not_located.items() if k not in carried}, **missed}
        anatomy.targets_from = job.reference
        s.qc.anatomy = anatomy
        s.qc.targets = [t for t in s.qc.targets if t.target not in carried] + placed
        s.provenance.append(got.step)
        report.counts["series_targets_from_t1"] += 1


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
        targets = base.qc.targets  # the baseline's placements (the montage's slices included)
        if not targets:
            continue
        window = next(r.window for r in base.renders if r.role == "target" and r.window)
        for visit in visits[1:]:
            s = next(x for x in visit.series if x.sequence == "T1w" and x.nifti)
            t, r = staged[id(s)], staged[id(base)]
            refused = {**base.qc.planes_refused_reason, **s.qc.planes_refused_reason}
            jobs.append((PairTask(params, str(Path(r.out_dir) / "volume.nii.gz"),
                                  str(Path(t.out_dir) / "volume.nii.gz"), t.out_dir, t.final_dir, base.series_id,
                                  refused=refused, reference_visit=base_visit.visit_id, targets=targets,
                                  window=window), s))
    for (job, s), res in zip(jobs, pmap(pair_series, [j for j, _ in jobs], workers=workers, scheduler=scheduler),
                             strict=True):
        if not res.ok:
            report.counts["longitudinal_registration_failed"] += 1
            s.qc.flag("longitudinal_registration_failed")
            continue
        paired: Paired = res.value
        s.renders.extend(paired.renders)
        s.provenance.append(paired.step)
        s.qc.paired_with = job.reference
        report.counts["series_paired_to_baseline"] += 1


def _change_visits(cases: list[Case], series_tasks: list[tuple[SeriesTask, Any]], params: NormalizeParams,
                   workers: int, scheduler: str | None, report: Report) -> None:
    """Compare each follow-up FLAIR with the case's baseline FLAIR (its earliest visit's): the largest new or
    enlarging lesion, in ``qc.change`` of the follow-up, with both rendered at it (roles ``change_baseline`` and
    ``change``; curation/imaging/change.py)."""
    from curation.imaging.change import Changed, ChangeTask, change_series

    staged = {id(s): t for t, s in series_tasks}
    jobs: list[tuple[ChangeTask, tuple[Any, Any]]] = []
    for case in cases:
        visits = sorted((v for v in case.visits if any(s.sequence == "FLAIR" and s.nifti for s in v.series)),
                        key=lambda v: (v.days_from_baseline is None, v.days_from_baseline or 0))
        if len(visits) < 2 or visits[0].days_from_baseline is None:
            continue
        base = next(s for s in visits[0].series if s.sequence == "FLAIR" and s.nifti)
        for visit in visits[1:]:
            if visit.days_from_baseline is None or visit.days_from_baseline <= (visits[0].days_from_baseline or 0):
                continue
            s = next(x for x in visit.series if x.sequence == "FLAIR" and x.nifti)
            t, r = staged[id(s)], staged[id(base)]
            jobs.append((ChangeTask(params, str(Path(r.out_dir) / "volume.nii.gz"),
                                    str(Path(t.out_dir) / "volume.nii.gz"), t.out_dir, t.final_dir, base.series_id,
                                    visits[0].visit_id), (s, base)))
    for (job, (s, base)), res in zip(jobs, pmap(change_series, [j for j, _ in jobs], workers=workers,
                                                 scheduler=scheduler), strict=True):
        if not res.ok:
            report.counts["lesion_change_failed"] += 1
            s.qc.flag(res.reason)
            continue
        got: Changed = res.value
        s.provenance.append(got.step)
        if got.change is None:
            report.counts["lesion_change_none"] += 1
            s.qc.change = LesionChange(found=None, reference=job.reference)
            continue
        c = got.change
        # each render on the series it shows (the baseline's slice is the baseline's, though written beside the
        # follow-up's)
        for shown in got.renders:
            (base if shown.role == "change_baseline" else s).renders.append(shown)
        baseline_render = next(x.path for x in got.renders if x.role == "change_baseline")
        s.qc.change = LesionChange(found=c.kind, reference=job.reference, reference_visit=job.reference_visit,
                                   baseline_render=baseline_render, centre_mm=c.centre_mm, slice_index=c.slice_index,
                                   volume_mm3=c.volume_mm3, contrast=c.contrast, count=c.count)
        report.counts[f"lesion_change_{c.kind}"] += 1


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
                thumb = im.convert("RGB")
                thumb.thumbnail((tile, tile))
                x, y = (i % cols) * tile, (i // cols) * (tile + 14)
                sheet.paste(thumb, (x, y))
        except OSError:
            x, y = (i % cols) * tile, (i // cols) * (tile + 14)
        colour = (80, 220, 80) if row.get("pass") else (240, 80, 80)
        draw.text((x + 2, y + tile), f"{row['id'][:18]}", fill=colour)
    save_png(sheet, out)
