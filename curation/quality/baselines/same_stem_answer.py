"""The answer the other items with the same question have most often."""

from __future__ import annotations

from curation.quality.baselines import Baseline, Corpus, argmax, most_common_other
from curation.schema import Item
from curation.text import plain


def pick(item: Item, c: Corpus) -> list[int]:
    seen = c.others(c.stems[plain(item.question)], plain(item.answer))
    return argmax([seen[plain(o)] for o in item.options])


def open_guess(item: Item, c: Corpus) -> float:
    return most_common_other(c.stems[plain(item.question)], item, c)


BASELINE = Baseline("same_stem_answer", 30, pick, open_guess)
