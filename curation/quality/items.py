"""What every quality measure reads of an item: the text a model is shown besides the images, its words and the
phrases it states, the unit that is measured (the template), whether it is a scorable MCQ, and how a figure over
items is rounded."""

from __future__ import annotations

import re

from curation.schema import Item, ItemFormat
from curation.text import plain

STOP = frozenset(
    "the a an and or of to in on at for with by from as is are was were be been this that these those which what "
    "who whom whose how why when where than then there their its it his her he she they them patient patients "
    "most likely best following shown show shows image images mri scan study does do did has have had not no "
    "into over under between after before about your you one two any all each other".split())


def words(text: str) -> set[str]:
    return {w for w in plain(text).split() if len(w) >= 3 and w not in STOP}


def stated(phrase: str, haystack: str) -> bool:
    """``phrase`` appears in ``haystack`` as whole words (both normalised)."""
    p = plain(phrase)
    return bool(p) and re.search(rf"(?<![a-z0-9]){re.escape(p)}(?![a-z0-9])", haystack) is not None


def template_key(item: Item) -> str:
    """The unit that is measured and blocked: the template, or for LLM-written items the generator and task type."""
    return item.template_id or f"{item.generator.kind}:{item.task_type.value}"


def visible_text(item: Item) -> str:
    """What a model is shown besides the images: the context, the question and, in a dialogue, the clinician's
    turns (the model turns are the reference)."""
    turns = [t.text for t in item.turns if t.role != "model"] if item.format == ItemFormat.multi_turn else []
    return " ".join([item.context, item.question, *turns])


def is_mcq(item: Item) -> bool:
    return item.format == ItemFormat.mcq and item.answer_index is not None and len(item.options) >= 2


def mean(xs: list[float]) -> float | None:
    """The mean rounded to 4 places (None over no values): how every validity figure is written."""
    return round(sum(xs) / len(xs), 4) if xs else None
