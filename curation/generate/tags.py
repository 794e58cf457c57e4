"""Dimension tags computed from an item (its answer's facts, its context, its evidence), never declared.

- small_object: a target shown that covers under ``small_object_below`` of the brain in its slice (measured by the
  normalize stage on a volume), or a report's figure of a lesion its report calls small ("small", "punctate",
  "lacunar", a size up to 10 mm: finding_facts._described_small), where no mask measures it
- fine_detail: the answer is a grade read off a small structure (the hippocampi), or a change of the ventricles
  under ``SUBTLE_CHANGE`` of their volume (a gross one, or the size of a large structure, is a global judgement)
- spatial: the answer depends on locating the finding (anatomy, side, territory)
- on a teaching figure (a caption describes what it shows): small_object where the caption calls the finding small
  or measures it up to 10 mm, fine_detail where it reads a signal, density or enhancement, spatial where it places
  the finding (a structure, a side): teaching.figure_dims
- temporal: two time points, registered and shown at the same position
- multi_source: the image and a non-image fact the key depends on, stated in the context, are both needed
- long_tail: the answer depends on a diagnosis rarer than the knowledge table's ``long_tail_below`` (per 100,000)
- causal: the question asks why (a mechanism) or what to do next

Difficulty, where no model rated it (``difficulty``): the number of demands the item makes of a reader of the image,
each visual dimension one, each reasoning dimension but multi_source one, more than one image one (not for a
registered pair: temporal counts it), a grade read against age norms one, and a dialogue whose later turn must be
combined with the image one; easy at most 1, medium 2, hard 3 or more. An open answer and the history beside the
image add nothing (every open or dialogue item had read "hard" whatever it asked; the reviews of issue 29).
"""

from __future__ import annotations

import re
from typing import Any

from curation.generate.values import keyed
from curation.schema import Evidence, Item, ItemFormat, ReasoningDim, TaskType, VisualDim

SMALL_OBJECT_BELOW = 0.01
# a grade or change of a structure read off one slice (a whole-brain montage or a large lesion is not fine detail)
# (a sequence is told by the contrast of the whole slice, and the size of the ventricles is a global judgement)
FINE_DETAIL = {"hippocampal_grade", "conversion", "kind_asked"}
SUBTLE_CHANGE = 0.15  # a ventricular change under this share of the baseline volume is fine detail
AGE_NORMED = {"hippocampal_grade", "ventricle_grade"}  # grades read against the age band's limits
SPATIAL = {"lesion.anatomy", "lesion.laterality", "territory", "structure"}
# the non-image facts each answer's key depends on (shown in the context, they make the item multi-source)
DEPENDS_ON = {
    "hippocampal_grade": {"age", "age_phrase"},
    "memory_picture": {"mmse"},
    "ventricle_grade": {"age", "age_phrase"},
    "dx": {"mmse", "presentation"},
    "conversion": {"dx_baseline"},
    "next_step": {"presentation"},
    "lesion.label": {"presentation"},
}
CAUSAL_TASKS = {TaskType.causal_reasoning, TaskType.next_step}
DIAGNOSTIC = {"dx", "next_step"}  # answers that depend on the diagnosis (long_tail applies to these only)
_FACT = re.compile(r"\{\{\s*([a-z_]+(?:\.[a-z_]+)*)")
_NAMES = re.compile(r"\b([a-z_]+(?:\.[a-z_]+)*)\b")


def answer_facts(answer_template: str) -> frozenset[str]:
    """The facts an answer template states: ``"{{ lesion.label }} in the {{ lesion.anatomy }}"`` ->
    {lesion.label, lesion.anatomy}."""
    return frozenset(_FACT.findall(answer_template))


def context_facts(context_template: str) -> set[str]:
    """Fact names a context template refers to (inside ``{{ }}`` or ``{% %}``)."""
    names: set[str] = set()
    for block in re.findall(r"\{\{(.*?)\}\}|\{%(.*?)%\}", context_template):
        for part in block:
            names.update(_NAMES.findall(part))
    return names


def demands(item: Item) -> int:
    """What an item asks of a reader of its image, counted (see the module docstring)."""
    answers = set((item.facts or {}).get("answer_facts") or [])
    temporal = ReasoningDim.temporal in item.reasoning_dims
    return (len(item.visual_dims) + sum(r != ReasoningDim.multi_source for r in item.reasoning_dims)
            + int(len(item.images) > 1 and not temporal) + int(bool(answers & AGE_NORMED))
            + int(item.format == ItemFormat.multi_turn and bool(item.turns)))


def difficulty(item: Item) -> str:
    """``easy``, ``medium`` or ``hard`` by the rule in the module docstring."""
    n = demands(item)
    return "easy" if n <= 1 else ("medium" if n == 2 else "hard")


def compute(task_type: TaskType, answers: frozenset[str], context_template: str, evidence: list[Evidence],
            facts: dict[str, Any], knowledge: dict[str, Any],
            small_object_below: float = SMALL_OBJECT_BELOW) -> tuple[list[VisualDim], list[ReasoningDim]]:
    visual: list[VisualDim] = []
    reasoning: list[ReasoningDim] = []
    fractions = [e.target_fraction for e in evidence if e.target_fraction is not None]
    lesion = facts.get("lesion") or {}
    small_figure = bool(lesion.get("small")) and any(e.target == "figure" for e in evidence)
    if (fractions and min(fractions) < small_object_below) or small_figure:
        visual.append(VisualDim.small_object)
    before, after = facts.get("ventricles_ml_baseline"), facts.get("ventricles_ml_followup")
    subtle = ("ventricle_change" in answers and isinstance(before, int | float) and isinstance(after, int | float)
              and before > 0 and abs(after - before) / before < SUBTLE_CHANGE)
    if evidence and (answers & FINE_DETAIL or subtle) and all(e.plane != "montage" for e in evidence):
        visual.append(VisualDim.fine_detail)
    if evidence and answers & SPATIAL:
        visual.append(VisualDim.spatial)
    # a teaching figure: what its caption says reading it takes (teaching.figure_dims)
    by_figure = facts.get("figure_dims") or {}
    for dim in sorted({d for e in evidence if e.target == "figure" for d in by_figure.get(e.series_id or "", [])}):
        if VisualDim(dim) not in visual:
            visual.append(VisualDim(dim))
    visits = {e.visit_id for e in evidence if e.visit_id}
    positions = {(e.target, e.plane, round(e.position_mm, 0)) for e in evidence if e.position_mm is not None}
    if len(visits) >= 2 and len(positions) == 1:
        reasoning.append(ReasoningDim.temporal)
    needed = set().union(*(DEPENDS_ON.get(a, set()) for a in answers)) if answers else set()
    if evidence and needed & context_facts(context_template):
        reasoning.append(ReasoningDim.multi_source)
    if task_type in CAUSAL_TASKS:
        reasoning.append(ReasoningDim.causal)
    prevalence = keyed(knowledge.get("prevalence_per_100k", {}), facts.get("dx"))
    # long_tail where the answer depends on the diagnosis (a rare disease's side or place is not a rare question)
    if prevalence is not None and prevalence < float(knowledge.get("long_tail_below", 20)) and answers & DIAGNOSTIC:
        reasoning.append(ReasoningDim.long_tail)
    return visual, reasoning
