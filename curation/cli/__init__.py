"""``curate``: one subcommand per pipeline stage; each parses, calls run(), reports in one line.

The root app gathers one module per command group: the top-level stages (``stages``), ``evaluate`` and
``calibrate-judge`` (``evaluate``), ``demo-data`` (``demo_data``), and the ``deid``, ``imaging``, ``review``,
``release`` and ``schema`` groups; what they share is in ``common``. Added here in the order ``curate --help``
lists them.
"""

from __future__ import annotations

import os
import sys

import typer

from curation.cli import deid, demo_data, evaluate, imaging, release, review, schema, stages

app = typer.Typer(help="Build reviewed, versioned, frozen multimodal neurology reasoning benchmarks.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
app.add_typer(stages.app)  # added without a name: their commands are top-level ones
app.add_typer(evaluate.app)
app.add_typer(demo_data.app)
app.add_typer(deid.app, name="deid")
app.add_typer(imaging.app, name="imaging")
app.add_typer(review.app, name="review")
app.add_typer(release.app, name="release")
app.add_typer(schema.app, name="schema")


def main() -> None:  # pragma: no cover
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    sys.exit(app())
