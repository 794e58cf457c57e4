"""Harder distractors for a multiple-choice item: plausible, of the answer's kind, and never a paraphrase of it."""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, BaseModel, Field

from curation.generate.augment.base import ItemStep, Sampled, selected
from curation.schema import Item, ItemFormat
from curation.text import spaced


class DistractorsParams(Sampled):
    fraction: float = Field(validation_alias=AliasChoices("distractor_fraction", "fraction"))


class DistractorsReply(BaseModel):
    distractors: list[str]


class Distractors(ItemStep[DistractorsReply]):
    name = "distractors"
    order = 20
    version = 1
    prompt_name = "distractors"
    params_model = DistractorsParams
    reply_model = DistractorsReply
    params: DistractorsParams

    def applies(self, item: Item) -> bool:
        return item.format == ItemFormat.mcq and item.answer_index is not None and \
            selected(item.item_id, self.name, self.params.fraction, self.params.seed)

    def values(self, inp: Item) -> dict[str, Any]:
        current = [o for i, o in enumerate(inp.options) if i != inp.answer_index]
        return {"n": len(inp.options) - 1, "context": inp.context, "question": inp.question, "answer": inp.answer,
                "distractors": current}

    def check(self, inp: Item, reply: DistractorsReply) -> str | None:
        need = len(inp.options) - 1
        ds = [d.strip() for d in reply.distractors]
        if len(ds) < need:
            return "too_few"
        ds = ds[:need]
        if len({spaced(d) for d in ds}) < need:
            return "duplicate_options"
        a = spaced(inp.answer)
        if any(spaced(d) == a or spaced(d) in a or a in spaced(d) for d in ds):
            return "paraphrases_answer"
        return None

    def replaced(self, item: Item) -> dict[str, Any]:
        return {"options": list(item.options)}

    def change(self, item: Item, reply: DistractorsReply) -> None:
        need = len(item.options) - 1
        new = [" ".join(d.split()) for d in reply.distractors[:need]]
        i = item.answer_index or 0
        item.options = new[:i] + [item.answer] + new[i:]
