"""Fast unit tests of item generation on cases built in the test: one visit per item, evidence-bearing images,
laterality, the one-item-per-fact cap, computed tags, balanced letters and clean item text."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from curation.generate.engine import Engine
from curation.generate.facts import fact_sets
from curation.generate.presentation import clinical_context, deid_artefacts
from curation.params import GenerateParams
from curation.schema import (
    Case,
    Diagnosis,
    Figure,
    Finding,
    Patient,
    Placement,
    ReasoningDim,
    Render,
    Series,
    SourceName,
    Step,
    Visit,
    VisualDim,
)

ROOT = Path(__file__).resolve().parents[1]
KB = yaml.safe_load((ROOT / "templates" / "knowledge" / "neurology.yaml").read_text())


def engine(**kw) -> Engine:
    return Engine(GenerateParams(templates_dir=str(ROOT / "templates" / "questions"),
                                 knowledge=str(ROOT / "templates" / "knowledge" / "neurology.yaml"), **kw))


def t1(sid: str, *, pos_hip: float = -21.0, pos_vent: float = 18.0, reference: str | None = None,
       paired: bool = True, ventricles_ml: float | None = 30.0) -> Series:
    """A T1w series as normalize leaves it: its target renders, and its lateral ventricles measured on the image
    (``ventricles_ml``; None: not measured)."""
    renders = [
        Render(plane="axial", slice_index=90, path=f"r/{sid}/axial_090.png", role="mid"),
        Render(plane="coronal", slice_index=97, path=f"r/{sid}/coronal_097.png", role="target", target="hippocampus",
               position_mm=pos_hip, located_by="atlas_registration"),
        Render(plane="axial", slice_index=110, path=f"r/{sid}/axial_110.png", role="target",
               target="lateral_ventricles", position_mm=pos_vent, located_by="atlas_registration"),
        Render(plane="montage", path=f"r/{sid}/montage_axial.png", role="montage"),
    ]
    prov = [Step(name="register_to_baseline", args={"reference": reference})] if reference else []
    if reference and paired:  # a registered follow-up is also rendered at the baseline's positions
        renders += [
            Render(plane="coronal", slice_index=98, path=f"r/{sid}/coronal_098_paired.png", role="paired",
                   target="hippocampus", position_mm=-21.0, located_by=f"registered_to:{reference}"),
            Render(plane="axial", slice_index=111, path=f"r/{sid}/axial_111_paired.png", role="paired",
                   target="lateral_ventricles", position_mm=18.0,
                   located_by=f"registered_to:{reference}"),
        ]
    measures = {"lateral_ventricles_ml": ventricles_ml} if ventricles_ml is not None else {}
    return Series(series_id=sid, sequence="T1w", format="nifti", renders=renders,
                  qc={"pass": True, "anatomy": {"fit": "ok", "measures": measures}}, provenance=prov)


def adni_case(*, registered: bool = True, same_position: bool = True,
              seen_ml: tuple[float | None, float | None] = (28.0, 41.0)) -> Case:
    """Two ADNI visits; ``seen_ml``: the lateral ventricles each visit's T1w shows (the table says 30 and 40 mL)."""
    v0 = Visit(visit_id="bl", days_from_baseline=0, diagnosis="mild cognitive impairment",
               scores={"MMSE": 27.0, "Hippocampus": 6900.0, "Ventricles": 30000.0},
               series=[t1("S0", ventricles_ml=seen_ml[0])])
    v1 = Visit(visit_id="m24", days_from_baseline=731, diagnosis="Alzheimer's disease dementia",
               scores={"MMSE": 21.0, "Hippocampus": 6000.0, "Ventricles": 40000.0},
               series=[t1("S1", reference="S0" if registered else None, paired=same_position, pos_vent=30.0,
                          pos_hip=-5.0, ventricles_ml=seen_ml[1])])
    return Case(case_id="adni-x", source=SourceName.adni, license="ADNI DUA", patient=Patient(age=69, sex="F"),
                ehr={"MMSE": 27.0, "Hippocampus": 6900.0}, visits=[v0, v1],
                diagnosis=Diagnosis(primary="Alzheimer's disease dementia"))


