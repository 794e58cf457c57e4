"""Quality gates with planted defects, the model-based gates against the local LLM server, and splits."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from curation.jsonio import read_jsonl
from curation.params import FilterParams, LlmParams, ModelSpec, ValidityParams
from curation.quality.filter import run
from curation.quality.gates import item_text
from curation.quality.leaks import load_rules, mapping_leaks
from curation.schema import Item, Review, ReviewDecision
from curation.testing.openai_server import OpenAIServer, Reply

from .conftest import ROOT

L = "ABCDE"


@pytest.fixture(autouse=True)
def _in_pipeline(pipeline: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(pipeline)
    monkeypatch.delenv("CURATION_LLM_BASE_URL", raising=False)


def generated(pipeline: Path) -> list[Item]:
    return list(read_jsonl(pipeline / "generate" / "items.jsonl", Item))


def write(items: list[Item], folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "items.jsonl").write_text("".join(i.model_dump_json() + "\n" for i in items))
    return folder


def fparams(**kw) -> FilterParams:
    """The gates under test here, with the template validity gates reporting only and no key-balance cap (both
    tested in tests/test_validity.py on a corpus built for them)."""
    kw.setdefault("validity", ValidityParams(block=False, sibling_leaks=False, block_on=[]))
    kw.setdefault("max_answer_share", 1.0)  # the key-balance cap is tested in tests/test_validity.py
    return FilterParams(prompts_dir=str(ROOT / "templates" / "prompts"), **kw)


def rejected(folder: Path) -> dict[str, dict]:
    return {r["item_id"]: r for r in read_jsonl(folder / "rejected.jsonl")}


def test_near_duplicates_keep_the_best_reviewed_copy(pipeline, tmp_path):
    items = generated(pipeline)
    # (the longest such item: one word changed in a short question and five one-word options is no near copy)
    base = max((i for i in items if i.format.value == "mcq" and i.template_id == "lesion_recognition"),
               key=lambda i: len(item_text(i)))
    twin = base.model_copy(deep=True, update={"item_id": "itm-twin",
                                              "question": base.question.replace("principal", "main")})
    twin.review = Review(decisions=[ReviewDecision(reviewer="rev-1", verdict="accept")], final_verdict="accept")
    report = run(fparams(), write([*items, twin], tmp_path / "in"), tmp_path / "out")
    rej = rejected(tmp_path / "out")
    assert rej[base.item_id]["reasons"] == ["near_duplicate"] and "itm-twin" not in rej
    assert report.counts["rejected:near_duplicate"] == 1
    # the same question for a different case (another image) is not a duplicate
    kept = read_jsonl(tmp_path / "out" / "items.jsonl", Item)
    assert sum(1 for i in kept if i.template_id == "lesion_recognition") >= 2


def test_near_copies_of_known_benchmark_questions_are_dropped(pipeline, tmp_path):
    items = generated(pipeline)
    rules = load_rules()  # a target no other gate rejects (a stroke's reperfusion step is read off its history)
    target = next(i for i in items if i.template_id == "next_management_step" and not mapping_leaks(i, rules))
    known = tmp_path / "known.jsonl"
    near_copy = {"question": target.question.replace("most appropriate", "best"),
                 "options": {L[n]: o for n, o in enumerate(target.options)}, "answer": target.answer}
    unrelated = {"question": "Which nerve innervates the deltoid?", "answer": "axillary"}
    known.write_text(json.dumps(near_copy) + "\n" + json.dumps(unrelated) + "\n")
    report = run(fparams(known_questions=str(known)), write(items, tmp_path / "in"), tmp_path / "out")
    assert rejected(tmp_path / "out")[target.item_id]["reasons"] == ["near_duplicate_of_known_benchmark"]
    # every item asking the target's question over its options is a copy (two stroke cases share next steps)
    copies = sum(1 for i in items if i.question == target.question and sorted(i.options) == sorted(target.options))
    assert report.counts["rejected:near_duplicate_of_known_benchmark"] == copies
    assert report.metrics["known_questions"] == 2


def answers_by_text(items: list[Item]) -> dict[str, str]:
    return {i.question + "|" + "|".join(i.options): L[i.answer_index] for i in items if i.answer_index is not None}


def responder(items: list[Item], *, flag: str, shortcut: str, easy: str):
    right = answers_by_text(items)
    by_q = defaultdict(list)
    for i in items:
        by_q[i.question].append(i)

    def respond(body, n):
        system = body["messages"][0]["content"]
        content = body["messages"][-1]["content"]
        has_image = isinstance(content, list) and any(p["type"] == "image_url" for p in content)
        text = content if isinstance(content, str) else next(p["text"] for p in content if p["type"] == "text")
        if "auditing items" in system:
            bad = flag in text
            return Reply(json.dumps({"self_contained": True, "single_answer": not bad, "clinically_valid": True,
                                     "image_text_consistent": True,
                                     "reason": "two options are defensible" if bad else ""}))
        q = text.split("Question: ", 1)[1].split("\n", 1)[0].strip()
        opts = [line[3:].strip() for line in text.splitlines() if len(line) > 3 and line[1:3] == ". " and line[0] in L]
        key = q + "|" + "|".join(opts)
        if key not in right:
            return Reply("I cannot determine this.")
        if not has_image:  # text only: right only for the planted shortcut item
            return Reply(right[key] if shortcut in q else "I cannot tell without the image.")
        if easy in q:
            return Reply(right[key])
        wrong = L[(L.index(right[key]) + 1) % len(opts)]
        return Reply(right[key] if body.get("seed", 0) % 2 == 0 else wrong)

    return respond


def test_model_gates_verifier_text_only_and_difficulty(pipeline, tmp_path):
    items = [i for i in generated(pipeline) if i.images]
    mcq = [i for i in items if i.format.value == "mcq"]
    flagged, shortcut, easy = mcq[0], mcq[1], mcq[2]
    flagged.question = "AMBIGUOUS-MARK " + flagged.question
    shortcut.question = "SHORTCUT-MARK " + shortcut.question
    easy.question = "EASY-MARK " + easy.question
    with OpenAIServer(responder(items, flag="AMBIGUOUS-MARK", shortcut="SHORTCUT-MARK", easy="EASY-MARK")) as server:
        llm = LlmParams(base_url=server.base_url, model="local-verifier", backoff_s=0.01,
                        cache_dir=str(tmp_path / "cache"))
        models = [ModelSpec(name=f"filter-{n}", model=f"local-vlm-{n}", base_url=server.base_url) for n in (1, 2)]
        p = fparams(difficulty_models=models, difficulty_samples=2)
        report = run(p, write(items, tmp_path / "in"), tmp_path / "out", llm=llm)
        p.drop_image_not_needed = True
        run(p, write(items, tmp_path / "in2"), tmp_path / "out2", llm=llm)
    rej = rejected(tmp_path / "out")
    assert rej[flagged.item_id]["reasons"] == ["verifier:single_answer"]
    assert rej[flagged.item_id]["detail"] == "two options are defensible"
    assert rej[easy.item_id]["reasons"] == ["too_easy:all_filter_models_correct"]
    kept = {i.item_id: i for i in read_jsonl(tmp_path / "out" / "items.jsonl", Item)}
    assert kept[shortcut.item_id].quality.image_not_needed is True
    assert report.counts["tagged:image_not_needed"] == 1
    # two samples per model at seeds 0 and 1: right then wrong -> pass rate 0.5 -> "medium"
    # the responder knows an item by its text alone, so the item checked is one no other item shares its text with
    # (two ADNI participants get the same hippocampal question and options, with different keys)
    texts = Counter(i.question + "|" + "|".join(i.options) for i in items)
    other = next(i for i in mcq[3:] if i.item_id in kept and texts[i.question + "|" + "|".join(i.options)] == 1)
    assert kept[other.item_id].quality.difficulty_pass_rates == {"filter-1": 0.5, "filter-2": 0.5}
    assert kept[other.item_id].difficulty == "medium"
    assert kept[other.item_id].quality.verifier.passed is True
    assert rejected(tmp_path / "out2")[shortcut.item_id]["reasons"] == ["image_not_needed"]


def test_without_endpoint_model_gates_are_reported_skipped(pipeline, tmp_path):
    report = run(fparams(), write(generated(pipeline), tmp_path / "in"), tmp_path / "out")
    assert set(report.skipped_steps) >= {"llm_verifier", "text_only_check"}


def test_splits_stratified_patient_disjoint_with_private_test(pipeline, tmp_path):
    report = run(fparams(private_test_fraction=0.25, min_cell_count=50, max_items_per_task_type=5),
                 write(generated(pipeline), tmp_path / "in"), tmp_path / "out")
    kept = list(read_jsonl(tmp_path / "out" / "items.jsonl", Item))
    split_of: dict[str, set[str]] = defaultdict(set)
    for i in kept:
        split_of[i.case_id].add(i.split)
    assert all(len(s) == 1 for s in split_of.values())
    assert {i.split for i in kept} == {"test", "dev", "private_test"}
    assert max(report.metrics["balance"]["task_type"].values()) <= 5
    assert report.counts["rejected:rebalanced_out"] > 0
    under = report.metrics["underfilled_cells"]
    thin = [t for t, n in report.metrics["balance"]["task_type"].items() if n < 50]
    assert thin and all(f"task_type:{t}" in under for t in thin)


def test_synonym_leak_and_grammar_cue_are_caught(pipeline):
    from curation.quality.filter import check, load_synonyms

    syn = load_synonyms(ROOT / "templates" / "knowledge" / "lexicon.yaml")
    item = next(i for i in generated(pipeline) if i.template_id == "lesion_recognition" and i.answer == "mass")
    assert check(item, syn) == []
    leaky = item.model_copy(update={"context": "A heterogeneous tumour was seen."})
    assert check(leaky, syn) == ["answer_leak_synonym"]
    opts = ["abscess", "mass", "infarct", "enhancing lesion", "oedema"]
    cue = item.model_copy(update={"question": "The MRI shows a", "options": opts, "answer": "mass", "answer_index": 1})
    assert "mcq_answer_by_grammar" in check(cue, syn)
