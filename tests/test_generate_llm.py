"""The generate stage's LLM path end to end against the local OpenAI-compatible server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from curation.jsonio import read_jsonl
from curation.params import LlmParams, load_params
from curation.schema import Item
from curation.testing.openai_server import OpenAIServer, Reply

from .conftest import ROOT
from .scripted_llm import generation_responder


@pytest.fixture
def gen_params():
    p = load_params(ROOT / "params.yaml").generate
    p.templates_dir, p.knowledge = str(ROOT / p.templates_dir), str(ROOT / p.knowledge)
    p.diagnoses = str(ROOT / p.diagnoses)
    p.prompts_dir = str(ROOT / p.prompts_dir)
    return p


def _llm(server: OpenAIServer, tmp_path: Path) -> LlmParams:
    return LlmParams(base_url=server.base_url, model="local-test", backoff_s=0.01, cache_dir=str(tmp_path / "cache"),
                     concurrency=8)


# The shipped templates make no multi-turn item (each question a consult would ask is already asked of the case by
# another template), so the dialogue step is exercised with a consult template of the test's own, listed first.
CONSULT = """- id: consult_dialogue
  version: 1
  task_type: multi_turn_dialogue
  format: multi_turn
  requires: [dx, presentation, lesion.label, image.lesion]
  images: [image.lesion]
  context: "{{ presentation }}"
  question: "A colleague asks for a consult on this patient."
  turns:
    - {role: clinician, text: "Here is the history and the MRI. What abnormality do you see?"}
    - {role: model, text: "{{ lesion.label }}"}
    - {role: clinician, text: "Given the history, what is your leading diagnosis?"}
    - {role: model, text: "{{ dx }}"}
  answer: "{{ dx }}"
"""


def test_llm_augmentation_end_to_end_and_rerun_is_byte_identical(pipeline, gen_params, tmp_path, monkeypatch):
    import shutil

    from curation.generate.stage import run

    tdir = tmp_path / "templates"
    shutil.copytree(gen_params.templates_dir, tdir)
    (tdir / "00_consult.yaml").write_text(CONSULT)
    gen_params.templates_dir = str(tdir)
    monkeypatch.chdir(pipeline)
    run(gen_params, pipeline / "extract", tmp_path / "templated")  # no endpoint: the template items alone
    with OpenAIServer(generation_responder()) as server:
        report = run(gen_params, pipeline / "extract", tmp_path / "a", llm=_llm(server, tmp_path))
        calls = server.calls
        items = list(read_jsonl(tmp_path / "a" / "items.jsonl", Item))
        templ = list(read_jsonl(tmp_path / "templated" / "items.jsonl", Item))
        assert any(i.format.value == "multi_turn" for i in templ)
        steps = {a.step for i in items for a in i.augmentations}
        assert steps == {"paraphrase", "distractors", "rationale", "dialogue"}
        for i in items:
            for a in i.augmentations:
                assert a.model == "local-test" and a.prompt_version == 1 and a.cache_key
            if any(a.step == "paraphrase" for a in i.augmentations):
                assert i.question.startswith("Looking at the study provided")
            if i.format.value == "mcq":
                assert i.options[i.answer_index] == i.answer
        # the same template items, in the same order, plus LLM questions from the case-report figures
        assert [i.item_id for i in items if i.generator.kind == "template"] == [i.item_id for i in templ]
        llm_items = [i for i in items if i.generator.kind == "llm"]
        assert llm_items and all(i.images and i.facts.get("caption") for i in llm_items)
        assert all(i.options[i.answer_index] == i.answer for i in llm_items)
        assert report.counts["llm:caption_questions:ok"] >= 1
        # the caption route sends the figure itself to the model as a data URI
        caption_req = next(r for r in server.requests if "Task: write up to" in json.dumps(r))
        parts = caption_req["messages"][-1]["content"]
        assert any(p["type"] == "image_url" and p["image_url"]["url"].startswith("data:image/png;base64,")
                   for p in parts)
        metrics = json.loads(json.dumps(report.metrics))
        assert metrics["llm_calls"] == calls and metrics["llm_prompt_tokens"] > 0
        # (cache hits need not be 0 here: items that ask the very same thing, a paraphrase of the same question, may
        # share an answer cached within the run)

        server.reset()
        run(gen_params, pipeline / "extract", tmp_path / "b", llm=_llm(server, tmp_path))
        assert server.calls == 0, "a re-run is served from the cache"
        assert (tmp_path / "a" / "items.jsonl").read_bytes() == (tmp_path / "b" / "items.jsonl").read_bytes()


def test_unusable_answers_are_logged_and_leave_items_as_templated(pipeline, gen_params, tmp_path, monkeypatch):
    from curation.generate.stage import run

    monkeypatch.chdir(pipeline)
    gen_params.llm_steps = ["paraphrase", "distractors"]
    leaky = generation_responder(**{
        r"Task: paraphrase": Reply(content="Sure! Here is a paraphrase: {not json"),
        r"Task: write (\d+) harder distractors": Reply(status=500),
    })
    with OpenAIServer(leaky) as server:
        llm = _llm(server, tmp_path)
        llm.max_retries = 1
        report = run(gen_params, pipeline / "extract", tmp_path / "out", llm=llm)
    items = list(read_jsonl(tmp_path / "out" / "items.jsonl", Item))
    templ = {i.item_id: i for i in read_jsonl(pipeline / "generate" / "items.jsonl", Item)}
    assert len(items) == len(templ)
    assert all(i == templ[i.item_id] for i in items), "a failed step must not change an item"
    failures = list(read_jsonl(tmp_path / "out" / "llm_failures.jsonl"))
    assert {f["error"] for f in failures} == {"malformed_json", "http_500"}
    assert any(f["raw"] == ["Sure! Here is a paraphrase: {not json"] for f in failures)
    assert report.counts["llm_failed:paraphrase:malformed_json"] == report.counts["llm:paraphrase:failed"] > 0
    assert report.counts["llm_failed:distractors:http_500"] > 0


def test_leaking_paraphrase_is_rejected(pipeline, gen_params, tmp_path, monkeypatch):
    from curation.generate.stage import run

    monkeypatch.chdir(pipeline)
    gen_params.llm_steps = ["paraphrase"]
    gen_params.paraphrase_fraction = 1.0

    def leak(body, n):
        text = body["messages"][-1]["content"]
        answer = text.split("Answer (must not appear in the new question): ")[1].strip()
        return Reply(content=json.dumps({"question": f"Is this {answer}, or something else?"}))

    with OpenAIServer(leak) as server:
        report = run(gen_params, pipeline / "extract", tmp_path / "out", llm=_llm(server, tmp_path))
    assert report.counts["llm_failed:paraphrase:rejected"] > 0
    assert not any(i.augmentations for i in read_jsonl(tmp_path / "out" / "items.jsonl", Item))


def test_without_endpoint_llm_steps_are_reported_skipped(pipeline, gen_params, tmp_path, monkeypatch):
    from curation.generate.stage import run

    monkeypatch.chdir(pipeline)
    monkeypatch.delenv("CURATION_LLM_BASE_URL", raising=False)
    report = run(gen_params, pipeline / "extract", tmp_path / "out", report_path=tmp_path / "r.json")
    data = json.loads((tmp_path / "r.json").read_text())
    assert "llm_augmentation" in json.dumps(data) and "no LLM endpoint configured" in json.dumps(data)
    assert report.metrics.get("llm_calls") is None
