"""Asking a model a benchmark item and reading its answer: shared by the filter's model gates and validity
baselines (quality) and by the evaluation harness (evaluate), so neither imports the other.

An item is asked through the versioned ``eval_answer`` prompt with its images as data URIs; multi-turn items are
played turn by turn. ``extract_letter`` reads the option a response commits to.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curation.llm import LLMClient, Prompt, Request
from curation.schema import Item, ReleaseRow
from curation.text import LETTERS, plain

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
    error: str | None = None
    letter: str | None = None
    correct: bool | None = None
    judge: dict[str, Any] | None = None
    judge_score: float | None = None
    error_type: str | None = None
    bertscore: float | None = None


def _image_parts(images: list[bytes]) -> list[dict[str, Any]]:
    out = []
    for data in images:
        mime = "image/png" if data[:8] == b"\x89PNG\r\n\x1a\n" else "image/jpeg"
        out.append({"type": "image_url", "image_url": {"url": f"data:{mime};base64,{base64.b64encode(data).decode()}"}})
    return out


def ask(client: LLMClient, prompt: Prompt, items: list[EvalItem], n: int, temperature: float) -> list[Sample]:
    """n samples for every item; multi-turn items are played turn by turn, all dialogues advancing together."""
    samples = {(it.item_id, s): Sample(it.item_id, s) for it in items for s in range(n)}
    single = [it for it in items if it.format != "multi_turn"]
    reqs, keys = [], []
    for it in single:
        base = prompt.messages(context=it.context, question=it.question, options=it.options)
        base[-1]["content"] = [{"type": "text", "text": base[-1]["content"]}, *_image_parts(it.images)]
        for s in range(n):
            reqs.append(Request(messages=base, prompt_id=prompt.id, prompt_version=prompt.version, seed=s,
                                temperature=temperature, max_tokens=prompt.max_tokens))
            keys.append((it.item_id, s))
    for key, res in zip(keys, client.run(reqs), strict=True):
        samples[key].response = res.text if res.ok else None
        samples[key].error = None if res.ok else res.error
    # dialogues: the clinician's turns are the user's; the model answers each in turn
    dialogues: list[dict[str, Any]] = []
    for it in (i for i in items if i.format == "multi_turn"):
        # the question first (asked with the images), then each clinician turn, each revealing something new
        asks = [a for a in [it.question, *(t["text"] for t in it.turns if t["role"] != "model")] if a]
        sys_msg, first = prompt.messages(context=it.context, question=asks[0], options=[])
        first = {"role": "user", "content": [{"type": "text", "text": first["content"]}, *_image_parts(it.images)]}
        for s in range(n):
            dialogues.append({"key": (it.item_id, s), "messages": [sys_msg, first], "asks": asks[1:], "seed": s})
    live = dialogues
    while live:
        reqs = [Request(messages=d["messages"], prompt_id=prompt.id, prompt_version=prompt.version, seed=d["seed"],
                        temperature=temperature, max_tokens=prompt.max_tokens) for d in live]
        nxt = []
        for d, res in zip(live, client.run(reqs), strict=True):
            smp = samples[d["key"]]
            if not res.ok:
                smp.error = res.error
                continue
            smp.dialogue.append({"role": "model", "text": res.text or ""})
            d["messages"] = [*d["messages"], {"role": "assistant", "content": res.text or ""}]
            if d["asks"]:
                q = d["asks"].pop(0)
                smp.dialogue.append({"role": "clinician", "text": q})
                d["messages"].append({"role": "user", "content": q})
                nxt.append(d)
            else:
                smp.response = res.text
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
