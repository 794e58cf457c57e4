"""The ``filter`` stage: validity, leakage and duplicate gates, then seeded patient-disjoint splits."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from curation.errors import InputError
from curation.generate import tags
from curation.jsonio import read_jsonl, write_json, write_jsonl
from curation.params import FilterParams, LlmParams
from curation.quality import item_gates
from curation.quality.item_gates import Reason
from curation.records import staged_dir
from curation.report import Report
from curation.schema import Item, TemplateValidity
from curation.text import plain


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


def check(item: Item, synonyms: list[set[str]] | None = None) -> list[str]:
    """Reasons an item is unusable; empty when it passes every per-item gate (``quality/item_gates``)."""
    return item_gates.check(item, synonyms)


def run(params: FilterParams, src: Path, dst: Path, report_path: Path | None = None,
        llm: LlmParams | None = None, validity_path: Path | None = None, plot_path: Path | None = None) -> Report:
    from curation.quality.gates import assign_splits, balance, model_gates, near_duplicates, rebalance
    from curation.quality.items import template_key
    from curation.quality.validity import plot_rows

    src, dst = Path(src), Path(dst)
    if not (src / "items.jsonl").exists():
        raise InputError("no items.jsonl (run the generate stage first)", src)
    report = Report(stage="filter")
    llm = llm or LlmParams()
    rejected: list[dict[str, object]] = []

    def reject(item: Item, reasons: Sequence[Reason], detail: object = None) -> None:
        """Record an item's rejection: each reason counted by its code and listed by its label; a reason's own
        detail (a model gate's) replaces ``detail``."""
        for r in reasons:
            report.counts[f"rejected:{r.code}"] += 1
            if r.detail:
                detail = r.detail
        rejected.append({"item_id": item.item_id, "template_id": item.template_id,
                         "reasons": [r.label for r in reasons], **({"detail": detail} if detail else {})})

    items = list(read_jsonl(src / "items.jsonl", Item))
    report.inputs = len(items)
    m = _measure(items, params, llm, report)
    for i in items:
        if m.reasons[i.item_id]:
            reject(i, m.reasons[i.item_id], m.details.get(i.item_id))
    valid = [i for i in items if not m.reasons[i.item_id]]
    dups = near_duplicates(valid, params, report)
    gated = model_gates([i for i in valid if i.item_id not in dups], params, llm, report)
    capped = rebalance([i for i in valid if i.item_id not in dups and i.item_id not in gated], params)
    kept: list[Item] = []
    for item in valid:
        if item.item_id in dups:
            reject(item, [Reason(dups[item.item_id])])
        elif item.item_id in gated:
            reject(item, [gated[item.item_id]])
        elif item.item_id in capped:
            reject(item, [Reason("rebalanced_out")])
        else:
            _mark_kept(item, template_key(item), m.templates[template_key(item)], params)
            kept.append(item)
    assign_splits(kept, params)
    bal = balance(kept, params)
    report.metrics["balance"] = bal["distribution"]
    report.metrics["underfilled_cells"] = bal["underfilled_cells"]
    report.metrics["answer_position_counts"] = bal["distribution"]["answer_letter"]
    report.metrics["split_counts"] = dict(sorted(Counter(i.split for i in kept).items()))
    validity = _validity_record(params, m, kept, valid)
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
        write_json(plot_path, plot_rows(m.templates))
    report.write(report_path)
    return report


@dataclasses.dataclass
class _Measured:
    """What the per-item gates and the template measures found: each item's reasons (empty: it goes on to the set
    gates), their details, the items the templates were measured on, and the per-template and model records."""

    reasons: dict[str, list[Reason]]
    details: dict[str, object]
    measured: list[Item]
    templates: dict[str, Any]
    models: dict[str, Any]


def _measure(items: list[Item], params: FilterParams, llm: LlmParams, report: Report) -> _Measured:
    """Per-item gates and leak rules, the answer-share cap, sibling leaks, then each template's validity (blind
    baselines and model baselines, measured on its well-formed items, leaking ones included); a blocked template's
    reasons are added to each of its items."""
    from curation.quality.ablation import model_baselines
    from curation.quality.blind import measure_blind
    from curation.quality.gates import answer_share_cap
    from curation.quality.items import template_key
    from curation.quality.leaks import load_rules, mapping_leaks, sibling_leaks
    from curation.quality.validity import decide

    synonyms = load_synonyms(params.lexicon)
    rules = load_rules(params.leak_rules)
    reasons: dict[str, list[Reason]] = {}
    details: dict[str, object] = {}
    for item in items:
        reasons[item.item_id] = item_gates.reasons(item, synonyms) + [
            Reason(code, well_formed=True, leak=True) for code in mapping_leaks(item, rules)]
    # validity is a property of the template: measured on all its well-formed items, leaking ones included (a
    # reason that leaves an item well-formed is a cue or a leak)
    measured = [i for i in items if all(r.well_formed for r in reasons[i.item_id])]
    # keys balanced first: what is measured (and released) keys no answer on more than max_answer_share
    for iid in answer_share_cap(measured, params):
        reasons[iid].append(Reason("rebalanced_out:answer_share"))
    measured = [i for i in measured if all(r.well_formed for r in reasons[i.item_id])]
    if params.validity.sibling_leaks:
        for iid, (reason, sibling) in sibling_leaks(measured, synonyms).items():
            reasons[iid].append(Reason(reason, leak=True))
            details[iid] = {"sibling": sibling}
    templates = measure_blind(measured, params.validity, synonyms)
    models = model_baselines(measured, params.validity, llm, params.prompts_dir, params.seed, report)
    decide(templates, models, params.validity)
    for i in items:
        t = templates.get(template_key(i))
        if t and t["blocked"]:
            reasons[i.item_id].extend(Reason(r) for r in t["reasons"])
            details.setdefault(i.item_id, t["detail"])
    return _Measured(reasons, details, measured, templates, models)


def _mark_kept(item: Item, key: str, t: dict[str, Any], params: FilterParams) -> None:
    """An item that passed every gate: the checks it passed and its template's validity in its quality record, a
    difficulty by rule where no model rated it, status kept."""
    q = item.quality
    q.gates = "passed"
    q.checks = ["validity", "leakage", "near_duplicate", "template_validity",
                *sorted(k for k in q.ran() if k != "image_not_needed")]
    q.template_validity = TemplateValidity(
        template=key, best_blind_baseline=t["best_blind_baseline"], best_blind_lift=t["best_blind_lift"],
        above_threshold=t["above_threshold"], blocked=t["blocked"], reasons=t["reasons"],
        max_blind_lift=params.validity.max_blind_lift)
    if item.difficulty is None:  # no difficulty model rated it: the computed rule (generate.tags)
        item.difficulty = tags.difficulty(item)
        q.difficulty_by = "rule"
    item.status = "kept"


def _validity_record(params: FilterParams, m: _Measured, kept: list[Item], valid: list[Item]) -> dict[str, Any]:
    """validity.json: the thresholds, the overall and per-template blind measures, the model baselines, difficulty
    by model and the leaks found."""
    from curation.quality.blind import effective_items, overall_blind, selected
    from curation.quality.items import template_key
    from curation.quality.validity import difficulty_by_model

    templates, models = m.templates, m.models
    kept_by_t = Counter(template_key(i) for i in kept)
    for key, entry in templates.items():
        entry["kept_items"] = kept_by_t.get(key, 0)
    return {
        "max_blind_lift": params.validity.max_blind_lift, "confidence": params.validity.confidence,
        "block": params.validity.block,
        "baselines": selected(params.validity.baselines),
        "overall": {**overall_blind(m.measured, templates),
                    "kept_items": len(kept), "kept_effective_items": effective_items(kept),
                    "templates_above_threshold": sorted(k for k, e in templates.items() if e["above_threshold"]),
                    "templates_blocked": sorted(k for k, e in templates.items() if e["blocked"]),
                    "items_blocked": sum(e["items"] for e in templates.values() if e["blocked"]),
                    "answered_without_image": {name: r["answered_without_image"]
                                               for name, r in (models.get("models") or {}).items()}},
        "templates": templates,
        "model_baselines": {k: val for k, val in models.items() if k != "models"} | {
            "models": {name: {k: val for k, val in r.items() if k != "templates"}
                       for name, r in (models.get("models") or {}).items()}},
        # every rated item, the ones dropped as too easy included, so the bias toward the filter models shows
        "difficulty_by_model": difficulty_by_model(valid) if params.difficulty_models else
        "skipped: no difficulty_models in filter params",
        "leaks": dict(sorted(Counter(r.code for rs in m.reasons.values() for r in rs if r.leak).items())),
    }
