"""The text scrubber: one patient's identity tokens (name parts, ids, birth date, institution) read from the
dataset, and a descriptor cleaned of them, of dates and of id-like numbers. The engine cleans descriptors with it;
the differential verifier (``compare``) looks for the same strings independently.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from curation.deid.elements import PN_FORM, tag_text

NAME_TAGS = (0x00100010, 0x00101001, 0x00101005, 0x00101060, 0x00080090, 0x00081050, 0x00081070)
ID_TAGS = (0x00100020, 0x00101000, 0x00080050, 0x00100030)
INSTITUTION_TAGS = (0x00080080, 0x00080081, 0x00081040)  # name, address, department: removed as whole strings


def identity_tokens(ds: Any) -> list[str]:
    """Name parts, ids and birth date of this patient and the institution, removed wherever a descriptor repeats
    them (the differential verifier looks for the same strings)."""
    tokens: list[str] = []
    for tag in NAME_TAGS:
        for part in re.split(r"[\^\s\\,=]+", tag_text(ds, tag)):
            if len(part) >= 2:
                tokens.append(part)
    for tag in ID_TAGS:
        for v in tag_text(ds, tag).split("\\"):
            if v:
                tokens.append(v)
                bare = re.sub(r"[\W_]+", "", v)
                if bare != v and len(bare) >= 5:
                    tokens.append(bare)  # "ZQ-778812" typed as "ZQ778812"
    for tag in INSTITUTION_TAGS:
        tokens.extend(v.strip() for v in tag_text(ds, tag).split("\\") if len(v.strip()) >= 3)
    return sorted(set(tokens), key=len, reverse=True)


ID_LIKE = re.compile(r"\b(?:MRN|ID|ACC)?[-:# ]*\d{5,}\b", re.IGNORECASE)
_MONTHS = "JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|SEPT|OCT|NOV|DEC"
# a date typed into a descriptor in any common style ("MPRAGE 2006-04-20", "13-JAN-2023", "Jan 13 2023")
DATE_LIKE = re.compile(
    rf"\b(?:(?:19|20)\d{{2}}[-./](?:0?[1-9]|1[0-2])[-./](?:0?[1-9]|[12]\d|3[01])"
    rf"|(?:0?[1-9]|[12]\d|3[01])[-./ ](?:0?[1-9]|1[0-2]|(?:{_MONTHS})[A-Z]*\.?)[-./ ](?:19|20)?\d{{2}}"
    rf"|(?:{_MONTHS})[A-Z]*\.? (?:0?[1-9]|[12]\d|3[01])(?:st|nd|rd|th)?,? (?:19|20)\d{{2}}"
    rf"|(?:0?[1-9]|1[0-2])/(?:0?[1-9]|[12]\d|3[01])/(?:19|20)?\d{{2}})\b", re.IGNORECASE)
LABELS = re.compile(r"\b(MRN|DOB|scanned for|patient name)\b[:#]?", re.IGNORECASE)
SEPARATORS = re.compile(r"[\^,;:]+(\s*[\^,;:]+)*")


class Scrubber:
    """Removes one patient's identity tokens (names, ids, birth date), dates and id-like numbers from a descriptor."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = [(t, t.lower()) for t in tokens]
        self.needles = [low for t, low in self.tokens if len(t) >= 3]

    def mentions(self, text: str) -> bool:
        low = text.lower()
        return any(t in low for t in self.needles)

    def clean(self, text: str) -> str:
        low = text.lower()
        present = tuple(t for t, t_low in self.tokens if t_low in low)
        if present:
            text = _alternation(present).sub("", text)
        text = PN_FORM.sub("", text)
        text = DATE_LIKE.sub("", text)
        text = ID_LIKE.sub("", text)
        text = LABELS.sub("", text)
        text = SEPARATORS.sub(lambda m: m.group(0)[0], text)
        return " ".join(text.strip(" ^,;:").split())[:64]


@lru_cache(maxsize=4096)
def _alternation(tokens: tuple[str, ...]) -> re.Pattern[str]:
    # tokens come longest first, so a full id goes before a part of it
    return re.compile("|".join(re.escape(t) for t in tokens), re.IGNORECASE)
