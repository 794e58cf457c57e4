"""Atomic, streaming record I/O, content hashes and pseudonymous ids."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

from pydantic import BaseModel, ValidationError

from curation.errors import ParamsError, RecordError, validation_message

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

SECRET_ENV = "CURATION_SECRET"
SECRET_FILE = Path(".curation/secret")  # under the project root


def relpath(path: str | os.PathLike[str]) -> str:
    """Paths in records are relative to the project root (the working directory of `dvc repro`)."""
    p = Path(os.path.abspath(path))
    try:
        return p.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return p.as_posix()


# ---------------------------------------------------------------- atomic writes
@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", durable: bool = True) -> Iterator[IO[Any]]:
    """Write to a temp file beside ``path``, fsync (unless ``durable`` is False), then rename over it.

    A reader never sees a half-written file: either the old content or the new.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    binary = "b" in mode
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as fh:
            yield fh
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    with atomic_open(path, "wb") as fh:
        fh.write(data)


def write_text(path: str | os.PathLike[str], text: str) -> None:
    with atomic_open(path, "w") as fh:
        fh.write(text)


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    write_text(path, json.dumps(to_jsonable(obj), indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def copy_file(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    dst = Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent)
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def staged_dir(dst: str | os.PathLike[str]) -> Iterator[Path]:
    """Build a whole output folder beside ``dst`` and swap it in only on success.

    Stages rewrite their outputs completely; a killed stage leaves the previous
    output (or none) at ``dst``, never a mix.
    """
    dst = Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    # leftovers of a killed earlier run (never visible at dst) are removed first
    for stale in [*dst.parent.glob(f".{dst.name}.*.building"), *dst.parent.glob(f".{dst.name}.*.old")]:
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", suffix=".building", dir=dst.parent))
    try:
        yield tmp
        old = None
        if dst.exists():
            old = dst.with_name(f".{dst.name}.{secrets.token_hex(4)}.old")
            os.replace(dst, old)
        os.replace(tmp, dst)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


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
            if not line.strip():
                continue
            if not line.endswith("\n"):
                raise RecordError(f"line {lineno}: truncated record (no newline at end)", path)
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise RecordError(f"line {lineno}: invalid JSON ({exc.msg})", path) from None
            if model is None:
                yield obj
                continue
            try:
                yield model.model_validate(obj)
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


# ---------------------------------------------------------------- hashes and ids
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


def project_secret(root: Path | None = None) -> bytes:
    """The key for pseudonymous ids, date shifts and UID remapping: ``CURATION_SECRET``, else the git-ignored
    ``<root>/.curation/secret`` (made once). The CLI resolves it from the project root (the folder of ``--params``)
    and passes it to the stages; without ``root`` only the environment is read, so library code never creates a
    file in whatever the working directory is.

    It is never written into any output; losing it only means ids change on the next run.
    """
    env = os.environ.get(SECRET_ENV)
    if env:
        return env.encode()
    if root is None:
        raise ParamsError(f"no project secret: set {SECRET_ENV}, or pass the secret from the project root "
                          f"(curate keeps one in <project>/{SECRET_FILE.as_posix()})")
    path = Path(root) / SECRET_FILE
    if path.exists():
        return path.read_text().strip().encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    gitignore = path.parent / ".gitignore"
    if not gitignore.exists():
        write_text(gitignore, "*\n")
    value = secrets.token_hex(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(value + "\n")
    return value.encode()


def keyed_hash(*parts: str, secret: bytes | None = None, length: int = 16) -> str:
    """HMAC-SHA256 of ``parts`` under ``secret`` (None: ``CURATION_SECRET``; stages pass the project's)."""
    key = project_secret() if secret is None else secret
    msg = "\x1f".join(parts).encode()
    return hmac.new(key, msg, hashlib.sha256).hexdigest()[:length]


def pseudonym(source: str, source_id: str, secret: bytes | None = None) -> str:
    """Stable pseudonymous case id: same source id and secret -> same id, across runs."""
    return f"{source.replace('-', '')[:6]}-{keyed_hash('case', source, source_id, secret=secret, length=12)}"
