"""Blind baselines: rules that answer an item from its text alone. Each module of this package is one baseline,
registered by being here: it defines ``BASELINE``, a :class:`Baseline` whose ``pick`` gives the options it would
choose among (ties stay tied; none: no idea, so chance) and, where it can also guess an answer without options (an
open or multi-turn item), ``open`` gives its expected accuracy there. ``quality.blind`` runs them per template,
in ``order`` (on a tie the first names the reason, so the most specific cue comes first).

Baselines that learn from other items (a template's majority answer or letter, the answer of items with the same
stem) leave the item itself out, so a template with balanced answers scores at or below chance on them.

Adding a baseline is adding a module (the smallest: ``longest_option.py``)."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache

from curation.quality import registered
from curation.quality.items import is_mcq, template_key, visible_text
from curation.schema import Item
from curation.text import LETTERS, plain

NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w])")


def context_numbers_of(item: Item) -> list[float]:
    """The numbers an item's visible text states (an age, a score, a duration), in order."""
    return [float(x) for x in NUMBER.findall(visible_text(item))]


@dataclass
class Corpus:
    """What the leave-one-out baselines learn from: answers and letters per template, answers per stem."""

    answers: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    letters: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    stems: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    # per template: (item id, the numbers its visible text states, its answer), for context_numbers
    numeric: dict[str, list[tuple[str, list[float], str]]] = field(default_factory=lambda: defaultdict(list))
    synonyms: list[set[str]] = field(default_factory=list)

    @classmethod
    def of(cls, items: Iterable[Item], synonyms: list[set[str]] | None = None) -> Corpus:
        c = cls(synonyms=synonyms or [])
        for i in items:
            c.answers[template_key(i)][plain(i.answer)] += 1
            c.stems[plain(i.question)][plain(i.answer)] += 1
            c.numeric[template_key(i)].append((i.item_id, context_numbers_of(i), plain(i.answer)))
            if is_mcq(i):
                c.letters[template_key(i)][LETTERS[i.answer_index or 0]] += 1
        return c

    def others(self, counts: Counter[str], own: str) -> Counter[str]:
        out = Counter(counts)
        out[own] -= 1
        return +out


Pick = Callable[[Item, Corpus], list[int]]  # the option indexes a baseline picks among (empty: no idea)
OpenGuess = Callable[[Item, Corpus], float]  # its expected accuracy on an item without options


@dataclass(frozen=True)
class Baseline:
    name: str
    order: int  # run, and preferred on a tie, in this order
    pick: Pick
    open: OpenGuess | None = None  # None: it cannot guess an answer without options


def argmax(scores: list[float]) -> list[int]:
    """The indexes of the top score (none where every score is zero: nothing to go on)."""
    top = max(scores, default=0)
    return [n for n, s in enumerate(scores) if s == top] if top > 0 else []


def most_common_other(counts: Counter[str], item: Item, c: Corpus) -> float:
    """Accuracy of answering the most common other answer in ``counts`` (ties shared)."""
    seen = c.others(counts, plain(item.answer))
    if not seen:
        return 0.0
    top = max(seen.values())
    tied = [a for a, v in seen.items() if v == top]
    return (plain(item.answer) in tied) / len(tied)


@lru_cache(maxsize=1)
def baselines() -> tuple[Baseline, ...]:
    """Every baseline of this package, in order."""
    return registered(__name__, __path__, "BASELINE", Baseline)


def by_name() -> dict[str, Baseline]:
    return {b.name: b for b in baselines()}
