"""Gate: the item has a question and an answer, and no template placeholder or missing value left in its text."""

from __future__ import annotations

import re

from curation.quality.item_gates import ItemGate
from curation.schema import Item

RESIDUE = re.compile(r"\{\{|\}\}|\{%|\bNone\b|\bnan\b|\bundefined\b")


def check(item: Item, synonyms: list[set[str]]) -> list[str]:
    reasons = []
    texts = [item.question, item.answer, item.context, *item.options, *(t.text for t in item.turns)]
    if not item.question.strip() or not item.answer.strip():
        reasons.append("empty_text")
    if any(RESIDUE.search(t or "") for t in texts):
        reasons.append("template_residue")
    return reasons


GATE = ItemGate("text", 10, check)