def report_case(*, lesion_side: str, deficit_side: str, presentation: str | None = None) -> Case:
    pres = presentation or (f"Mr. [NAME] (DOB 1957-04-05, [ADDRESS]) was brought in on 2020-01-31 with three weeks of "
                            f"headache and new {deficit_side} arm weakness. MRI showed a mass.")
    findings = [
        Finding(text="weakness", label="weakness", category="finding", laterality=deficit_side,  # type: ignore[arg-type]
                source_field="presentation"),
        Finding(text="mass", label="mass", category="finding", anatomy="frontal lobe", laterality=lesion_side,  # type: ignore[arg-type]
                sequence="FLAIR", source_field="notes"),
    ]
    fig = Figure(figure_id="s1-FLAIR-002", caption="Axial FLAIR MRI: large mass",
                 renders=[Render(plane="figure", path="r/fig.png", role="figure")])
    return Case(case_id="radiop-y", source=SourceName.radiopaedia, license="CC BY-NC-SA 3.0",
                patient=Patient(age=63, sex="M"), presentation=pres, figures=[fig], findings=findings,
                diagnosis=Diagnosis(primary="Glioblastoma", differential=["Cerebral metastasis"]))


def by_template(items) -> dict:
    return {i.template_id: i for i in items}


def test_every_fact_and_image_of_an_item_comes_from_one_visit() -> None:
    items, _ = engine().generate(adni_case())
    got = by_template(items)
    hip = got["hippocampal_atrophy"]
    # baseline visit: age 69, 6.9 mL -> normal volume; the follow-up's 6.0 mL is not used with the baseline image
    assert hip.answer == "normal volume" and hip.facts["visit"] == "bl"
    assert [e.visit_id for e in hip.evidence] == ["bl"] and hip.evidence[0].target == "hippocampus"
    assert hip.images == ["r/S0/coronal_097.png"] and hip.evidence[0].plane == "coronal"
    consult = got["memory_clinic_consult"]  # the baseline's dx and MMSE, told in the consult's second turn
    # the second turn's answer crosses the image's grade with the score: normal hippocampi, MMSE 27 (not under 27)
    assert consult.answer == ("normal volume; no evidence of a neurodegenerative process on this image or this "
                              "score") and "27/30" in consult.turns[0].text
    for it in items:
        visits = {e.visit_id for e in it.evidence}
        assert len(visits) == 1 or it.facts["visit"] == "bl+m24", it.template_id


def test_age_is_taken_at_the_scan() -> None:
    case = adni_case()
    sets = fact_sets(case, KB)
    assert [s["age"] for s in sets if s["kind"] == "visit"] == [69, 71]


def test_pairs_need_registration_and_the_same_position() -> None:
    got = by_template(engine().generate(adni_case())[0])
    vc = got["ventricular_change"]
    assert vc.answer == "increased" and ReasoningDim.temporal in vc.reasoning_dims
    assert [e.visit_id for e in vc.evidence] == ["bl", "m24"]
    assert vc.evidence[0].position_mm == vc.evidence[1].position_mm
    assert "MMSE" not in vc.context and "21" not in vc.context  # no follow-up score to do arithmetic on
    for case in (adni_case(registered=False), adni_case(same_position=False)):
        got = by_template(engine().generate(case)[0])
        assert "ventricular_change" not in got


def test_a_table_volume_is_a_key_only_where_the_image_agrees() -> None:
    """The ventricles' grade and their change come from the table (ADNIMERGE), and are asked only where the volume
    normalize measured on the image gives the same grade or the next one: a wrong join, another visit's table or
    another processing's would otherwise key a confident wrong answer. The hippocampal grade, which the image does
    not measure, is asked only from a row whose ventricles the image confirms. A refusal is a counted skip reason."""
    e = engine()
    items, _ = e.generate(adni_case())  # table 30 -> 40 mL, image 28 -> 41 mL: agreed
    got = by_template(items)
    assert got["ventricular_size"].answer == "within the normal range"
    assert got["ventricular_change"].answer == "increased"
    assert got["hippocampal_atrophy"].answer == "normal volume"  # a row the image confirms gives its other volumes
    # the image shows ventricles far larger than the table's at both visits (95 mL at 69 is severely enlarged, 80 mL
    # at 71 moderately; the table's 30 and 40 mL are within the normal range), and shrinking between the visits
    # where the table has them growing
    items, skipped = e.generate(adni_case(seen_ml=(95.0, 80.0)))
    got = by_template(items)
    assert "ventricular_size" not in got and "ventricular_change" not in got
    reasons = {s.reason for s in skipped}
    assert {"refused_ventricle_grade:image_disagrees", "refused_ventricle_change:image_disagrees"} <= reasons
    # the row's hippocampal volume is not measured on the image: a row whose ventricles the image contradicts
    # gives no hippocampal key either
    assert "hippocampal_atrophy" not in got and "memory_clinic_consult" not in got
    assert "refused_hippocampal_grade:row_image_disagrees" in reasons
    # the next grade is within a measure's noise (38 mL at 69 is "mildly enlarged", the table's 30 mL is not)
    assert "ventricular_size" in by_template(e.generate(adni_case(seen_ml=(39.0, 41.0)))[0])
    # an image without a measure (a contrast fluid cannot be told on) confirms nothing
    items, skipped = e.generate(adni_case(seen_ml=(None, None)))
    assert "ventricular_size" not in by_template(items)
    assert "refused_ventricle_grade:image_unmeasured" in {s.reason for s in skipped}
    assert "hippocampal_atrophy" not in by_template(items)
    assert "refused_hippocampal_grade:row_image_unmeasured" in {s.reason for s in skipped}
    # a row without ventricles cannot be confirmed: its hippocampal volume is no key
    case = adni_case()
    for v in case.visits:
        del v.scores["Ventricles"]
    items, skipped = e.generate(case)
    assert "hippocampal_atrophy" not in by_template(items)
    assert "refused_hippocampal_grade:row_unconfirmed" in {s.reason for s in skipped}


