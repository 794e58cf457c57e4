"""The release's MLCommons Croissant description (``croissant.json``), built and checked with ``mlcroissant``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

from curation.params import ReleaseParams
from curation.release.rai import rai_fields
from curation.schema import ReleaseRow


def _fields() -> list[tuple[str, str, str, bool]]:
    """(column, description, data type, repeated) for every ``ReleaseRow`` column but the embedded images, which
    the image file set describes."""
    out = []
    for name in ReleaseRow.columns():
        if name == "images":
            continue
        f = ReleaseRow.model_fields[name]
        repeated = get_args(f.annotation) == (str,)
        out.append((name, f.description or "", "integer" if int in (f.annotation, *get_args(f.annotation)) else "text",
                    repeated))
    return out


def build(root: Path, params: ReleaseParams, name: str, description: str, licenses: list[str]) -> dict[str, Any]:
    import mlcroissant as mlc

    parquet = mlc.FileSet(id="parquet-files", name="parquet-files", description="Items, one Parquet file per split.",
                          encoding_formats=["application/x-parquet"], includes=["data/*.parquet"])
    images = mlc.FileSet(id="image-files", name="image-files", description="The item images as PNG files.",
                         encoding_formats=["image/png"], includes=["images/*.png"])

    def field(col: str, desc: str, dtype: Any, repeated: bool = False) -> Any:
        return mlc.Field(id=f"items/{col}", name=col, description=desc, data_types=[dtype], repeated=repeated,
                         source=mlc.Source(file_set="parquet-files", extract=mlc.Extract(column=col)))

    types = {"text": mlc.DataType.TEXT, "integer": mlc.DataType.INTEGER}
    fields = [field(c, d, types[t], repeated=r) for c, d, t, r in _fields()]
    items = mlc.RecordSet(id="items", name="items", description="Benchmark items.", fields=fields)
    key = f"{params.name.replace('-', '_')}_{params.version.replace('.', '_')}"
    cite = params.citation or (f"@misc{{{key},\n"
                                f"  title = {{{params.name} {params.version}: "
                                f"a multimodal neurology reasoning benchmark}},\n"
                                f"  note = {{version {params.version}}}\n}}")
    extra: dict[str, Any] = {"url": params.homepage} if params.homepage else {}
    meta = mlc.Metadata(
        name=name, description=description, version=params.version, license=licenses or ["other"],
        cite_as=cite, distribution=[parquet, images], record_sets=[items],
        keywords=["medical", "neurology", "MRI", "multimodal", "benchmark", "visual question answering"], **extra,
        **rai_fields(),
    )
    return meta.to_json()


def write(root: Path, params: ReleaseParams, name: str, description: str, licenses: list[str]) -> Path:
    from curation.records import write_text

    path = root / "croissant.json"
    write_text(path, json.dumps(build(root, params, name, description, licenses), indent=2, sort_keys=True,
                                default=str) + "\n")
    return path
