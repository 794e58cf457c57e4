"""``curate review``: expert review in Label Studio (merge is the pipeline stage; push, pull, status, serve talk to
the server)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from curation.cli.common import ParamsOpt, Stage, clean_errors, params_section, project_secret_for, stage_command

app = typer.Typer(help="Expert review in Label Studio: push, pull, status, merge.", no_args_is_help=True)


@stage_command(app, "merge")
def review_merge(
    stage: Stage,
    in_dir: Annotated[Path, typer.Argument(help="Kept items.")],
    annotations: Annotated[Path, typer.Argument(help="Pinned Label Studio JSON export.")],
    out_dir: Annotated[Path, typer.Argument(help="Reviewed items.")],
) -> Any:
    """Apply reviewers' verdicts and edits; compute agreement."""
    from curation.review.merge import run

    return run(stage.params.review, in_dir, annotations, out_dir, report_path=stage.report, secret=stage.secret)


@app.command("push")
@clean_errors
def review_push(
    items: Annotated[Path | None, typer.Argument(help="items.jsonl to review (default: review.items).")] = None,
    adjudication: Annotated[bool, typer.Option("--adjudication", help="Push an adjudication queue to the "
                                               "adjudication project (items from adjudication_queue.jsonl).")] = False,
    params: ParamsOpt = Path("params.yaml"),
) -> None:
    """Create or update the Label Studio project and its tasks (idempotent: tasks are keyed by item id)."""
    from curation.review.labelstudio import load_items, push

    p = params_section(params, "review")
    counts = push(p, load_items(items or Path(p.items)), adjudication=adjudication)
    typer.echo("review push: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


@app.command("pull")
@clean_errors
def review_pull(
    out: Annotated[Path | None, typer.Argument(help="Snapshot to write (default: review.annotations).")] = None,
    params: ParamsOpt = Path("params.yaml"),
) -> None:
    """Export all annotations into the pinned snapshot that `dvc repro` merges (commit it, or track it with DVC)."""
    from curation.review.labelstudio import pull

    p = params_section(params, "review")
    target = out or Path(p.annotations)
    counts = pull(p, target)
    typer.echo(f"review pull: {counts.get('tasks', 0)} tasks, {counts.get('annotations', 0)} annotations -> {target}")


@app.command("status")
@clean_errors
def review_status(
    params: ParamsOpt = Path("params.yaml"),
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Review progress per reviewer and per task type / dimension."""
    from curation.review.labelstudio import status, status_lines

    st = status(params_section(params, "review"), secret=project_secret_for(params))
    if as_json:
        typer.echo(json.dumps(st, indent=2))
        return
    for line in status_lines(st):
        typer.echo(line)


@app.command("serve")
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

    p = params_section(params, "review")
    try:
        serve(p, data_dir, port, on_ready=ready)
    except (ValueError, OSError, RuntimeError, TimeoutError) as exc:
        raise ServiceError(str(exc)) from None

