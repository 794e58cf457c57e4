"""Text helpers shared across stages: option letters and the normalisers used to compare texts.

Two normalisers, because two comparisons need different things:
- ``plain`` (letters and digits only, lower case, single spaces): is one text in another whatever the punctuation
  (near-duplicate shingles, leak and blind-baseline checks, the filter's synonyms, the generator's repeated answers).
  ``keep="'"`` keeps apostrophes: ``extract_letter`` matches a model's response against each option's text that
  way, as it always has (its tests and the evaluation's recorded letters depend on it; whether dropping them would
  change a match was not measured, so that variant stays).
- ``spaced`` (lower case, single spaces, punctuation kept): is an answer stated verbatim, where "T2*" and "T2" or
  "CDR 0.5" and "CDR 05" must stay different (the LLM augmentation's checks on rewritten questions and distractors,
  the evaluation's reference-in-response fallback for open answers without a judge).
"""

from __future__ import annotations

import re

LETTERS = "ABCDEFGH"
"""Option letters, in order: option n of an MCQ is LETTERS[n]."""

_NOT_WORD = {"": re.compile(r"[^a-z0-9 ]"), "'": re.compile(r"[^a-z0-9' ]")}


def plain(text: str | None, keep: str = "") -> str:
    """Lower case, every character but a-z, 0-9 (and ``keep``: "" or "'") made a space, spaces collapsed."""
    return " ".join(_NOT_WORD[keep].sub(" ", (text or "").lower()).split())


def spaced(text: str | None) -> str:
    """Lower case with whitespace collapsed; punctuation kept."""
    return " ".join((text or "").lower().split())


# C0/C1 controls but tab, newline and carriage return; bidi embeddings, overrides and isolates (a right-to-left
# override makes "gpj.exe" show as "exe.jpg"), marks, zero-width characters and the byte-order mark
_HIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")


def visible(text: str, *, one_line: bool = False) -> tuple[str, int]:
    """``text`` without control, bidi and zero-width characters (and, ``one_line``, with its whitespace collapsed, for
    labels and names); returns the text and how many characters were removed."""
    cleaned, n = _HIDDEN.subn("", text)
    if one_line:
        cleaned = " ".join(cleaned.split())
    return cleaned, n
