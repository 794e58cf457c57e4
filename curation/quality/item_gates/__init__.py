"""Per-item gates: what makes one item unusable on its own (empty text, a malformed choice, a missing image, the
answer written in the question). Each module of this package is one gate, registered by being here: it defines
``GATE``, an ``ItemGate`` whose ``check`` gives the item's reasons (empty when it passes). ``filter`` walks them all
in ``order``; a reason that starts with one of a gate's ``measured`` prefixes leaves the item well-formed, so it is
still measured with its template (a leak or a cue says something about the template, not only the item).

Adding a gate is adding a module (the smallest: ``text.py``)."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from curation.schema import Item


@dataclass(frozen=True)
class ItemGate:
    name: str
    order: int  # gates run, and their reasons are listed, in this order
    check: Callable[[Item, list[set[str]]], list[str]]  # (item, synonym groups of the lexicon) -> reasons
    measured: tuple[str, ...] = ()


@lru_cache(maxsize=1)
def gates() -> tuple[ItemGate, ...]:
    """Every gate of this package, in order."""
    found = []
    for mod in pkgutil.iter_modules(__path__):
        gate = getattr(importlib.import_module(f"{__name__}.{mod.name}"), "GATE", None)
        if not isinstance(gate, ItemGate):
            raise TypeError(f"{__name__}.{mod.name} defines no GATE (an ItemGate)")
        found.append(gate)
    return tuple(sorted(found, key=lambda g: (g.order, g.name)))


def check(item: Item, synonyms: list[set[str]] | None = None) -> list[str]:
    """Reasons an item is unusable; empty when it passes every gate."""
    return [r for gate in gates() for r in gate.check(item, synonyms or [])]


def measured_prefixes() -> tuple[str, ...]:
    """Reason prefixes that leave an item well-formed: it is still measured with its template."""
    return tuple(p for gate in gates() for p in gate.measured)
