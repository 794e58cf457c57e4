"""Asking a model a benchmark item and reading its answer: shared by the filter's model gates and validity
baselines (quality) and by the evaluation harness (evaluate), so neither imports the other.

An item is asked through the versioned ``eval_answer`` prompt with its images as data URIs; multi-turn items are
played turn by turn. ``extract_letter`` reads the option a response commits to.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curation.llm import LLMClient, Prompt
from curation.llm.images import image_parts
from curation.llm.step import LLMStep, StepParams
from curation.schema import Item, ReleaseRow
from curation.text import LETTERS, plain, spaced

_REFUSAL = re.compile(r"\b(?:i cannot|i can't|i am unable|i'm unable|cannot determine|unable to (?:determine|answer)|"
                      r"not possible to (?:determine|answer)|as an ai)\b", re.I)



@dataclass
class EvalItem:
    item_id: str
    task_type: str
    format: str
    question: str
    context: str
    options: list[str]
    answer: str
    answer_index: int | None
    reference: str
    turns: list[dict[str, str]]
    images: list[bytes]
    visual_dims: list[str]
    reasoning_dims: list[str]
    source: str
    difficulty: str
    split: str

    @classmethod
    def from_row(cls, row: ReleaseRow, images: list[bytes]) -> EvalItem:
        """A release row as the harness asks it (``images``: its pixels, embedded or rebuilt)."""
        return cls(
            item_id=row.item_id, task_type=row.task_type, format=row.format, question=row.question,
            context=row.context, options=list(row.options), answer=row.answer, answer_index=row.answer_index,
            reference=row.reference_answer or row.answer, turns=json.loads(row.turns or "[]"), images=images,
            visual_dims=list(row.visual_dims), reasoning_dims=list(row.reasoning_dims), source=row.source,
            difficulty=row.difficulty or "unrated", split=row.split)

    @classmethod
    def from_item(cls, item: Item, with_images: bool) -> EvalItem:
        """A pipeline item as the filter's model gates ask it (images read from its renders when ``with_images``)."""
        return cls(
            item_id=item.item_id, task_type=item.task_type.value, format=item.format.value, question=item.question,
            context=item.context, options=list(item.options), answer=item.answer, answer_index=item.answer_index,
            reference=item.reference_answer or item.answer, turns=[t.model_dump() for t in item.turns],
            images=[Path(p).read_bytes() for p in item.images] if with_images else [],
            visual_dims=[d.value for d in item.visual_dims], reasoning_dims=[d.value for d in item.reasoning_dims],
            source=item.source.value, difficulty=item.difficulty or "", split="")


@dataclass
class Sample:
    item_id: str
    sample: int
    response: str | None = None
    dialogue: list[dict[str, str]] = field(default_factory=list)
    error: str | None = None  # the failure's code (malformed_json, rejected, http_500 ...)
    error_detail: str = ""  # what in the reply it was about, where the code has a detail
    letter: str | None = None
    correct: bool | None = None
    judge: dict[str, Any] | None = None
    judge_score: float | None = None
    error_type: str | None = None
    bertscore: float | None = None


@dataclass(frozen=True)
class Ask:
    """One sample of one item: its first question, or (``history`` set) a dialogue's next turn."""

    item: EvalItem
    sample: int
    history: tuple[dict[str, Any], ...] | None = None


class AnswerParams(StepParams):
    temperature: float


class AnswerItem(LLMStep[Ask, str]):
    """A model answers an item as an examinee would: its context and question (a dialogue's first ask) in the
    ``eval_answer`` prompt, its images attached; the reply is free text, read later (``extract_letter``)."""

    name = "answer_item"
    version = 1
    prompt_name = "eval_answer"
    params_model = AnswerParams
    params: AnswerParams

    def values(self, inp: Ask) -> dict[str, Any]:
        it = inp.item
        if it.format == "multi_turn":  # the question first (asked with the images), the clinician's turns after
            return {"context": it.context, "question": dialogue_asks(it)[0], "options": []}
        return {"context": it.context, "question": it.question, "options": it.options}

    def messages(self, inp: Ask) -> list[dict[str, Any]]:
        if inp.history is not None:
            return list(inp.history)
        system, user = super().messages(inp)
        return [system, {"role": "user", "content": [{"type": "text", "text": user["content"]},
                                                     *image_parts(inp.item.images)]}]

    def sampling(self, inp: Ask) -> dict[str, Any]:
        return {"seed": inp.sample, "temperature": self.params.temperature}

    def input_id(self, inp: Ask) -> str:
        return f"{inp.item.item_id}#{inp.sample}"


def dialogue_asks(it: EvalItem) -> list[str]:
    """What a multi-turn item asks, in order: its question, then each clinician turn, each revealing more."""
    return [a for a in [it.question, *(t["text"] for t in it.turns if t["role"] != "model")] if a]


