"""The ``filter`` stage: validity, leakage and duplicate gates, then seeded patient-disjoint splits."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from curation.errors import InputError
from curation.generate import tags
from curation.jsonio import read_jsonl, write_json, write_jsonl
from curation.params import FilterParams, LlmParams
from curation.records import staged_dir
from curation.report import Report
from curation.schema import Item, ItemFormat
from curation.text import plain

RESIDUE = re.compile(r"\{\{|\}\}|\{%|\bNone\b|\bnan\b|\bundefined\b")


def load_synonyms(lexicon: str | Path | None) -> list[set[str]]:
    """Groups of interchangeable terms (a label and its surface forms) from the extraction lexicon."""
    if not lexicon or not Path(lexicon).exists():
        return []
    import yaml

    lex = yaml.safe_load(Path(lexicon).read_text(encoding="utf-8")) or {}
    groups = []
    for cat in ("findings", "anatomy", "sequences", "diagnoses"):
        for label, terms in (lex.get(cat) or {}).items():
            groups.append({plain(label), *(plain(t) for t in terms)} - {""})
    return groups


def _article_cue(item: Item) -> bool:
    """The question ends in "a"/"an" and only the answer agrees with that article."""
    words = item.question.rstrip(" ?.:").split()
    if not words or words[-1].lower() not in ("a", "an"):
        return False

    def agrees(option: str) -> bool:
        vowel = option[:1].lower() in "aeiou"
        return vowel == (words[-1].lower() == "an")

    return agrees(item.answer) and not any(agrees(o) for o in item.options if plain(o) != plain(item.answer))


_CONTENT_WORD = re.compile(r"[a-z]{5,}")


def _echo_cue(item: Item) -> bool:
    """A word of the history (context and clinician turns, not the question) that only the answer repeats, whole or
    inside a longer word: "a first seizure" and "... and antiseizure medication" among options without it."""
    history = " ".join([item.context or "", *(t.text for t in item.turns if t.role != "model")]).lower()
    words = set(_CONTENT_WORD.findall(history))

    def echoed(option: str) -> set[str]:
        own = _CONTENT_WORD.findall(option.lower())
        return {w for w in words if any(w in o for o in own)}

    others = set().union(*(echoed(o) for o in item.options if plain(o) != plain(item.answer)))
    return bool(echoed(item.answer) - others)


MIN_OPTIONS, MAX_OPTIONS = 3, 8


def check(item: Item, synonyms: list[set[str]] | None = None) -> list[str]:
    """Reasons an item is unusable; empty when it passes every gate."""
    reasons = []
    texts = [item.question, item.answer, item.context, *item.options, *(t.text for t in item.turns)]
    if not item.question.strip() or not item.answer.strip():
        reasons.append("empty_text")
    if any(RESIDUE.search(t or "") for t in texts):
        reasons.append("template_residue")
    if item.format == ItemFormat.mcq:
        distinct = {plain(o) for o in item.options}
        # a closed set of three real categories (left/right/bilateral, normal/mild/marked) is not padded with
        # implausible options; chance is one over the item's own option count
        if not MIN_OPTIONS <= len(item.options) <= MAX_OPTIONS:
            reasons.append("mcq_option_count")
        if len(distinct) != len(item.options):
            reasons.append("mcq_duplicate_options")
        if sum(plain(o) == plain(item.answer) for o in item.options) != 1:
            reasons.append("mcq_not_exactly_one_correct")
        lengths = sorted(len(o) for o in item.options if plain(o) != plain(item.answer))
        if lengths and len(item.answer) > 2.5 * max(lengths[-1], 1) and len(item.answer) > 30:
            reasons.append("mcq_answer_by_length")
        if _article_cue(item):
            reasons.append("mcq_answer_by_grammar")
        if _echo_cue(item):
            reasons.append("mcq_answer_by_echo")
    if not item.images:
        reasons.append("no_image")
    for img in item.images:
        if not Path(img).is_file():
            reasons.append("image_missing")
            break
        try:
            from PIL import Image

            with Image.open(img) as im:
                im.verify()
        except Exception:
            reasons.append("image_unreadable")
            break
    ans = plain(item.answer)
    if len(ans) >= 4:  # a dialogue shows its clinician turns too (the model turns are the reference)
        from curation.quality.items import visible_text

        visible = plain(visible_text(item))
        if re.search(rf"\b{re.escape(ans)}\b", visible):
            reasons.append("answer_leak")
        else:  # a synonym of the answer (from the lexicon) gives it away just as well
            for group in synonyms or []:
                if ans in group and any(len(t) >= 4 and re.search(rf"\b{re.escape(t)}\b", visible) for t in group):
                    reasons.append("answer_leak_synonym")
                    break
    return reasons


# per-item reasons that leave an item well-formed: it is still measured with its template (cues, leaks)
STRUCTURAL_OK = ("answer_leak", "mcq_answer_by_")


def run(params: FilterParams, src: Path, dst: Path, report_path: Path | None = None,
        llm: LlmParams | None = None, validity_path: Path | None = None, plot_path: Path | None = None) -> Report:
    from curation.quality.ablation import model_baselines
    from curation.quality.blind import effective_items, measure_blind, overall_blind
    from curation.quality.gates import answer_share_cap, assign_splits, balance, model_gates, near_duplicates, rebalance
    from curation.quality.items import template_key
    from curation.quality.leaks import load_rules, mapping_leaks, sibling_leaks
    from curation.quality.validity import decide, difficulty_by_model, plot_rows

    src, dst = Path(src), Path(dst)
    if not (src / "items.jsonl").exists():
        raise InputError("no items.jsonl (run the generate stage first)", src)
    report = Report(stage="filter")
    llm = llm or LlmParams()
    rejected: list[dict[str, object]] = []

    def reject(item: Item, reasons: list[str], detail: object = None) -> None:
        for r in reasons:
            report.counts[f"rejected:{r.split(':')[0] if r.startswith('verifier') else r}"] += 1
        rejected.append({"item_id": item.item_id, "template_id": item.template_id, "reasons": reasons,
                         **({"detail": detail} if detail else {})})

    synonyms = load_synonyms(params.lexicon)
    rules = load_rules(params.leak_rules)
    items = list(read_jsonl(src / "items.jsonl", Item))
    report.inputs = len(items)
    reasons: dict[str, list[str]] = {}
    details: dict[str, object] = {}
    for item in items:
        reasons[item.item_id] = check(item, synonyms) + mapping_leaks(item, rules)
    # validity is a property of the template: measured on all its well-formed items, leaking ones included
    measured = [i for i in items if all(r.startswith(STRUCTURAL_OK) for r in reasons[i.item_id])]
    # keys balanced first: what is measured (and released) keys no answer on more than max_answer_share
    for iid in answer_share_cap(measured, params):
        reasons[iid].append("rebalanced_out:answer_share")
    measured = [i for i in measured if all(r.startswith(STRUCTURAL_OK) for r in reasons[i.item_id])]
    if params.validity.sibling_leaks:
        for iid, (reason, sibling) in sibling_leaks(measured, synonyms).items():
            reasons[iid].append(reason)
            details[iid] = {"sibling": sibling}
    templates = measure_blind(measured, params.validity, synonyms)
    models = model_baselines(measured, params.validity, llm, params.prompts_dir, params.seed, report)
    decide(templates, models, params.validity)
    for i in items:
        t = templates.get(template_key(i))
        if t and t["blocked"]:
            reasons[i.item_id].extend(t["reasons"])
            details.setdefault(i.item_id, t["detail"])
    for i in items:
        if reasons[i.item_id]:
            reject(i, reasons[i.item_id], details.get(i.item_id))
    valid = [i for i in items if not reasons[i.item_id]]
    dups = near_duplicates(valid, params, report)
    gated = model_gates([i for i in valid if i.item_id not in dups], params, llm, report)
    capped = rebalance([i for i in valid if i.item_id not in dups and i.item_id not in gated], params)
    kept: list[Item] = []
    for item in valid:
        if item.item_id in dups:
            reject(item, [dups[item.item_id]])
        elif item.item_id in gated:
            reason, detail = gated[item.item_id]
            reject(item, [reason], detail)
        elif item.item_id in capped:
            reject(item, ["rebalanced_out"])
        else:
            optional = ("verifier", "text_only_correct_rate", "difficulty_pass_rates")
            checks = ["validity", "leakage", "near_duplicate", "template_validity",
                      *sorted(k for k in optional if k in item.quality)]
            t = templates[template_key(item)]
            item.quality = {**item.quality, "gates": "passed", "checks": checks, "template_validity": {
                "template": template_key(item), "best_blind_baseline": t["best_blind_baseline"],
                "best_blind_lift": t["best_blind_lift"], "above_threshold": t["above_threshold"],
                "blocked": t["blocked"], "reasons": t["reasons"], "max_blind_lift": params.validity.max_blind_lift}}
            if item.difficulty is None:  # no difficulty model rated it: the computed rule (generate.tags)
                item.difficulty = tags.difficulty(item)
                item.quality["difficulty_by"] = "rule"
            item.status = "kept"
            kept.append(item)
    assign_splits(kept, params)
    bal = balance(kept, params)
    report.metrics["balance"] = bal["distribution"]
    report.metrics["underfilled_cells"] = bal["underfilled_cells"]
    report.metrics["answer_position_counts"] = bal["distribution"]["answer_letter"]
    report.metrics["split_counts"] = dict(sorted(Counter(i.split for i in kept).items()))
    kept_by_t = Counter(template_key(i) for i in kept)
    for key, entry in templates.items():
        entry["kept_items"] = kept_by_t.get(key, 0)
    validity: dict[str, Any] = {
        "max_blind_lift": params.validity.max_blind_lift, "confidence": params.validity.confidence,
        "block": params.validity.block,
        "baselines": list(params.validity.baselines),
        "overall": {**overall_blind(measured, templates),
                    "kept_items": len(kept), "kept_effective_items": effective_items(kept),
                    "templates_above_threshold": sorted(k for k, e in templates.items() if e["above_threshold"]),
                    "templates_blocked": sorted(k for k, e in templates.items() if e["blocked"]),
                    "items_blocked": sum(e["items"] for e in templates.values() if e["blocked"]),
                    "answered_without_image": {m: r["answered_without_image"]
                                               for m, r in (models.get("models") or {}).items()}},
        "templates": templates,
        "model_baselines": {k: val for k, val in models.items() if k != "models"} | {
            "models": {m: {k: val for k, val in r.items() if k != "templates"}
                       for m, r in (models.get("models") or {}).items()}},
        # every rated item, the ones dropped as too easy included, so the bias toward the filter models shows
        "difficulty_by_model": difficulty_by_model(valid) if params.difficulty_models else
        "skipped: no difficulty_models in filter params",
        "leaks": dict(sorted(Counter(r for rs in reasons.values() for r in rs
                                     if r.startswith(("answer_leak", "sibling"))).items())),
    }
    report.metrics["validity"] = {"templates_blocked": validity["overall"]["templates_blocked"],
                                  "items_blocked": validity["overall"]["items_blocked"]}
    report.outputs = len(kept)
    with staged_dir(dst) as staging:
        write_jsonl(staging / "items.jsonl", kept)
        write_jsonl(staging / "rejected.jsonl", rejected)
        write_json(staging / "validity.json", validity)
    if validity_path is not None:
        write_json(validity_path, validity)
    if plot_path is not None:
        write_json(plot_path, plot_rows(templates))
    report.write(report_path)
    return report
