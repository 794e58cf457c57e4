"""LLM augmentation of template items, and LLM questions written straight from case-report figures.

Each step is one module here, an ``LLMStep`` (``curation.llm.step``) with a prompt under ``templates/prompts``
and a typed reply: the client validates every answer against the prompt's schema and the step's own check
before it touches an item, and a change is recorded in ``item.augmentations`` with the original text, so a
reviewer sees what the model wrote. A failed call or an unusable answer leaves the item as the template made it
and is counted and logged with the raw text.

A new step is a module here with an ``ItemStep`` or ``FigureStep`` subclass, and its prompt: registered by being
here (``STEPS``), run by default (``generate.llm_steps: all``), after the project's steps unless its ``order`` says
otherwise.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from curation.errors import ParamsError
from curation.generate.augment.base import FigureStep, ItemStep
from curation.llm import LLMClient
from curation.llm.step import StepOutcome, run_steps
from curation.params import GenerateParams
from curation.report import Report
from curation.schema import Case, Item


def _steps() -> dict[str, type[ItemStep[Any] | FigureStep[Any]]]:
    """Every step defined by a module of this package, by name, in ``order`` (then name)."""
    found: list[type[ItemStep[Any] | FigureStep[Any]]] = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        found += [c for c in vars(module).values() if isinstance(c, type) and issubclass(c, ItemStep | FigureStep)
                  and c.__module__ == module.__name__ and "name" in vars(c) and not inspect.isabstract(c)]
    return {c.name: c for c in sorted(found, key=lambda c: (c.order, c.name))}


# the steps by name (``generate.llm_steps``), in the order they are applied to an item
STEPS = _steps()


def chosen(llm_steps: list[str] | str) -> list[str]:
    """The steps ``generate.llm_steps`` names (``all``: every one here), in ``STEPS`` order."""
    names = list(STEPS) if llm_steps == "all" else list(llm_steps)
    unknown = sorted(set(names) - set(STEPS))
    if unknown:
        raise ParamsError(f"generate.llm_steps names no step of curation/generate/augment: {', '.join(unknown)} "
                          f"(steps: {', '.join(STEPS)})")
    return [name for name in STEPS if name in names]


class Augmenter:
    def __init__(self, params: GenerateParams, client: LLMClient, report: Report, failures_log: Callable[[dict], None],
                 prompts_dir: str | Path) -> None:
        self.client = client
        self.report = report
        self.log_failure = failures_log
        steps = [STEPS[name](params, prompts_dir) for name in chosen(params.llm_steps)]
        self.item_steps = [s for s in steps if isinstance(s, ItemStep)]
        self.figure_steps = [s for s in steps if isinstance(s, FigureStep)]

    def _settle(self, input_id: str, outcome: StepOutcome[Any]) -> bool:
        step = outcome.origin.step
        self.report.counts[f"llm:{step}:{'ok' if outcome.ok else 'failed'}"] += 1
        if not outcome.ok:
            self.report.counts[f"llm_failed:{step}:{outcome.code}"] += 1
            self.log_failure({"step": step, "item_id": input_id, "error": outcome.code, "detail": outcome.detail,
                              "raw": list(outcome.raw_reply)})
        return outcome.ok

    def augment(self, items: list[Item]) -> list[Item]:
        """Every step that applies to a template item, all asked in one batch, applied in ``STEPS`` order."""
        jobs = [(step, item) for item in items if item.generator.kind == "template"
                for step in self.item_steps if step.applies(item)]
        for (step, item), outcome in zip(jobs, run_steps(self.client, jobs), strict=True):
            if self._settle(item.item_id, outcome):
                step.apply(item, outcome)
        return items

    def caption_items(self, cases: list[Case]) -> Iterator[Item]:
        for step in self.figure_steps:
            inputs = [inp for case in cases for inp in step.inputs(case)]
            for inp, outcome in zip(inputs, step.run(self.client, inputs), strict=True):
                if self._settle(step.input_id(inp), outcome):
                    for item in step.items(inp, outcome):
                        self.report.counts[f"llm:{step.name}:items"] += 1
                        yield item