def test_no_item_without_an_evidence_bearing_view() -> None:
    case = adni_case()
    for v in case.visits:
        for s in v.series:
            s.renders = [r for r in s.renders if r.role == "mid"]  # only a mid-axial slice, as before the fix
    got = by_template(engine().generate(case)[0])
    assert not {"hippocampal_atrophy", "ventricular_size", "memory_clinic_consult"} & set(got)


def test_a_lesion_on_the_wrong_side_does_not_explain_the_deficit() -> None:
    wrong = by_template(engine().generate(report_case(lesion_side="right", deficit_side="right"))[0])
    assert "symptom_mechanism" not in wrong
    right = by_template(engine().generate(report_case(lesion_side="right", deficit_side="left"))[0])
    ref = right["symptom_mechanism"].reference_answer
    assert "right-sided lesion explains the left-sided weakness" in ref, ref
    assert right["lesion_laterality"].answer == "right"


def test_item_text_has_no_deid_placeholders_or_dates() -> None:
    items, _ = engine().generate(report_case(lesion_side="right", deficit_side="left"))
    assert items
    for it in items:
        text = " ".join([it.context, it.question, *it.options, it.reference_answer or "", it.rationale or ""])
        assert not deid_artefacts(text), (it.template_id, text)
        assert "MRI showed" not in it.context  # the presentation stops before imaging is told
    ctx = by_template(items)["case_most_likely_diagnosis"].context
    # age and sex come back from the case where the title was the only mention of them
    # and the sequence of the figure shown (its caption's), which a reader always knows
    assert ctx == ("A 63-year-old man was brought in with three weeks of headache and new left arm weakness. "
                   "The sequence shown is FLAIR.")
    assert by_template(items)["case_most_likely_diagnosis"].evidence[0].sequence == "FLAIR"


@pytest.mark.parametrize("text,expected", [
    ("Ms. [NAME], a 29-year-old teacher ([ID], phone [PHONE]), presented on 2018-05-07 with blurred vision.",
     "A 29-year-old female teacher presented with blurred vision."),
    ("A 71-year-old man, Mr. [NAME-3fa2c1] of [ADDRESS] ([ID]), was seen on 2 Nov 2020 with aphasia. CT was normal.",
     "A 71-year-old man was seen with aphasia."),
    ("She was seen by Dr. [NAME] at [LOCATION] for [NAME]'s syndrome.", ""),
    # a date after "of" (the real wording "on the morning of 15 October"): the sentence was dropped for keeping it
    ("Mrs. [NAME] ([ID]), a 58-year-old translator, had sudden difficulty finding words on the morning of "
     "2023-05-15.", "A 58-year-old female translator had sudden difficulty finding words."),
    ("He was admitted in the evening of 2019-03-02 with fever.", "He was admitted with fever."),
])
def test_presentations_lose_placeholders_dates_and_imaging(text: str, expected: str) -> None:
    assert clinical_context(text, KB) == expected


def test_one_item_per_case_and_fact() -> None:
    items, skipped = engine().generate(report_case(lesion_side="right", deficit_side="left"))
    keys = [(i.case_id, tuple(i.facts["answer_facts"])) for i in items]
    assert len(keys) == len(set(keys))
    answers = [i.answer.lower() for i in items]
    assert len(answers) == len(set(answers))


