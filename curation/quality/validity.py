"""Validity: does an item's answer need its image? Measured per template, without a model (blind baselines
against chance, cue metrics) and, when an endpoint is configured, with models under image ablations.

A blind baseline answers every item of a template from its text alone by one fixed rule. Each baseline picks a
set of options (ties stay tied) and scores the expected accuracy of picking among them at random; a rule that has
nothing to go on picks uniformly, i.e. scores chance. Baselines that learn from other items (the template's
majority answer or letter, the answer of items with the same stem) leave the item itself out, so a template with
balanced answers scores at or below chance on them. A template whose best baseline beats chance by more than
``filter.validity.max_blind_lift`` is blocked: every item of it is rejected with that baseline as the reason.
"""

from __future__ import annotations

import io
import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curation.params import LlmParams, ModelSpec, ValidityParams
from curation.records import keyed_hash
from curation.report import Report
from curation.schema import Item, ItemFormat
from curation.text import LETTERS, plain

STOP = frozenset(
    "the a an and or of to in on at for with by from as is are was were be been this that these those which what "
    "who whom whose how why when where than then there their its it his her he she they them patient patients "
    "most likely best following shown show shows image images mri scan study does do did has have had not no "
    "into over under between after before about your you one two any all each other".split())


def words(text: str) -> set[str]:
    return {w for w in plain(text).split() if len(w) >= 3 and w not in STOP}


def stated(phrase: str, haystack: str) -> bool:
    """``phrase`` appears in ``haystack`` as whole words (both normalised)."""
    p = plain(phrase)
    return bool(p) and re.search(rf"(?<![a-z0-9]){re.escape(p)}(?![a-z0-9])", haystack) is not None


def template_key(item: Item) -> str:
    """The unit that is measured and blocked: the template, or for LLM-written items the generator and task type."""
    return item.template_id or f"{item.generator.kind}:{item.task_type.value}"


def visible_text(item: Item) -> str:
    """What a model is shown besides the images: the context, the question and, in a dialogue, the clinician's
    turns (the model turns are the reference)."""
    turns = [t.text for t in item.turns if t.role != "model"] if item.format == ItemFormat.multi_turn else []
    return " ".join([item.context, item.question, *turns])


def is_mcq(item: Item) -> bool:
    return item.format == ItemFormat.mcq and item.answer_index is not None and len(item.options) >= 2


# -- blind baselines ----------------------------------------------------------------------------------------
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


