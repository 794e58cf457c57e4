"""The LLM step contract (``curation.llm.step``), unit layer: no server, no subprocess. A scripted client stands in
for the endpoint; the real client's cache key shows each step asks exactly what its stage asked before the steps
moved onto the contract."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import AliasChoices, BaseModel, Field

from curation.answering import AnswerItem, AnswerParams, Ask, EvalItem
from curation.evaluate.judge import Graded, Judge
from curation.generate.augment import STEPS, Augmenter
from curation.generate.augment.base import ItemStep
from curation.llm import LLMClient, Request, Result, load_prompt
from curation.llm.images import image_parts, with_images
from curation.llm.step import UNPARSABLE, LLMStep, StepParams
from curation.params import GenerateParams, JudgeParams, LlmParams
from curation.quality.verify import VerifyItem
from curation.report import Kind, Outcome, Report
from curation.schema import ItemFormat, Turn

from .factories import ROOT, item

PROMPTS = ROOT / "templates" / "prompts"

TOY_PROMPT = """id: toy
version: 3
max_tokens: 50
system: You count.
user: "Count to {{ n }} for {{ who }}."
response_schema:
  type: object
  properties: {count: {type: integer}}
  required: [count]
"""


class ToyParams(StepParams):
    limit: int = Field(validation_alias=AliasChoices("toy_limit", "limit"))


class ToyReply(BaseModel):
    count: int


class Toy(LLMStep[str, ToyReply]):
    """A whole LLM step in one class: name, version, prompt, params, typed reply, values and a check."""

    name = "toy"
    version = 2
    prompt_name = "toy"
    params_model = ToyParams
    reply_model = ToyReply
    params: ToyParams

    def values(self, inp: str) -> dict[str, Any]:
        return {"n": self.params.limit, "who": inp}

    def check(self, inp: str, reply: ToyReply) -> str | None:
        return "over_limit" if reply.count > self.params.limit else None

    def input_id(self, inp: str) -> str:
        return inp


class Section(BaseModel):
    """A stage's params section: the step reads its own fields from it and ignores the rest."""

    toy_limit: int = 4
    seed: int = 13


class Scripted:
    """Stands in for ``LLMClient``: answers each request with the next scripted ``Result``, running the request's
    check on a scripted value the way the client does."""

    model = "asked-model"

    def __init__(self, results: list[Result]) -> None:
        self.results = results
        self.requests: list[Request] = []

    def run(self, requests: Sequence[Request]) -> list[Result]:
        self.requests.extend(requests)
        out = []
        for req, res in zip(requests, self.results, strict=False):
            reason = req.check(res.value) if res.ok and req.check else None
            out.append(Result(False, res.key, res.texts, error="rejected", error_detail=reason, model=res.model)
                       if reason else res)
        return out


@pytest.fixture
def toy_dir(tmp_path: Path) -> Path:
    (tmp_path / "toy.yaml").write_text(TOY_PROMPT)
    return tmp_path


def test_step_renders_its_prompt_and_parses_a_typed_reply(toy_dir):
    step = Toy(Section(), toy_dir)
    client = Scripted([Result(True, "k1", ['{"count": 3}'], data=[{"count": 3}], model="served-model")])
    [out] = step.run(client, ["ward 7"])  # type: ignore[arg-type]
    assert isinstance(out, Outcome) and out.kind is Kind.ok and out.ok
    assert out.value == ToyReply(count=3)
    [req] = client.requests
    assert req.messages == [{"role": "system", "content": "You count."},
                            {"role": "user", "content": "Count to 4 for ward 7."}]
    assert (req.prompt_id, req.prompt_version, req.max_tokens) == ("toy", 3, 50)
    assert req.schema == load_prompt("toy", toy_dir).response_schema


def test_provenance_is_recorded_from_the_steps_own_fields(toy_dir):
    step = Toy({"toy_limit": 9, "unrelated": "ignored"}, toy_dir)
    client = Scripted([Result(True, "key-abc", ['{"count": 1}'], data=[{"count": 1}], cached=True, model="")])
    [out] = step.run(client, ["a"])  # type: ignore[arg-type]
    prov = out.origin
    assert (prov.step, prov.step_version) == ("toy", 2)
    assert (prov.prompt_id, prov.prompt_version) == ("toy", 3)
    assert prov.params == {"limit": 9}  # the step's own params, read from the section by alias
    assert prov.model == prov.requested_model == "asked-model"  # the endpoint named no model
    assert prov.cache_key == "key-abc" and prov.cached


def test_failed_call_is_an_outcome_with_raw_input_and_reply(toy_dir):
    step = Toy(Section(), toy_dir)
    client = Scripted([Result(False, "k", ["not JSON {"], error="malformed_json", model="m")])
    [out] = step.run(client, ["ward 7"])  # type: ignore[arg-type]
    assert out.kind is Kind.failed and not out.ok and out.code == "malformed_json"
    assert out.raw_input == "ward 7" and out.raw_reply == ("not JSON {",)
    assert out.origin.step == "toy"
    with pytest.raises(ValueError, match="malformed_json"):
        _ = out.value


def test_steps_check_rejects_a_well_formed_reply_and_keeps_it(toy_dir):
    step = Toy(Section(toy_limit=2), toy_dir)
    client = Scripted([Result(True, "k", ['{"count": 5}'], data=[{"count": 5}], model="m")])
    [out] = step.run(client, ["x"])  # type: ignore[arg-type]
    assert (out.code, out.detail) == ("rejected", "over_limit")
    assert out.raw_reply == ('{"count": 5}',) and out.raw_input == "x"


