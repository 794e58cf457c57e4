"""Set-level and model-based quality gates: near-duplicates, LLM verifier, text-only shortcut, model-assisted
difficulty, balance, and stratified patient-disjoint splits."""

from __future__ import annotations

import csv
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from curation.errors import InputError
from curation.params import FilterParams, LlmParams
from curation.pseudonyms import keyed_hash
from curation.quality.item_gates import Reason
from curation.report import Report
from curation.schema import Item, ItemFormat, Verdict
from curation.text import LETTERS, plain

REVIEW_RANK = {"accept": 3, "accept_with_edits": 2}


def shingles(text: str, n: int = 5) -> set[str]:
    """Character n-grams of the normalised text: robust to a reworded word, unlike word n-grams."""
    t = plain(text)
    if len(t) < n:
        return {t} if t else set()
    return {t[i:i + n] for i in range(len(t) - n + 1)}


def minhash(text: str, num_perm: int = 128) -> Any:
    from datasketch import MinHash

    m = MinHash(num_perm=num_perm, seed=1)
    for s in sorted(shingles(text)):
        m.update(s.encode())
    return m


def item_text(item: Item) -> str:
    return " ".join([item.question, *item.options, item.answer])


def load_known_questions(path: str | Path) -> list[str]:
    """A file of public benchmark questions: .jsonl (``question`` [+ ``options``, ``answer``]), .csv or .txt."""
    path = Path(path)
    if not path.exists():
        raise InputError("known-questions file not found", path)
    if path.suffix == ".jsonl":
        out = []
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                raise InputError(f"line {n}: invalid JSON", path) from None
            opts = r.get("options") or []
            opts = list(opts.values()) if isinstance(opts, dict) else list(opts)
            out.append(" ".join([str(r.get("question", "")), *map(str, opts), str(r.get("answer", ""))]))
        return out
    if path.suffix == ".csv":
        with path.open(newline="", encoding="utf-8") as fh:
            return [" ".join(v for k, v in row.items() if k in ("question", "options", "answer") and v)
                    for row in csv.DictReader(fh)]
    return [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]


def near_duplicates(items: list[Item], params: FilterParams, report: Report) -> dict[str, str]:
    """item_id -> reason for items to drop: near-copies within a case (the best-reviewed copy stays) and
    near-copies of known public benchmark questions."""
    from datasketch import MinHashLSH

    drop: dict[str, str] = {}
    sigs = {i.item_id: minhash(item_text(i)) for i in items}
    if params.known_questions:
        known = load_known_questions(params.known_questions)
        lsh = MinHashLSH(threshold=params.near_duplicate_threshold, num_perm=128)
        for n, q in enumerate(known):
            lsh.insert(f"known-{n}", minhash(q))
        for i in items:
            if lsh.query(sigs[i.item_id]):
                drop[i.item_id] = "near_duplicate_of_known_benchmark"
        report.metrics["known_questions"] = len(known)

    def rank(i: Item) -> tuple[int, str]:
        verdict = i.review.final_verdict if i.review else None
        return (-REVIEW_RANK.get(verdict or "", 0), i.item_id)

    by_case: dict[str, list[Item]] = defaultdict(list)
    for i in items:
        by_case[i.case_id].append(i)
    for case_items in by_case.values():
        keep: list[Item] = []
        for i in sorted(case_items, key=rank):
            if i.item_id in drop:
                continue
            twin = next((k for k in keep if sigs[k.item_id].jaccard(sigs[i.item_id]) >= params.near_duplicate_threshold
                         and k.images == i.images), None)
            if twin is not None:
                drop[i.item_id] = "near_duplicate"
            else:
                keep.append(i)
    return drop


# -- model-based gates ------------------------------------------------------------------------------------
def _correct_rates(client: Any, prompt: Any, items: list[Item], samples: int, temperature: float,
                   with_images: bool) -> dict[str, float | None]:
    """Fraction of samples in which the model picks the right option, per MCQ item (None: no answer)."""
    from curation.answering import EvalItem, ask, extract_letter

    mcq = [i for i in items if i.format == ItemFormat.mcq and i.answer_index is not None]
    out: dict[str, float | None] = {}
    results = ask(client, prompt, [EvalItem.from_item(i, with_images) for i in mcq], samples, temperature)
    by_item: dict[str, list[bool]] = defaultdict(list)
    for s in results:
        if s.response is not None:
            item = next(i for i in mcq if i.item_id == s.item_id)
            by_item[s.item_id].append(extract_letter(s.response, item.options) == LETTERS[item.answer_index or 0])
    for i in mcq:
        got = by_item.get(i.item_id)
        out[i.item_id] = round(sum(got) / len(got), 4) if got else None
    return out


