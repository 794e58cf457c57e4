"""LLM augmentation of template items, and LLM questions written straight from case-report figures.

Each step is a prompt under ``templates/prompts`` with a JSON schema; every answer is validated (schema, then
the step's own check) before it touches an item, and a change is recorded in ``item.augmentations`` with the
original text, so a reviewer sees what the model wrote. A failed call or an unusable answer leaves the item
as the template made it and is counted and logged with the raw text.
"""

from __future__ import annotations

import base64
import mimetypes
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from curation.llm import LLMClient, Prompt, Request, Result, load_prompt
from curation.params import GenerateParams
from curation.records import content_hash
from curation.report import Report
from curation.schema import (
    Augmentation,
    Case,
    Generator,
    Item,
    ItemFormat,
    ReasoningDim,
    TaskType,
    Turn,
    VisualDim,
)
from curation.text import spaced


def _leaks(answer: str, text: str) -> bool:
    a = spaced(answer)
    return len(a) >= 3 and a in spaced(text)


def data_uri(path: str | Path) -> str:
    mime = mimetypes.guess_type(str(path))[0] or "image/png"
    return f"data:{mime};base64,{base64.b64encode(Path(path).read_bytes()).decode()}"


def with_images(messages: list[dict[str, Any]], images: list[str]) -> list[dict[str, Any]]:
    """Attach images to the last user message as data URIs (the OpenAI vision message format)."""
    paths = [p for p in images if Path(p).is_file()]
    if not paths:
        return messages
    out = [dict(m) for m in messages]
    last = out[-1]
    last["content"] = [{"type": "text", "text": last["content"]}] + [
        {"type": "image_url", "image_url": {"url": data_uri(p)}} for p in paths]
    return out


def _selected(item_id: str, step: str, fraction: float, seed: int) -> bool:
    return int(content_hash([seed, step, item_id], 8), 16) / 16**8 < fraction


