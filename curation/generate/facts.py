"""The facts a template may ask for, one set per visit (or per registered pair of visits) of one case.

Every fact and every image in a set comes from the same visit, so an item never pairs the clinical values of one
visit with the image of another. Images are evidence: the render of a series placed on the template's target
(hippocampus, lateral ventricles, lesion, whole brain) by the normalize stage, with its slice and position in mm.
A missing fact is simply absent; a template that requires it is not made from that set.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from pydantic import BaseModel, ConfigDict

from curation.generate.finding_facts import figure_facts, finding_facts, history_deficit
from curation.generate.presentation import clinical_context
from curation.generate.teaching import teaching_case, teaching_facts
from curation.generate.values import age_phrase, fmt, num
from curation.generate.visit_facts import change_facts, pair_facts, visit_facts
from curation.nlp.diagnoses import Diagnoses
from curation.schema import Case, Evidence

SEX_WORD = {"F": "woman", "M": "man"}
CHILD_WORD = {"F": "girl", "M": "boy"}  # under 18 ("a 10-year-old man" read wrong in a clinical review)


def sex_word(sex: str | None, age: float | None) -> str | None:
    words = CHILD_WORD if age is not None and age < 18 else SEX_WORD
    return words.get(sex or "")


IMAGE_NAMES = ("hippocampus", "ventricles", "brain", "lesion", "figure", "sequence_known", "baseline_hippocampus",
               "followup_hippocampus", "baseline_ventricles", "followup_ventricles", "key_figure", "dx_figure",
               "pair_first", "pair_second", "kind_figure", "other_figure", "dx_figures",
               "compartment_figures", "baseline_change", "followup_change", "consult_figures", "group_figures",
               "structure_figures", "side_figures", "mechanism_figure", "signal_figure",
               "enhancement_figure", "complication_figures")


class LesionFacts(BaseModel):
    model_config = ConfigDict(extra="forbid")
    label: str
    anatomy: str | None = None
    laterality: str | None = None
    sequence: str | None = None
    small: bool = False  # the report calls it small (a size word before it, or up to 10 mm): finding_facts


class MaskLesionFacts(BaseModel):
    """The lesion as the source's own mask gives it (normalize: located_by lesion_mask), on its render's slice."""

    model_config = ConfigDict(extra="forbid")
    laterality: str | None = None  # left, right or bilateral on the shown slice; None where neither is clear
    count: int
    largest_mm3: float
    lobe: str | None = None  # where most of the shown slice's lesion lies (normalize: lobes.yaml); None if unclear
    other_lobes: list[str] = []  # the lobes the slice's lesion does not reach: a lobe item's wrong options
    fov_mm: float | None = None  # the shown slice's width, right to left: the scale a reader needs
    diameter: str | None = None  # size band of the slice's one lesion, clear of the bands' bounds


class DeficitFacts(BaseModel):
    model_config = ConfigDict(extra="forbid")
    label: str
    side: str | None = None
    kind: str
    hemisphere: str | None = None  # the one it points to (finding_facts.history_deficit)
    structures: list[str] | None = None  # the structures of that hemisphere whose lesion gives it


class Facts(BaseModel):
    """Every fact a template may require or render: one visit's (``kind`` visit) or a registered pair's (pair).
    Templates are checked against these names when they load, so a misspelt requirement fails there."""

    model_config = ConfigDict(extra="forbid")
    kind: str
    source: str
    case_id: str
    visit_id: str | None = None
    image: dict[str, Evidence | list[Evidence]] = {}
    age: int | None = None
    age_phrase: str | None = None
    sex_word: str | None = None
    presentation: str | None = None
    apoe4: Any = None
    dx: str | None = None
    dx_scheme: str | None = None
    differential: list[str] | None = None
    mmse: Any = None
    cdr: Any = None
    cdrsb: Any = None
    hippocampus_ml: float | None = None
    hippocampal_grade: str | None = None
    memory_picture: str | None = None
    mmse_line: Any = None  # the MMSE under which memory_picture reads "impaired", told in the turn that gives the score
    ventricles_ml: float | None = None
    ventricle_grade: str | None = None
    nwbv: float | None = None
    atrophy_grade: str | None = None
    sequence: str | None = None
    weighting: str | None = None  # of the series a visit's anatomy images come from ("T1-weighted")
    sequence_choices: list[str] | None = None
    figure_id: str | None = None
    image_sequence: str | None = None  # the sequence of the lesion image shown (a reader always knows it)
    lesion: LesionFacts | None = None
    mask_lesion: MaskLesionFacts | None = None
    findings_text: str | None = None
    territory: str | None = None
    deficit: DeficitFacts | None = None
    deficit_matches_lesion: bool | None = None
    next_step: str | None = None
    interval: str | None = None
    mmse_baseline: Any = None
    dx_baseline: str | None = None
    dx_followup: str | None = None
    conversion: str | None = None
    ventricle_change: str | None = None
    ventricles_ml_baseline: float | None = None
    ventricles_ml_followup: float | None = None
    lesion_change: str | None = None  # a new or enlarging lesion between two FLAIR visits (knowledge lesion_changes)
    lesion_change_mm3: float | None = None
    # a teaching case's (teaching.py)
    dx_options: list[str] | None = None
    structure: str | None = None
    dx_caption_first: str | None = None
    figure_dims: dict[str, list[str]] | None = None  # figure id -> the visual dimensions its caption implies
    dx_direct: str | None = None
    dx_with_history: str | None = None
    dx_told_ok: bool | None = None
    dx_told: bool | None = None
    dx_image_count: str | None = None  # "two images": how many a diagnosis item shows (their sequences are not told:
    # a sibling asks one)
    dx_reference: str | None = None
    dx_considered: list[str] | None = None  # the diagnoses the case's own differential weighs against it
    pair_kind_names: list[str] | None = None
    structure_options: list[str] | None = None
    side: str | None = None  # the side of the patient a described figure's finding lies on (teaching._side_facts)
    side_options: list[str] | None = None
    side_caption: str | None = None
    signal: str | None = None  # how a figure's finding looks against the tissue around it (teaching._signal_facts)
    signal_options: list[str] | None = None
    signal_caption: str | None = None
    enhancement: str | None = None  # how a post-contrast figure's finding enhances (teaching._enhancement_facts)
    enhancement_options: list[str] | None = None
    enhancement_caption: str | None = None
    enhancement_kind_name: str | None = None
    structure_caption: str | None = None  # the description the structure was read from
    consult_caption: str | None = None  # what the consult's images show (the key caption, or the group's)
    group_caption: str | None = None  # a caption written for two to six figures together (teaching._caption_group)
    group_caption_first: str | None = None
    group_image_count: str | None = None
    findings_report: str | None = None
    key_caption: str | None = None
    key_caption_first: str | None = None
    key_kind_name: str | None = None
    other_caption: str | None = None
    other_caption_first: str | None = None
    other_kind_name: str | None = None
    pair_reference: str | None = None
    kind_asked: str | None = None
    kind_options: list[str] | None = None
    compartment: str | None = None
    compartment_options: list[str] | None = None
    mechanism_finding: str | None = None  # the lesion that explains the presenting deficit (teaching._mechanism_facts)
    mechanism_caption: str | None = None
    mechanism_deficit: DeficitFacts | None = None
    # what the lesion does around it, and why (teaching._complication_facts)
    complication_finding: str | None = None
    complication_reasons: list[str] | None = None
    complication_kind_names: list[str] | None = None
    # fact -> why it was withheld although the case has it (a table's volume the image contradicts: visit_facts);
    # a template that requires it is skipped with that reason
    refused: dict[str, str] | None = None


def known_fact(dotted: str) -> bool:
    """Whether a template's ``requires``/``images`` entry names a fact that ``fact_sets`` can produce."""
    head, _, rest = dotted.partition(".")
    if head == "image":
        return rest in IMAGE_NAMES
    field = Facts.model_fields.get(head)
    if field is None:
        return False
    if not rest:
        return True
    nested: type[BaseModel] | None = {"lesion": LesionFacts, "mask_lesion": MaskLesionFacts,
                                      "deficit": DeficitFacts, "mechanism_deficit": DeficitFacts}.get(head)
    return nested is not None and rest in nested.model_fields