def test_tags_are_computed_from_the_item() -> None:
    case = report_case(lesion_side="right", deficit_side="left")
    got = by_template(engine().generate(case)[0])
    # glioblastoma, the commonest primary brain tumour, is not long tail (knowledge long_tail_below: 3 per 100,000)
    assert ReasoningDim.long_tail not in got["case_most_likely_diagnosis"].reasoning_dims
    rare = report_case(lesion_side="right", deficit_side="left")
    rare.diagnosis = Diagnosis(primary="Primary CNS lymphoma", differential=["Glioblastoma"])  # 1 per 100,000
    rare_dx = by_template(engine().generate(rare)[0])["case_most_likely_diagnosis"]
    assert ReasoningDim.long_tail in rare_dx.reasoning_dims
    assert ReasoningDim.multi_source in got["case_most_likely_diagnosis"].reasoning_dims
    assert got["lesion_laterality"].visual_dims == [VisualDim.spatial]
    assert ReasoningDim.long_tail not in got["lesion_laterality"].reasoning_dims  # its side is not a rare question
    assert ReasoningDim.causal in got["symptom_mechanism"].reasoning_dims
    assert VisualDim.small_object not in got["lesion_recognition"].visual_dims  # size unknown: not claimed
    small = adni_case()
    s0 = small.visits[0].series[0]
    s0.qc.targets = [Placement(target="hippocampus", plane="coronal", slice_index=97, target_fraction=0.004,
                               located_by="atlas_registration"),
                     Placement(target="lateral_ventricles", plane="axial", slice_index=110, target_fraction=0.05,
                               located_by="atlas_registration")]
    tagged = by_template(engine().generate(small)[0])
    assert VisualDim.small_object in tagged["hippocampal_atrophy"].visual_dims  # 0.4% of the brain in its slice
    assert tagged["hippocampal_atrophy"].evidence[0].target_fraction == 0.004
    assert VisualDim.small_object not in tagged["ventricular_size"].visual_dims
    adni = by_template(engine().generate(adni_case())[0])
    assert ReasoningDim.temporal not in adni["hippocampal_atrophy"].reasoning_dims
    assert ReasoningDim.long_tail not in adni["memory_clinic_consult"].reasoning_dims


def test_answer_letters_are_balanced_and_independent_of_case_order() -> None:
    e = engine()
    cases = []
    for n in range(8):
        c = report_case(lesion_side="right", deficit_side="left")
        cases.append(c.model_copy(update={"case_id": f"radiop-{n}"}))

    def letters(order):
        made = [it for c in order for it in e.generate(c)[0]]
        return {(i.case_id, i.template_id): (i.answer_index, i.item_id) for i in e.finalize(made)}

    forward, backward = letters(cases), letters(cases[::-1])
    assert forward == backward
    idx = [v[0] for (_, t), v in forward.items() if t == "case_most_likely_diagnosis"]
    assert max(idx.count(k) for k in set(idx)) - min(idx.count(k) for k in range(2)) <= 1


def test_a_template_requiring_an_unknown_fact_fails_when_it_loads(tmp_path: Path) -> None:
    from curation.errors import ParamsError
    from curation.generate.engine import load_templates

    (tmp_path / "t.yaml").write_text(yaml.safe_dump([{
        "id": "typo", "version": 1, "task_type": "localization", "format": "open", "requires": ["lesion.anatomie"],
        "images": ["image.lesion"], "question": "Where?", "answer": "{{ lesion.anatomy }}"}]))
    with pytest.raises(ParamsError, match="unknown fact lesion.anatomie"):
        load_templates(tmp_path)
    assert load_templates(ROOT / "templates" / "questions")  # the shipped templates name only known facts


def test_the_key_is_not_left_the_longest_option_when_a_longer_distractor_exists() -> None:
    e = engine(n_options=3)
    e.knowledge = {**e.knowledge, "findings": {"mass": ["a", "b", "c", "d", "a much longer distractor"]}}
    case = report_case(lesion_side="right", deficit_side="left")
    item = by_template(e.generate(case)[0])["lesion_recognition"]
    assert max(item.options, key=len) != item.answer, item.options