def _mean(xs: list[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


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
        "key_is_longest_rate": _mean(longest), "key_stem_overlap": _mean(key_ov),
        "distractor_stem_overlap": _mean(dis_ov),
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
        ch = _mean([chance(i, vocab) for i in its]) or 0.0
        base = {b: _mean(v) for b, v in accs.items() if v}
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


# -- model baselines under image ablations ------------------------------------------------------------------
def _blank_png(size: tuple[int, int]) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("L", size, 0).save(buf, format="PNG")
    return buf.getvalue()


def _size(path: str) -> tuple[int, int]:
    from PIL import Image

    with Image.open(path) as im:
        return im.size


def _sequence(item: Item) -> str | None:
    return next((e.sequence for e in item.evidence if e.sequence), None)


def swapped_images(items: list[Item], seed: int) -> dict[str, list[str]]:
    """For each item, the images of another case's item showing the same sequence (from ``Item.evidence``; an item
    without evidence borrows from another case's item of the same template, whose image slots are the same
    sequence by construction). Items with no such donor are left out."""
    pool: dict[tuple[str, ...], list[Item]] = defaultdict(list)

    def key(i: Item) -> tuple[str, ...]:
        seq = _sequence(i)
        return ("seq", seq, str(len(i.images))) if seq else ("tpl", template_key(i), str(len(i.images)))

    for i in items:
        if i.images:
            pool[key(i)].append(i)
    out: dict[str, list[str]] = {}
    for i in items:
        donors = sorted((d for d in pool.get(key(i), []) if d.case_id != i.case_id and d.images != i.images),
                        key=lambda d: keyed_hash("swap", str(seed), i.item_id, d.item_id, secret=b"swap"))
        if donors:
            out[i.item_id] = list(donors[0].images)
    return out


def condition_images(condition: str, item: Item, swapped: dict[str, list[str]]) -> list[bytes] | None:
    """The images shown under an ablation condition; None when the condition cannot be run for this item."""
    if condition == "no_image":
        return []
    if condition == "own_image":
        return [Path(p).read_bytes() for p in item.images]
    if condition == "swapped_image":
        paths = swapped.get(item.item_id)
        return [Path(p).read_bytes() for p in paths] if paths else None
    return [_blank_png(_size(p)) for p in item.images]


def model_baselines(items: list[Item], params: ValidityParams, llm: LlmParams, prompts_dir: str, seed: int,
                    report: Report) -> dict[str, Any]:
    """Accuracy per model, condition and template on the MCQ items; items a model answers without their image
    are tagged (``quality.answered_without_image``). Returns {"status", "models": {name: {...}}}."""
    from curation.answering import EvalItem, ask, extract_letter
    from curation.llm import load_prompt, not_configured
    from curation.quality.gates import _client

    specs = list(params.models)
    why = None
    if not specs:
        why = not_configured(llm)
        if not why:
            specs = [ModelSpec(name=str(llm.model), model=str(llm.model), base_url=llm.base_url,
                               api_key_env=llm.api_key_env)]
    if why:
        report.skip_step("model_baselines", why)
        return {"status": f"skipped: {why}"}
    mcq = [i for i in items if is_mcq(i)]
    prompt = load_prompt("eval_answer", prompts_dir)
    swapped = swapped_images(mcq, seed)
    by_id = {i.item_id: i for i in mcq}
    out: dict[str, Any] = {"status": "run", "conditions": list(params.conditions), "samples": params.samples,
                           "temperature": params.temperature, "models": {}}
    for spec in specs:
        client = _client(llm, spec, params.temperature)
        per_cond: dict[str, dict[str, float]] = {}
        for cond in params.conditions:
            evs = []
            for i in mcq:
                imgs = condition_images(cond, i, swapped)
                if imgs is None:
                    report.counts[f"validity:{cond}_unavailable"] += 1
                    continue
                ev = EvalItem.from_item(i, False)
                ev.images = imgs
                evs.append(ev)
            hits: dict[str, list[bool]] = defaultdict(list)
            for s in ask(client, prompt, evs, params.samples, params.temperature):
                if s.response is None:
                    report.counts[f"validity:failed_call:{(s.error or '').split(':')[0]}"] += 1
                    continue
                it = by_id[s.item_id]
                hits[s.item_id].append(extract_letter(s.response, it.options) == LETTERS[it.answer_index or 0])
            per_cond[cond] = {iid: sum(h) / len(h) for iid, h in hits.items()}
        no_img = per_cond.get("no_image", {})
        for iid, rate in no_img.items():
            if rate > 0.5:
                q = by_id[iid].quality
                q["answered_without_image"] = sorted({*q.get("answered_without_image", []), spec.name})
                report.counts[f"tagged:answered_without_image:{spec.name}"] += 1
        templates: dict[str, dict[str, Any]] = defaultdict(dict)
        for cond_name, rates in per_cond.items():
            by_t: dict[str, list[float]] = defaultdict(list)
            for iid, r in rates.items():
                by_t[template_key(by_id[iid])].append(r)
            for t, rs in by_t.items():
                templates[t][cond_name] = _mean(rs)
        for t in templates:
            its = [i for i in mcq if template_key(i) == t]
            templates[t]["answered_without_image"] = sum(no_img.get(i.item_id, 0) > 0.5 for i in its)
        out["models"][spec.name] = {
            "model": spec.model,
            "overall": {cond: _mean(list(r.values())) for cond, r in per_cond.items()},
            "answered_without_image": sum(r > 0.5 for r in no_img.values()),
            "templates": dict(sorted(templates.items())),
            "calls": client.usage.as_metrics(),
        }
    return out


def difficulty_by_model(items: list[Item]) -> dict[str, Any]:
    """Model-assisted difficulty as each filter model alone would rate it, so the bias toward them is visible."""
    rates: dict[str, list[float]] = defaultdict(list)
    for i in items:
        for m, r in (i.quality.get("difficulty_pass_rates") or {}).items():
            rates[m].append(r)
    out = {}
    for m, rs in sorted(rates.items()):
        grades = Counter("easy" if r >= 0.8 else ("medium" if r >= 0.4 else "hard") for r in rs)
        out[m] = {"items": len(rs), "mean_pass_rate": _mean(rs), **{g: grades.get(g, 0) for g in
                                                                    ("easy", "medium", "hard")}}
    return out


# -- decisions ----------------------------------------------------------------------------------------------
def wilson(p: float, n: int, confidence: float) -> tuple[float, float]:
    """Wilson score interval of a proportion ``p`` over ``n`` trials at ``confidence`` (0: the point itself)."""
    if n <= 0 or confidence <= 0:
        return p, p
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(max(p * (1 - p), 0.0) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _over(v: dict[str, Any], acc: float, chance: float, what: str, params: ValidityParams) -> bool:
    """Whether the lift of ``acc`` over ``chance`` is above the threshold at the lower end of its interval over the
    template's items; records the interval, and the lift as uncertain where only its point estimate is above."""
    eps = 1e-9
    n = int(v.get("mcq_items") or v["items"])
    lo, hi = wilson(acc, n, params.confidence)
    v["lift_intervals"][what] = [round(lo - chance, 4), round(hi - chance, 4)]
    if lo - chance > params.max_blind_lift + eps:
        return True
    if acc - chance > params.max_blind_lift + eps:
        v["uncertain"].append(f"{what} lift {100 * (acc - chance):.1f} points, {100 * params.confidence:.0f}% "
                              f"interval {100 * (lo - chance):.1f}..{100 * (hi - chance):.1f} over {n} items")
    return False


def decide(templates: dict[str, dict[str, Any]], models: dict[str, Any], params: ValidityParams) -> None:
    """Mark each template above the threshold (blind or model without an image) with its reasons, and blocked
    when ``block`` is on. Each lift carries its Wilson interval over the template's items (``*_interval``, in
    accuracy minus chance); a template is above the threshold only when the interval's lower end is, and one whose
    interval spans the threshold is listed as ``uncertain`` (more items would settle it)."""
    for t, v in templates.items():
        reasons, details = [], []
        v["uncertain"], v["lift_intervals"] = [], {}

        b = v["best_blind_baseline"]
        if v["best_blind_lift"] is not None and b and _over(v, v["blind_baselines"][b], v["chance"], b, params):
            reasons.append(f"blind_baseline:{b}")
            details.append(f"{b} {100 * v['blind_baselines'][b]:.1f}% vs chance {100 * v['chance']:.1f}%")
        v["models"] = {}
        for name, m in (models.get("models") or {}).items():
            got = m["templates"].get(t)
            if not got:
                continue
            v["models"][name] = got
            mcq_chance = v["chance"]
            for cond in params.block_on:
                acc = got.get(cond)
                if acc is not None and _over(v, acc, mcq_chance, f"{name}:{cond}", params):
                    reasons.append(f"model_without_image:{name}:{cond}")
                    details.append(f"{name} {cond} {100 * acc:.1f}% vs chance {100 * mcq_chance:.1f}%")
        v["above_threshold"] = bool(reasons)
        v["blocked"] = bool(reasons) and params.block
        v["reasons"] = reasons
        v["detail"] = "; ".join(details) + (f" (> {100 * params.max_blind_lift:.0f} points)" if details else "")


def plot_rows(templates: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """DVC plot data: one row per template, its best blind baseline's accuracy and lift over chance in points."""
    rows = []
    for t, v in templates.items():
        best = v["best_blind_baseline"]
        acc = v["blind_baselines"].get(best) if best else None
        rows.append({"template": t, "best_blind_baseline": best or "-", "chance": round(100 * v["chance"], 2),
                     "accuracy": round(100 * (acc or 0), 2), "lift_points": round(100 * (v["best_blind_lift"] or 0), 2),
                     "blocked": bool(v.get("blocked"))})
    return rows
