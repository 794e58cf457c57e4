"""The LLM judge: grades a candidate's answer against the clinicians' reference on the rubric of
``eval_judge.yaml`` and names the main error of a wrong one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from curation.answering import EvalItem
from curation.llm.step import LLMStep, StepParams

ErrorType = Literal["perceptual", "reasoning", "knowledge", "hallucination", "format_refusal"]


@dataclass(frozen=True)
class Graded:
    """One response to grade, and the item it answers."""

    item: EvalItem
    response: str
    sample: int = 0


class JudgeStepParams(StepParams):
    weights: dict[str, float]  # the rubric criteria that count (evaluate.judge.weights)


class Judgement(BaseModel):
    scores: dict[str, int]
    correct: bool
    error_type: ErrorType | None
    explanation: str | None = None


class Judge(LLMStep[Graded, Judgement]):
    name = "judge"
    version = 1
    prompt_name = "eval_judge"
    params_model = JudgeStepParams
    reply_model = Judgement
    params: JudgeStepParams

    def values(self, inp: Graded) -> dict[str, Any]:
        return {"question": inp.item.question, "options": inp.item.options, "reference": inp.item.reference,
                "response": inp.response}

    def check(self, inp: Graded, reply: Judgement) -> str | None:
        missing = [c for c in self.params.weights if c not in reply.scores]
        return f"missing_criteria:{','.join(missing)}" if missing else None

    def input_id(self, inp: Graded) -> str:
        return f"{inp.item.item_id}#{inp.sample}"
