"""Blind baselines: how well an item can be answered from its text alone, measured per template against chance,
with the cue metrics (key length, stem overlap, answer letters) and effective items.

A blind baseline (one module of ``quality.baselines`` each) answers every item of a template from its text alone by
one fixed rule. Each baseline picks a set of options (ties stay tied) and scores the expected accuracy of picking
among them at random; a rule that has nothing to go on picks uniformly, i.e. scores chance. A template whose best
baseline beats chance by more than ``filter.validity.max_blind_lift`` is blocked: every item of it is rejected with
that baseline as the reason.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

from curation.errors import ParamsError
from curation.params import ValidityParams
from curation.quality.baselines import Corpus, by_name
from curation.quality.items import is_mcq, mean, template_key, visible_text, words
from curation.schema import Item
from curation.text import LETTERS, plain


def selected(names: str | list[str]) -> list[str]:
    """The baselines ``filter.validity.baselines`` names: every one (``all``) in its order, or those listed, in the
    order listed."""
    known = by_name()
    if names == "all":
        return list(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ParamsError(f"filter.validity.baselines: no baseline {', '.join(map(repr, unknown))} "
                          f"(known: {', '.join(known)})")
    return list(names)


def expected_correct(picked: list[int], item: Item) -> float:
    """Accuracy of picking at random among ``picked`` (all options when empty)."""
    if not picked:
        return 1 / len(item.options)
    return (item.answer_index in picked) / len(picked)


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
    chosen = [by_name()[n] for n in selected(params.baselines)]
    by_t: dict[str, list[Item]] = defaultdict(list)
    for i in items:
        by_t[template_key(i)].append(i)
    out: dict[str, dict[str, Any]] = {}
    for t, its in sorted(by_t.items()):
        vocab = len({plain(i.answer) for i in its})
        accs: dict[str, list[float]] = {b.name: [] for b in chosen}
        for i in its:
            for b in chosen:
                if is_mcq(i):
                    accs[b.name].append(expected_correct(b.pick(i, corpus), i))
                elif b.open is not None:  # an open or multi-turn item: only a baseline that can guess an answer
                    accs[b.name].append(b.open(i, corpus))
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


