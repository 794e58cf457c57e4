"""``curate deid``: the de-identification stage and its standalone commands (dicom, text, deface, verify)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from curation.cli.common import (
    ParamsOpt,
    SchedulerOpt,
    Stage,
    WorkersOpt,
    clean_errors,
    echo_error,
    echo_summary,
    params_section,
    project_secret_for,
    stage_command,
    writer,
)

app = typer.Typer(help="De-identify DICOM, text and volumes; verify outputs.", no_args_is_help=True)


@stage_command(app, "run", workers=True, scheduler=True)
def deid_run(
    stage: Stage,
    in_dir: Annotated[Path, typer.Argument(help="Folder of ingested sources (each with cases.jsonl).")],
    out_dir: Annotated[Path, typer.Argument(help="De-identified cases, files, audit.jsonl, quarantine.jsonl.")],
) -> Any:
    """Pipeline stage: de-identify every ingested case (DICOM, volumes, sidecars, figures, text)."""
    from curation.deid.stage import run

    return run(stage.params.deidentify, in_dir, out_dir, workers=stage.workers, scheduler=stage.scheduler,
               report_path=stage.report, secret=stage.secret)


@app.command("dicom")
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

    p, secret = params_section(params, "deidentify"), project_secret_for(params)
    _refuse_foreign(out_dir, "audit.jsonl")
    # built beside OUT_DIR and swapped in whole: a failed run leaves the previous output as it was, never a mix
    with staged_dir(out_dir) as staging:
        report = deid_dicom_dir(p.dicom, in_dir, staging, workers=workers, scheduler=scheduler, secret=secret,
                                pixels=p.pixels, text=p.text)
    echo_summary(report)


def _refuse_foreign(out: Path, marker: str) -> None:
    """A standalone command replaces its output folder whole; a folder of other files (no ``marker`` of an earlier
    run) is refused rather than replaced."""
    from curation.errors import InputError

    if out.is_dir() and any(out.iterdir()) and not (out / marker).exists():
        raise InputError(f"not an earlier output of this command (no {marker}) and not empty; refusing to replace "
                         "it: name a new or empty folder", out)


@app.command("text")
@clean_errors
def deid_text(
    src: Annotated[Path, typer.Argument(help="A .txt file or a folder of them.")],
    out: Annotated[Path, typer.Argument(help="Output file or folder (mirrors SRC).")],
    params: ParamsOpt = Path("params.yaml"),
) -> None:
    """Replace PHI in clinical text (names, dates, ids, contacts, addresses, ages over 89)."""
    from curation.deid.stage import deid_text_path

    with writer(out):
        echo_summary(deid_text_path(params_section(params, "deidentify").text, src, out,
                                    secret=project_secret_for(params)))


@app.command("deface")
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
        echo_error(f"{src}: no such file")
        raise typer.Exit(3)
    with writer(out):
        typer.echo(json.dumps(deface_file(src, out, brain_mask=brain_mask), sort_keys=True))


@app.command("verify")
@clean_errors
def deid_verify(
    directory: Annotated[Path, typer.Argument(help="Folder of outputs to scan.")],
    against: Annotated[Path | None, typer.Option(
        help="Folder of the inputs: compare each DICOM output with its input (dates, UIDs, names, ids that "
             "survived unchanged; identity strings of the input anywhere in the output).")] = None,
    pixels: Annotated[bool, typer.Option(
        "--pixels/--no-pixels",
        help="Read every PNG/JPEG by OCR (Tesseract, original resolution) and report identifying text left in "
             "its pixels (about 3 s an image).")] = True,
) -> None:
    """Scan outputs for residual identifiers; exits non-zero listing each finding."""
    from curation.deid.compare import verify_against
    from curation.deid.verify import verify_dir

    if not directory.is_dir():
        echo_error(f"{directory}: not a folder")
        raise typer.Exit(3)
    if against is not None:
        if not against.is_dir():
            echo_error(f"{against}: not a folder")
            raise typer.Exit(3)
        result = verify_against(directory, against, project_secret_for(Path("params.yaml")))  # the project here
        for f in result.findings or []:
            typer.echo(f.line())
        if result.findings:
            echo_error(f"{len(result.findings)} finding(s) in {directory} against {against} "
                 f"({result.checked} input values checked)")
            raise typer.Exit(6)
        typer.echo(f"{directory}: nothing of {against} survived ({result.checked} input values checked)")
        return
    findings = verify_dir(directory, pixels=pixels)
    for f in findings:
        typer.echo(f.line())
    if findings:
        echo_error(f"{len(findings)} residual identifier finding(s) in {directory}")
        raise typer.Exit(6)
    typer.echo(f"{directory}: no residual identifiers found")


