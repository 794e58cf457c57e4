"""How an item may show a case's presentation: the sentences before imaging is told, with what text
de-identification left (placeholders, full dates) removed, and the check that item text carries none of it."""

from __future__ import annotations

import re
from typing import Any

# a placeholder left by text de-identification ([NAME], [ID-3fa2c1]) or a full date, which item text never carries
PLACEHOLDER = re.compile(r"\[[A-Z][A-Z_]+(?:-[0-9a-f]{4,})?\]")
_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*"
FULL_DATE = re.compile(rf"\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b\d{{1,2}}/\d{{1,2}}/\d{{2,4}}\b|\b\d{{1,2}} {_MONTH} \d{{4}}\b"
                       rf"|\b{_MONTH} \d{{1,2}},? \d{{4}}\b")


# a source's blank field ("None provided.", "N/A"), which says nothing of the patient, wherever it stands
# (capitalised, as a field's whole value is, with the field's label if it has one ("PMH: None provided."), and ending
# where a sentence may: "is not given much weight" is a sentence)
BLANK_FIELD = re.compile(r"(?:^|(?<=\s))(?:[A-Z][A-Za-z ]{0,24}:\s*)?(?:(?:None|Not|Nothing)\s+"
                         r"(?i:provided|given|available|stated)|N/A)\.?(?=\s+[A-Z0-9]|\s*$)")


def deid_artefacts(text: str) -> list[str]:
    """The placeholders and full dates in ``text`` (an item must have none)."""
    return PLACEHOLDER.findall(text) + FULL_DATE.findall(text)


def clinical_context(text: str, knowledge: dict[str, Any], who: str | None = None) -> str:
    """The presentation as an item may show it: the sentences before imaging is told, less those naming a diagnosis,
    treatment or outcome, with the placeholders and dates that de-identification left removed (a sentence that keeps
    one is dropped). Ages and intervals stay; a date of birth or of admission does not. A patient named by title
    becomes ``who`` ("a 63-year-old man") or the title's sex ("a woman"), so age and sex survive."""
    stop = [re.compile(p, re.IGNORECASE) for p in knowledge.get("context_stop", [])]
    drop = [re.compile(p, re.IGNORECASE) for p in knowledge.get("context_drop", [])]
    kept = []
    for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z])", BLANK_FIELD.sub("", text).strip()):
        if any(c.search(sentence) for c in stop):
            break
        if any(c.search(sentence) for c in drop):
            continue
        s = _scrub(sentence, who if not kept else None)
        if s and not deid_artefacts(s):
            kept.append(s)
    return " ".join(kept)


_TITLE = r"(?:Mr|Mrs|Ms|Miss|Mx|Dr)\.?\s*"
_PH = r"\[[A-Z][A-Z_]+(?:-[0-9a-f]{4,})?\]"


_TITLE_SEX = {"mr": "man", "mrs": "woman", "ms": "woman", "miss": "woman"}


def _scrub(s: str, who: str | None = None) -> str:
    """Remove identifying fragments around de-identification placeholders and dates without breaking the sentence."""
    date = FULL_DATE.pattern
    # a parenthesis holding a placeholder or a date: "(DOB 1957-04-05, [ADDRESS])"
    s = re.sub(rf"\s*\([^()]*(?:{_PH}|{date})[^()]*\)", "", s)
    # an apposition naming the patient: ", Mr. [NAME] of [ADDRESS],"
    s = re.sub(rf",\s*{_TITLE}{_PH}[^,.]*,", "", s)
    def sex_of(title: str) -> str | None:
        return _TITLE_SEX.get(title.rstrip(". ").lower())

    def apposition(m: re.Match[str]) -> str:  # "Ms. [NAME], a 29-year-old teacher," -> "A 29-year-old female teacher"
        desc, sex = m.group(3), sex_of(m.group(1))
        if sex and not re.search(r"\b(man|woman|male|female|boy|girl|he|she)\b", desc):
            desc = re.sub(r"(-old)\b", rf"\1 {'female' if sex == 'woman' else 'male'}", desc, count=1)
        return f"{m.group(2).capitalize()} {desc} "

    s = re.sub(rf"^((?:Mr|Mrs|Ms|Miss|Mx|Dr)\.?\s*){_PH},\s*(an?)\s+([^,]+),\s*", apposition, s)
    s = re.sub(rf"^((?:Mr|Mrs|Ms|Miss|Mx|Dr)\.?\s*){_PH}\s*",
               lambda m: f"{(who or ('a ' + (sex_of(m.group(1)) or 'patient'))).capitalize()} "
               if who or sex_of(m.group(1)) else "The patient ", s)
    # "on the morning of 2020-01-31", "on 2020-01-31", "since 02/06/2020"
    s = re.sub(rf"\s+(?:(?:on|in|during)\s+)?(?:the\s+)?(?:morning|afternoon|evening|night)\s+of\s+(?:{date})", "", s)
    s = re.sub(rf"\s+(?:on|since|from|at|dated|of)\s+(?:{date})", "", s)
    # a relative or place named after its role: "his wife [NAME]", "of [ADDRESS]"
    s = re.sub(rf"\s+(?:of|from|in|at|to|into|near|for)\s+{_PH}", "", s)  # "deployed to [LOCATION]": "deployed"
    s = re.sub(rf"\s*(?:{_TITLE})?{_PH}(?=[\s,.;:])", "", s)
    s = re.sub(r"\s+([,.;:])", r"\1", re.sub(r"\s{2,}", " ", s)).strip()
    s = re.sub(r",\s*,", ",", s)
    s = re.sub(r"\b(with|and|of|by|to)\s*,\s*", r"\1 ", s)  # "with [NAME], nausea" -> "with nausea"
    return s[:1].upper() + s[1:] if s else s

