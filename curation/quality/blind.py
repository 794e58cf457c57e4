"""Blind baselines: how well an item can be answered from its text alone, measured per template against chance,
with the cue metrics (key length, stem overlap, answer letters) and effective items.

A blind baseline answers every item of a template from its text alone by one fixed rule. Each baseline picks a
set of options (ties stay tied) and scores the expected accuracy of picking among them at random; a rule that has
nothing to go on picks uniformly, i.e. scores chance. Baselines that learn from other items (the template's
majority answer or letter, the answer of items with the same stem) leave the item itself out, so a template with
balanced answers scores at or below chance on them. A template whose best baseline beats chance by more than
``filter.validity.max_blind_lift`` is blocked: every item of it is rejected with that baseline as the reason.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from curation.params import ValidityParams
from curation.quality.items import is_mcq, mean, stated, template_key, visible_text, words
from curation.schema import Item
from curation.text import LETTERS, plain


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


def _argmax(scores: list[float]) -> list[int]:
    top = max(scores, default=0)
    return [n for n, s in enumerate(scores) if s == top] if top > 0 else []


def majority_answer(item: Item, c: Corpus) -> list[int]:
    seen = c.others(c.answers[template_key(item)], plain(item.answer))
    return _argmax([seen[plain(o)] for o in item.options])


def answer_position(item: Item, c: Corpus) -> list[int]:
    seen = c.others(c.letters[template_key(item)], LETTERS[item.answer_index or 0])
    return _argmax([seen[LETTERS[n]] for n in range(len(item.options))])


def longest_option(item: Item, c: Corpus) -> list[int]:
    return _argmax([len(o.strip()) for o in item.options])


def stem_overlap(item: Item, c: Corpus) -> list[int]:
    stem = words(visible_text(item))
    return _argmax([len(words(o) & stem) for o in item.options])


def stated_in_context(item: Item, c: Corpus) -> list[int]:
    hay = plain(visible_text(item))

    def said(option: str) -> bool:
        forms = {plain(option)}
        for g in c.synonyms:
            if plain(option) in g:
                forms |= {t for t in g if len(t) >= 4}
        return any(stated(f, hay) for f in forms)

    return [n for n, o in enumerate(item.options) if said(o)]


def same_stem_answer(item: Item, c: Corpus) -> list[int]:
    seen = c.others(c.stems[plain(item.question)], plain(item.answer))
    return _argmax([seen[plain(o)] for o in item.options])


NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w])")


def context_numbers_of(item: Item) -> list[float]:
    """The numbers an item's visible text states (an age, a score, a duration), in order."""
    return [float(x) for x in NUMBER.findall(visible_text(item))]


def nearest_answers(item: Item, c: Corpus) -> list[str]:
    """The answers of the template's other items whose stated numbers are nearest this item's (each number scaled
    by its range over the template; ties all kept): what a reader who maps a score or an age to the key, without
    the image, would answer. Empty when the text states no number or no other item states as many."""
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


def context_numbers(item: Item, c: Corpus) -> list[int]:
    """The option that the nearest other items by stated numbers were keyed (see nearest_answers)."""
    near = set(nearest_answers(item, c))
    return [n for n, o in enumerate(item.options) if plain(o) in near]


BASELINES: dict[str, Pick] = {
    "majority_answer": majority_answer,
    "answer_position": answer_position,
    "longest_option": longest_option,
    "stem_overlap": stem_overlap,
    "stated_in_context": stated_in_context,
    "same_stem_answer": same_stem_answer,
    "context_numbers": context_numbers,
}
# open and multi-turn items have no options: the baselines that can still guess an answer, and how
OPEN_BASELINES = ("majority_answer", "stated_in_context", "same_stem_answer", "context_numbers")


def expected_correct(picked: list[int], item: Item) -> float:
    """Accuracy of picking at random among ``picked`` (all options when empty)."""
    if not picked:
        return 1 / len(item.options)
    return (item.answer_index in picked) / len(picked)


def open_guess(name: str, item: Item, c: Corpus) -> float:
    """Blind accuracy on an item without options: the most common other answer (ties shared), or the answer
    stated in the visible text."""
    if name == "stated_in_context":
        return float(stated(item.answer, plain(visible_text(item))) and len(plain(item.answer)) >= 4)
    if name == "context_numbers":
        near = nearest_answers(item, c)
        return (plain(item.answer) in near) / len(near) if near else 0.0
    counts = c.answers[template_key(item)] if name == "majority_answer" else c.stems[plain(item.question)]
    seen = c.others(counts, plain(item.answer))
    if not seen:
        return 0.0
    top = max(seen.values())
    tied = [a for a, v in seen.items() if v == top]
    return (plain(item.answer) in tied) / len(tied)