def model_gates(items: list[Item], params: FilterParams, llm: LlmParams, report: Report) -> dict[str, Reason]:
    """LLM verifier, text-only shortcut and model-assisted difficulty; item_id -> why to drop it."""
    from curation.llm import model_client, not_configured

    drop: dict[str, Reason] = {}
    why = not_configured(llm)
    if why:
        for step, on in (("llm_verifier", params.llm_verifier), ("text_only_check", params.text_only_check)):
            if on:
                report.skip_step(step, why)
    else:
        client = model_client(llm)
        if params.llm_verifier:
            _verify(client, items, params, report, drop)
        if params.text_only_check:
            _text_only(client, items, params, report, drop)
    if params.difficulty_models:
        _difficulty(items, params, llm, report, drop)
    return drop


def _verify(client: Any, items: list[Item], params: FilterParams, report: Report,
            drop: dict[str, Reason]) -> None:
    """The LLM verifier on each item with its images; an item failing any of ``VERIFIER_CHECKS`` is dropped."""
    from curation.quality.verify import VerifyItem

    for i, out in zip(items, VerifyItem(None, params.prompts_dir).run(client, items), strict=True):
        if not out.ok:
            report.counts[f"verifier_failed:{out.code}"] += 1
            continue
        failed = out.value.failed()
        i.quality.verifier = Verdict(model=out.origin.requested_model, passed=not failed, reason=out.value.reason)
        if failed:
            drop[i.item_id] = Reason("verifier", failed[0], out.value.reason or "")
    report.metrics["verifier_calls"] = client.usage.as_metrics()


def _text_only(client: Any, items: list[Item], params: FilterParams, report: Report,
               drop: dict[str, Reason]) -> None:
    """The model answers each item still kept without its images; one it gets right is tagged image_not_needed
    (and dropped when ``drop_image_not_needed``)."""
    from curation.llm import load_prompt

    prompt = load_prompt("eval_answer", params.prompts_dir)
    rates = _correct_rates(client, prompt, [i for i in items if i.item_id not in drop], 1, 0.0, False)
    for i in items:
        rate = rates.get(i.item_id)
        if rate is None:
            continue
        i.quality.text_only_correct_rate = rate
        if rate >= 1.0:
            i.quality.image_not_needed = True
            report.counts["tagged:image_not_needed"] += 1
            if params.drop_image_not_needed:
                drop[i.item_id] = Reason("image_not_needed", detail="answered correctly without the image")


def _difficulty(items: list[Item], params: FilterParams, llm: LlmParams, report: Report,
                drop: dict[str, Reason]) -> None:
    """Each difficulty model answers the kept items ``difficulty_samples`` times with their images: the mean pass
    rate grades the item easy / medium / hard; one every model always gets right is dropped when
    ``drop_if_all_models_correct``."""
    from curation.llm import load_prompt, model_client

    prompt = load_prompt("eval_answer", params.prompts_dir)
    per_model: dict[str, dict[str, float | None]] = {}
    live = [i for i in items if i.item_id not in drop]
    for spec in params.difficulty_models:
        per_model[spec.name] = _correct_rates(model_client(llm, spec, 0.7), prompt, live, params.difficulty_samples,
                                              0.7, True)
    for i in live:
        rates = {m: rate for m, r in per_model.items() if (rate := r.get(i.item_id)) is not None}
        if not rates:
            continue
        mean = sum(rates.values()) / len(rates)
        i.quality.difficulty_pass_rates = rates
        i.difficulty = "easy" if mean >= 0.8 else ("medium" if mean >= 0.4 else "hard")
        report.counts[f"difficulty:{i.difficulty}"] += 1
        all_correct = len(rates) == len(per_model) and all(r >= 1.0 for r in rates.values())
        if params.drop_if_all_models_correct and all_correct:
            drop[i.item_id] = Reason("too_easy", "all_filter_models_correct", rates)


