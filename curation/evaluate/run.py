"""``curate evaluate``: run OpenAI-compatible vision models on a release and score them.

For every model: n samples per item (the item's images as data URIs, its context and question in the
versioned ``eval_answer`` prompt); multi-turn items are played turn by turn. Every call goes through the
shared cached client, so a re-run after a crash makes only the calls that are missing. Responses are stored
raw. MCQs are scored by answer-letter extraction; open answers by the LLM judge's rubric when a judge is
configured (otherwise by whether the reference answer appears in the response, and the report says so);
BERTScore compares open answers with the reference.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

from curation.answering import EvalItem, Sample, ask, extract_letter, grade, is_refusal
from curation.errors import InputError, ParamsError
from curation.evaluate.judge import Graded, Judge
from curation.evaluate.scoring import BertScorer, weighted_score
from curation.jsonio import write_jsonl
from curation.llm import LLMClient, Prompt, load_prompt
from curation.params import EvaluateParams, LlmParams, ModelSpec
from curation.records import output_lock, write_text
from curation.release import read
from curation.release.rebuild import rebuilt_images
from curation.text import LETTERS


def load_release(release: Path, splits: list[str], rebuilt: Path | None = None,
                 no_image: bool = False) -> tuple[list[EvalItem], Counter[str]]:
    """The release's items with pixels; reference-only items get theirs from ``rebuilt`` (the images folder of
    ``curate release rebuild``) when every image is there with the SHA-256 the reference names. ``no_image``: every
    item, asked without its images (the blind baseline needs no pixels, so reference-only items count too)."""
    items: list[EvalItem] = []
    skipped: Counter[str] = Counter()
    for row in read.rows(release, splits):
        if no_image:
            items.append(EvalItem.from_row(row, []))
            continue
        images = [img.data for img in row.images if img.data]
        if not images and row.image_refs:
            images, why = rebuilt_images(row, rebuilt)
            if why:
                skipped[why] += 1
                continue
        items.append(EvalItem.from_row(row, images))
    return items, skipped


def _client(base_url: str | None, model: str, api_key_env: str, p: EvaluateParams, temperature: float) -> LLMClient:
    return LLMClient(LlmParams(base_url=base_url, model=model, api_key_env=api_key_env, concurrency=p.concurrency,
                               max_retries=p.max_retries, timeout_s=p.timeout_s, backoff_s=p.backoff_s,
                               temperature=temperature, cache_dir=p.cache_dir))


def score_samples(items: dict[str, EvalItem], samples: list[Sample], p: EvaluateParams,
                  judge: LLMClient | None, judge_prompt: Prompt | None, bert: BertScorer | None) -> None:
    for s in samples:
        it = items[s.item_id]
        if s.response is None:
            continue
        if it.format == "mcq":
            s.letter = extract_letter(s.response, it.options)
            s.correct = grade(it.format, s.response, it.options, it.answer_index, it.answer)
            if s.letter is None:
                s.error_type = "format_refusal"
        elif is_refusal(s.response):
            s.correct, s.error_type = False, "format_refusal"
    # the judge grades open answers and classifies the errors of wrong MCQ answers
    to_judge = [s for s in samples if s.response is not None and s.error_type != "format_refusal"
                and (items[s.item_id].format != "mcq" or s.correct is False)]
    if judge is not None and judge_prompt is not None:
        graded = [Graded(items[s.item_id], s.response or "", s.sample) for s in to_judge]
        for s, out in zip(to_judge, Judge(p.judge, judge_prompt).run(judge, graded), strict=True):
            if not out.ok:
                s.judge = {"error": out.code, "detail": out.detail, "raw": out.raw_reply[0] if out.raw_reply else None}
                continue
            v = out.value
            s.judge = v.model_dump(mode="json", exclude_unset=True)
            s.judge_score = weighted_score(v.scores, p.judge.weights)
            if items[s.item_id].format != "mcq":
                s.correct = v.correct and s.judge_score >= p.judge.pass_threshold
            if s.correct is False:
                s.error_type = v.error_type or "reasoning"
    else:
        for s in to_judge:
            it = items[s.item_id]
            if it.format != "mcq":
                # without a judge: correct when the reference answer appears in the response
                s.correct = grade(it.format, s.response, it.options, it.answer_index, it.answer)
    if bert is not None:
        open_s = [s for s in samples if s.response is not None and items[s.item_id].format != "mcq"]
        for s, f1 in zip(open_s, bert.f1([s.response or "" for s in open_s],
                                          [items[s.item_id].reference for s in open_s]), strict=True):
            s.bertscore = f1


def circular_eval(client: LLMClient, prompt: Prompt,
                  items: list[EvalItem]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """MMBench's CircularEval: every MCQ asked once (greedy) under each circular shift of its options; an item
    counts as correct only when every shift is answered right. Returns the metrics (the unshifted accuracy beside
    the circular one, overall and per task type) and one row per item and shift."""
    mcq = [it for it in items if it.format == "mcq" and it.answer_index is not None and len(it.options) >= 2]
    shifted = []
    for it in mcq:
        n = len(it.options)
        for k in range(n):
            shifted.append(replace(it, item_id=f"{it.item_id}#{k}", options=it.options[k:] + it.options[:k],
                                   answer_index=((it.answer_index or 0) - k) % n))
    by_id = {s.item_id: s for s in shifted}
    results: dict[str, dict[int, bool | None]] = defaultdict(dict)
    rows = []
    for smp in ask(client, prompt, shifted, 1, 0.0):
        it = by_id[smp.item_id]
        base, shift = smp.item_id.rsplit("#", 1)
        letter = extract_letter(smp.response, it.options) if smp.response is not None else None
        ok = None if smp.response is None else letter == LETTERS[it.answer_index or 0]
        results[base][int(shift)] = ok
        rows.append({"item_id": base, "shift": int(shift), "letter": letter, "correct": ok, "error": smp.error})
    complete = {iid: r for iid, r in results.items() if all(v is not None for v in r.values())}

    def figures(ids: list[str]) -> dict[str, Any]:
        done = [complete[i] for i in ids if i in complete]
        return {"n_items": len(ids), "n_scored": len(done),
                "vanilla_accuracy": round(sum(bool(r[0]) for r in done) / len(done), 4) if done else None,
                "circular_accuracy": round(sum(all(r.values()) for r in done) / len(done), 4) if done else None}

    by_type: dict[str, list[str]] = defaultdict(list)
    for it in mcq:
        by_type[it.task_type].append(it.item_id)
    metrics = {**figures([it.item_id for it in mcq]), "temperature": 0.0, "shifts": len(shifted),
               "incomplete_items": len(results) - len(complete),
               "by_task_type": {t: figures(ids) for t, ids in sorted(by_type.items())}}
    return metrics, rows


def evaluate(p: EvaluateParams, release: Path, out: Path, models: list[ModelSpec]) -> dict[str, Any]:
    from curation.evaluate.report import aggregate, leaderboard, plots

    release, out = Path(release), Path(out)
    if not models:
        raise ParamsError("no model to evaluate (give --base-url and --model, or evaluate.models in params)")
    rebuilt = Path(p.rebuilt_images) if p.rebuilt_images else None
    items_list, skipped = load_release(release, p.splits, rebuilt, p.no_image)
    if not items_list:
        raise InputError(f"no items with pixels in splits {p.splits} ({dict(skipped)})", release)
    items = {it.item_id: it for it in items_list}
    prompt = load_prompt("eval_answer", p.prompts_dir)
    judge = judge_prompt = None
    if p.judge.base_url and p.judge.model:
        judge = _client(p.judge.base_url, p.judge.model, p.judge.api_key_env, p, 0.0)
        judge_prompt = load_prompt("eval_judge", p.prompts_dir)
    bert = BertScorer() if p.bertscore else None
    all_metrics: dict[str, Any] = {}
    for spec in models:
        client = _client(spec.base_url, spec.model, spec.api_key_env, p, p.temperature)
        samples = ask(client, prompt, items_list, p.samples, p.temperature)
        score_samples(items, samples, p, judge, judge_prompt, bert)
        m = aggregate(items, samples, p)
        m["model"] = {"name": spec.name, "model": spec.model, "prompt": f"{prompt.id}@v{prompt.version}"}
        m["calls"] = client.usage.as_metrics()
        m["skipped_items"] = dict(skipped)
        m["condition"] = "no_image" if p.no_image else "with_images"
        m["open_scorer"] = f"judge:{p.judge.model}" if judge else "contains_reference"
        m["bertscore_encoder"] = bert.describe() if bert else None
        if judge:
            m["judge_calls"] = judge.usage.as_metrics()
        folder = out / spec.name
        if p.circular:
            m["circular"], circ_rows = circular_eval(_client(spec.base_url, spec.model, spec.api_key_env, p, 0.0),
                                                     prompt, items_list)
            write_jsonl(folder / "circular.jsonl", circ_rows)
        else:
            m["circular"] = "skipped: evaluate.circular is false"
        write_jsonl(folder / "responses.jsonl", ({
            "item_id": s.item_id, "sample": s.sample, "response": s.response, "dialogue": s.dialogue,
            "error": s.error, "error_detail": s.error_detail} for s in samples))
        write_jsonl(folder / "scores.jsonl", ({
            "item_id": s.item_id, "sample": s.sample, "letter": s.letter, "correct": s.correct,
            "judge": s.judge, "judge_score": s.judge_score, "error_type": s.error_type, "bertscore": s.bertscore}
            for s in samples))
        write_text(folder / "metrics.json", json.dumps(m, indent=2, sort_keys=True) + "\n")
        all_metrics[spec.name] = m
    write_text(out / "metrics.json", json.dumps(all_metrics, indent=2, sort_keys=True) + "\n")
    write_text(out / "leaderboard.md", leaderboard(all_metrics))
    plots(all_metrics, out / "plots")
    return all_metrics



def release_is_empty(release: Path) -> bool:
    """A release built with zero items (every template blocked, say): a manifest and no data files."""
    release = Path(release)
    return (release / "manifest.json").is_file() and not read.parquet_files(release, required=False)


def write_skipped(out: Path, reason: str) -> None:
    """What a run that could not happen leaves behind: the reason, in the files the pipeline tracks."""
    out = Path(out)
    write_text(out / "metrics.json", json.dumps({"skipped": reason}, indent=2) + "\n")
    write_text(out / "leaderboard.md", f"# Leaderboard\n\nSkipped: {reason}.\n")
    write_text(out / "plots" / "dimensions.json", "[]\n")


def evaluate_release(p: EvaluateParams, release: Path, out: Path, *, images: Path | None = None,
                     base_url: str | None = None, model: str | None = None) -> list[str]:
    """``curate evaluate``: score the models of ``evaluate.models`` (and ``model`` at ``base_url``, both given or
    neither) on a release, under ``out``'s one-writer lock, with ``images`` rebuilt for reference-only items. A run
    that cannot happen (a release with no items, no model configured) is recorded as skipped. Returns the lines to
    print: one per model, or the reason it was skipped."""
    if images is not None:
        p.rebuilt_images = str(images)
    models = list(p.models)
    if base_url and model:
        models.append(ModelSpec(name=model.replace("/", "_"), model=model, base_url=base_url))
    empty = release_is_empty(release)
    if not models or empty:
        reason = ("the release has no items" if empty else
                  "no model configured (give --base-url and --model, or evaluate.models in params.yaml)")
        write_skipped(out, reason)
        return [f"evaluate: skipped: {reason}"]
    with output_lock(out):
        metrics = evaluate(p, release, out, models)
    return [f"evaluate {name}: MCQ accuracy {m['mcq_accuracy']}, pass@1 {m['pass_at_1']}, pass@k {m['pass_at_k']}, "
            f"{m['overall']['n_scored']} items -> {out}" for name, m in metrics.items()]
