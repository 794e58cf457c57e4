"""The answer the template's other items have most often."""

from __future__ import annotations

from curation.quality.baselines import Baseline, Corpus, argmax, most_common_other
from curation.quality.items import template_key
from curation.schema import Item
from curation.text import plain


def pick(item: Item, c: Corpus) -> list[int]:
    seen = c.others(c.answers[template_key(item)], plain(item.answer))
    return argmax([seen[plain(o)] for o in item.options])


def open_guess(item: Item, c: Corpus) -> float:
    return most_common_other(c.answers[template_key(item)], item, c)


BASELINE = Baseline("majority_answer", 20, pick, open_guess)