def fact_sets(case: Case, knowledge: dict[str, Any], diagnoses: Diagnoses | None = None,
              kinds_asked: Counter[str] | None = None) -> list[dict[str, Any]]:
    """The fact sets of ``case``: one per imaging visit in visit order, then baseline/follow-up pairs; a case without
    imaging visits (a case report, a Radiopaedia case) has one set holding its figures."""
    common = _case_facts(case, knowledge)
    out: list[dict[str, Any]] = []
    visits = [v for v in case.visits if v.series and not v.scores.get("reliability_rescan")]
    findings_visit = visits[0].visit_id if len(visits) == 1 else None  # report findings belong to a lone study
    for visit in visits:
        f = {**common, "kind": "visit", "visit_id": visit.visit_id}
        visit_facts(f, case, visit, knowledge)
        if visit.visit_id == findings_visit or not visits:
            finding_facts(f, case, knowledge)
        out.append(f)
    if not visits:
        f = {**common, "kind": "visit", "visit_id": None, "image": {}}
        if case.diagnosis.primary:
            f["dx"] = case.diagnosis.primary
        if diagnoses is not None and teaching_case(case):
            teaching_facts(f, case, diagnoses, Counter() if kinds_asked is None else kinds_asked,
                           history_deficit(case, knowledge))
        elif case.source == "case-reports" and case.figures:
            # a journal article none of whose figures says what one image is (panels not cut, a caption of several
            # images): which image shows the finding its text names is unknown, and items keyed from the text on
            # such figures were wrong about half the time on real cases; no image item is made
            finding_facts(f, case, knowledge)
        else:
            figure_facts(f, case)
            finding_facts(f, case, knowledge)
        out.append(f)
    pair = pair_facts(case, visits, common, knowledge)
    if pair is not None:
        out.append(pair)
    change = change_facts(case, visits, common, knowledge)
    if change is not None:
        out.append(change)
    # checked against the model (a fact this module misnames fails here), handed on as plain data for Jinja
    # (absent facts stay absent, so ``default`` filters apply; nested ones keep their keys for ``if`` tests)
    return [{k: v for k, v in Facts.model_validate(f).model_dump().items() if v is not None} for f in out]


