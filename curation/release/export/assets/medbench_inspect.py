"""Inspect tasks over a medbench-curation release (written by `curate release export --format inspect`).

    inspect eval medbench_inspect.py@medbench --model openai-api/local/MODEL       # with images
    inspect eval medbench_inspect.py@medbench_no_image --model ...                # the blind baseline
    inspect eval medbench_inspect.py@medbench -T judge=openai-api/local/JUDGE    # open answers by the judge

Each sample is sent as `curate evaluate` sends it (the same system and user text, the images after the text; a
dialogue's clinician turns asked one by one) and scored by `medbench_scoring.py`, the project's own scoring code.
Metrics: accuracy overall and per format, task type and dimension.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import (
    ChatMessageSystem,
    ChatMessageUser,
    Content,
    ContentImage,
    ContentText,
    GenerateConfig,
    get_model,
)
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, grouped, scorer, stderr
from inspect_ai.solver import Generate, Solver, TaskState, solver

HERE = Path(__file__).resolve().parent


def _scoring() -> Any:
    spec = importlib.util.spec_from_file_location("medbench_scoring", HERE / "medbench_scoring.py")
    if spec is None or spec.loader is None:
        raise RuntimeError(f"{HERE / 'medbench_scoring.py'}: cannot load the scoring module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ms = _scoring()
JUDGE = json.loads((HERE / "judge_prompt.json").read_text(encoding="utf-8"))
RESPONSE_MARK = "<<<CANDIDATE_RESPONSE>>>"


def _records() -> list[dict[str, Any]]:
    with open(HERE / "samples.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _dataset(with_images: bool) -> MemoryDataset:
    samples = []
    for r in _records():
        if with_images and not r["images"]:
            continue  # reference-only: its images are rebuilt from your own copy (see README.md)
        content: list[Content] = [ContentText(text=r["user"])]
        if with_images:
            content += [ContentImage(image=str(HERE / "images" / name)) for name in r["images"]]
        md = {**r["metadata"], "asks": r["asks"], "judge_system": r["judge_system"], "judge_user": r["judge_user"]}
        samples.append(Sample(id=r["id"], input=[ChatMessageSystem(content=r["system"]),
                                                 ChatMessageUser(content=content)],
                              target=r["target"], metadata=md))
    return MemoryDataset(samples, name="medbench" if with_images else "medbench_no_image")


@solver
def answer() -> Solver:
    """Generate; for a dialogue, ask each later clinician turn in order and answer it (the last answer is scored)."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        state = await generate(state)
        for ask in state.metadata.get("asks") or []:
            state.messages.append(ChatMessageUser(content=ask))
            state = await generate(state)
        return state

    return solve


@scorer(metrics=[accuracy(), stderr(), grouped(accuracy(), "format", all=False),
                   grouped(accuracy(), "task_type", all=False)])
def medbench_scorer(judge: str | None = None) -> Any:
    """MCQ by the letter the answer commits to; open and dialogue answers by the judge's rubric when ``judge`` names
    a model, else by whether the reference answer appears in the response (as `curate evaluate` does)."""

    async def score(state: TaskState, target: Target) -> Score:
        md = state.metadata
        response = state.output.completion
        if md["format"] == "mcq":
            letter = ms.extract_letter(response, md["options"])
            ok = ms.grade("mcq", response, md["options"], md["answer_index"], md["answer"])
            return Score(value=CORRECT if ok else INCORRECT, answer=letter or "", explanation=response)
        if judge and not ms.is_refusal(response):
            reply = await get_model(judge).generate(
                [ChatMessageSystem(content=md["judge_system"]),
                 ChatMessageUser(content=md["judge_user"].replace(RESPONSE_MARK, response))],
                config=GenerateConfig(temperature=0.0))
            verdict = json.loads(reply.completion)  # a reply that is not JSON fails the sample, unscored
            weighted = ms.weighted_score(verdict["scores"], JUDGE["weights"])
            ok = bool(verdict["correct"]) and weighted >= JUDGE["pass_threshold"]
            return Score(value=CORRECT if ok else INCORRECT, answer=response, explanation=reply.completion,
                         metadata={"judge_score": weighted, "error_type": verdict.get("error_type")})
        ok = ms.grade(md["format"], response, md["options"], md["answer_index"], md["answer"])
        return Score(value=CORRECT if ok else INCORRECT, answer=response)

    return score


def _task(with_images: bool, judge: str | None) -> Task:
    records = _records()
    max_tokens = max((r["max_tokens"] for r in records), default=512)
    return Task(dataset=_dataset(with_images), solver=answer(), scorer=medbench_scorer(judge),
                config=GenerateConfig(max_tokens=max_tokens),
                name="medbench" if with_images else "medbench_no_image")


@task
def medbench(judge: str | None = None) -> Task:
    """Every item that has its images, asked with them."""
    return _task(True, judge)


@task
def medbench_no_image(judge: str | None = None) -> Task:
    """Every item, asked without its images: the blind baseline."""
    return _task(False, judge)
