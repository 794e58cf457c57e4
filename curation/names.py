"""Names as text: a path or file name read from disk may hold bytes that are not UTF-8 (Python keeps them as
surrogate escapes), which no record, report or JSON file can carry as they are."""

from __future__ import annotations

import os


def printable(text: str) -> str:
    """A path or name as valid UTF-8 text: bytes that are not UTF-8 (surrogate escapes) become ``\\xNN``."""
    return os.fsencode(text).decode("utf-8", errors="backslashreplace") if _has_surrogates(text) else text


def _has_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def is_utf8_name(text: str) -> bool:
    return not _has_surrogates(text)
