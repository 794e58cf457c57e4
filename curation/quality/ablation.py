"""Model baselines under image ablations: each configured model answers a template's MCQ items with their own
image, none, a blank one and another case's image of the same sequence, so a template answered as well without
its image is seen; items a model answers without the image are tagged."""

from __future__ import annotations

import io
from collections import defaultdict
from pathlib import Path
from typing import Any

from curation.params import LlmParams, ModelSpec, ValidityParams
from curation.pseudonyms import keyed_hash
from curation.quality.items import is_mcq, mean, template_key
from curation.report import Report
from curation.schema import Item
from curation.text import LETTERS


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
    from curation.llm import load_prompt, model_client, not_configured

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
        client = model_client(llm, spec, params.temperature)
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
                    report.counts[f"validity:failed_call:{s.error or 'unknown'}"] += 1
                    continue
                it = by_id[s.item_id]
                hits[s.item_id].append(extract_letter(s.response, it.options) == LETTERS[it.answer_index or 0])
            per_cond[cond] = {iid: sum(h) / len(h) for iid, h in hits.items()}
        no_img = per_cond.get("no_image", {})
        for iid, rate in no_img.items():
            if rate > 0.5:
                q = by_id[iid].quality
                q.answered_without_image = sorted({*q.answered_without_image, spec.name})
                report.counts[f"tagged:answered_without_image:{spec.name}"] += 1
        templates: dict[str, dict[str, Any]] = defaultdict(dict)
        for cond_name, rates in per_cond.items():
            by_t: dict[str, list[float]] = defaultdict(list)
            for iid, r in rates.items():
                by_t[template_key(by_id[iid])].append(r)
            for t, rs in by_t.items():
                templates[t][cond_name] = mean(rs)
        for t in templates:
            its = [i for i in mcq if template_key(i) == t]
            templates[t]["answered_without_image"] = sum(no_img.get(i.item_id, 0) > 0.5 for i in its)
        out["models"][spec.name] = {
            "model": spec.model,
            "overall": {cond: mean(list(r.values())) for cond, r in per_cond.items()},
            "answered_without_image": sum(r > 0.5 for r in no_img.values()),
            "templates": dict(sorted(templates.items())),
            "calls": client.usage.as_metrics(),
        }
    return out

