"""The ``filter`` stage: validity, leakage and duplicate gates, then seeded patient-disjoint splits."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from curation.errors import InputError
from curation.params import FilterParams
from curation.records import keyed_hash, read_jsonl, staged_dir, write_jsonl
from curation.report import Report
from curation.schema import Item, ItemFormat

RESIDUE = re.compile(r"\{\{|\}\}|\{%|\bNone\b|\bnan\b|\bundefined\b")


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9 ]", " ", text.lower()).split())


def check(item: Item) -> list[str]:
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
    return reasons


def run(params: FilterParams, src: Path, dst: Path, report_path: Path | None = None) -> Report:
    src, dst = Path(src), Path(dst)
    if not (src / "items.jsonl").exists():
        raise InputError("no items.jsonl (run the generate stage first)", src)
    report = Report(stage="filter")
    kept: list[Item] = []
    rejected: list[dict[str, object]] = []
    seen: dict[str, str] = {}
    for item in read_jsonl(src / "items.jsonl", Item):
        report.inputs += 1
        reasons = check(item)
        key = _norm(f"{item.case_id} {item.question} {item.answer} {' '.join(item.images)}")
        if not reasons and key in seen:
            reasons.append("duplicate")
        if reasons:
            for r in reasons:
                report.counts[f"rejected:{r}"] += 1
            rejected.append({"item_id": item.item_id, "template_id": item.template_id, "reasons": reasons})
            continue
        seen[key] = item.item_id
        item.quality = {"gates": "passed", "checks": ["validity", "leakage", "duplicate"]}
        item.status = "kept"
        kept.append(item)
    # patient-disjoint splits: the split is a function of the case id alone
    fractions = sorted(params.splits.items())
    for item in kept:
        u = int(keyed_hash("split", str(params.seed), item.case_id, secret=b"split", length=8), 16) / 16**8
        acc = 0.0
        item.split = fractions[-1][0]
        for name, frac in fractions:
            acc += frac
            if u < acc:
                item.split = name
                break
    letters = Counter(i.answer_index for i in kept if i.answer_index is not None)
    report.metrics["answer_position_counts"] = {str(k): v for k, v in sorted(letters.items())}
    report.metrics["split_counts"] = dict(sorted(Counter(i.split for i in kept).items()))
    report.outputs = len(kept)
    with staged_dir(dst) as staging:
        write_jsonl(staging / "items.jsonl", kept)
        write_jsonl(staging / "rejected.jsonl", rejected)
    report.skip_step("llm_verifier", "not available in this version")
    report.write(report_path)
    return report
