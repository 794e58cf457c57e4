"""Gate: the answer (or a synonym of it from the lexicon) is not written in what the model reads beside the image."""

from __future__ import annotations

import re

from curation.quality.item_gates import ItemGate
from curation.schema import Item
from curation.text import plain


def check(item: Item, synonyms: list[set[str]]) -> list[str]:
    ans = plain(item.answer)
    if len(ans) < 4:
        return []
    from curation.quality.items import visible_text

    # a dialogue shows its clinician turns too (the model turns are the reference)
    visible = plain(visible_text(item))
    if re.search(rf"\b{re.escape(ans)}\b", visible):
        return ["answer_leak"]
    for group in synonyms:  # a synonym of the answer gives it away just as well
        if ans in group and any(len(t) >= 4 and re.search(rf"\b{re.escape(t)}\b", visible) for t in group):
            return ["answer_leak_synonym"]
    return []


GATE = ItemGate("answer_leak", 40, check, measured=frozenset({"answer_leak", "answer_leak_synonym"}),
                leak=True)
