"""LLM augmentation of template items, and LLM questions written straight from case-report figures.

Each step is one module here, an ``LLMStep`` (``curation.llm.step``) with a prompt under ``templates/prompts``
and a typed reply: the client validates every answer against the prompt's schema and the step's own check
before it touches an item, and a change is recorded in ``item.augmentations`` with the original text, so a
reviewer sees what the model wrote. A failed call or an unusable answer leaves the item as the template made it
and is counted and logged with the raw text.

A new step is a module with an ``ItemStep`` or ``FigureStep`` subclass, listed in ``STEPS``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from curation.generate.augment.base import FigureStep, ItemStep
from curation.generate.augment.caption_questions import CaptionQuestions
from curation.generate.augment.dialogue import Dialogue
from curation.generate.augment.distractors import Distractors
from curation.generate.augment.paraphrase import Paraphrase
from curation.generate.augment.rationale import Rationale
from curation.llm import LLMClient
from curation.llm.step import StepOutcome, run_steps
from curation.params import GenerateParams
from curation.report import Report
from curation.schema import Case, Item

# the steps by name (``generate.llm_steps``), in the order they are applied to an item
STEPS: dict[str, type[ItemStep[Any] | FigureStep[Any]]] = {
    s.name: s for s in (Paraphrase, Distractors, Rationale, Dialogue, CaptionQuestions)}


class Augmenter:
    def __init__(self, params: GenerateParams, client: LLMClient, report: Report, failures_log: Callable[[dict], None],
                 prompts_dir: str | Path) -> None:
        self.client = client
        self.report = report
        self.log_failure = failures_log
        steps = [STEPS[name](params, prompts_dir) for name in STEPS if name in params.llm_steps]
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
