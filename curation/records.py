"""Atomic, streaming record I/O, content hashes and pseudonymous ids."""

from __future__ import annotations

import contextlib
import errno
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

from curation.errors import BusyError, ParamsError, RecordError, ResourceError, validation_message

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


# ---------------------------------------------------------------- resource errors
# errno values that say the machine, not the input, failed a write
RESOURCE_ERRNOS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only filesystem",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EFBIG: "file too large for the filesystem",
}


def resource_error(exc: BaseException, path: object | None = None) -> ResourceError | None:
    """The :class:`ResourceError` an ``OSError`` met while writing stands for (None: not a resource fault)."""
    what = RESOURCE_ERRNOS.get(getattr(exc, "errno", None) or -1) if isinstance(exc, OSError) else None
    if what is None:
        return None
    where = path if path is not None else getattr(exc, "filename", None)
    return ResourceError(f"cannot write ({what}); not replaced, as it was", printable_path(where) if where is not None
                         else None, what)


def printable_path(path: object) -> str:
    return os.fsencode(str(path)).decode("utf-8", errors="backslashreplace")


@contextlib.contextmanager
def writing(path: object | None = None) -> Iterator[None]:
    """Turn a resource fault (``OSError`` ENOSPC, EROFS, EACCES...) raised inside into a :class:`ResourceError`:
    the write helpers here and code that writes through other libraries (nibabel, PIL) wrap their writes in it."""
    try:
        yield
    except OSError as exc:
        err = resource_error(exc, path)
        if err is None:
            raise
        raise err from None


def raise_if_resource(exc: BaseException, path: object | None = None) -> None:
    """For a per-input ``except Exception`` around a write: re-raise a resource fault as a :class:`ResourceError`,
    so it stops the run instead of quarantining the input."""
    err = resource_error(exc, path)
    if err is not None:
        raise err from None


# ---------------------------------------------------------------- one writer per output
_HELD: dict[str, list[int]] = {}  # lock file -> [fd, depth] held by this process


def lock_path(dst: str | os.PathLike[str]) -> Path:
    """The lock beside an output (``.<name>.lock``): outside the folder, which is swapped whole."""
    dst = Path(os.path.abspath(dst))
    return dst.with_name(f".{dst.name}.lock")


@contextlib.contextmanager
def output_lock(dst: str | os.PathLike[str]) -> Iterator[None]:
    """Hold the one-writer lock of the output ``dst`` (a folder or a file) while the body runs.

    A second writer, in this or another process (on this host, or another sharing the filesystem), is refused at
    once with a :class:`BusyError` naming the holder. The lock is a ``flock`` on ``.<name>.lock``, which the kernel
    releases when its holder dies, however it dies: a lock file left by a killed run is stale and taken over by the
    next. Re-entrant within one process (the CLI and the stage it calls may both lock one output)."""
    lock = lock_path(dst)
    key = str(lock)
    held = _HELD.get(key)
    if held is not None:
        held[1] += 1
        try:
            yield
        finally:
            held[1] -= 1
        return
    with writing(lock.parent):
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = _acquire(lock, Path(dst))
    _HELD[key] = [fd, 1]
    try:
        yield
    finally:
        del _HELD[key]
        # unlinked while still locked: a run that opened this file meanwhile finds it gone once it gets the lock,
        # and tries again on the new file
        with contextlib.suppress(OSError):
            os.unlink(lock)
        os.close(fd)


def _acquire(lock: Path, dst: Path) -> int:
    import fcntl

    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise BusyError(f"another run is writing here ({holder}); wait for it to finish, or stop it",
                            printable_path(dst)) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            current = os.stat(lock)
            mine = os.fstat(fd)
            same = (current.st_ino, current.st_dev) == (mine.st_ino, mine.st_dev)
        except FileNotFoundError:
            same = False
        if not same:  # its holder finished and removed it between our open and our lock
            os.close(fd)
            continue
        try:
            _write_holder(fd)
        except BaseException:
            os.close(fd)
            raise
        return fd


def _write_holder(fd: int) -> None:
    import socket
    import sys
    import time

    prog = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    prog = "curate" if prog == "__main__.py" else prog  # `python -m curation.cli`
    command = " ".join([prog, *sys.argv[1:]])
    info = {"pid": os.getpid(), "host": socket.gethostname(), "command": command[:200],
            "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    data = (json.dumps(info, ensure_ascii=False) + "\n").encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


def _holder(fd: int) -> str:
    """Who holds a lock, from what its holder wrote in the file (it may not have written it yet)."""
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode("utf-8", errors="replace") or "{}")
        return f"pid {info['pid']} on {info['host']}, `{info['command']}`, since {info['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "holder not known yet"


# ---------------------------------------------------------------- atomic writes
@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", durable: bool = True) -> Iterator[IO[Any]]:
    """Write to a temp file beside ``path``, fsync (unless ``durable`` is False), then rename over it.

    A reader never sees a half-written file: either the old content or the new. A resource fault (disk full,
    read-only, permission) is raised as a :class:`ResourceError` naming ``path``.
    """
    path = Path(path)
    with writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    binary = "b" in mode
    try:
        with writing(path):
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
    with writing(dst):
        dst.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent)
    os.close(fd)
    try:
        with writing(dst):
            shutil.copyfile(src, tmp)
            os.replace(tmp, dst)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def staged_dir(dst: str | os.PathLike[str]) -> Iterator[Path]:
    """Build a whole output folder beside ``dst`` and swap it in only on success.

    Stages rewrite their outputs completely; a killed stage leaves the previous output (or none) at ``dst``, never
    a mix. The folder's writer lock (:func:`output_lock`) is held throughout, so a second run into ``dst`` is
    refused before it touches anything, and leftovers are removed only when no other run can own them.
    """
    dst = Path(dst)
    with output_lock(dst):
        with writing(dst):
            dst.parent.mkdir(parents=True, exist_ok=True)
            # leftovers of a killed earlier run (never visible at dst) are removed first
            for stale in [*dst.parent.glob(f".{dst.name}.*.building"), *dst.parent.glob(f".{dst.name}.*.old")]:
                shutil.rmtree(stale, ignore_errors=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", suffix=".building", dir=dst.parent))
        try:
            yield tmp
            with writing(dst):
                old = None
                if dst.exists():
                    old = dst.with_name(f".{dst.name}.{secrets.token_hex(4)}.old")
                    os.replace(dst, old)
                try:
                    os.replace(tmp, dst)
                except BaseException:
                    if old is not None:
                        os.replace(old, dst)  # the previous output back where it was
                    raise
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        except ResourceError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            at = f" at {_inside(exc.path, tmp)}" if exc.path else ""
            raise ResourceError(f"cannot write ({exc.what}{at}); the previous output is as it was", dst,
                                exc.what) from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise


def _inside(path: str, folder: Path) -> str:
    """``path`` relative to a staging ``folder`` when inside it (the name the file would have had in the output)."""
    try:
        return Path(os.path.abspath(path)).relative_to(os.path.abspath(folder)).as_posix()
    except ValueError:
        return path


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
        return path.read_text(encoding="utf-8").strip().encode()
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