class Augmenter:
    def __init__(self, params: GenerateParams, client: LLMClient, report: Report, failures_log: Callable[[dict], None],
                 prompts_dir: str | Path) -> None:
        self.params = params
        self.client = client
        self.report = report
        self.log_failure = failures_log
        self.prompts: dict[str, Prompt] = {s: load_prompt(s, prompts_dir) for s in params.llm_steps}

    # -- per-step requests and how an answer is applied -------------------------------------------------
    def _plan(self, item: Item) -> list[tuple[str, Request, Callable[[Item, Any, Result], None]]]:
        plan = []
        p = self.params
        if item.generator.kind != "template":
            return plan
        if "paraphrase" in self.prompts and item.format != ItemFormat.multi_turn and \
                _selected(item.item_id, "paraphrase", p.paraphrase_fraction, p.seed):
            original = item.question

            def check(v: Any) -> str | None:
                q = v["question"]
                if spaced(q) == spaced(original):
                    return "unchanged"
                if "{{" in q or "{%" in q:
                    return "template_residue"
                if _leaks(item.answer, q):
                    return "answer_leaked"
                return None

            req = Request.from_prompt(self.prompts["paraphrase"], check, context=item.context, question=item.question,
                                      options=item.options, answer=item.answer)
            plan.append(("paraphrase", req, self._apply_paraphrase))
        if "distractors" in self.prompts and item.format == ItemFormat.mcq and item.answer_index is not None and \
                _selected(item.item_id, "distractors", p.distractor_fraction, p.seed):
            need = len(item.options) - 1
            current = [o for i, o in enumerate(item.options) if i != item.answer_index]

            def check(v: Any) -> str | None:
                ds = [d.strip() for d in v["distractors"]]
                if len(ds) < need:
                    return "too_few"
                ds = ds[:need]
                if len({spaced(d) for d in ds}) < need:
                    return "duplicate_options"
                a = spaced(item.answer)
                if any(spaced(d) == a or spaced(d) in a or a in spaced(d) for d in ds):
                    return "paraphrases_answer"
                return None

            req = Request.from_prompt(self.prompts["distractors"], check, n=need, context=item.context,
                                      question=item.question, answer=item.answer, distractors=current)
            plan.append(("distractors", req, self._apply_distractors))
        if "rationale" in self.prompts and not item.rationale and item.format != ItemFormat.multi_turn:
            req = Request.from_prompt(self.prompts["rationale"], None, context=item.context, question=item.question,
                                      answer=item.answer, facts=item.facts)
            plan.append(("rationale", req, self._apply_rationale))
        if "dialogue" in self.prompts and item.format == ItemFormat.multi_turn:
            answer = item.answer

            def check(v: Any) -> str | None:
                roles = [t["role"] for t in v["turns"]]
                if roles[0] != "clinician" or any(a == b for a, b in zip(roles, roles[1:], strict=False)):
                    return "roles_not_alternating"
                last_model = [t["text"] for t in v["turns"] if t["role"] == "model"][-1:]
                if not last_model or not _leaks(answer, last_model[0]):
                    return "diagnosis_not_reached"
                return None

            req = Request.from_prompt(self.prompts["dialogue"], check, context=item.context, facts=item.facts,
                                      answer=item.answer)
            plan.append(("dialogue", req, self._apply_dialogue))
        return plan

    def _record(self, item: Item, step: str, res: Result, replaced: dict[str, Any]) -> None:
        prompt = self.prompts[step]
        item.augmentations.append(Augmentation(step=step, model=res.model or self.client.model, prompt_id=prompt.id,
                                               prompt_version=prompt.version, cache_key=res.key, replaced=replaced))

    def _apply_paraphrase(self, item: Item, v: Any, res: Result) -> None:
        self._record(item, "paraphrase", res, {"question": item.question})
        item.question = " ".join(v["question"].split())

    def _apply_distractors(self, item: Item, v: Any, res: Result) -> None:
        need = len(item.options) - 1
        new = [" ".join(d.split()) for d in v["distractors"][:need]]
        self._record(item, "distractors", res, {"options": list(item.options)})
        i = item.answer_index or 0
        item.options = new[:i] + [item.answer] + new[i:]

    def _apply_rationale(self, item: Item, v: Any, res: Result) -> None:
        self._record(item, "rationale", res, {"rationale": item.rationale})
        item.rationale = " ".join(v["rationale"].split())

    def _apply_dialogue(self, item: Item, v: Any, res: Result) -> None:
        self._record(item, "dialogue", res, {"turns": [t.model_dump() for t in item.turns]})
        item.turns = [Turn(role=t["role"], text=" ".join(t["text"].split())) for t in v["turns"]]

    # -- running ----------------------------------------------------------------------------------------
    def _settle(self, step: str, item_id: str, res: Result) -> bool:
        self.report.counts[f"llm:{step}:{'ok' if res.ok else 'failed'}"] += 1
        if not res.ok:
            self.report.counts[f"llm_failed:{step}:{(res.error or 'unknown').split(':')[0]}"] += 1
            self.log_failure({"step": step, "item_id": item_id, "error": res.error, "raw": res.texts})
        return res.ok

    def augment(self, items: list[Item]) -> list[Item]:
        jobs = [(item, step, req, apply) for item in items for step, req, apply in self._plan(item)]
        results = self.client.run([j[2] for j in jobs])
        for (item, step, _req, apply), res in zip(jobs, results, strict=True):
            if self._settle(step, item.item_id, res):
                apply(item, res.value, res)
        return items

    def caption_items(self, cases: list[Case]) -> Iterator[Item]:
        if "caption_questions" not in self.prompts:
            return
        prompt = self.prompts["caption_questions"]
        jobs = []
        for case in cases:
            for fig in case.figures:
                if fig.missing or not fig.caption.strip() or not fig.renders:
                    continue
                image = fig.renders[0].path

                def check(v: Any) -> str | None:
                    for q in v["questions"]:
                        if len({spaced(o) for o in q["options"]}) != len(q["options"]):
                            return "duplicate_options"
                        if q["answer_index"] >= len(q["options"]):
                            return "answer_index_out_of_range"
                    return None

                req = Request.from_prompt(prompt, check, n=self.params.caption_questions_per_figure,
                                          presentation=case.presentation, caption=fig.caption,
                                          diagnosis=case.diagnosis.primary or "")
                req.messages = with_images(req.messages, [image])
                jobs.append((case, fig, image, req))
        results = self.client.run([j[3] for j in jobs])
        for (case, fig, image, _req), res in zip(jobs, results, strict=True):
            if not self._settle("caption_questions", f"{case.case_id}/{fig.figure_id}", res):
                continue
            for n, q in enumerate(res.value["questions"][: self.params.caption_questions_per_figure]):
                options = [" ".join(o.split()) for o in q["options"]]
                answer = options[q["answer_index"]]
                body = {"case_id": case.case_id, "figure": fig.figure_id, "prompt": [prompt.id, prompt.version],
                        "n": n, "question": q["question"], "options": options}
                self.report.counts["llm:caption_questions:items"] += 1
                yield Item(
                    item_id="itm-" + content_hash(body), case_id=case.case_id, source=case.source,
                    task_type=TaskType(q["task_type"]), format=ItemFormat.mcq, question=" ".join(q["question"].split()),
                    options=options, answer=answer, answer_index=q["answer_index"],
                    rationale=" ".join(q["rationale"].split()), images=[image],
                    context=case.presentation.strip(),
                    visual_dims=sorted({VisualDim(d) for d in q["visual_dims"]}),
                    reasoning_dims=sorted({ReasoningDim(d) for d in q["reasoning_dims"]}),
                    facts={"caption": fig.caption, "figure_id": fig.figure_id},
                    generator=Generator(kind="llm", model=res.model or self.client.model, prompt_hash=res.key),
                    license=case.license, attribution=case.attribution, status="draft",
                )