def chance(item: Item, vocabulary: int) -> float:
    """An MCQ's chance is one over its options; an open item's is one over its template's distinct answers (at
    least two, so a constant answer is never 'chance')."""
    if is_mcq(item):
        return 1 / len(item.options)
    return 1 / max(2, vocabulary)


def cue_metrics(items: list[Item]) -> dict[str, Any]:
    mcq = [i for i in items if is_mcq(i)]
    longest: list[float] = []
    key_ov: list[float] = []
    dis_ov: list[float] = []
    for i in mcq:
        k = i.answer_index or 0
        lengths = [len(o.strip()) for o in i.options]
        longest.append(float(lengths[k] > max(x for n, x in enumerate(lengths) if n != k)))
        stem = words(visible_text(i))

        def overlap(o: str, stem: set[str] = stem) -> float:
            w = words(o)
            return len(w & stem) / len(w) if w else 0.0

        key_ov.append(overlap(i.options[k]))
        dis_ov.extend(overlap(o) for n, o in enumerate(i.options) if n != k)
    letters = Counter(LETTERS[i.answer_index or 0] for i in mcq)
    n_opts = max((len(i.options) for i in mcq), default=0)
    return {
        "key_is_longest_rate": mean(longest), "key_stem_overlap": mean(key_ov),
        "distractor_stem_overlap": mean(dis_ov),
        "answer_letters": {LETTERS[n]: letters.get(LETTERS[n], 0) for n in range(n_opts)},
        "answer_letter_max_share": round(max(letters.values()) / len(mcq), 4) if mcq else None,
    }


def effective_items(items: list[Item]) -> int:
    """Distinct (case, answer fact) pairs: what is left after capping one item per case and fact."""
    return len({(i.case_id, plain(i.answer)) for i in items})


def measure_blind(items: list[Item], params: ValidityParams, synonyms: list[set[str]] | None = None
                  ) -> dict[str, dict[str, Any]]:
    """Per template: items, chance, each blind baseline's accuracy, the best and its lift over chance, cue
    metrics and effective items."""
    corpus = Corpus.of(items, synonyms)
    by_t: dict[str, list[Item]] = defaultdict(list)
    for i in items:
        by_t[template_key(i)].append(i)
    out: dict[str, dict[str, Any]] = {}
    for t, its in sorted(by_t.items()):
        vocab = len({plain(i.answer) for i in its})
        accs: dict[str, list[float]] = {b: [] for b in params.baselines}
        for i in its:
            for b in params.baselines:
                if is_mcq(i):
                    accs[b].append(expected_correct(BASELINES[b](i, corpus), i))
                elif b in OPEN_BASELINES:
                    accs[b].append(open_guess(b, i, corpus))
        ch = mean([chance(i, vocab) for i in its]) or 0.0
        base = {b: mean(v) for b, v in accs.items() if v}
        best = max(base, key=lambda b: base[b] or 0) if base else None  # ties: the first in params order
        lift = round((base[best] or 0) - ch, 4) if best else None
        out[t] = {
            "items": len(its), "mcq_items": sum(is_mcq(i) for i in its),
            "formats": dict(sorted(Counter(i.format.value for i in its).items())),
            "task_types": dict(sorted(Counter(i.task_type.value for i in its).items())),
            "chance": ch, "blind_baselines": base, "best_blind_baseline": best, "best_blind_lift": lift,
            "cue": cue_metrics(its), "effective_items": effective_items(its),
        }
    return out


def _baseline_of(name: str) -> Callable[[dict[str, Any]], float | None]:
    def get(t: dict[str, Any]) -> float | None:
        return t["blind_baselines"].get(name)

    return get


def overall_blind(items: list[Item], templates: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Item-weighted figures over every template."""
    n = sum(t["items"] for t in templates.values())
    names = sorted({b for t in templates.values() for b in t["blind_baselines"]})

    def weighted(get: Callable[[dict[str, Any]], float | None]) -> float | None:
        pairs = [(get(t), t["items"]) for t in templates.values() if get(t) is not None]
        w = sum(k for _, k in pairs)
        return round(sum((v or 0) * k for v, k in pairs) / w, 4) if w else None

    return {
        "items": n, "mcq_items": sum(t["mcq_items"] for t in templates.values()), "templates": len(templates),
        "chance": weighted(lambda t: float(t["chance"])),
        "blind_baselines": {b: weighted(_baseline_of(b)) for b in names},
        "cue": {k: v for k, v in cue_metrics(items).items() if k != "answer_letters"},
        "effective_items": effective_items(items),
    }