def test_a_lesion_the_report_calls_small_makes_its_figure_items_small_object() -> None:
    """A report's figure has no measured mask: the report's own words say how big the lesion is. The fixture text is
    written here, not drawn from the project's demo cases."""
    case = report_case(lesion_side="left", deficit_side="right")
    case.notes = "Axial SWI showed a punctate blooming focus in the left frontal lobe; nothing else."
    start = case.notes.index("blooming focus")
    case.findings[1] = Finding(text="blooming focus", label="susceptibility focus", category="finding",
                               anatomy="frontal lobe", laterality="left", sequence="SWI", source_field="notes",
                               start=start, end=start + len("blooming focus"))
    got = by_template(engine().generate(case)[0])
    assert VisualDim.small_object in got["lesion_laterality"].visual_dims
    case.notes = "Axial SWI showed a large blooming focus in the left frontal lobe; small vessels were normal."
    case.findings[1] = case.findings[1].model_copy(update={"start": case.notes.index("blooming focus")})
    got = by_template(engine().generate(case)[0])
    assert VisualDim.small_object not in got["lesion_laterality"].visual_dims  # "small" after it is another thing


def test_difficulty_counts_what_the_image_reading_asks() -> None:
    from curation.generate.tags import difficulty

    adni = by_template(engine().generate(adni_case())[0])
    # a small structure graded against age norms, then combined with a score given in a later turn
    assert difficulty(adni["memory_clinic_consult"]) == "hard"
    assert difficulty(adni["hippocampal_atrophy"]) == "medium"  # fine detail and age norms
    assert VisualDim.fine_detail not in adni["ventricular_size"].visual_dims  # a large structure's size is global
    assert difficulty(adni["ventricular_size"]) == "easy"  # age norms only
    report = by_template(engine().generate(report_case(lesion_side="right", deficit_side="left"))[0])
    assert difficulty(report["lesion_laterality"]) == "easy"  # one place on one image
    assert difficulty(report["lesion_rationale"]) == "easy"  # an open answer adds nothing by itself


def two_sequence_case(second: str | None) -> Case:
    """A report case of a DWI study (three figures) and, unless ``second`` is None, a second study of the same lesion
    on ``second``, each caption naming its own sequence (the lexicon's finding of category sequence)."""
    studies = [("DWI", "Axial DWI MRI Acute infarct with restricted diffusion on DWI")]
    if second:
        studies.append((second, f"Axial {second} MRI The acute infarct is hyperintense on {second}."))
    figures, findings = [], []
    for s, (seq, caption) in enumerate(studies, 1):
        for i in range(1, 4):
            fid = f"s{s}-{seq}-{i:03d}"
            figures.append(Figure(figure_id=fid, caption=caption,
                                  renders=[Render(plane="figure", path=f"r/{fid}.png", role="figure")]))
            findings += [Finding(text=seq, label=seq, category="sequence", source_field=f"figure:{fid}"),
                         Finding(text="infarct", label="infarct", category="finding", anatomy="occipital lobe",
                                 laterality="left", sequence=seq, source_field=f"figure:{fid}")]  # type: ignore[arg-type]
    return Case(case_id="radiop-z", source=SourceName.radiopaedia, license="CC BY-NC-SA 3.0",
                patient=Patient(age=70, sex="F"), presentation="A 70-year-old woman was found confused.",
                figures=figures, findings=findings,
                diagnosis=Diagnosis(primary="Acute ischaemic stroke", differential=["Focal seizure"]))


def test_a_second_sequence_of_a_reports_lesion_makes_a_sequence_item() -> None:
    """The lesion items show the middle figure of the first study; the sequence item asks the other study's sequence
    (the first is told in the siblings' context), on its middle figure; one sequence alone asks nothing."""
    items = by_template(engine().generate(two_sequence_case("FLAIR"))[0])
    seq = items["sequence_identification"]
    assert seq.answer == "FLAIR" and seq.images == ["r/s2-FLAIR-002.png"]
    assert set(seq.options) == set(KB["sequences"])
    assert items["lesion_recognition"].images == ["r/s1-DWI-002.png"]
    assert items["case_most_likely_diagnosis"].context.endswith("The sequence shown is DWI.")
    assert "sequence_identification" not in by_template(engine().generate(two_sequence_case(None))[0])


@pytest.mark.parametrize(("text", "want"), [
    ("10 yo girl with known disease for routine followup None Provided",
     "10 yo girl with known disease for routine followup"),
    ("Headache for a week. N/A", "Headache for a week."),
    ("Not provided. A 40 year old man with seizures.", "A 40 year old man with seizures."),
    # a sentence that says something is not given is kept whole
    ("The family history is not given much weight.", "The family history is not given much weight."),
])
def test_a_sources_blank_field_is_no_history(text: str, want: str) -> None:
    """A blank field in a source's history ("None Provided", "N/A") says nothing of the patient; as item text it
    would read as a template's missing value."""
    assert clinical_context(text, KB) == want
