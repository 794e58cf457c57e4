"""A content-addressed store of anatomy fits, so that a series registered once is not registered again.

A fit costs tens of seconds a volume; a curator re-running ``dvc repro`` after changing a lesion threshold, a
template or a render setting would pay it again for every volume. A fit is a pure function of the series' voxels,
its affine, its sequence and the code and settings of the fit, so those are the key (sha256): the voxels, the
affine, the sequence, the bytes of anatomy.py, templatefit.py, registration.yaml and landmarks.yaml, the template
files' names and sizes and the antspyx version. Any change to one of them is a miss. An entry is ANTs' transform
files and a small JSON (matrix, metric, kind, file order), written to a temporary folder and renamed into place, so
that concurrent workers and a killed run never leave a half entry. A fit being computed is claimed (a lock file in
the store's ``.claims`` folder): another process that needs the same fit, a second run on the same corpus or a
worker of another stage, waits for it and reads it back instead of fitting the series again.

Where: ``CURATION_FIT_CACHE`` (a folder; ``off`` turns the store off), else ``$XDG_CACHE_HOME/medbench-curation/
anatomy-fits`` (``~/.cache`` without it). Its size is kept under ``CURATION_FIT_CACHE_GB`` (default 5): after a
write, the least recently used entries go first.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from curation import records

VERSION = "1"
ENTRY = "fit.json"
CLAIM_WAIT_S = 1800  # past this a claim is taken as stale (its holder hung) and the fit is made anyway


@dataclass(frozen=True)
class Entry:
    """A fit as stored: the transform files (in the order ANTs gave them) and the fit's numbers."""

    matrix: list[list[float]]
    metric: float
    kind: str
    fwd: list[str]  # file names inside the entry's folder
    inv: list[str]


def root() -> Path | None:
    """The store's folder, or None where ``CURATION_FIT_CACHE=off``."""
    where = os.environ.get("CURATION_FIT_CACHE", "").strip()
    if where.lower() in {"off", "0", "none", "false"}:
        return None
    if where:
        return Path(where).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "medbench-curation" / "anatomy-fits"


def key(data: np.ndarray, affine: np.ndarray, sequence: str | None, code: Iterable[bytes]) -> str:
    """sha256 over everything a fit depends on (``code``: the bytes of the fit's code and settings)."""
    h = hashlib.sha256(f"fitcache {VERSION}\n".encode())
    arr = np.ascontiguousarray(data, dtype=np.float32)
    h.update(repr(arr.shape).encode())
    h.update(arr.tobytes())
    h.update(np.ascontiguousarray(affine, dtype=np.float64).tobytes())
    h.update(f"\nsequence={sequence or ''}\n".encode())
    for part in code:
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()


def claimed(k: str) -> AbstractContextManager[None]:
    """Held while the fit for key ``k`` is looked up and, on a miss, computed and stored: a process that needs the
    same fit meanwhile waits, then finds it stored (``records.claimed``)."""
    return records.claimed(records.claim_lock(root(), k), CLAIM_WAIT_S)


def load(k: str, into: Path) -> Entry | None:
    """The entry for key ``k`` with its files copied into ``into``, or None (not stored, or unreadable)."""
    base = root()
    if base is None:
        return None
    folder = base / k[:2] / k
    try:
        meta = json.loads((folder / ENTRY).read_text(encoding="utf-8"))
        entry = Entry(meta["matrix"], float(meta["metric"]), str(meta["kind"]), list(meta["fwd"]), list(meta["inv"]))
        for name in {*entry.fwd, *entry.inv}:
            if Path(name).name != name:
                raise ValueError(f"{name!r} is not a file name")
            shutil.copyfile(folder / name, into / name)
        os.utime(folder)  # least recently used goes first
    except FileNotFoundError:
        if folder.exists():  # files lost from an entry: removed, so that the fit is stored afresh
            shutil.rmtree(folder, ignore_errors=True)
        return None
    except (OSError, ValueError, KeyError, TypeError):
        shutil.rmtree(folder, ignore_errors=True)
        return None
    return entry


def store(k: str, entry: Entry, files: dict[str, str]) -> None:
    """Store ``entry`` under key ``k``; ``files`` maps each name in the entry to the file to copy. Best effort: a
    store that cannot be written (read-only, disk full) leaves the run as it was, without its cache."""
    base = root()
    if base is None:
        return
    final = base / k[:2] / k
    if final.exists():
        return
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{k[:12]}.", dir=final.parent))
        try:
            for name, src in files.items():
                shutil.copyfile(src, tmp / name)
            (tmp / ENTRY).write_text(json.dumps(entry.__dict__), encoding="utf-8")
            os.replace(tmp, final)  # atomic; another worker that got there first keeps its (identical) entry
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            return
    except OSError:
        return
    _trim(base)


def _trim(base: Path) -> None:
    """Least recently used entries removed until the store is under its size (``CURATION_FIT_CACHE_GB``)."""
    try:
        limit = float(os.environ.get("CURATION_FIT_CACHE_GB", "5")) * 1e9
    except ValueError:
        limit = 5e9
    entries: list[tuple[float, int, Path]] = []
    for folder in base.glob("??/*"):
        if folder.name.startswith(".") or not folder.is_dir():
            continue
        try:
            size = sum(f.stat().st_size for f in folder.iterdir())
            entries.append((folder.stat().st_mtime, size, folder))
        except OSError:
            continue
    total = sum(s for _, s, _ in entries)
    for _, size, folder in sorted(entries):
        if total <= limit:
            break
        shutil.rmtree(folder, ignore_errors=True)
        # its claim goes with it (at worst a fit of a trimmed entry, claimed this instant, is computed twice)
        (base / ".claims" / f"{folder.name}.lock").unlink(missing_ok=True)
        total -= size


def fingerprint(code: Iterable[Path], data: Iterable[Path], versions: Iterable[str]) -> tuple[bytes, ...]:
    """The ``code`` parts of a key: each code or settings file's bytes, each data file's name and size (templates
    too large to read on every start), and each library version."""
    return (*(Path(f).read_bytes() for f in code), *(f"{Path(d).name} {Path(d).stat().st_size}".encode() for d in data),
            *(v.encode() for v in versions))
