"""``curate``: one subcommand per pipeline stage; each parses, calls run(), reports in one line."""

from __future__ import annotations

import functools
import inspect
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from curation.errors import CurationError, ResourceError

F = TypeVar("F", bound=Callable[..., Any])

app = typer.Typer(help="Build reviewed, versioned, frozen multimodal neurology reasoning benchmarks.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
deid_app = typer.Typer(help="De-identify DICOM, text and volumes; verify outputs.", no_args_is_help=True)
imaging_app = typer.Typer(help="Convert and render images outside the pipeline.", no_args_is_help=True)
review_app = typer.Typer(help="Expert review in Label Studio: push, pull, status, merge.", no_args_is_help=True)
release_app = typer.Typer(help="Build, verify, compare and export frozen releases.", no_args_is_help=True)
schema_app = typer.Typer(help="Data model utilities.", no_args_is_help=True)
app.add_typer(deid_app, name="deid")
app.add_typer(imaging_app, name="imaging")
app.add_typer(review_app, name="review")
app.add_typer(release_app, name="release")
app.add_typer(schema_app, name="schema")

ParamsOpt = Annotated[Path, typer.Option("--params", help="params.yaml to read this stage's section from.")]
ReportOpt = Annotated[Path | None, typer.Option("--report", help="Write the stage report (JSON metrics) here.")]
WorkersOpt = Annotated[int, typer.Option("--workers", min=1, help="Local worker processes.")]
ReleaseDirArg = Annotated[Path | None, typer.Argument(help="A release folder (default: the one params.yaml names).")]
SchedulerOpt = Annotated[str | None, typer.Option("--scheduler", help="Dask scheduler address, e.g. tcp://host:8786.")]


def _err(message: str) -> None:
    typer.echo(f"error: {message}", err=True)


def clean_errors(fn: F) -> F:
    """Library errors become one line on stderr and a non-zero exit code, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (CurationError, ResourceError) as exc:
            _err(" ".join(str(exc).split()))
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            _err("interrupted")
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


def writer(out: Path) -> Any:
    """The one-writer lock of a standalone command's output (a file or a folder): a second run into it is refused
    at once, naming the holder (the stages lock theirs in ``staged_dir``)."""
    from curation.records import output_lock

    return output_lock(out)


def _section(params: Path, name: str) -> Any:
    from curation.params import load_params

    return getattr(load_params(params), name)


def _done(report: Any) -> None:
    typer.echo(report.summary())


def project_root(params: Path) -> Path:
    """The project a command works on: the folder of its params.yaml (where dvc runs the stages)."""
    return Path(params).resolve().parent


def _secret(params: Path) -> bytes:
    """The project's secret (``CURATION_SECRET``, else ``<project>/.curation/secret``, made once)."""
    from curation.records import project_secret

    return project_secret(project_root(params))


@dataclass
class Stage:
    """What a stage command gets from the options every stage shares: ``--params`` (loaded once, on first use),
    the project root and secret that follow from it, ``--report``, and ``--workers``/``--scheduler`` where the
    stage runs in parallel."""

    params_file: Path
    report: Path | None
    workers: int = 1
    scheduler: str | None = None

    @functools.cached_property
    def params(self) -> Any:
        from curation.params import load_params

        return load_params(self.params_file)

    @property
    def root(self) -> Path:
        return project_root(self.params_file)

    @functools.cached_property
    def secret(self) -> bytes:
        return _secret(self.params_file)


_SHARED = {
    "params": (ParamsOpt, Path("params.yaml")),
    "report": (ReportOpt, None),
    "workers": (WorkersOpt, 1),
    "scheduler": (SchedulerOpt, None),
}


def stage_command(group: typer.Typer, name: str | None = None, *, workers: bool = False, scheduler: bool = False,
                  footer: Callable[[Any], str] | None = None) -> Callable[[F], F]:
    """Register ``fn(stage: Stage, *own arguments) -> Report`` as a command of ``group``: the shared options
    (``--params``, ``--report``, and ``--workers``/``--scheduler`` when asked for) are added after its own, library
    errors become one line, and the returned report's summary (then ``footer(report)``) is printed."""

    def register(fn: F) -> F:
        sig = inspect.signature(fn, eval_str=True)
        own = [p for p in sig.parameters.values() if p.name != "stage"]
        wanted = ["params", "report", *(["workers"] if workers else []), *(["scheduler"] if scheduler else [])]
        shared = [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, annotation=_SHARED[k][0],
                                    default=_SHARED[k][1]) for k in wanted]

        @functools.wraps(fn)
        def command(*args: Any, params: Path, report: Path | None, workers: int = 1, scheduler: str | None = None,
                    **kwargs: Any) -> None:
            result = fn(Stage(params, report, workers, scheduler), *args, **kwargs)
            _done(result)
            if footer is not None:
                typer.echo(footer(result))

        command.__signature__ = sig.replace(parameters=[*own, *shared], return_annotation=None)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in (*own, *shared)}
        group.command(name)(clean_errors(command))
        return fn

    return register


