"""The option sharing the most words with the item's visible text."""

from __future__ import annotations

from curation.quality.baselines import Baseline, Corpus, argmax
from curation.quality.items import visible_text, words
from curation.schema import Item


def pick(item: Item, c: Corpus) -> list[int]:
    stem = words(visible_text(item))
    return argmax([len(words(o) & stem) for o in item.options])


BASELINE = Baseline("stem_overlap", 60, pick)
