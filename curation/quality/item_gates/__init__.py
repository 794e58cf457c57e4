"""Per-item gates: what makes one item unusable on its own (empty text, a malformed choice, a missing image, the
answer written in the question). Each module of this package is one gate, registered by being here: it defines
``GATE``, an ``ItemGate`` whose ``check`` gives the item's reason codes (empty when it passes). ``filter`` walks them
all in ``order`` and reads each code as a :class:`Reason`; a code among the gate's ``measured`` leaves the item
well-formed, so it is still measured with its template (a leak or a cue says something about the template, not only
the item).

Adding a gate is adding a module (the smallest: ``text.py``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from curation.quality import registered
from curation.schema import Item


@dataclass(frozen=True)
class ItemGate:
    name: str
    order: int  # gates run, and their reasons are listed, in this order
    check: Callable[[Item, list[set[str]]], list[str]]  # (item, synonym groups of the lexicon) -> reason codes
    measured: frozenset[str] = frozenset()  # the codes that leave the item well-formed
    leak: bool = False  # its reasons are leaks of the answer


@dataclass(frozen=True)
class Reason:
    """Why the filter drops an item, whichever gate decided (a per-item gate, a leak rule, a template measure, a set
    gate or a model gate): its code (counted in the report as ``rejected:<code>``), the check within it that failed
    where the gate has several (the LLM verifier's), what the gate said of it, whether the item stays well-formed
    (still measured with its template) and whether it is a leak of the answer (validity.json counts those)."""

    code: str
    check: str = ""
    detail: object = field(default=None, compare=False)  # a model's rates or words: not part of the reason's identity
    well_formed: bool = False
    leak: bool = False

    @property
    def label(self) -> str:
        """The reason as rejected.jsonl lists it."""
        return f"{self.code}:{self.check}" if self.check else self.code


@lru_cache(maxsize=1)
def gates() -> tuple[ItemGate, ...]:
    """Every gate of this package, in order."""
    return registered(__name__, __path__, "GATE", ItemGate)


def reasons(item: Item, synonyms: list[set[str]] | None = None) -> list[Reason]:
    """Why an item fails the gates; empty when it passes every gate."""
    return [Reason(code, well_formed=code in gate.measured, leak=gate.leak)
            for gate in gates() for code in gate.check(item, synonyms or [])]


def check(item: Item, synonyms: list[set[str]] | None = None) -> list[str]:
    """The codes of :func:`reasons`."""
    return [r.code for r in reasons(item, synonyms)]