@stage_command(app, workers=True, scheduler=True)
def ingest(
    stage: Stage,
    source: Annotated[str, typer.Argument(help="adni | oasis1 | oasis3 | radiopaedia | case-reports")],
    raw_dir: Annotated[Path, typer.Argument(help="The source's download folder.")],
    out_dir: Annotated[Path, typer.Argument(help="Where cases.jsonl, quarantine.jsonl and files/ go.")],
) -> Any:
    """Turn one source's download tree into Case records (bad inputs are quarantined with a reason)."""
    from curation.ingest import run

    return run(stage.params.ingest, source, raw_dir, out_dir, workers=stage.workers, scheduler=stage.scheduler,
               report_path=stage.report, secret=stage.secret)


@stage_command(deid_app, "run", workers=True, scheduler=True)
def deid_run(
    stage: Stage,
    in_dir: Annotated[Path, typer.Argument(help="Folder of ingested sources (each with cases.jsonl).")],
    out_dir: Annotated[Path, typer.Argument(help="De-identified cases, files, audit.jsonl, quarantine.jsonl.")],
) -> Any:
    """Pipeline stage: de-identify every ingested case (DICOM, volumes, sidecars, figures, text)."""
    from curation.deid.stage import run

    return run(stage.params.deidentify, in_dir, out_dir, workers=stage.workers, scheduler=stage.scheduler,
               report_path=stage.report, secret=stage.secret)


@deid_app.command("dicom")
@clean_errors
def deid_dicom(
    in_dir: Annotated[Path, typer.Argument(help="Any folder of files.")],
    out_dir: Annotated[Path, typer.Argument(help="De-identified files at the same relative paths.")],
    params: ParamsOpt = Path("params.yaml"),
    workers: WorkersOpt = 1,
    scheduler: SchedulerOpt = None,
) -> None:
    """De-identify every DICOM file under IN_DIR (PS3.15 Annex E); others are listed in quarantine.jsonl."""
    from curation.deid.stage import deid_dicom_dir
    from curation.records import staged_dir

    p, secret = _section(params, "deidentify").dicom, _secret(params)
    _refuse_foreign(out_dir, "audit.jsonl")
    # built beside OUT_DIR and swapped in whole: a failed run leaves the previous output as it was, never a mix
    with staged_dir(out_dir) as staging:
        report = deid_dicom_dir(p, in_dir, staging, workers=workers, scheduler=scheduler, secret=secret)
    _done(report)


def _refuse_foreign(out: Path, marker: str) -> None:
    """A standalone command replaces its output folder whole; a folder of other files (no ``marker`` of an earlier
    run) is refused rather than replaced."""
    from curation.errors import InputError

    if out.is_dir() and any(out.iterdir()) and not (out / marker).exists():
        raise InputError(f"not an earlier output of this command (no {marker}) and not empty; refusing to replace "
                         "it: name a new or empty folder", out)


@deid_app.command("text")
@clean_errors
def deid_text(
    src: Annotated[Path, typer.Argument(help="A .txt file or a folder of them.")],
    out: Annotated[Path, typer.Argument(help="Output file or folder (mirrors SRC).")],
    params: ParamsOpt = Path("params.yaml"),
) -> None:
    """Replace PHI in clinical text (names, dates, ids, contacts, addresses, ages over 89)."""
    from curation.deid.stage import deid_text_path

    with writer(out):
        _done(deid_text_path(_section(params, "deidentify").text, src, out, secret=_secret(params)))


