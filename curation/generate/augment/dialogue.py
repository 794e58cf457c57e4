"""A consult dialogue for a multi-turn item: clinician and consultant alternate, and the consultant's last turn
reaches the diagnosis."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from curation.generate.augment.base import ItemStep, leaks
from curation.schema import Item, ItemFormat, Turn


class DialogueTurn(BaseModel):
    role: Literal["clinician", "model"]
    text: str


class DialogueReply(BaseModel):
    turns: list[DialogueTurn]


class Dialogue(ItemStep[DialogueReply]):
    name = "dialogue"
    order = 40
    version = 1
    prompt_name = "dialogue"
    reply_model = DialogueReply

    def applies(self, item: Item) -> bool:
        return item.format == ItemFormat.multi_turn

    def values(self, inp: Item) -> dict[str, Any]:
        return {"context": inp.context, "facts": inp.facts, "answer": inp.answer}

    def check(self, inp: Item, reply: DialogueReply) -> str | None:
        roles = [t.role for t in reply.turns]
        if roles[0] != "clinician" or any(a == b for a, b in zip(roles, roles[1:], strict=False)):
            return "roles_not_alternating"
        last_model = [t.text for t in reply.turns if t.role == "model"][-1:]
        if not last_model or not leaks(inp.answer, last_model[0]):
            return "diagnosis_not_reached"
        return None

    def replaced(self, item: Item) -> dict[str, Any]:
        return {"turns": [t.model_dump() for t in item.turns]}

    def change(self, item: Item, reply: DialogueReply) -> None:
        item.turns = [Turn(role=t.role, text=" ".join(t.text.split())) for t in reply.turns]