# ----------------------------------------------------------------------------- case-wide facts
# a history that states the patient's age: "58 year old", "3-month-old", "an infant"
_AGE_TOLD = re.compile(r"\b\d+\s*(?:-|\s)?(?:years?|yrs?|y/?o|y\.o\.?|months?|mos?|weeks?|wks?|days?)\b|"
                       r"\b(?:infant|newborn|neonate)s?\b", re.I)

def _case_facts(case: Case, knowledge: dict[str, Any]) -> dict[str, Any]:
    f: dict[str, Any] = {"source": case.source.value, "case_id": case.case_id}
    if case.diagnosis.differential:
        f["differential"] = list(case.diagnosis.differential)
    if case.patient.sex in SEX_WORD:
        f["sex_word"] = sex_word(case.patient.sex, case.patient.age)
    if case.patient.age is not None:
        f["age"] = case.patient.age
        f["age_phrase"] = age_phrase(case.patient.age, case.patient.age_90_plus)
    who = None
    if case.patient.age is not None:
        sex = sex_word(case.patient.sex, case.patient.age) or "patient"
        who = f"{age_phrase(case.patient.age, case.patient.age_90_plus)} {sex}"
    context = clinical_context(case.presentation, knowledge, who)
    if context and who and not _AGE_TOLD.search(context):
        # the age and sex where the history does not tell them ("Skull pain. Noncontributory."): a reader weighs an
        # eosinophilic granuloma against a metastasis by the age (a clinical read)
        context = f"{who[0].upper()}{who[1:]}. {context}"
    if context:
        f["presentation"] = context
    if case.ehr.get("APOE4") is not None:
        f["apoe4"] = fmt(num(case.ehr["APOE4"]))
    return f


def lookup(facts: dict[str, Any], dotted: str) -> Any:
    cur: Any = facts
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur or cur[part] in (None, "", [], {}):
            return None
        cur = cur[part]
    return cur