@deid_app.command("deface")
@clean_errors
def deid_deface(
    src: Annotated[Path, typer.Argument(help="A 3D head MRI volume (.nii or .nii.gz).")],
    out: Annotated[Path, typer.Argument(help="The defaced volume (same header and voxel grid).")],
    brain_mask: Annotated[Path | None, typer.Option("--brain-mask", help="A brain mask on the same voxel grid; "
                                                    "the volume is refused if any removed voxel lies in it.")] = None,
) -> None:
    """Zero the face and ears of a head MRI (registered template face mask); prints the report as JSON."""
    from curation.imaging.deface import deface_file

    if not src.is_file():
        _err(f"{src}: no such file")
        raise typer.Exit(3)
    with writer(out):
        typer.echo(json.dumps(deface_file(src, out, brain_mask=brain_mask), sort_keys=True))


@deid_app.command("verify")
@clean_errors
def deid_verify(
    directory: Annotated[Path, typer.Argument(help="Folder of outputs to scan.")],
    against: Annotated[Path | None, typer.Option(
        help="Folder of the inputs: compare each DICOM output with its input (dates, UIDs, names, ids that "
             "survived unchanged; identity strings of the input anywhere in the output).")] = None,
) -> None:
    """Scan outputs for residual identifiers; exits non-zero listing each finding."""
    from curation.deid.verify import verify_against, verify_dir

    if not directory.is_dir():
        _err(f"{directory}: not a folder")
        raise typer.Exit(3)
    if against is not None:
        if not against.is_dir():
            _err(f"{against}: not a folder")
            raise typer.Exit(3)
        result = verify_against(directory, against, _secret(Path("params.yaml")))  # the project here
        for f in result.findings or []:
            typer.echo(f.line())
        if result.findings:
            _err(f"{len(result.findings)} finding(s) in {directory} against {against} "
                 f"({result.checked} input values checked)")
            raise typer.Exit(6)
        typer.echo(f"{directory}: nothing of {against} survived ({result.checked} input values checked)")
        return
    findings = verify_dir(directory)
    for f in findings:
        typer.echo(f.line())
    if findings:
        _err(f"{len(findings)} residual identifier finding(s) in {directory}")
        raise typer.Exit(6)
    typer.echo(f"{directory}: no residual identifiers found")


@imaging_app.command("convert")
@clean_errors
def imaging_convert(
    src: Annotated[Path, typer.Argument(help="DICOM file or series folder, Analyze .hdr, or NIfTI.")],
    out: Annotated[Path, typer.Argument(help="Output .nii.gz (canonical RAS+).")],
    params: ParamsOpt = Path("params.yaml"),
) -> None:
    """Convert one image or series to a canonical RAS+ NIfTI (within normalize.bounds.max_volume_bytes)."""
    import nibabel as nib

    from curation.imaging.convert import convert_path
    from curation.io.volumes import VolumeTooLarge, save_nifti

    if not src.exists():
        _err(f"{src}: does not exist")
        raise typer.Exit(3)
    try:
        img, info = convert_path(src, _section(params, "normalize").bounds.max_volume_bytes)
    except VolumeTooLarge as exc:
        _err(f"{src}: volume_too_large ({exc})")
        raise typer.Exit(3) from None
    except Exception as exc:
        _err(f"{src}: cannot convert ({type(exc).__name__}: {exc})")
        raise typer.Exit(3) from None
    from curation.records import writing

    with writer(out), writing(out):
        if out.name.endswith((".nii", ".nii.gz")):
            save_nifti(img, out)
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            nib.save(img, str(out))
    typer.echo(f"{out}: shape {tuple(img.shape)}, orientation {info['orientation']}")


