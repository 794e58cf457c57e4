"""Gate: a multiple-choice item offers 3 to 8 distinct options (2 where they are every answer its question has),
exactly one of them the answer, and nothing but the image tells which: not its length, not the article before it,
not a word of the history that only it repeats.
A cue leaves the item well-formed (measured with its template); the others do not."""

from __future__ import annotations

import re

from curation.quality.item_gates import ItemGate
from curation.schema import Item, ItemFormat
from curation.text import plain

MIN_OPTIONS, MAX_OPTIONS = 3, 8
# a closed question's options are every answer it has (its template's distractors say ``closed``): brighter or darker
MIN_CLOSED_OPTIONS = 2


def _article_cue(item: Item) -> bool:
    """The question ends in "a"/"an" and only the answer agrees with that article."""
    words = item.question.rstrip(" ?.:").split()
    if not words or words[-1].lower() not in ("a", "an"):
        return False

    def agrees(option: str) -> bool:
        vowel = option[:1].lower() in "aeiou"
        return vowel == (words[-1].lower() == "an")

    return agrees(item.answer) and not any(agrees(o) for o in item.options if plain(o) != plain(item.answer))


_CONTENT_WORD = re.compile(r"[a-z]{5,}")


def _echo_cue(item: Item) -> bool:
    """A word of the history (context and clinician turns, not the question) that only the answer repeats, whole or
    inside a longer word: "a first seizure" and "... and antiseizure medication" among options without it."""
    history = " ".join([item.context or "", *(t.text for t in item.turns if t.role != "model")]).lower()
    words = set(_CONTENT_WORD.findall(history))

    def echoed(option: str) -> set[str]:
        own = _CONTENT_WORD.findall(option.lower())
        return {w for w in words if any(w in o for o in own)}

    others = set().union(*(echoed(o) for o in item.options if plain(o) != plain(item.answer)))
    return bool(echoed(item.answer) - others)


def check(item: Item, synonyms: list[set[str]]) -> list[str]:
    if item.format != ItemFormat.mcq:
        return []
    reasons = []
    distinct = {plain(o) for o in item.options}
    # a closed set of real categories (left/right/bilateral, normal/mild/marked; brighter/darker, two) is not padded
    # with implausible options; chance is one over the item's own option count
    closed = item.facts.get("closed_options") is True and item.generator.kind == "template"
    least = MIN_CLOSED_OPTIONS if closed else MIN_OPTIONS
    if not least <= len(item.options) <= MAX_OPTIONS:
        reasons.append("mcq_option_count")
    if len(distinct) != len(item.options):
        reasons.append("mcq_duplicate_options")
    if sum(plain(o) == plain(item.answer) for o in item.options) != 1:
        reasons.append("mcq_not_exactly_one_correct")
    lengths = sorted(len(o) for o in item.options if plain(o) != plain(item.answer))
    if lengths and len(item.answer) > 2.5 * max(lengths[-1], 1) and len(item.answer) > 30:
        reasons.append("mcq_answer_by_length")
    if _article_cue(item):
        reasons.append("mcq_answer_by_grammar")
    if _echo_cue(item):
        reasons.append("mcq_answer_by_echo")
    return reasons


# an answer told by its length, grammar or echo is a cue: the item is well-formed, and its template is measured with it
GATE = ItemGate("options", 20, check,
                measured=frozenset({"mcq_answer_by_length", "mcq_answer_by_grammar", "mcq_answer_by_echo"}))
