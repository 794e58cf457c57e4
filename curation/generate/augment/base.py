"""The two kinds of generation step: one that rewrites a part of a template item, one that writes new items from a
case-report figure. Each is an ``LLMStep``; what the kind adds is which inputs it takes and what a reply does."""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from curation.jsonio import content_hash
from curation.llm.step import LLMStep, StepOutcome, StepParams
from curation.schema import Augmentation, Case, Figure, Item
from curation.text import spaced

R = TypeVar("R")


def leaks(answer: str, text: str) -> bool:
    """``text`` states ``answer`` (three characters or more)."""
    a = spaced(answer)
    return len(a) >= 3 and a in spaced(text)


def selected(item_id: str, step: str, fraction: float, seed: int) -> bool:
    """Whether ``step`` runs on an item: a seeded hash draw, stable across runs."""
    return int(content_hash([seed, step, item_id], 8), 16) / 16**8 < fraction


class Sampled(StepParams):
    """A step that runs on a seeded fraction of the items it could run on."""

    fraction: float
    seed: int


class ItemStep(LLMStep[Item, R]):
    """Rewrites one part of a template item. The change is recorded in ``item.augmentations`` with what it
    replaced, so a reviewer sees what the model wrote."""

    order: ClassVar[int] = 100  # item steps apply in this order (a step without one comes after the project's)

    @abstractmethod
    def applies(self, item: Item) -> bool:
        """Whether the step runs on ``item``."""

    @abstractmethod
    def replaced(self, item: Item) -> dict[str, Any]:
        """The part of ``item`` the step rewrites, as it is before."""

    @abstractmethod
    def change(self, item: Item, reply: R) -> None:
        """Write ``reply`` into ``item``."""

    def input_id(self, inp: Item) -> str:
        return inp.item_id

    def apply(self, item: Item, outcome: StepOutcome[R]) -> None:
        prov = outcome.origin
        item.augmentations.append(Augmentation(step=prov.step, model=prov.model, prompt_id=prov.prompt_id,
                                               prompt_version=prov.prompt_version, cache_key=prov.cache_key,
                                               replaced=self.replaced(item)))
        self.change(item, outcome.value)


@dataclass(frozen=True)
class FigureInput:
    """A case-report figure with a caption and a render, and its case."""

    case: Case
    figure: Figure
    image: str  # the render shown to the model


class FigureStep(LLMStep[FigureInput, R]):
    """Writes new items from a case-report figure and its caption."""

    order: ClassVar[int] = 100  # figure steps run in this order

    def inputs(self, case: Case) -> list[FigureInput]:
        """The figures of ``case`` the step can use: present, captioned, rendered."""
        return [FigureInput(case, fig, fig.renders[0].path) for fig in case.figures
                if not fig.missing and fig.caption.strip() and fig.renders]

    def input_id(self, inp: FigureInput) -> str:
        return f"{inp.case.case_id}/{inp.figure.figure_id}"

    @abstractmethod
    def items(self, inp: FigureInput, outcome: StepOutcome[R]) -> list[Item]:
        """The items an ok reply makes."""
