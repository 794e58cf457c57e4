"""JSON and JSONL records: streaming, atomic reads and writes, canonical JSON, content hashes, file digests and
batching."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from curation.errors import RecordError, validation_message
from curation.records import atomic_open, write_text

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


# ---------------------------------------------------------------- JSON / JSONL
def to_jsonable(obj: Any) -> Any:
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json", exclude_none=False)
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return obj.as_posix()
    return obj


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    write_text(path, json.dumps(to_jsonable(obj), indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def dumps_line(obj: Any) -> str:
    return json.dumps(to_jsonable(obj), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def batched(rows: Iterable[T], n: int) -> Iterator[list[T]]:
    """Lists of up to ``n`` consecutive rows (itertools.batched arrived only in Python 3.12)."""
    batch: list[T] = []
    for row in rows:
        batch.append(row)
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch


def write_jsonl(path: str | os.PathLike[str], rows: Iterable[Any]) -> int:
    """Stream rows to ``path`` atomically; returns the number written."""
    n = 0
    with atomic_open(path, "w") as fh:
        for row in rows:
            fh.write(dumps_line(row))
            fh.write("\n")
            n += 1
    return n


def read_jsonl(path: str | os.PathLike[str], model: type[M] | None = None) -> Iterator[Any]:
    """Yield one record a line; a malformed line is an error naming file and line."""
    path = Path(path)
    if not path.exists():
        raise RecordError("file not found", path)
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                yield _validated(_record(line, lineno, path), model, lineno, path)


def read_jsonl_ordered(path: str | os.PathLike[str], key: Callable[[Any], Any],
                       model: type[M] | None = None) -> Iterator[Any]:
    """``read_jsonl`` in the order of ``key`` (of each record as read, before validation; the file's order among
    equal keys), not the file's. The file is read twice, first for the keys and where each record starts, so that
    memory holds keys, not records."""
    path = Path(path)
    if not path.exists():
        raise RecordError("file not found", path)
    order = []
    with path.open("rb") as fh:
        end = 0
        for lineno, raw in enumerate(fh, 1):
            start, end = end, end + len(raw)
            if raw.strip():
                order.append((key(_record(raw.decode("utf-8"), lineno, path)), lineno, start))
        order.sort(key=lambda x: (x[0], x[1]))
        for _, lineno, start in order:
            fh.seek(start)
            yield _validated(json.loads(fh.readline()), model, lineno, path)


def _record(line: str, lineno: int, path: Path) -> Any:
    if not line.endswith("\n"):
        raise RecordError(f"line {lineno}: truncated record (no newline at end)", path)
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise RecordError(f"line {lineno}: invalid JSON ({exc.msg})", path) from None


def _validated(obj: Any, model: type[M] | None, lineno: int, path: Path) -> Any:
    if model is None:
        return obj
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        raise RecordError(f"line {lineno}: {validation_message(exc)}", path) from None


def read_json(path: str | os.PathLike[str]) -> Any:
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RecordError("file not found", path) from None
    except json.JSONDecodeError as exc:
        raise RecordError(f"invalid JSON at line {exc.lineno} ({exc.msg})", path) from None


# ---------------------------------------------------------------- content hashes
def canonical_json(obj: Any) -> bytes:
    return json.dumps(to_jsonable(obj), sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


def content_hash(obj: Any, length: int = 16) -> str:
    return hashlib.sha256(canonical_json(obj)).hexdigest()[:length]


def sha256_file(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
