"""Paraphrase a template question so it does not read as a template; never hint at the answer."""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, BaseModel, Field

from curation.generate.augment.base import ItemStep, Sampled, leaks, selected
from curation.schema import Item, ItemFormat
from curation.text import spaced


class ParaphraseParams(Sampled):
    fraction: float = Field(validation_alias=AliasChoices("paraphrase_fraction", "fraction"))


class ParaphraseReply(BaseModel):
    question: str


class Paraphrase(ItemStep[ParaphraseReply]):
    name = "paraphrase"
    order = 10
    version = 1
    prompt_name = "paraphrase"
    params_model = ParaphraseParams
    reply_model = ParaphraseReply
    params: ParaphraseParams

    def applies(self, item: Item) -> bool:
        return item.format != ItemFormat.multi_turn and \
            selected(item.item_id, self.name, self.params.fraction, self.params.seed)

    def values(self, inp: Item) -> dict[str, Any]:
        return {"context": inp.context, "question": inp.question, "options": inp.options, "answer": inp.answer}

    def check(self, inp: Item, reply: ParaphraseReply) -> str | None:
        q = reply.question
        if spaced(q) == spaced(inp.question):
            return "unchanged"
        if "{{" in q or "{%" in q:
            return "template_residue"
        if leaks(inp.answer, q):
            return "answer_leaked"
        return None

    def replaced(self, item: Item) -> dict[str, Any]:
        return {"question": item.question}

    def change(self, item: Item, reply: ParaphraseReply) -> None:
        item.question = " ".join(reply.question.split())
