"""The pipeline stages that are top-level commands: ingest, normalize, extract, generate, filter (each parses its
arguments, calls the stage's run() and prints its report's summary)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from curation.cli.common import Stage, stage_command
from curation.schema import SourceName

app = typer.Typer()  # its commands join the root app at the top level (added without a name)


@stage_command(app, workers=True, scheduler=True)
def ingest(
    stage: Stage,
    source: Annotated[str, typer.Argument(help=" | ".join(SourceName))],
    raw_dir: Annotated[Path, typer.Argument(help="The source's download folder.")],
    out_dir: Annotated[Path, typer.Argument(help="Where cases.jsonl, quarantine.jsonl and files/ go.")],
) -> Any:
    """Turn one source's download tree into Case records (bad inputs are quarantined with a reason)."""
    from curation.ingest import run

    return run(stage.params.ingest, source, raw_dir, out_dir, workers=stage.workers, scheduler=stage.scheduler,
               report_path=stage.report, secret=stage.secret)


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


