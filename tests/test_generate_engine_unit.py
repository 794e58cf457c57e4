"""Item generation from templates and a knowledge table written here: each item's key is its case's fact and
exactly one option, options come from the named table, letters are balanced per template and ids are content
hashes; every template that makes no item says why; the generate stage writes and counts them, the same bytes on a
rerun; a malformed template fails to load with its reason."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest
import yaml

from curation.errors import InputError, ParamsError
from curation.generate.engine import Engine, Skip, _letters, load_templates
from curation.generate.stage import run as generate
from curation.jsonio import read_jsonl
from curation.params import GenerateParams
from curation.schema import Case, Item, ReasoningDim

from .factories import ROOT, figure_case, project_params, write_cases

DIAGNOSES = ["glioblastoma", "cerebral abscess", "primary CNS lymphoma", "meningioma", "tumefactive demyelination",
             "cerebral metastasis"]
LONG_TAIL = "tumefactive demyelination"

TEMPLATES = [
    {"id": "figure_dx", "version": 1, "task_type": "direct_diagnosis", "format": "mcq",
     "requires": ["dx", "image.figure"], "images": ["image.figure"],
     "context": "Axial FLAIR MRI of {{ age_phrase }} {{ sex_word | default('patient') }}.",
     "question": "Which diagnosis fits this image best?", "answer": "{{ dx }}",
     "distractors": {"table": "unit_diagnoses"}, "rationale": "The recorded diagnosis is {{ dx }}."},
    # the same fact asked again: the case gives it once
    {"id": "figure_dx_open", "version": 1, "task_type": "rationale_generation", "format": "open",
     "requires": ["dx", "image.figure"], "images": ["image.figure"], "question": "What does this image show?",
     "answer": "{{ dx }}", "reference_answer": "{{ dx }}"},
    {"id": "age_told", "version": 1, "task_type": "direct_diagnosis", "format": "open",
     "requires": ["age", "image.figure"], "images": ["image.figure"],
     "question": "The patient is {{ age }} years old; how old is the patient?",
     "answer": "{{ age }}"},
    {"id": "needs_mmse", "version": 1, "task_type": "multi_source_integration", "format": "open",
     "requires": ["mmse", "image.figure"], "images": ["image.figure"], "question": "What is the MMSE?",
     "answer": "{{ mmse }}"},
    {"id": "sex_no_pool", "version": 1, "task_type": "direct_diagnosis", "format": "mcq",
     "requires": ["sex_word", "image.figure"], "images": ["image.figure"], "question": "Who is shown?",
     "answer": "{{ sex_word }}", "distractors": {"table": "unit_empty"}},
    {"id": "adni_only", "version": 1, "task_type": "direct_diagnosis", "format": "open", "sources": ["adni"],
     "requires": ["dx"], "question": "Which category?", "answer": "{{ dx }}"},
]


def setup(folder: Path, templates: list[dict] | None = None, **kw) -> GenerateParams:
    """Generate params naming a templates folder and a knowledge table (the project's, plus the test's tables)."""
    (folder / "templates").mkdir(parents=True, exist_ok=True)
    (folder / "templates" / "unit.yaml").write_text(yaml.safe_dump(TEMPLATES if templates is None else templates))
    kb = yaml.safe_load((ROOT / "templates" / "knowledge" / "neurology.yaml").read_text())
    kb["unit_diagnoses"] = DIAGNOSES
    kb["unit_empty"] = []
    # every diagnosis here common but one (the project table spells some of them in capitals)
    kb["prevalence_per_100k"] = {**{k: v for k, v in kb["prevalence_per_100k"].items() if k.casefold() not in
                                    {d.casefold() for d in DIAGNOSES}}, **dict.fromkeys(DIAGNOSES, 500), LONG_TAIL: 1}
    (folder / "kb.yaml").write_text(yaml.safe_dump(kb))
    base = project_params().generate
    return base.model_copy(update={"templates_dir": str(folder / "templates"), "knowledge": str(folder / "kb.yaml"),
                                   **kw})


def cases(n: int = 10) -> list[Case]:
    return [figure_case(k, dx=DIAGNOSES[k % 5]) for k in range(n)]


def test_the_key_is_the_cases_fact_and_exactly_one_option(tmp_path: Path) -> None:
    engine = Engine(setup(tmp_path))
    made = []
    for case in cases():
        items, _ = engine.generate(case)
        made.extend(items)
    items = [i for i in engine.finalize(made) if i.template_id == "figure_dx"]
    assert len(items) == 10
    dx = {c.case_id: c.diagnosis.primary for c in cases()}
    for it in items:
        assert it.answer == dx[it.case_id] and it.facts["dx"] == dx[it.case_id]
        assert it.options[it.answer_index] == it.answer and it.options.count(it.answer) == 1
        assert len(it.options) == 5 and set(it.options) <= set(DIAGNOSES)  # distractors from the named table
        assert it.images == [f"r/{it.case_id}.png"] and it.evidence[0].target == "figure"
        assert it.generator.kind == "template" and it.generator.template_version == "1"
        assert it.rationale == f"The recorded diagnosis is {it.answer}."
        assert (ReasoningDim.long_tail in it.reasoning_dims) == (it.answer == LONG_TAIL)


def test_answer_letters_are_balanced_and_do_not_depend_on_case_order(tmp_path: Path) -> None:
    params = setup(tmp_path)

    def letters(order: list[Case]) -> dict[str, tuple[str, int]]:
        engine = Engine(params)
        items = engine.finalize([i for c in order for i in engine.generate(c)[0]])
        return {i.case_id: (i.item_id, i.answer_index) for i in items if i.template_id == "figure_dx"}

    first = letters(cases())
    assert Counter(k for _, k in first.values()) == {0: 2, 1: 2, 2: 2, 3: 2, 4: 2}
    shuffled = cases()
    random.Random(3).shuffle(shuffled)
    assert letters(shuffled) == first  # same letter and same content id per case
    ids = [i for i, _ in first.values()]
    assert len(set(ids)) == 10 and all(i.startswith("itm-") and len(i) == 20 for i in ids)


def test_every_template_that_makes_no_item_says_why(tmp_path: Path) -> None:
    engine = Engine(setup(tmp_path))
    items, skipped = engine.generate(cases(1)[0])
    assert [i.template_id for i in items] == ["figure_dx"]
    assert {str(skip): n for skip, n in skipped.items()} == {
        "figure_dx_open:fact_already_asked": 1, "age_told:answer_in_text": 1, "needs_mmse:missing_mmse": 1,
        "sex_no_pool:no_distractors": 1}  # adni_only: not this source
    items, skipped = engine.generate(figure_case(0, dx=None))
    assert "figure_dx" not in {i.template_id for i in items}
    assert skipped[Skip("figure_dx", "missing_dx")] == 1


def test_n_options_and_a_key_that_would_stand_out_by_length(tmp_path: Path) -> None:
    short = [dict(TEMPLATES[0], id="short_pool", distractors={"table": "unit_short"})]
    params = setup(tmp_path, short, n_options=3)
    kb = yaml.safe_load(Path(params.knowledge).read_text())
    kb["unit_short"] = ["cyst", "mass", "oedema", "infarct", "a longer plausible distractor"]
    Path(params.knowledge).write_text(yaml.safe_dump(kb))
    engine = Engine(params)
    for case in cases(5):
        (it,), _ = engine.generate(case)
        assert len(it.options) == 3 and it.answer in it.options
        # the key is never the one long option while the table has a longer one
        assert max(len(o) for o in it.options if o != it.answer) > len(it.answer)


def test_generate_stage_writes_and_counts_items_the_same_on_a_rerun(tmp_path: Path) -> None:
    params = setup(tmp_path)
    src = write_cases(tmp_path / "extract", [*cases(5), figure_case(9, dx=None)])
    report = generate(params, src, tmp_path / "generate")
    items = list(read_jsonl(tmp_path / "generate" / "items.jsonl", Item))
    assert [i.template_id for i in items] == ["figure_dx"] * 5
    assert report.inputs == 6 and report.outputs == 5
    assert report.counts["generator:template"] == 5 and report.counts["task_type:direct_diagnosis"] == 5
    assert report.counts["template_skipped:missing_dx"] == 2  # the case without a diagnosis, both dx templates
    assert report.counts["template_skipped_by:figure_dx:missing_dx"] == 1
    assert report.counts["template_skipped_by:figure_dx_open:missing_dx"] == 1
    assert report.counts["template_skipped:fact_already_asked"] == 5
    assert report.metrics["templates"] == len(TEMPLATES) and report.metrics["effective_template_items"] == 5
    assert "llm_augmentation" in report.skipped_steps  # no endpoint configured: said, not faked
    first = (tmp_path / "generate" / "items.jsonl").read_bytes()
    generate(params, src, tmp_path / "generate")
    assert (tmp_path / "generate" / "items.jsonl").read_bytes() == first
    with pytest.raises(InputError, match="no cases.jsonl"):
        generate(params, tmp_path / "nowhere", tmp_path / "out")


@pytest.mark.parametrize(("change", "message"), [
    ({"distractors": None}, "an MCQ needs distractors"),
    ({"requires": ["dx", "tumour_size"]}, "unknown fact tumour_size"),
    ({"format": "essay"}, "template 1: format"),
])
def test_a_malformed_template_fails_to_load_with_its_reason(tmp_path: Path, change: dict, message: str) -> None:
    bad = {k: v for k, v in {**TEMPLATES[0], **change}.items() if v is not None}
    (tmp_path / "t.yaml").write_text(yaml.safe_dump([bad]))
    with pytest.raises(ParamsError, match=message):
        load_templates(tmp_path)


def test_duplicate_template_ids_and_an_empty_folder_fail(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text(yaml.safe_dump([TEMPLATES[0], TEMPLATES[0]]))
    with pytest.raises(ParamsError, match="duplicate template id figure_dx"):
        load_templates(tmp_path)
    with pytest.raises(ParamsError, match="no template files"):
        load_templates(tmp_path / "empty")


def test_a_knowledge_entry_that_is_not_text_is_a_one_line_error(tmp_path) -> None:
    import pytest

    from curation.errors import ParamsError
    from curation.generate.engine import _check_lists_of_text

    kb = {"next_steps": {"Some disease": ["Do this first", {"Control risk": "blood pressure and a statin"}]}}
    with pytest.raises(ParamsError, match=r"next_steps.Some disease: every entry must be text"):
        _check_lists_of_text(kb, tmp_path / "neurology.yaml")
    _check_lists_of_text({"next_steps": {"Some disease": ["Do this first"]}}, tmp_path / "neurology.yaml")


def test_image_alike_lists_a_diagnosis_once_and_its_other_names_count_as_it(tmp_path: Path) -> None:
    """A diagnosis the image cannot tell from the key is no wrong option under any of its names (diagnosis_aliases),
    and the table lists it once: another name of it there is a one-line error."""
    from curation.generate.engine import Distractors

    params = setup(tmp_path)
    engine = Engine(params)
    engine.knowledge |= {"differentials": {"Disease A": ["Disease B variant", "Disease C", "disease b"]},
                         "image_alike": {"Disease A": ["Disease B"]},
                         "diagnosis_aliases": {"Disease B variant": "Disease B"}}
    spec = Distractors(table="case_differential_then_differentials", key="dx")
    facts = {"dx": "Disease A", "differential": ["Disease B Variant", "Disease D"]}
    assert engine.distractor_pool(spec, facts, "Disease A") == (["Disease D", "Disease C"], 1)
    kb = yaml.safe_load((tmp_path / "kb.yaml").read_text())
    kb["image_alike"]["Glioblastoma"].append("Haemorrhagic metastasis")
    (tmp_path / "kb.yaml").write_text(yaml.safe_dump(kb))
    with pytest.raises(ParamsError, match=r"image_alike.Glioblastoma: 'Haemorrhagic metastasis' is another name of "
                                          r"'Cerebral metastases' \(diagnosis_aliases\)"):
        Engine(params)


def test_next_step_options_are_the_first_steps_of_the_differential() -> None:
    """Each wrong option is what a differential diagnosis would call for, so the history alone does not pick the key
    (a table written here, not the project's)."""
    from curation.generate.engine import differential_next_steps

    kb = {"next_steps": {"Disease A": ["treat A", "wrong for A 1", "wrong for A 2"], "Disease B": ["treat B", "x"],
                         "Disease C": ["treat C"], "Disease D": ["treat D"]},
          "differentials": {"Disease A": ["Disease C", "Disease Z"]},
          "diagnosis_aliases": {"Disease B variant": "Disease B"}}
    got = differential_next_steps(kb, "Disease A", ["Disease B variant", "Disease D"], "treat A", 3)
    assert got == ["treat B", "treat D", "treat C"]
    assert differential_next_steps(kb, "Disease A", ["Disease B variant"], "treat A", 3) == \
        ["treat B", "treat C", "wrong for A 1"]  # topped up from A's own wrong steps to exactly three
    # a diagnosis whose first step is right for A too gives no option; an own wrong step that restates an offered
    # one in other words is passed over
    kb["shared_next_step"] = {"disease a": ["Disease B"]}
    kb["next_steps"]["Disease A"] = ["treat A", "refer for surgical resection of the tumour", "watch and wait"]
    kb["next_steps"]["Disease C"] = ["refer for surgical resection or biopsy"]
    assert differential_next_steps(kb, "Disease A", ["Disease B variant", "Disease D"], "treat A", 3) == \
        ["treat D", "refer for surgical resection or biopsy", "watch and wait"]


def test_letters_stay_balanced_when_some_items_have_fewer_options() -> None:
    # a template whose distractors ran short for some cases: 4 and 5 options mixed (the demo's stroke territory)
    for widths in ([4, 5, 5, 4, 4, 5, 4, 5, 4], [5] * 4 + [4] * 5, [4] * 5 + [5] * 4, [3, 5, 2, 5, 4, 5, 3]):
        at = _letters(widths)
        assert all(0 <= a < w for a, w in zip(at, widths, strict=True))
        used = Counter(at)
        shared = [used[k] for k in range(min(widths))]
        assert max(shared) - min(shared) <= 1, (widths, used)
        assert all(used[k] <= max(shared) for k in range(min(widths), max(widths))), (widths, used)
    assert _letters([5] * 7) == [0, 1, 2, 3, 4, 0, 1]  # equal widths: plain round robin
