"""Reading a release: its Parquet files (one per split) as ``ReleaseRow``s, the ``datasets`` features that
``release build`` writes them with, and its manifest's summary (``release show``). Every reader of a release (diff,
export, rebuild, evaluate) goes through here."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, get_args

from curation.errors import InputError
from curation.schema import ReleaseImage, ReleaseRow


def features() -> Any:
    """The ``datasets.Features`` of a release's Parquet files, derived from ``ReleaseRow`` (column order kept)."""
    from datasets import Features, Image, Sequence, Value

    def feature(name: str) -> Any:
        ann = ReleaseRow.model_fields[name].annotation
        if name == "images":
            return Sequence(Image())
        if ann is str:
            return Value("string")
        if int in (ann, *get_args(ann)):
            return Value("int32")
        if get_args(ann) == (str,):  # list[str]
            return Sequence(Value("string"))
        raise TypeError(f"ReleaseRow.{name}: no Parquet feature for {ann}")

    return Features({name: feature(name) for name in ReleaseRow.columns()})


def split_of(path: Path) -> str:
    """``data/<split>-00000-of-00001.parquet`` -> ``<split>``."""
    return Path(path).name.split("-")[0]


def parquet_files(release: Path, required: bool = True) -> list[Path]:
    """The release's Parquet files in split order; none is an error unless ``required`` is false."""
    files = sorted(Path(release, "data").glob("*.parquet"))
    if not files and required:
        raise InputError("no Parquet files under data/ (is this a release folder?)", release)
    return files


def row_columns(release: Path, columns: Sequence[str]) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Only ``columns`` of every row, with the file it is in (a reader that needs no image bytes reads no pixels)."""
    import pyarrow.parquet as pq

    for f in parquet_files(release):
        for row in pq.read_table(f, columns=list(columns)).to_pylist():
            yield f, row


def rows(release: Path, splits: Sequence[str] = ()) -> Iterator[ReleaseRow]:
    """Every row of the release (of ``splits`` when given), with its split and image bytes."""
    import pyarrow.parquet as pq

    for f in parquet_files(release):
        split = split_of(f)
        if splits and split not in splits:
            continue
        for r in pq.read_table(f).to_pylist():
            images = [ReleaseImage(path=i.get("path") or "", data=i.get("bytes")) for i in r.get("images") or [] if i]
            # a null text or list reads as empty, as every reader took it before; columns ReleaseRow lacks are left
            values = {c: (_EMPTY[c]() if r.get(c) is None and c in _EMPTY else r.get(c)) for c in ReleaseRow.columns()}
            yield ReleaseRow.model_validate({**values, "images": images, "split": split})


_EMPTY = {n: (str if f.annotation is str else list) for n, f in ReleaseRow.model_fields.items()
          if n != "split" and (f.annotation is str or get_args(f.annotation) == (str,))}


def summary_lines(release: Path) -> Iterator[str]:
    """``curate release show``: a release's location, name and version, item counts and review status, from its
    manifest (line by line, as each is read from it)."""
    from curation.jsonio import read_json

    m = read_json(release / "manifest.json")
    yield f"{release}: {m['name']} {m['version']}"
    for key in ("split", "task_type", "source", "review_status"):
        yield f"  {key}: " + ", ".join(f"{k}={v}" for k, v in m["counts"].get(key, {}).items())
    yield f"  expert-reviewed: {m['reviewed_items']}, not reviewed: {m['unreviewed_items']}"
