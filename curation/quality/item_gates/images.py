"""Gate: the item shows at least one image, and every image it names is there and decodes."""

from __future__ import annotations

from pathlib import Path

from curation.quality.item_gates import ItemGate
from curation.schema import Item


def check(item: Item, synonyms: list[set[str]]) -> list[str]:
    if not item.images:
        return ["no_image"]
    for img in item.images:
        if not Path(img).is_file():
            return ["image_missing"]
        try:
            from PIL import Image

            with Image.open(img) as im:
                im.verify()
        except Exception:
            return ["image_unreadable"]
    return []


GATE = ItemGate("images", 30, check)
