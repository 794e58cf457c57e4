"""``curate schema``: data model utilities."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from curation.cli.common import clean_errors

app = typer.Typer(help="Data model utilities.", no_args_is_help=True)


@app.command("export")
@clean_errors
def schema_export(out_dir: Annotated[Path, typer.Argument(help="Folder for one JSON Schema per model.")]) -> None:
    """Write the JSON Schema of every record type."""
    from curation.records import write_text
    from curation.schema import EXPORTED_MODELS

    for name, model in EXPORTED_MODELS.items():
        schema = json.dumps(model.model_json_schema(), indent=2, sort_keys=True)
        write_text(out_dir / f"{name}.schema.json", schema + "\n")
    typer.echo(f"{out_dir}: {len(EXPORTED_MODELS)} schemas")