def test_reply_the_reply_model_cannot_read_is_rejected_as_unparsable(toy_dir):
    req = Toy(Section(), toy_dir).request("x")
    assert req.check is not None and req.check({"count": "many"}) == UNPARSABLE


def test_params_are_checked_when_the_step_is_made(toy_dir):
    with pytest.raises(ValueError, match="toy_limit"):
        Toy({"seed": 1}, toy_dir)


# -- every step asks what its stage asked before --------------------------------------------------------------
@pytest.fixture
def key() -> Any:
    return LLMClient(LlmParams(base_url="http://127.0.0.1:9/v1", model="m"), cache_dir="/nonexistent").key


def test_generation_steps_ask_as_the_augmenter_did(tmp_path, monkeypatch, key):
    monkeypatch.chdir(tmp_path)
    gp = GenerateParams(prompts_dir=str(PROMPTS), paraphrase_fraction=1.0, distractor_fraction=1.0)
    it = item(1, context="A 70-year-old with memory loss.", facts={"dx": "grade 2"})
    dialogue = item(2, format=ItemFormat.multi_turn, options=[], key=0, answer="grade 2",
                    turns=[Turn(role="clinician", text="What do you see?"), Turn(role="model", text="grade 2")])
    prompts = {s: load_prompt(s, PROMPTS) for s in ("paraphrase", "distractors", "rationale", "dialogue")}
    before = {
        "paraphrase": Request.from_prompt(prompts["paraphrase"], None, context=it.context, question=it.question,
                                          options=it.options, answer=it.answer),
        "distractors": Request.from_prompt(prompts["distractors"], None, n=4, context=it.context,
                                           question=it.question, answer=it.answer,
                                           distractors=[o for i, o in enumerate(it.options) if i != it.answer_index]),
        "rationale": Request.from_prompt(prompts["rationale"], None, context=it.context, question=it.question,
                                         answer=it.answer, facts=it.facts),
        "dialogue": Request.from_prompt(prompts["dialogue"], None, context=dialogue.context, facts=dialogue.facts,
                                        answer=dialogue.answer),
    }
    for name, old in before.items():
        step = STEPS[name](gp, PROMPTS)
        assert isinstance(step, ItemStep)
        target = dialogue if name == "dialogue" else it
        assert step.applies(target)
        assert key(step.request(target)) == key(old), name


def test_augmenter_keeps_failures_with_raw_reply_and_leaves_the_item(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    gp = GenerateParams(prompts_dir=str(PROMPTS), llm_steps=["paraphrase"], paraphrase_fraction=1.0)
    it = item(1)
    question = it.question
    client = Scripted([Result(True, "k", ['{"question": "x"}'], data=[{"question": it.question}], model="m")])
    failures: list[dict[str, Any]] = []
    report = Report(stage="generate")
    Augmenter(gp, client, report, failures.append, PROMPTS).augment([it])  # type: ignore[arg-type]
    assert it.question == question and not it.augmentations
    assert failures == [{"step": "paraphrase", "item_id": it.item_id, "error": "rejected",
                         "detail": "unchanged", "raw": ['{"question": "x"}']}]
    assert report.counts == {"llm:paraphrase:failed": 1, "llm_failed:paraphrase:rejected": 1}


def test_augmenter_records_the_change_with_the_steps_provenance(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    gp = GenerateParams(prompts_dir=str(PROMPTS), llm_steps=["rationale"])
    it = item(1, rationale="")
    reply = {"rationale": "Grade 2 because   the facts say so and nothing else fits."}
    client = Scripted([Result(True, "ck", [""], data=[reply], model="served")])
    Augmenter(gp, client, Report(stage="generate"), [].append, PROMPTS).augment([it])  # type: ignore[arg-type]
    assert it.rationale == "Grade 2 because the facts say so and nothing else fits."
    [aug] = it.augmentations
    assert aug.model_dump() == {"step": "rationale", "model": "served", "prompt_id": "rationale",
                                "prompt_version": 1, "cache_key": "ck", "replaced": {"rationale": ""}}


def test_verifier_judge_and_answer_ask_as_their_stages_did(tmp_path, monkeypatch, key):
    monkeypatch.chdir(tmp_path)
    it = item(1, context="Context.")
    verify = Request.from_prompt(load_prompt("verify_item", PROMPTS), None, context=it.context, question=it.question,
                                 options=it.options, answer=it.answer)
    verify.messages = with_images(verify.messages, it.images)
    assert key(VerifyItem(None, PROMPTS).request(it)) == key(verify)

    ev = EvalItem.from_item(it, True)
    judge_prompt = load_prompt("eval_judge", PROMPTS)
    judge = Request.from_prompt(judge_prompt, None, question=ev.question, options=ev.options, reference=ev.reference,
                                response="B. grade 2")
    assert key(Judge(JudgeParams(), judge_prompt).request(Graded(ev, "B. grade 2"))) == key(judge)

    prompt = load_prompt("eval_answer", PROMPTS)
    base = prompt.messages(context=ev.context, question=ev.question, options=ev.options)
    base[-1]["content"] = [{"type": "text", "text": base[-1]["content"]}, *image_parts(ev.images)]
    answer = Request(messages=base, prompt_id=prompt.id, prompt_version=prompt.version, seed=3, temperature=0.7,
                     max_tokens=prompt.max_tokens)
    assert key(AnswerItem(AnswerParams(temperature=0.7), prompt).request(Ask(ev, 3))) == key(answer)