@imaging_app.command("render")
@clean_errors
def imaging_render(
    volume: Annotated[Path, typer.Argument(help="A NIfTI/Analyze volume.")],
    out_dir: Annotated[Path, typer.Argument(help="Folder for PNG renders and renders.json.")],
    params: ParamsOpt = Path("params.yaml"),
    sequence: Annotated[str | None, typer.Option(help="The contrast (T1w, T2w, FLAIR, PD, ...): picks the "
                                                      "registration template and the lesion polarity.")] = None,
) -> None:
    """Render mid/key slices in three planes plus a montage, and list them in renders.json."""
    from curation.imaging.normalize import process_series
    from curation.records import write_json
    from curation.report import Outcome

    fmt = "analyze" if volume.name.endswith(".hdr") else "nifti"
    with writer(out_dir):
        res = Outcome.from_result(process_series({"format": fmt, "files": [str(volume)],
                                                  "params": _section(params, "normalize"), "out_dir": str(out_dir),
                                                  "final_dir": str(out_dir), "sequence": sequence}))
        if not res.ok:
            _err(f"{volume}: {res.reason} ({res.detail})")
            raise typer.Exit(3)
        write_json(out_dir / "renders.json", res.data["renders"])
    typer.echo(f"{out_dir}: {len(res.data['renders'])} renders")


@stage_command(app, workers=True, scheduler=True)
def normalize(
    stage: Stage,
    in_dir: Annotated[Path, typer.Argument(help="De-identified stage output.")],
    out_dir: Annotated[Path, typer.Argument(help="Canonical NIfTI, renders, qc.jsonl, contact sheet.")],
) -> Any:
    """Canonical RAS+ NIfTI, normalization, deterministic renders and QC for every series and figure."""
    from curation.imaging.normalize import run

    return run(stage.params.normalize, in_dir, out_dir, workers=stage.workers, scheduler=stage.scheduler,
               report_path=stage.report)


@stage_command(app)
def extract(
    stage: Stage,
    in_dir: Annotated[Path, typer.Argument(help="Normalized stage output.")],
    out_dir: Annotated[Path, typer.Argument(help="Cases with structured findings.")],
) -> Any:
    """Extract findings (anatomy, laterality, sequence, negation, time) and diagnoses from case text."""
    from curation.nlp.extract import run

    return run(stage.params.extract, in_dir, out_dir, report_path=stage.report)


@stage_command(app)
def generate(
    stage: Stage,
    in_dir: Annotated[Path, typer.Argument(help="Extracted cases.")],
    out_dir: Annotated[Path, typer.Argument(help="Draft items.")],
) -> Any:
    """Generate tagged items from the templates, then augment them through the LLM endpoint if one is set."""
    from curation.generate.stage import run

    return run(stage.params.generate, in_dir, out_dir, report_path=stage.report, llm=stage.params.llm)


@stage_command(app, "filter")
def filter_(
    stage: Stage,
    in_dir: Annotated[Path, typer.Argument(help="Draft items.")],
    out_dir: Annotated[Path, typer.Argument(help="Kept items (with splits) and rejected.jsonl.")],
    validity: Annotated[Path | None, typer.Option("--validity", help="Also write the validity report (blind and "
                                                  "model baselines per template) here, e.g. reports/validity.json.")
                        ] = None,
    validity_plot: Annotated[Path | None, typer.Option("--validity-plot", help="DVC plot data: blind baseline "
                                                       "accuracy vs chance per template.")] = None,
) -> Any:
    """Quality gates (validity, leakage, near-duplicates, LLM verifier, text-only shortcut, model-assisted
    difficulty), template validity (blind baselines, image ablations; shortcut templates blocked), balance report
    and stratified patient-disjoint splits."""
    from curation.quality.filter import run

    return run(stage.params.filter, in_dir, out_dir, report_path=stage.report, llm=stage.params.llm,
               validity_path=validity, plot_path=validity_plot)


@stage_command(review_app, "merge")
def review_merge(
    stage: Stage,
    in_dir: Annotated[Path, typer.Argument(help="Kept items.")],
    annotations: Annotated[Path, typer.Argument(help="Pinned Label Studio JSON export.")],
    out_dir: Annotated[Path, typer.Argument(help="Reviewed items.")],
) -> Any:
    """Apply reviewers' verdicts and edits; compute agreement."""
    from curation.review.merge import run

    return run(stage.params.review, in_dir, annotations, out_dir, report_path=stage.report, secret=stage.secret)


