"""Containment: names taken from input never become paths, and files read stay inside their folder.

A ``<fig id>``, a series name or a file name is a *name*: it is turned into one safe path component
(no separators, no ``..``, no leading dot, bounded length) before anything is written under it. A file
that input points at (an href, a listed image, a symlink) is read only if it resolves inside the
folder it belongs to.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Never

from curation.names import is_utf8_name, printable
from curation.report import Outcome

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
MAX_NAME = 96
# names Windows reserves for devices, with any extension (CON.png, nul.tar.gz) and in any case: a release holding one
# cannot be unpacked there
_RESERVED = re.compile(r"^(?:CON|PRN|AUX|NUL|COM[0-9]|LPT[0-9]|CONIN\$|CONOUT\$)(?:\.|$)", re.IGNORECASE)
_EXT = re.compile(r"(?:\.[A-Za-z0-9]{1,8}){1,2}$")


def safe_name(text: object, max_len: int = MAX_NAME) -> str:
    """One path component made from ``text``; unchanged when it is already safe.

    A changed name gets a short hash of the original stem before its extension, so two different unsafe
    names never meet (``../a`` and ``__a`` stay apart), an Analyze ``.hdr``/``.img`` pair stays a pair, and
    the result is never empty, ``.``/``..``, hidden or longer than ``max_len``.
    """
    raw = printable(str(text))
    if portable(raw) and 0 < len(raw) <= max_len:
        return raw
    m = _EXT.search(raw)
    ext = m.group(0) if m and m.start() > 0 and raw[m.start() - 1] not in "/\\" else ""
    stem_raw = raw[: len(raw) - len(ext)]
    digest = hashlib.sha256(stem_raw.encode("utf-8")).hexdigest()[:8]
    stem = _UNSAFE.sub("_", stem_raw).lstrip(".")[: max(1, max_len - 9 - len(ext))].rstrip("._-") or "x"
    return f"{stem}-{digest}{ext}"


def portable(name: str) -> bool:
    """A file name every common filesystem takes as it is: A-Z a-z 0-9 . _ - only, not hidden, not a Windows device
    name (CON, NUL, AUX, COM1, LPT9... with any extension), not ending in a dot (Windows drops it)."""
    return (_UNSAFE.search(name) is None and not name.startswith(".") and not name.endswith(".")
            and _RESERVED.match(name) is None)


def inside(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> bool:
    """Whether ``path`` (symlinks followed) lies inside ``root`` (symlinks followed)."""
    try:
        return Path(path).resolve().is_relative_to(Path(root).resolve())
    except (OSError, RuntimeError, ValueError):  # a symlink loop, an unencodable name
        return False


def input_rel(path: str | os.PathLike[str], src: str | os.PathLike[str]) -> str:
    """A quarantine path: relative to the stage's input folder (or, outside it, to the working folder)."""
    p = Path(path).resolve()
    for base in (Path(src).resolve(), Path.cwd()):
        if p.is_relative_to(base):
            return printable(p.relative_to(base).as_posix())
    return printable(os.path.relpath(p, Path(src).resolve()))


def readable(path: str | os.PathLike[str], src: str | os.PathLike[str]) -> bool:
    """Files a record names are read only inside the stage's input folder, or the project folder (where records
    point when ingest.copy_files is false)."""
    return inside(path, src) or inside(path, Path.cwd())


OUTSIDE_INPUT = Outcome.failure("outside_input",
                                "resolves outside the stage's input folder and the project folder; not read")

WALK_DETAIL = {
    "outside_raw": "a symlink that resolves outside the raw folder; not read",
    "filename_not_utf8": "the file name is not UTF-8; rename it to ingest it",
    "broken_symlink": "a symlink to nothing",
    "symlinked_folder": "a symlink to a folder inside the raw folder; its files are read where they are",
}


def _refused(code: str) -> Outcome[Never]:
    return Outcome.failure(code, WALK_DETAIL[code])


def walk_files(top: Path, root: Path | None = None) -> Iterator[tuple[Path, Outcome[Never] | None]]:
    """Every file under ``top`` (inside ``root``, default ``top``), with why it must not be read (or None).

    Failures: ``outside_raw`` (a symlink, to a file or a folder, that resolves outside ``root``),
    ``filename_not_utf8`` (bytes in the name that are not UTF-8), ``broken_symlink``; skipped:
    ``symlinked_folder`` (a symlink to a folder inside ``root``: its files are read where they are). Folders are
    never followed through symlinks, so nothing outside ``root`` is listed, let alone read.
    """
    real_root = Path(root or top).resolve()
    for folder, dirs, files in os.walk(top, followlinks=False):
        base = Path(folder)
        dirs.sort()
        for d in list(dirs):
            p = base / d
            if p.is_symlink():
                dirs.remove(d)
                if inside(p, real_root) and p.resolve().is_dir():
                    yield p, Outcome.skip("symlinked_folder", WALK_DETAIL["symlinked_folder"])
                else:
                    yield p, _refused("outside_raw")
            elif not is_utf8_name(d):
                dirs.remove(d)
                yield p, _refused("filename_not_utf8")
        for f in sorted(files):
            p = base / f
            if not is_utf8_name(f):
                yield p, _refused("filename_not_utf8")
            elif p.is_symlink() and not inside(p, real_root):
                yield p, _refused("outside_raw")
            elif p.is_file():
                yield p, None
            elif p.is_symlink():
                yield p, _refused("broken_symlink")


def unique_name(name: str, seen: set[str]) -> str:
    """``name``, or ``name-2``, ``name-3``... so that no two names of one record match, ignoring letter case
    (figures stored as files must not overwrite one another, on case-insensitive filesystems either)."""
    candidate, n = name, 1
    while candidate.lower() in seen:
        n += 1
        candidate = f"{name}-{n}"
    seen.add(candidate.lower())
    return candidate
