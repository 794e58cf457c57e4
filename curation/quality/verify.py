"""The LLM verifier: a senior neurologist's audit of an item as written, its images attached, before clinicians
review it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from curation.llm.images import with_images
from curation.llm.step import LLMStep
from curation.schema import Item

VERIFIER_CHECKS = ("self_contained", "single_answer", "clinically_valid", "image_text_consistent")


class Verdict(BaseModel):
    self_contained: bool
    single_answer: bool
    clinically_valid: bool
    image_text_consistent: bool
    reason: str | None = None

    def failed(self) -> list[str]:
        """The checks the item fails, in ``VERIFIER_CHECKS`` order."""
        return [k for k in VERIFIER_CHECKS if not getattr(self, k)]


class VerifyItem(LLMStep[Item, Verdict]):
    name = "verify_item"
    version = 1
    prompt_name = "verify_item"
    reply_model = Verdict

    def values(self, inp: Item) -> dict[str, Any]:
        return {"context": inp.context, "question": inp.question, "options": inp.options, "answer": inp.answer}

    def messages(self, inp: Item) -> list[dict[str, Any]]:
        return with_images(super().messages(inp), inp.images)

    def input_id(self, inp: Item) -> str:
        return inp.item_id
