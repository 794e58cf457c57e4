"""Atomic writes, one writer per output, staged output folders, file copies, resource errors and relpath.

JSON/JSONL I/O and content hashes are in :mod:`curation.jsonio`; the project secret and pseudonymous ids in
:mod:`curation.pseudonyms`."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from curation.errors import BusyError, ResourceError


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
    with writing(dst):  # a disk too full for the lock itself: the error names the output, as every other does
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
            # not left behind on a full disk: removed while still locked, as a finished run removes it
            with contextlib.suppress(OSError):
                os.unlink(lock)
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


def claim_lock(store: Path | None, key: str) -> Path | None:
    """The lock file claiming ``key`` in a content-addressed ``store``: in the store's ``.claims`` folder, apart from
    the entries, so that listing, counting and trimming entries never meets a lock."""
    return None if store is None else store / ".claims" / f"{key}.lock"


@contextlib.contextmanager
def claimed(lock: Path | None, wait_s: float) -> Iterator[None]:
    """Held while a store's entry is looked up and, on a miss, computed and stored (the fit store, the OCR store):
    another process that needs the same entry meanwhile waits, then finds it stored, instead of computing it again.
    The lock is the operating system's (released when its holder exits, killed or not); ``lock`` None, a lock file
    that cannot be made, or a claim held past ``wait_s`` (its holder hung) claims nothing."""
    from filelock import FileLock, Timeout

    held = None
    if lock is not None:
        try:
            lock.parent.mkdir(parents=True, exist_ok=True)
            held = FileLock(str(lock), timeout=wait_s)
            held.acquire()
        except (OSError, Timeout, NotImplementedError, RuntimeError):  # no flock on this file system: no claim
            held = None
    try:
        yield
    finally:
        if held is not None:
            with contextlib.suppress(OSError, RuntimeError):  # the work is done; a lock that will not let go is moot
                held.release()
