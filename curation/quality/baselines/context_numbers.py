"""The answer of the template's other items whose stated numbers (an age, a score, a duration) are nearest this
item's: what a reader who maps a score to the key, without the image, would answer."""

from __future__ import annotations

from curation.quality.baselines import Baseline, Corpus, context_numbers_of
from curation.quality.items import template_key
from curation.schema import Item
from curation.text import plain


def nearest_answers(item: Item, c: Corpus) -> list[str]:
    """The answers of the template's other items whose stated numbers are nearest this item's (each number scaled
    by its range over the template; ties all kept). Empty when the text states no number or no other item states as
    many."""
    own = context_numbers_of(item)
    rows = [(nums, ans) for iid, nums, ans in c.numeric[template_key(item)] if len(nums) == len(own)]
    peers = [(nums, ans) for (iid, nums, ans) in c.numeric[template_key(item)]
             if iid != item.item_id and len(nums) == len(own)]
    if not own or not peers:
        return []
    spans = [(max(r[0][k] for r in rows) - min(r[0][k] for r in rows)) or 1.0 for k in range(len(own))]
    dist = [(sum(abs(a - b) / w for a, b, w in zip(nums, own, spans, strict=True)), ans) for nums, ans in peers]
    best = min(d for d, _ in dist)
    return sorted({ans for d, ans in dist if d <= best + 1e-9})


def pick(item: Item, c: Corpus) -> list[int]:
    near = set(nearest_answers(item, c))
    return [n for n, o in enumerate(item.options) if plain(o) in near]


def open_guess(item: Item, c: Corpus) -> float:
    near = nearest_answers(item, c)
    return (plain(item.answer) in near) / len(near) if near else 0.0


BASELINE = Baseline("context_numbers", 70, pick, open_guess)