# -- balance and splits -----------------------------------------------------------------------------------
def balance(items: list[Item], params: FilterParams) -> dict[str, Any]:
    cells: dict[str, Counter[str]] = {
        "task_type": Counter(i.task_type.value for i in items),
        "visual_dim": Counter(d.value for i in items for d in i.visual_dims),
        "reasoning_dim": Counter(d.value for i in items for d in i.reasoning_dims),
        "source": Counter(i.source.value for i in items),
        "diagnosis": Counter(str(i.facts.get("dx") or "unknown") for i in items),
        "answer_letter": Counter(LETTERS[i.answer_index] for i in items if i.answer_index is not None),
    }
    under = [f"{fam}:{k}" for fam, c in cells.items() if fam != "diagnosis" for k, v in c.items()
             if v < params.min_cell_count]
    return {"distribution": {f: dict(sorted(c.items())) for f, c in cells.items()}, "underfilled_cells": sorted(under)}


def _ranked(group: list[Item], params: FilterParams) -> list[Item]:
    return sorted(group, key=lambda i: keyed_hash("rebalance", str(params.seed), i.item_id, secret=b"rb"))


def answer_share_cap(items: list[Item], params: FilterParams) -> set[str]:
    """Item ids set aside so that no MCQ template keys one answer on more than ``max_answer_share`` of its items:
    the excess of its commonest answer, chosen by a seeded hash (so the choice is stable). A template with one
    answer only is left to the validity gates (its majority baseline)."""
    out: set[str] = set()
    if params.max_answer_share >= 1:
        return out
    by_template: dict[str, list[Item]] = defaultdict(list)
    for i in items:
        if i.options:
            by_template[i.template_id or ""].append(i)
    for group in by_template.values():
        top, n = Counter(plain(i.answer) for i in group).most_common(1)[0]
        rest = len(group) - n
        # the most of ``top`` that keeps its share at most max_answer_share: k / (k + rest) <= share
        allowed = max(1, int(params.max_answer_share * rest / (1 - params.max_answer_share) + 1e-9))
        if rest and n > allowed:
            out |= {i.item_id for i in _ranked([i for i in group if plain(i.answer) == top], params)[allowed:]}
    return out


def rebalance(items: list[Item], params: FilterParams) -> set[str]:
    """Item ids over the per-task-type cap, chosen by a seeded hash (so the choice is stable)."""
    if not params.max_items_per_task_type:
        return set()
    by_type: dict[str, list[Item]] = defaultdict(list)
    for i in items:
        by_type[i.task_type.value].append(i)
    out: set[str] = set()
    for group in by_type.values():
        out |= {i.item_id for i in _ranked(group, params)[params.max_items_per_task_type:]}
    return out


def assign_splits(items: list[Item], params: FilterParams) -> None:
    """Patient-disjoint splits: whole cases are assigned, stratified by source and the case's dominant task type,
    each stratum filled in proportion to the split fractions (a seeded order within a stratum)."""
    targets = dict(params.splits)
    if params.private_test_fraction:
        scale = 1 - params.private_test_fraction
        targets = {k: v * scale for k, v in targets.items()} | {"private_test": params.private_test_fraction}
    total = sum(targets.values())
    targets = {k: v / total for k, v in sorted(targets.items())}
    by_case: dict[str, list[Item]] = defaultdict(list)
    for i in items:
        by_case[i.case_id].append(i)
    strata: dict[str, list[str]] = defaultdict(list)
    for case_id, its in by_case.items():
        dominant = Counter(i.task_type.value for i in its).most_common(1)[0][0]
        strata[f"{its[0].source.value}|{dominant}"].append(case_id)
    overall = Counter[str]()
    seen = 0
    for _, cases in sorted(strata.items()):
        counts = Counter[str]()
        for n, case_id in enumerate(sorted(cases, key=lambda c: keyed_hash("split", str(params.seed), c,
                                                                           secret=b"split")), 1):
            seen += 1
            # the split furthest below its share, in this stratum and overall (small strata still fill every split)
            name = max(targets, key=lambda k: (targets[k] * n - counts[k] + targets[k] * seen - overall[k], targets[k]))
            counts[name] += 1
            overall[name] += 1
            for i in by_case[case_id]:
                i.split = name
