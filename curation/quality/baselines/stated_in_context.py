"""The option the item's own visible text states (or a synonym of it, from the lexicon)."""

from __future__ import annotations

from curation.quality.baselines import Baseline, Corpus
from curation.quality.items import stated, visible_text
from curation.schema import Item
from curation.text import plain


def pick(item: Item, c: Corpus) -> list[int]:
    hay = plain(visible_text(item))

    def said(option: str) -> bool:
        forms = {plain(option)}
        for g in c.synonyms:
            if plain(option) in g:
                forms |= {t for t in g if len(t) >= 4}
        return any(stated(f, hay) for f in forms)

    return [n for n, o in enumerate(item.options) if said(o)]


def open_guess(item: Item, c: Corpus) -> float:
    return float(stated(item.answer, plain(visible_text(item))) and len(plain(item.answer)) >= 4)


BASELINE = Baseline("stated_in_context", 10, pick, open_guess)
