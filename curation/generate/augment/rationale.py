"""The reference rationale of an item that has none: why the answer, from the facts given."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from curation.generate.augment.base import ItemStep
from curation.schema import Item, ItemFormat


class RationaleReply(BaseModel):
    rationale: str


class Rationale(ItemStep[RationaleReply]):
    name = "rationale"
    order = 30
    version = 1
    prompt_name = "rationale"
    reply_model = RationaleReply

    def applies(self, item: Item) -> bool:
        return not item.rationale and item.format != ItemFormat.multi_turn

    def values(self, inp: Item) -> dict[str, Any]:
        return {"context": inp.context, "question": inp.question, "answer": inp.answer, "facts": inp.facts}

    def replaced(self, item: Item) -> dict[str, Any]:
        return {"rationale": item.rationale}

    def change(self, item: Item, reply: RationaleReply) -> None:
        item.rationale = " ".join(reply.rationale.split())
