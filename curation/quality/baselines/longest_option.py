"""The longest option."""

from __future__ import annotations

from curation.quality.baselines import Baseline, Corpus, argmax
from curation.schema import Item


def pick(item: Item, c: Corpus) -> list[int]:
    return argmax([len(o.strip()) for o in item.options])


BASELINE = Baseline("longest_option", 40, pick)
