"""What every ``curate`` command shares: the options every stage takes, one-line library errors, the output lock,
the params section, project root and secret, and ``stage_command`` that wires a stage's run() to a command."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from curation.errors import CurationError, ResourceError

F = TypeVar("F", bound=Callable[..., Any])

ParamsOpt = Annotated[Path, typer.Option("--params", help="params.yaml to read this stage's section from.")]
ReportOpt = Annotated[Path | None, typer.Option("--report", help="Write the stage report (JSON metrics) here.")]
WorkersOpt = Annotated[int, typer.Option("--workers", min=1, help="Local worker processes.")]
SchedulerOpt = Annotated[str | None, typer.Option("--scheduler", help="Dask scheduler address, e.g. tcp://host:8786.")]


def echo_error(message: str) -> None:
    """Print ``error: <message>`` on stderr."""
    typer.echo(f"error: {message}", err=True)


def clean_errors(fn: F) -> F:
    """Library errors become one line on stderr and a non-zero exit code, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (CurationError, ResourceError) as exc:
            echo_error(" ".join(str(exc).split()))
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            echo_error("interrupted")
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


def writer(out: Path) -> Any:
    """The one-writer lock of a standalone command's output (a file or a folder): a second run into it is refused
    at once, naming the holder (the stages lock theirs in ``staged_dir``)."""
    from curation.records import output_lock

    return output_lock(out)


def params_section(params: Path, name: str) -> Any:
    """The ``name`` section of the params.yaml at ``params``."""
    from curation.params import load_params

    return getattr(load_params(params), name)


def echo_summary(report: Any) -> None:
    """Print a stage report's summary."""
    typer.echo(report.summary())


def project_root(params: Path) -> Path:
    """The project a command works on: the folder of its params.yaml (where dvc runs the stages)."""
    return Path(params).resolve().parent


def project_secret_for(params: Path) -> bytes:
    """The project's secret (``CURATION_SECRET``, else ``<project>/.curation/secret``, made once)."""
    from curation.pseudonyms import project_secret

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
        return project_secret_for(self.params_file)


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
            echo_summary(result)
            if footer is not None:
                typer.echo(footer(result))

        command.__signature__ = sig.replace(parameters=[*own, *shared], return_annotation=None)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in (*own, *shared)}
        group.command(name)(clean_errors(command))
        return fn

    return register

