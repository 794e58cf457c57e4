"""``curate demo-data``: write the synthetic demo corpus."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from curation.cli.common import clean_errors, writer

app = typer.Typer()  # its command joins the root app at the top level (added without a name)


@app.command("demo-data")
@clean_errors
def demo_data(out_dir: Annotated[Path, typer.Argument(help="Raw folder to fill, e.g. data/raw.")]) -> None:
    """Write the deterministic synthetic demo corpus (five sources, real layouts, fake PHI)."""
    from curation.demo.corpus import write_demo_corpus

    with writer(out_dir):
        counts = write_demo_corpus(out_dir)
    typer.echo(", ".join(f"{k}: {v} files" for k, v in counts.items()))

