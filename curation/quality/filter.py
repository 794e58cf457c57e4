"""The ``filter`` stage: validity, leakage and duplicate gates, then seeded patient-disjoint splits."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from curation.errors import InputError
from curation.params import FilterParams, LlmParams
from curation.records import read_jsonl, staged_dir, write_jsonl
from curation.report import Report
from curation.schema import Item, ItemFormat

RESIDUE = re.compile(r"\{\{|\}\}|\{%|\bNone\b|\bnan\b|\bundefined\b")


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9 ]", " ", text.lower()).split())


def load_synonyms(lexicon: str | Path | None) -> list[set[str]]:
    """Groups of interchangeable terms (a label and its surface forms) from the extraction lexicon."""
    if not lexicon or not Path(lexicon).exists():
        return []
    import yaml

    lex = yaml.safe_load(Path(lexicon).read_text()) or {}
    groups = []
    for cat in ("findings", "anatomy", "sequences", "diagnoses"):
        for label, terms in (lex.get(cat) or {}).items():
            groups.append({_norm(label), *(_norm(t) for t in terms)} - {""})
    return groups


def _article_cue(item: Item) -> bool:
    """The question ends in "a"/"an" and only the answer agrees with that article."""
    words = item.question.rstrip(" ?.:").split()
    if not words or words[-1].lower() not in ("a", "an"):
        return False

    def agrees(option: str) -> bool:
        vowel = option[:1].lower() in "aeiou"
        return vowel == (words[-1].lower() == "an")

    return agrees(item.answer) and not any(agrees(o) for o in item.options if _norm(o) != _norm(item.answer))


def check(item: Item, synonyms: list[set[str]] | None = None) -> list[str]:
    """Reasons an item is unusable; empty when it passes every gate."""
    reasons = []
    texts = [item.question, item.answer, item.context, *item.options, *(t.text for t in item.turns)]
    if not item.question.strip() or not item.answer.strip():
        reasons.append("empty_text")
    if any(RESIDUE.search(t or "") for t in texts):
        reasons.append("template_residue")
    if item.format == ItemFormat.mcq:
        distinct = {_norm(o) for o in item.options}
        if len(item.options) < 4 or len(item.options) > 5:
            reasons.append("mcq_option_count")
        if len(distinct) != len(item.options):
            reasons.append("mcq_duplicate_options")
        if sum(_norm(o) == _norm(item.answer) for o in item.options) != 1:
            reasons.append("mcq_not_exactly_one_correct")
        lengths = sorted(len(o) for o in item.options if _norm(o) != _norm(item.answer))
        if lengths and len(item.answer) > 2.5 * max(lengths[-1], 1) and len(item.answer) > 30:
            reasons.append("mcq_answer_by_length")
        if _article_cue(item):
            reasons.append("mcq_answer_by_grammar")
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
    ans = _norm(item.answer)
    if len(ans) >= 4 and item.format != ItemFormat.multi_turn:
        visible = _norm(item.question + " " + item.context)
        if re.search(rf"\b{re.escape(ans)}\b", visible):
            reasons.append("answer_leak")
        else:  # a synonym of the answer (from the lexicon) gives it away just as well
            for group in synonyms or []:
                if ans in group and any(len(t) >= 4 and re.search(rf"\b{re.escape(t)}\b", visible) for t in group):
                    reasons.append("answer_leak_synonym")
                    break
    return reasons


def run(params: FilterParams, src: Path, dst: Path, report_path: Path | None = None,
        llm: LlmParams | None = None) -> Report:
    from curation.quality.gates import assign_splits, balance, model_gates, near_duplicates, rebalance

    src, dst = Path(src), Path(dst)
    if not (src / "items.jsonl").exists():
        raise InputError("no items.jsonl (run the generate stage first)", src)
    report = Report(stage="filter")
    valid: list[Item] = []
    rejected: list[dict[str, object]] = []

    def reject(item: Item, reasons: list[str], detail: object = None) -> None:
        for r in reasons:
            report.counts[f"rejected:{r.split(':')[0] if r.startswith('verifier') else r}"] += 1
        rejected.append({"item_id": item.item_id, "template_id": item.template_id, "reasons": reasons,
                         **({"detail": detail} if detail else {})})

    synonyms = load_synonyms(params.lexicon)
    for item in read_jsonl(src / "items.jsonl", Item):
        report.inputs += 1
        reasons = check(item, synonyms)
        if reasons:
            reject(item, reasons)
        else:
            valid.append(item)
    dups = near_duplicates(valid, params, report)
    gated = model_gates([i for i in valid if i.item_id not in dups], params, llm or LlmParams(), report)
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
            checks = ["validity", "leakage", "near_duplicate", *sorted(k for k in optional if k in item.quality)]
            item.quality = {**item.quality, "gates": "passed", "checks": checks}
            item.status = "kept"
            kept.append(item)
    assign_splits(kept, params)
    bal = balance(kept, params)
    report.metrics["balance"] = bal["distribution"]
    report.metrics["underfilled_cells"] = bal["underfilled_cells"]
    report.metrics["answer_position_counts"] = bal["distribution"]["answer_letter"]
    report.metrics["split_counts"] = dict(sorted(Counter(i.split for i in kept).items()))
    report.outputs = len(kept)
    with staged_dir(dst) as staging:
        write_jsonl(staging / "items.jsonl", kept)
        write_jsonl(staging / "rejected.jsonl", rejected)
    report.write(report_path)
    return report
