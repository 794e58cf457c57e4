"""``curate release``: build (the pipeline stage), verify, show, rebuild, diff and export frozen releases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from curation.cli.common import ParamsOpt, Stage, clean_errors, echo_error, params_section, stage_command, writer

app = typer.Typer(help="Build, verify, compare and export frozen releases.", no_args_is_help=True)
ReleaseDirArg = Annotated[Path | None, typer.Argument(help="A release folder (default: the one params.yaml names).")]


@stage_command(app, "build", footer=lambda r: f"manifest sha256: {r.metrics['manifest_sha256']}")
def release_build(
    stage: Stage,
    in_dir: Annotated[Path, typer.Argument(help="Reviewed items.")],
    releases_dir: Annotated[Path, typer.Argument(help="Folder that holds NAME-VERSION/ releases.")],
    validity: Annotated[Path | None, typer.Option("--validity", help="The filter stage's validity report, for the "
                                                  "card's validity section.")] = None,
    licence_filter: Annotated[list[str] | None, typer.Option(
        "--licence-filter", help="Release only items of these licence classes (commercial, non_commercial, "
        "reference_only, no_licence_stated; repeat or comma-separate): a subset NAME-CLASS-VERSION.")] = None,
) -> Any:
    """Build NAME-VERSION/ (Parquet, images, card, manifest); refuses to overwrite a different version, and refuses
    templates above the validity threshold that were not blocked. Prints the manifest's SHA-256: publish it with
    the release, for `curate release verify --digest`."""
    from curation.release.build import run

    if licence_filter:
        from curation.errors import ParamsError
        from curation.release.terms import CLASSES

        chosen = sorted({c.strip() for spec in licence_filter for c in spec.split(",") if c.strip()})
        unknown = [c for c in chosen if c not in CLASSES]
        if unknown:
            raise ParamsError(f"--licence-filter: unknown licence class(es) {', '.join(unknown)} "
                              f"(known: {', '.join(CLASSES)})")
        stage.params.release.licence_filter = chosen  # type: ignore[assignment]
    return run(stage.params.release, in_dir, releases_dir, report_path=stage.report, params_file=stage.params_file,
               validity=validity)


@app.command("verify")
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
        echo_error(f"{len(problems)} problem(s) in {directory}")
        raise typer.Exit(6)
    pinned = "matches the pinned digest" if digest else "not pinned: give --digest to check it"
    typer.echo(f"{directory}: verified (manifest sha256 {manifest_digest(directory)}, {pinned})")


@app.command("show")
@clean_errors
def release_show(
    directory: ReleaseDirArg = None,
    params: ParamsOpt = Path("params.yaml"),
) -> None:
    """Print a release's location, item counts and review status from its manifest."""
    from curation.release.read import summary_lines

    for line in summary_lines(directory or _configured_release(params)):
        typer.echo(line)


def _configured_release(params: Path) -> Path:
    rel = params_section(params, "release")
    return Path("data/releases") / f"{rel.name}-{rel.version}"


@stage_command(app, "rebuild", workers=True)
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


@app.command("diff")
@clean_errors
def release_diff(
    a: Annotated[Path, typer.Argument(help="The older release folder.")],
    b: Annotated[Path, typer.Argument(help="The newer release folder.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the full diff as JSON.")] = False,
) -> None:
    """Items added, removed and changed between two releases, with counts per task type and dimension."""
    from curation.release.diff import diff, diff_lines

    d = diff(a, b)
    if as_json:
        typer.echo(json.dumps(d, indent=2))
        return
    for line in diff_lines(d):
        typer.echo(line)


@app.command("export")
@clean_errors
def release_export(
    directory: Annotated[Path, typer.Argument(help="A release folder.")],
    out: Annotated[Path, typer.Argument(help="File (neural-medbench) or folder (the harnesses) to write.")],
    fmt: Annotated[str, typer.Option("--format", help="neural-medbench, inspect, lmms-eval or vlmevalkit")
                   ] = "neural-medbench",
    images: Annotated[Path | None, typer.Option("--images", help="Images rebuilt by `curate release rebuild`, so "
                                                "reference-only items go out with the pixels you hold.")] = None,
    params: ParamsOpt = Path("params.yaml"),
) -> None:
    """Write a release in another benchmark's layout (Neural-MedBench JSON) or as a task folder an evaluation harness
    loads (Inspect, lmms-eval, VLMEvalKit): images, MCQ and open items with the prompts `curate evaluate` sends, the
    judge prompt, per-dimension categories and a _no_image twin of every task."""
    from curation.release.export import ExportOptions, export, export_format

    export_format(fmt)  # an unknown format is refused before params are read
    ev = params_section(params, "evaluate")
    opts = ExportOptions(prompts_dir=Path(ev.prompts_dir), judge_weights=dict(ev.judge.weights),
                         judge_pass_threshold=ev.judge.pass_threshold, images=images)
    typer.echo(f"release export ({fmt}): {export(directory, out, fmt, opts)}")
