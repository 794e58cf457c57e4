"""The filter stage on items built here: each per-item gate names its reason, the stage counts every rejection by
reason and keeps the rest with their splits; near-duplicates, known-benchmark copies, the per-task-type cap, balance
and patient-disjoint splits (quality/gates.py) on small sets."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from curation.jsonio import read_jsonl
from curation.params import FilterParams
from curation.quality.filter import check, load_synonyms
from curation.quality.filter import run as filter_run
from curation.quality.gates import assign_splits, balance, load_known_questions, near_duplicates, rebalance
from curation.report import Report
from curation.schema import Item, Review, ReviewDecision

from .factories import GRADES, item, project_params, write_items


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # item images are relative to the project root, here tmp_path
    monkeypatch.delenv("CURATION_LLM_BASE_URL", raising=False)


def fparams(**kw) -> FilterParams:
    p = project_params().filter
    return p.model_copy(update=kw)


def unreadable(n: int) -> Item:
    it = item(n, write_image=False)
    Path(it.images[0]).parent.mkdir(parents=True, exist_ok=True)
    Path(it.images[0]).write_bytes(b"\x89PNG\r\n\x1a\n not really a PNG")
    return it


DEFECTS = {
    "empty_text": lambda: item(0, question="  "),
    "template_residue": lambda: item(0, question="How would you grade the {{ finding }} on this image?"),
    "mcq_option_count": lambda: item(0, options=GRADES[:2]),
    "mcq_duplicate_options": lambda: item(0, options=["grade 1", "Grade 1", "grade 2"], key=2),
    "mcq_not_exactly_one_correct": lambda: item(0).model_copy(update={"answer": "grade 9"}),
    "mcq_answer_by_length": lambda: item(0, options=[*GRADES[:3], "grade 4 with sulcal effacement and midline shift"],
                                         key=3),
    "mcq_answer_by_grammar": lambda: item(0, question="The abnormality on this image is best described as an",
                                          options=["oedema", "mass", "cyst", "tumour"], key=0),
    # written here, not by the generator: only the key repeats a word of the history ("seizure" in "antiseizure")
    "mcq_answer_by_echo": lambda: item(0, context="A 30-year-old had a first seizure at work.",
                                       question="What should happen next?",
                                       options=["Antiseizure medication and follow-up", "Lumbar puncture today",
                                                "Carotid duplex and a statin", "Oral anticoagulation now"], key=0),
    "no_image": lambda: item(0, images=[]),
    "image_missing": lambda: item(0, write_image=False),
    "image_unreadable": lambda: unreadable(0),
    "answer_leak": lambda: item(0, context="The previous report graded it grade 1."),
    # the lexicon groups "vasogenic oedema" with "edema": the question gives the key away in other words
    "answer_leak_synonym": lambda: item(0, question="Which finding surrounds the mass, given the edema noted?",
                                        options=["vasogenic oedema", "infarct", "abscess", "cyst"], key=0),
}


@pytest.mark.parametrize("reason", sorted(DEFECTS))
def test_each_item_gate_names_its_own_reason(reason: str) -> None:
    synonyms = load_synonyms(project_params().filter.lexicon)
    assert check(DEFECTS[reason](), synonyms) == [reason]


def test_a_well_formed_item_passes_every_item_gate() -> None:
    assert check(item(0), load_synonyms(project_params().filter.lexicon)) == []


def test_a_closed_question_may_offer_its_two_answers_and_no_fewer() -> None:
    """Two options are all a closed question has (brighter or darker: its template's distractors say ``closed``);
    an open set still needs three, and a closed one still two."""
    synonyms = load_synonyms(project_params().filter.lexicon)
    two = ["Whiter than the tissue around it", "Darker than the tissue around it"]
    assert check(item(0, options=two, facts={"closed_options": True}), synonyms) == []
    assert check(item(0, options=two), synonyms) == ["mcq_option_count"]
    assert check(item(0, options=two[:1], facts={"closed_options": True}), synonyms) == ["mcq_option_count"]


def test_filter_counts_rejections_by_reason_and_keeps_the_rest_with_splits(tmp_path: Path) -> None:
    fair = [item(n) for n in range(10)]  # letters balanced, equal-length options: no blind baseline beats chance
    residue = item(10, question="How would you grade the {{ finding }}?")
    missing = item(11, write_image=False)
    leak = item(12, context="Known grade 3 lesion.", key=2)
    report = filter_run(fparams(), write_items(tmp_path / "in", [*fair, residue, missing, leak]), tmp_path / "out")

    rejected = {r["item_id"]: r for r in read_jsonl(tmp_path / "out" / "rejected.jsonl")}
    assert rejected[residue.item_id]["reasons"] == ["template_residue"]
    assert rejected[missing.item_id]["reasons"] == ["image_missing"]
    assert rejected[leak.item_id]["reasons"] == ["answer_leak"]
    assert {k: v for k, v in report.counts.items() if k.startswith("rejected:")} == {
        "rejected:template_residue": 1, "rejected:image_missing": 1, "rejected:answer_leak": 1}
    kept = list(read_jsonl(tmp_path / "out" / "items.jsonl", Item))
    assert sorted(i.item_id for i in kept) == sorted(i.item_id for i in fair)
    assert report.inputs == 13 and report.outputs == 10
    assert all(i.status == "kept" and i.quality.gates == "passed" for i in kept)
    assert all(i.quality.template_validity.blocked is False for i in kept)
    assert Counter(i.split for i in kept) == {"test": 8, "dev": 2}
    assert report.metrics["answer_position_counts"] == {"A": 2, "B": 2, "C": 2, "D": 2, "E": 2}
    # without an endpoint the model gates say so instead of passing silently
    assert set(report.skipped_steps) >= {"llm_verifier", "text_only_check"}
    validity = json.loads((tmp_path / "out" / "validity.json").read_text())
    assert validity["templates"]["tpl"]["blocked"] is False and validity["overall"]["kept_items"] == 10


def test_near_duplicates_within_a_case_keep_the_reviewed_copy() -> None:
    shared = ["img/shared.png"]
    first = item(0, case_id="case-a", images=shared)
    reviewed = item(1, case_id="case-a", images=shared, key=0,
                    question="How would you grade the abnormality in this image?",
                    review=Review(decisions=[ReviewDecision(reviewer="rev-1", verdict="accept")],
                                  final_verdict="accept"))
    other_image = item(2, case_id="case-a", key=0)  # the same text about another image is another question
    other_case = item(3, case_id="case-b", images=shared, key=0)
    report = Report(stage="filter")
    drop = near_duplicates([first, reviewed, other_image, other_case], fparams(), report)
    assert drop == {first.item_id: "near_duplicate"}


def test_near_copies_of_known_benchmark_questions_are_dropped(tmp_path: Path) -> None:
    known = tmp_path / "known.jsonl"
    options = {"A": "oedema", "B": "mass", "C": "cyst", "D": "tumour"}
    known.write_text(json.dumps({"question": "Which lesion is shown in the left frontal lobe on this FLAIR image?",
                                 "options": options, "answer": "mass"}) + "\n")
    copy = item(0, question="Which lesion is shown in the left frontal lobe on this FLAIR image?",
                options=list(options.values()), key=1)
    report = Report(stage="filter")
    drop = near_duplicates([copy, item(1)], fparams(known_questions=str(known)), report)
    assert drop == {copy.item_id: "near_duplicate_of_known_benchmark"}
    assert report.metrics["known_questions"] == 1


def test_known_questions_read_from_csv_and_text(tmp_path: Path) -> None:
    (tmp_path / "k.csv").write_text("question,answer,source\nWhat is shown?,mass,x\n")
    (tmp_path / "k.txt").write_text("First question?\n\nSecond question?\n")
    assert load_known_questions(tmp_path / "k.csv") == ["What is shown? mass"]
    assert load_known_questions(tmp_path / "k.txt") == ["First question?", "Second question?"]


def test_splits_are_patient_disjoint_proportional_and_seeded() -> None:
    items = [item(2 * c + k, case_id=f"case-{c:02d}", write_image=False) for c in range(20) for k in range(2)]
    assign_splits(items, fparams())
    by_case = {}
    for i in items:
        assert by_case.setdefault(i.case_id, i.split) == i.split  # both items of a case in one split
    assert Counter(by_case.values()) == {"test": 16, "dev": 4}
    again = [i.model_copy() for i in items]
    assign_splits(again, fparams())
    assert [i.split for i in again] == [i.split for i in items]
    private = [i.model_copy() for i in items]
    assign_splits(private, fparams(private_test_fraction=0.25))
    cases = Counter({i.case_id: i.split for i in private}.values())
    assert cases == {"test": 12, "private_test": 5, "dev": 3}


def test_rebalance_caps_each_task_type_by_a_stable_seeded_choice() -> None:
    lesion = [item(n, write_image=False) for n in range(5)]
    local = [item(10 + n, write_image=False, task_type="localization") for n in range(2)]
    assert rebalance(lesion + local, fparams()) == set()  # no cap in params.yaml
    out = rebalance(lesion + local, fparams(max_items_per_task_type=3))
    assert len(out) == 2 and out <= {i.item_id for i in lesion}
    assert rebalance(list(reversed(lesion + local)), fparams(max_items_per_task_type=3)) == out


def test_balance_counts_cells_and_flags_the_underfilled_ones() -> None:
    items = [item(n, write_image=False, visual_dims=["small_object"] if n < 2 else []) for n in range(6)]
    bal = balance(items, fparams(min_cell_count=3))
    assert bal["distribution"]["answer_letter"] == {"A": 2, "B": 1, "C": 1, "D": 1, "E": 1}
    assert bal["distribution"]["task_type"] == {"lesion_recognition": 6}
    assert "visual_dim:small_object" in bal["underfilled_cells"]
    assert "task_type:lesion_recognition" not in bal["underfilled_cells"]


NEW_GATE = '''"""Gate: a question ends with a question mark."""

from curation.quality.item_gates import ItemGate


def check(item, synonyms):
    return [] if item.question.rstrip().endswith("?") else ["question_unmarked"]


GATE = ItemGate("question_mark", 15, check)
'''


def test_a_new_item_gate_is_one_module_that_filter_walks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Adding a per-item gate is adding a module beside the others: nothing else is edited (the folder is put on the
    package's path here, as a new file in curation/quality/item_gates/ is)."""
    from curation.quality import item_gates

    extra = tmp_path / "gates"
    extra.mkdir()
    (extra / "question_mark.py").write_text(NEW_GATE)
    monkeypatch.setattr(item_gates, "__path__", [*item_gates.__path__, str(extra)])
    item_gates.gates.cache_clear()
    try:
        assert [g.name for g in item_gates.gates()] == ["text", "question_mark", "options", "images", "answer_leak"]
        plain = item(6, question="Grade the lesion.")
        assert check(plain) == ["question_unmarked"]
        report = filter_run(fparams(), write_items(tmp_path / "in", [*(item(n) for n in range(6)), plain]),
                            tmp_path / "out")
        assert report.counts["rejected:question_unmarked"] == 1 and report.outputs == 6
    finally:
        item_gates.gates.cache_clear()
        monkeypatch.undo()
        import sys

        sys.modules.pop("curation.quality.item_gates.question_mark", None)
    assert "question_mark" not in [g.name for g in item_gates.gates()]