@app.command()
@clean_errors
def evaluate(
    release_dir: Annotated[Path, typer.Argument(help="A release folder (data/*.parquet).")],
    out: Annotated[Path, typer.Option("--out", help="Where metrics.json, leaderboard.md, plots/ and per-model "
                                      "responses go.")] = Path("reports/eval"),
    base_url: Annotated[str | None, typer.Option("--base-url", help="OpenAI-compatible endpoint (adds one model "
                                                 "to those in evaluate.models).")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Model name at --base-url.")] = None,
    images: Annotated[Path | None, typer.Option("--images", help="Images rebuilt by `curate release rebuild`, for "
                                                "reference-only items.")] = None,
    params: ParamsOpt = Path("params.yaml"),
) -> None:
    """Score vision-language models on a release: MCQ accuracy, pass@k, judge, BERTScore, error taxonomy."""
    from curation.evaluate.run import evaluate as run_eval
    from curation.params import ModelSpec, load_params

    p = load_params(params).evaluate
    if images is not None:
        p.rebuilt_images = str(images)
    models = list(p.models)
    if base_url or model:
        if not (base_url and model):
            raise typer.BadParameter("--base-url and --model go together")
        models.append(ModelSpec(name=model.replace("/", "_"), model=model, base_url=base_url))
    from curation.evaluate.run import release_is_empty

    if not models or release_is_empty(release_dir):
        from curation.evaluate.run import write_skipped

        reason = ("the release has no items" if release_is_empty(release_dir) else
                  "no model configured (give --base-url and --model, or evaluate.models in params.yaml)")
        write_skipped(out, reason)
        typer.echo(f"evaluate: skipped: {reason}")
        return
    with writer(out):
        metrics = run_eval(p, release_dir, out, models)
    for name, m in metrics.items():
        typer.echo(f"evaluate {name}: MCQ accuracy {m['mcq_accuracy']}, pass@1 {m['pass_at_1']}, "
                   f"pass@k {m['pass_at_k']}, {m['overall']['n_scored']} items -> {out}")


@app.command("calibrate-judge")
@clean_errors
def calibrate_judge(
    judge_scores: Annotated[Path, typer.Argument(help="A model's scores.jsonl from curate evaluate.")],
    clinician_scores: Annotated[Path, typer.Argument(help="CSV or JSONL: item_id, sample, score (0-1), correct.")],
    out: Annotated[Path | None, typer.Option("--out", help="Also write the result as JSON here.")] = None,
) -> None:
    """Agreement and correlation between the LLM judge and clinicians' scores of the same answers."""
    from curation.evaluate.calibrate import calibrate, dumps
    from curation.records import write_text

    result = calibrate(judge_scores, clinician_scores)
    if out:
        write_text(out, dumps(result) + "\n")
    typer.echo(dumps(result))


@review_app.command("push")
@clean_errors
def review_push(
    items: Annotated[Path | None, typer.Argument(help="items.jsonl to review (default: review.items).")] = None,
    adjudication: Annotated[bool, typer.Option("--adjudication", help="Push an adjudication queue to the "
                                               "adjudication project (items from adjudication_queue.jsonl).")] = False,
    params: ParamsOpt = Path("params.yaml"),
) -> None:
    """Create or update the Label Studio project and its tasks (idempotent: tasks are keyed by item id)."""
    from curation.review.labelstudio import load_items, push

    p = _section(params, "review")
    counts = push(p, load_items(items or Path(p.items)), adjudication=adjudication)
    typer.echo("review push: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


@review_app.command("pull")
@clean_errors
def review_pull(
    out: Annotated[Path | None, typer.Argument(help="Snapshot to write (default: review.annotations).")] = None,
    params: ParamsOpt = Path("params.yaml"),
) -> None:
    """Export all annotations into the pinned snapshot that `dvc repro` merges (commit it, or track it with DVC)."""
    from curation.review.labelstudio import pull

    p = _section(params, "review")
    target = out or Path(p.annotations)
    counts = pull(p, target)
    typer.echo(f"review pull: {counts.get('tasks', 0)} tasks, {counts.get('annotations', 0)} annotations -> {target}")


@review_app.command("status")
@clean_errors
def review_status(
    params: ParamsOpt = Path("params.yaml"),
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Review progress per reviewer and per task type / dimension."""
    from curation.review.labelstudio import status

    st = status(_section(params, "review"), secret=_secret(params))
    if as_json:
        typer.echo(json.dumps(st, indent=2))
        return
    typer.echo(f"{st['project']}: {st['reviewed']}/{st['tasks']} tasks reviewed")
    ag, ev = st["agreement"], st["evidence_agreement"]
    typer.echo(f"  verdict agreement: {ag['doubly_reviewed']} doubly reviewed, kappa {ag['cohen_kappa_verdict']}, "
               f"alpha {ag['krippendorff_alpha_verdict']}; evidence visible: kappa "
               f"{ag['cohen_kappa_evidence_visible']}")
    typer.echo(f"  evidence agreement: {ev['pairs']} pairs of marks, same slice {ev['same_slice_rate']}, "
               f"rectangle IoU {ev['rectangle_iou']} over {ev['rectangle_pairs']} same-slice rectangle pairs")
    for who, n in st["per_reviewer"].items():
        typer.echo(f"  {who}: {n} annotations")
    for dim, c in st["per_dimension"].items():
        typer.echo(f"  {dim:<40} {c['reviewed']:>5}/{c['total']}")


@review_app.command("serve")
@clean_errors
def review_serve(
    port: Annotated[int, typer.Option("--port", help="Port on 127.0.0.1.")] = 8080,
    data_dir: Annotated[Path, typer.Option("--data-dir", help="Label Studio's data (and SQLite database).")] = Path(
        ".curation/labelstudio"),
    params: ParamsOpt = Path("params.yaml"),
) -> None:
    """Run the Label Studio review server with review.database (SQLite here, or PostgreSQL for a team)."""
    from curation.errors import ServiceError
    from curation.testing.labelstudio import serve

    def ready(server: Any, fresh: bool) -> None:
        typer.echo(f"Label Studio at {server.url} ({p.database.engine}); Ctrl-C stops it")
        if fresh:
            typer.echo(f"  admin {server.username}, password {server.password}; for push/pull/status: "
                       f"LABEL_STUDIO_URL={server.url} LABEL_STUDIO_API_KEY={server.token}")

    p = _section(params, "review")
    try:
        serve(p, data_dir, port, on_ready=ready)
    except (ValueError, OSError, RuntimeError, TimeoutError) as exc:
        raise ServiceError(str(exc)) from None


@stage_command(release_app, "build", footer=lambda r: f"manifest sha256: {r.metrics['manifest_sha256']}")
def release_build(
    stage: Stage,
    in_dir: Annotated[Path, typer.Argument(help="Reviewed items.")],
    releases_dir: Annotated[Path, typer.Argument(help="Folder that holds NAME-VERSION/ releases.")],
    validity: Annotated[Path | None, typer.Option("--validity", help="The filter stage's validity report, for the "
                                                  "card's validity section.")] = None,
) -> Any:
    """Build NAME-VERSION/ (Parquet, images, card, manifest); refuses to overwrite a different version, and refuses
    templates above the validity threshold that were not blocked. Prints the manifest's SHA-256: publish it with
    the release, for `curate release verify --digest`."""
    from curation.release.build import run

    return run(stage.params.release, in_dir, releases_dir, report_path=stage.report, params_file=stage.params_file,
               validity=validity)


@release_app.command("verify")
@clean_errors
def release_verify(
    directory: ReleaseDirArg = None,
    params: ParamsOpt = Path("params.yaml"),
    digest: Annotated[str | None, typer.Option("--digest", help="The manifest SHA-256 published with the release "
                                               "(printed by `release build`, named in the card).")] = None,
) -> None:
    """Check checksums, manifest, canary and schema (and, with --digest, the manifest itself); refuses paths out of
    the release and symlinks; non-zero exit on any problem."""
    from curation.release.verify import manifest_digest, verify_release

    directory = directory or _configured_release(params)
    problems = verify_release(directory, digest)
    for p in problems:
        typer.echo(p)
    if problems:
        _err(f"{len(problems)} problem(s) in {directory}")
        raise typer.Exit(6)
    pinned = "matches the pinned digest" if digest else "not pinned: give --digest to check it"
    typer.echo(f"{directory}: verified (manifest sha256 {manifest_digest(directory)}, {pinned})")


@release_app.command("show")
@clean_errors
def release_show(
    directory: ReleaseDirArg = None,
    params: ParamsOpt = Path("params.yaml"),
) -> None:
    """Print a release's location, item counts and review status from its manifest."""
    from curation.records import read_json

    directory = directory or _configured_release(params)
    m = read_json(directory / "manifest.json")
    typer.echo(f"{directory}: {m['name']} {m['version']}")
    for key in ("split", "task_type", "source", "review_status"):
        typer.echo(f"  {key}: " + ", ".join(f"{k}={v}" for k, v in m["counts"].get(key, {}).items()))
    typer.echo(f"  expert-reviewed: {m['reviewed_items']}, not reviewed: {m['unreviewed_items']}")


def _configured_release(params: Path) -> Path:
    rel = _section(params, "release")
    return Path("data/releases") / f"{rel.name}-{rel.version}"


@stage_command(release_app, "rebuild", workers=True)
def release_rebuild(
    stage: Stage,
    release_dir: Annotated[Path, typer.Argument(help="A release folder with reference-only items.")],
    out: Annotated[Path, typer.Argument(help="Where images/ and rebuild.json go.")],
    raw: Annotated[list[str], typer.Option("--raw", help="SOURCE=PATH of your own copy, e.g. adni=/data/ADNI; "
                                           "repeat per source.")],
) -> Any:
    """Rebuild the images of reference-only items from your own copy of ADNI / OASIS (matched by SHA-256)."""
    from curation.release.rebuild import run

    sources = {}
    for spec in raw:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise typer.BadParameter(f"--raw {spec!r}: expected SOURCE=PATH")
        sources[name] = Path(path)
    with writer(out):
        return run(stage.params, release_dir, sources, out, workers=stage.workers, report_path=stage.report,
                   secret=stage.secret)


@release_app.command("diff")
@clean_errors
def release_diff(
    a: Annotated[Path, typer.Argument(help="The older release folder.")],
    b: Annotated[Path, typer.Argument(help="The newer release folder.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the full diff as JSON.")] = False,
) -> None:
    """Items added, removed and changed between two releases, with counts per task type and dimension."""
    from curation.release.diff import diff

    d = diff(a, b)
    if as_json:
        typer.echo(json.dumps(d, indent=2))
        return
    c = d["counts"]
    typer.echo(f"{a} -> {b}: {c['added']} added, {c['removed']} removed, {c['changed']} changed, "
               f"{c['unchanged']} unchanged")
    for kind in ("added", "removed", "changed"):
        for dim, n in d["per_dimension"][kind].items():
            typer.echo(f"  {kind:<8} {dim:<40} {n}")


@release_app.command("export")
@clean_errors
def release_export(
    directory: Annotated[Path, typer.Argument(help="A release folder.")],
    out: Annotated[Path, typer.Argument(help="File to write.")],
    fmt: Annotated[str, typer.Option("--format", help="neural-medbench")] = "neural-medbench",
) -> None:
    """Write a release in another benchmark's layout (Neural-MedBench JSON: cases, text, images, questions)."""
    from curation.errors import ParamsError
    from curation.release.diff import export_neural_medbench

    if fmt != "neural-medbench":
        raise ParamsError(f"unknown export format {fmt!r} (known: neural-medbench)")
    n = export_neural_medbench(directory, out)
    typer.echo(f"release export: {n} cases -> {out}")


@schema_app.command("export")
@clean_errors
def schema_export(out_dir: Annotated[Path, typer.Argument(help="Folder for one JSON Schema per model.")]) -> None:
    """Write the JSON Schema of every record type."""
    from curation.records import write_text
    from curation.schema import EXPORTED_MODELS

    for name, model in EXPORTED_MODELS.items():
        schema = json.dumps(model.model_json_schema(), indent=2, sort_keys=True)
        write_text(out_dir / f"{name}.schema.json", schema + "\n")
    typer.echo(f"{out_dir}: {len(EXPORTED_MODELS)} schemas")


@app.command("demo-data")
@clean_errors
def demo_data(out_dir: Annotated[Path, typer.Argument(help="Raw folder to fill, e.g. data/raw.")]) -> None:
    """Write the deterministic synthetic demo corpus (five sources, real layouts, fake PHI)."""
    from curation.demo.corpus import write_demo_corpus

    with writer(out_dir):
        counts = write_demo_corpus(out_dir)
    typer.echo(", ".join(f"{k}: {v} files" for k, v in counts.items()))


def main() -> None:  # pragma: no cover
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    sys.exit(app())


if __name__ == "__main__":  # pragma: no cover
    main()
