"""``curate evaluate`` and ``curate calibrate-judge``: score models on a release; check the judge against
clinicians."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from curation.cli.common import ParamsOpt, clean_errors

app = typer.Typer()  # its commands join the root app at the top level (added without a name)


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
    no_image: Annotated[bool, typer.Option("--no-image", help="Ask every item without its images (the blind "
                                           "baseline, as the harness exports' _no_image tasks).")] = False,
    params: ParamsOpt = Path("params.yaml"),
) -> None:
    """Score vision-language models on a release: MCQ accuracy, pass@k, judge, BERTScore, error taxonomy."""
    from curation.evaluate.run import evaluate_release
    from curation.params import load_params

    p = load_params(params).evaluate
    p.no_image = p.no_image or no_image
    if (base_url or model) and not (base_url and model):
        raise typer.BadParameter("--base-url and --model go together")
    for line in evaluate_release(p, release_dir, out, images=images, base_url=base_url, model=model):
        typer.echo(line)


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

