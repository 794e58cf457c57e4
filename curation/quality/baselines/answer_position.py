"""The answer letter the template's other items have most often."""

from __future__ import annotations

from curation.quality.baselines import Baseline, Corpus, argmax
from curation.quality.items import template_key
from curation.schema import Item
from curation.text import LETTERS


def pick(item: Item, c: Corpus) -> list[int]:
    seen = c.others(c.letters[template_key(item)], LETTERS[item.answer_index or 0])
    return argmax([seen[LETTERS[n]] for n in range(len(item.options))])


BASELINE = Baseline("answer_position", 50, pick)
