"""Visual questions written straight from a case-report figure and its caption, the image attached."""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, BaseModel, Field

from curation.generate.augment.base import FigureInput, FigureStep
from curation.jsonio import content_hash
from curation.llm.images import with_images
from curation.llm.step import StepOutcome, StepParams
from curation.schema import Generator, Item, ItemFormat, ReasoningDim, TaskType, VisualDim
from curation.text import spaced


class CaptionQuestionsParams(StepParams):
    per_figure: int = Field(validation_alias=AliasChoices("caption_questions_per_figure", "per_figure"))


class CaptionQuestion(BaseModel):
    task_type: TaskType
    question: str
    options: list[str]
    answer_index: int
    rationale: str
    visual_dims: list[VisualDim]
    reasoning_dims: list[ReasoningDim]


class CaptionQuestionsReply(BaseModel):
    questions: list[CaptionQuestion]


class CaptionQuestions(FigureStep[CaptionQuestionsReply]):
    name = "caption_questions"
    order = 50
    version = 1
    prompt_name = "caption_questions"
    params_model = CaptionQuestionsParams
    reply_model = CaptionQuestionsReply
    params: CaptionQuestionsParams

    def values(self, inp: FigureInput) -> dict[str, Any]:
        return {"n": self.params.per_figure, "presentation": inp.case.presentation, "caption": inp.figure.caption,
                "diagnosis": inp.case.diagnosis.primary or ""}

    def messages(self, inp: FigureInput) -> list[dict[str, Any]]:
        return with_images(super().messages(inp), [inp.image])

    def check(self, inp: FigureInput, reply: CaptionQuestionsReply) -> str | None:
        for q in reply.questions:
            if len({spaced(o) for o in q.options}) != len(q.options):
                return "duplicate_options"
            if q.answer_index >= len(q.options):
                return "answer_index_out_of_range"
        return None

    def items(self, inp: FigureInput, outcome: StepOutcome[CaptionQuestionsReply]) -> list[Item]:
        case, fig, prov = inp.case, inp.figure, outcome.origin
        out = []
        for n, q in enumerate(outcome.value.questions[: self.params.per_figure]):
            options = [" ".join(o.split()) for o in q.options]
            body = {"case_id": case.case_id, "figure": fig.figure_id, "prompt": [prov.prompt_id, prov.prompt_version],
                    "n": n, "question": q.question, "options": options}
            out.append(Item(
                item_id="itm-" + content_hash(body), case_id=case.case_id, source=case.source,
                task_type=q.task_type, format=ItemFormat.mcq, question=" ".join(q.question.split()),
                options=options, answer=options[q.answer_index], answer_index=q.answer_index,
                rationale=" ".join(q.rationale.split()), images=[inp.image], context=case.presentation.strip(),
                visual_dims=sorted(set(q.visual_dims)), reasoning_dims=sorted(set(q.reasoning_dims)),
                facts={"caption": fig.caption, "figure_id": fig.figure_id},
                generator=Generator(kind="llm", model=prov.model, prompt_hash=prov.cache_key),
                license=case.license, attribution=case.attribution, origin=case.origin,
                pixels_altered=fig.pixels_masked, status="draft",
            ))
        return out