@dataclass
class _Dialogue:
    ask: Ask
    todo: list[str]


def ask(client: LLMClient, prompt: Prompt, items: list[EvalItem], n: int, temperature: float) -> list[Sample]:
    """n samples for every item; multi-turn items are played turn by turn, all dialogues advancing together."""
    step = AnswerItem(AnswerParams(temperature=temperature), prompt)
    samples = {(it.item_id, s): Sample(it.item_id, s) for it in items for s in range(n)}
    single = [Ask(it, s) for it in items if it.format != "multi_turn" for s in range(n)]
    for a, out in zip(single, step.run(client, single), strict=True):
        samples[a.item.item_id, a.sample].response = out.value if out.ok else None
        samples[a.item.item_id, a.sample].error = None if out.ok else out.code
        samples[a.item.item_id, a.sample].error_detail = "" if out.ok else out.detail
    # dialogues: the clinician's turns are the user's; the model answers each in turn
    live = [_Dialogue(Ask(it, s), dialogue_asks(it)[1:]) for it in items if it.format == "multi_turn" for s in range(n)]
    while live:
        nxt = []
        for d, out in zip(live, step.run(client, [d.ask for d in live]), strict=True):
            smp = samples[d.ask.item.item_id, d.ask.sample]
            if not out.ok:
                smp.error, smp.error_detail = out.code, out.detail
                continue
            text = out.value or ""
            smp.dialogue.append({"role": "model", "text": text})
            history = [*step.messages(d.ask), {"role": "assistant", "content": text}]
            if d.todo:
                q = d.todo.pop(0)
                smp.dialogue.append({"role": "clinician", "text": q})
                history.append({"role": "user", "content": q})
                d.ask = Ask(d.ask.item, d.ask.sample, tuple(history))
                nxt.append(d)
            else:
                smp.response = out.value
        live = nxt
    return list(samples.values())


def extract_letter(text: str | None, options: Sequence[str]) -> str | None:
    """The option letter a response commits to, or None when it commits to none (or to several).

    Understands "C", "(C)", "C.", "**C**", "Answer: C", "the answer is (C)", "Option C", and a response that
    quotes exactly one option's text. An explicit statement wins over a bare letter elsewhere.
    """
    if not text or not options:
        return None
    valid = set(LETTERS[: len(options)])
    t = text.strip()
    patterns = [  # the letter itself must be a capital, so "the answer is a lesion" is not (A)
        r"(?i:final answer|correct answer|answer|correct option|option|choice)\s*(?i:is)?\s*[:=]?\s*[\(\[\*]*([A-H])\b",
        r"^\s*[\(\[\*]*([A-H])[\)\]\*]*\s*(?:[.):,-]|$)",
        r"\(([A-H])\)",
        r"\*\*([A-H])\*\*",
    ]
    for pat in patterns:
        found = {m for m in re.findall(pat, t, flags=re.M) if m in valid}
        if len(found) == 1:
            return found.pop()
        if len(found) > 1:
            return None
    # the response names exactly one option's text
    nt = plain(t, keep="'")
    hits = [LETTERS[i] for i, o in enumerate(options) if plain(o, keep="'") and plain(o, keep="'") in nt]
    if len(hits) > 1:  # prefer the longest match when one option's text contains another's
        longest = max(hits, key=lambda letter: len(options[LETTERS.index(letter)]))
        others = [h for h in hits if h != longest]
        inside = plain(options[LETTERS.index(longest)], keep="'")
        if all(plain(options[LETTERS.index(h)], keep="'") in inside for h in others):
            return longest
        return None
    return hits[0] if hits else None


def is_refusal(text: str | None) -> bool:
    return not text or not text.strip() or bool(_REFUSAL.search(text))


def grade(fmt: str, response: str | None, options: Sequence[str], answer_index: int | None, answer: str) -> bool:
    """Whether a response is right without a judge: an MCQ by the letter it commits to, any other item by whether
    its answer appears in a response that is no refusal. ``curate evaluate`` and the harness exports score with
    this one function (the exports ship its source)."""
    if fmt == "mcq":
        letter = extract_letter(response, options)
        return letter is not None and answer_index is not None and letter == LETTERS[answer_index]
    return not is_refusal(response) and spaced(answer) in spaced(response)


def weighted_score(scores: Mapping[str, float], weights: dict[str, float], scale_max: float = 5.0) -> float:
    """Rubric criteria (each 1..scale_max) -> one 0..1 score with the configured weights."""
    total = sum(weights.values())
    if total <= 0:
        raise ValueError("rubric weights sum to zero")
    return round(sum(weights[c] * (scores[c] - 1) / (scale_max - 1) for c in weights) / total, 4)
