"""The facts a template may ask for, one set per visit (or per registered pair of visits) of one case.

Every fact and every image in a set comes from the same visit, so an item never pairs the clinical values of one
visit with the image of another. Images are evidence: the render of a series placed on the template's target
(hippocampus, lateral ventricles, lesion, whole brain) by the normalize stage, with its slice and position in mm.
A missing fact is simply absent; a template that requires it is not made from that set.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from pydantic import BaseModel, ConfigDict

from curation.schema import Case, Evidence, Finding, Render, Series, Visit

SEX_WORD = {"F": "woman", "M": "man"}
LESION_SEQUENCES = ("FLAIR", "T2w", "DWI", "SWI")
TARGET_SEQUENCE = "T1w"  # the anatomy of dementia items is read on T1-weighted images
# where a visit has none, on its T2-weighted series (atrophy and ventricular size read as well on it)
ANATOMY_SEQUENCES = ("T1w", "T2w")
WEIGHTING = {"T1w": "T1-weighted", "T2w": "T2-weighted"}
# a placeholder left by text de-identification ([NAME], [ID-3fa2c1]) or a full date, which item text never carries
PLACEHOLDER = re.compile(r"\[[A-Z][A-Z_]+(?:-[0-9a-f]{4,})?\]")
_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*"
FULL_DATE = re.compile(rf"\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b\d{{1,2}}/\d{{1,2}}/\d{{2,4}}\b|\b\d{{1,2}} {_MONTH} \d{{4}}\b"
                       rf"|\b{_MONTH} \d{{1,2}},? \d{{4}}\b")
POSITION_TOLERANCE_MM = 0.51


IMAGE_NAMES = ("hippocampus", "ventricles", "brain", "lesion", "figure", "sequence_known", "baseline_hippocampus",
               "followup_hippocampus", "baseline_ventricles", "followup_ventricles")


class LesionFacts(BaseModel):
    model_config = ConfigDict(extra="forbid")
    label: str
    anatomy: str | None = None
    laterality: str | None = None
    sequence: str | None = None
    small: bool = False  # the report calls it small (a size word before it, or up to 10 mm): _described_small


class DeficitFacts(BaseModel):
    model_config = ConfigDict(extra="forbid")
    label: str
    side: str | None = None
    kind: str


class Facts(BaseModel):
    """Every fact a template may require or render: one visit's (``kind`` visit) or a registered pair's (pair).
    Templates are checked against these names when they load, so a misspelt requirement fails there."""

    model_config = ConfigDict(extra="forbid")
    kind: str
    source: str
    case_id: str
    visit_id: str | None = None
    image: dict[str, Evidence] = {}
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
    nested = {"lesion": LesionFacts, "deficit": DeficitFacts}.get(head)
    return nested is not None and rest in nested.model_fields


def deid_artefacts(text: str) -> list[str]:
    """The placeholders and full dates in ``text`` (an item must have none)."""
    return PLACEHOLDER.findall(text) + FULL_DATE.findall(text)


def fact_sets(case: Case, knowledge: dict[str, Any]) -> list[dict[str, Any]]:
    """The fact sets of ``case``: one per imaging visit in visit order, then baseline/follow-up pairs; a case without
    imaging visits (a case report, a Radiopaedia case) has one set holding its figures."""
    common = _case_facts(case, knowledge)
    out: list[dict[str, Any]] = []
    visits = [v for v in case.visits if v.series and not v.scores.get("reliability_rescan")]
    findings_visit = visits[0].visit_id if len(visits) == 1 else None  # report findings belong to a lone study
    for visit in visits:
        f = {**common, "kind": "visit", "visit_id": visit.visit_id}
        _visit_facts(f, case, visit, knowledge)
        if visit.visit_id == findings_visit or not visits:
            _finding_facts(f, case, knowledge)
        out.append(f)
    if not visits:
        f = {**common, "kind": "visit", "visit_id": None, "image": {}}
        if case.diagnosis.primary:
            f["dx"] = case.diagnosis.primary
        _figure_facts(f, case)
        _finding_facts(f, case, knowledge)
        out.append(f)
    pair = _pair_facts(case, visits, common, knowledge)
    if pair is not None:
        out.append(pair)
    # checked against the model (a fact this module misnames fails here), handed on as plain data for Jinja
    # (absent facts stay absent, so ``default`` filters apply; nested ones keep their keys for ``if`` tests)
    return [{k: v for k, v in Facts.model_validate(f).model_dump().items() if v is not None} for f in out]


# ----------------------------------------------------------------------------- case-wide facts
def _case_facts(case: Case, knowledge: dict[str, Any]) -> dict[str, Any]:
    f: dict[str, Any] = {"source": case.source.value, "case_id": case.case_id}
    if case.diagnosis.differential:
        f["differential"] = list(case.diagnosis.differential)
    if case.patient.sex in SEX_WORD:
        f["sex_word"] = SEX_WORD[case.patient.sex]
    if case.patient.age is not None:
        f["age"] = case.patient.age
        f["age_phrase"] = _age_phrase(case.patient.age, case.patient.age_90_plus)
    who = None
    if case.patient.age is not None:
        sex = SEX_WORD.get(case.patient.sex or "", "patient")
        who = f"{_age_phrase(case.patient.age, case.patient.age_90_plus)} {sex}"
    context = clinical_context(case.presentation, knowledge, who)
    if context:
        f["presentation"] = context
    if case.ehr.get("APOE4") is not None:
        f["apoe4"] = _fmt(_num(case.ehr["APOE4"]))
    return f


def _age_phrase(age: int, ninety_plus: bool) -> str:
    """With its article: "a 74-year-old", "an 88-year-old", "a 90-year-old or older"."""
    if ninety_plus or age >= 90:
        return "a 90-year-old or older"
    return f"{'an' if str(age).startswith('8') or age in (11, 18) else 'a'} {age}-year-old"


def clinical_context(text: str, knowledge: dict[str, Any], who: str | None = None) -> str:
    """The presentation as an item may show it: the sentences before imaging is told, less those naming a diagnosis,
    treatment or outcome, with the placeholders and dates that de-identification left removed (a sentence that keeps
    one is dropped). Ages and intervals stay; a date of birth or of admission does not. A patient named by title
    becomes ``who`` ("a 63-year-old man") or the title's sex ("a woman"), so age and sex survive."""
    stop = [re.compile(p, re.IGNORECASE) for p in knowledge.get("context_stop", [])]
    drop = [re.compile(p, re.IGNORECASE) for p in knowledge.get("context_drop", [])]
    kept = []
    for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z])", text.strip()):
        if any(c.search(sentence) for c in stop):
            break
        if any(c.search(sentence) for c in drop):
            continue
        s = _scrub(sentence, who if not kept else None)
        if s and not deid_artefacts(s):
            kept.append(s)
    return " ".join(kept)


_TITLE = r"(?:Mr|Mrs|Ms|Miss|Mx|Dr)\.?\s*"
_PH = r"\[[A-Z][A-Z_]+(?:-[0-9a-f]{4,})?\]"


_TITLE_SEX = {"mr": "man", "mrs": "woman", "ms": "woman", "miss": "woman"}


def _scrub(s: str, who: str | None = None) -> str:
    """Remove identifying fragments around de-identification placeholders and dates without breaking the sentence."""
    date = FULL_DATE.pattern
    # a parenthesis holding a placeholder or a date: "(DOB 1957-04-05, [ADDRESS])"
    s = re.sub(rf"\s*\([^()]*(?:{_PH}|{date})[^()]*\)", "", s)
    # an apposition naming the patient: ", Mr. [NAME] of [ADDRESS],"
    s = re.sub(rf",\s*{_TITLE}{_PH}[^,.]*,", "", s)
    def sex_of(title: str) -> str | None:
        return _TITLE_SEX.get(title.rstrip(". ").lower())

    def apposition(m: re.Match[str]) -> str:  # "Ms. [NAME], a 29-year-old teacher," -> "A 29-year-old female teacher"
        desc, sex = m.group(3), sex_of(m.group(1))
        if sex and not re.search(r"\b(man|woman|male|female|boy|girl|he|she)\b", desc):
            desc = re.sub(r"(-old)\b", rf"\1 {'female' if sex == 'woman' else 'male'}", desc, count=1)
        return f"{m.group(2).capitalize()} {desc} "

    s = re.sub(rf"^((?:Mr|Mrs|Ms|Miss|Mx|Dr)\.?\s*){_PH},\s*(an?)\s+([^,]+),\s*", apposition, s)
    s = re.sub(rf"^((?:Mr|Mrs|Ms|Miss|Mx|Dr)\.?\s*){_PH}\s*",
               lambda m: f"{(who or ('a ' + (sex_of(m.group(1)) or 'patient'))).capitalize()} "
               if who or sex_of(m.group(1)) else "The patient ", s)
    # "on 2020-01-31", "since 02/06/2020"
    s = re.sub(rf"\s+(?:on|since|from|at|dated)\s+(?:{date})", "", s)
    # a relative or place named after its role: "his wife [NAME]", "of [ADDRESS]"
    s = re.sub(rf"\s+(?:of|from|in|at)\s+{_PH}", "", s)
    s = re.sub(rf"\s*(?:{_TITLE})?{_PH}(?=[\s,.;:])", "", s)
    s = re.sub(r"\s+([,.;:])", r"\1", re.sub(r"\s{2,}", " ", s)).strip()
    s = re.sub(r",\s*,", ",", s)
    s = re.sub(r"\b(with|and|of|by|to)\s*,\s*", r"\1 ", s)  # "with [NAME], nausea" -> "with nausea"
    return s[:1].upper() + s[1:] if s else s


# ----------------------------------------------------------------------------- one visit
def _visit_facts(f: dict[str, Any], case: Case, visit: Visit, knowledge: dict[str, Any]) -> None:
    days = visit.days_from_baseline or 0
    if case.patient.age is not None:
        age = case.patient.age + int(days / 365.25)  # age at the scan, not at baseline
        f["age"] = min(age, 90)
        f["age_phrase"] = _age_phrase(age, case.patient.age_90_plus)
    dx = visit.diagnosis or (case.diagnosis.primary if len([v for v in case.visits if v.series]) == 1 else None)
    if dx:
        f["dx"] = dx
        scheme = knowledge.get("dementia_scheme_by_source", {}).get(case.source.value)
        if dx in knowledge.get("dementia_schemes", {}).get(scheme, []):
            f["dx_scheme"] = scheme  # the categories its items may offer
    scores = dict(visit.scores)
    for key, names in {"mmse": ("MMSE",), "cdr": ("CDR",), "cdrsb": ("CDRSB", "CDRSUM")}.items():
        v = _score(scores, *names)
        if v is not None:
            f[key] = _fmt(v)
    images: dict[str, dict[str, Any]] = {}
    t1 = next((s for q in ANATOMY_SEQUENCES if (s := _first(visit, q)) is not None), None)
    if t1 is not None:
        f["weighting"] = WEIGHTING[t1.sequence or TARGET_SEQUENCE]
        for name, target in (("hippocampus", "hippocampus"), ("ventricles", "lateral_ventricles"),
                             ("brain", "brain")):
            r = target_render(t1, target)
            if r is not None:
                images[name] = _evidence(r, t1, visit, target).model_dump()
        # a volume measure goes with an image of the visit it was measured at: its T1-weighted series, or where it
        # has none its T2-weighted one
        _graded_facts(f, scores, knowledge, images)
    lesion = next(((s, r) for s in visit.series if s.sequence in LESION_SEQUENCES and _usable(s)
                   for r in [target_render(s, "lesion")] if r is not None), None)
    if lesion is not None:
        images["lesion"] = _evidence(lesion[1], lesion[0], visit, "lesion").model_dump()
    known = [s for s in visit.series if s.sequence and _usable(s) and _mid(s) is not None]
    if known:
        # which series a sequence question shows is drawn per case, so the answer is not always the first sequence
        s = known[int(hashlib.sha256(case.case_id.encode()).hexdigest(), 16) % len(known)]
        images["sequence_known"] = _evidence(_mid(s), s, visit, None).model_dump()  # type: ignore[arg-type]
        f["sequence"] = s.sequence
        if len({k.sequence for k in known}) >= 2:  # a one-sequence visit would make the answer a constant
            f["sequence_choices"] = sorted({k.sequence for k in known if k.sequence})
    f["image"] = images


def _memory_picture(grade: str, mmse: Any, knowledge: dict[str, Any]) -> str | None:
    """What the hippocampi and the score say together (knowledge ``memory_pictures``): atrophy or not, crossed with
    an MMSE below ``mmse_impaired_below`` or not, so that neither the image nor the score alone gives it."""
    table = knowledge.get("memory_pictures") or {}
    try:
        impaired = float(mmse) < float(knowledge["mmse_impaired_below"])
    except (KeyError, TypeError, ValueError):
        return None
    atrophy = grade != (knowledge.get("volume_grades") or ["normal volume"])[0]
    return table.get(f"{'atrophy' if atrophy else 'no atrophy'}, {'impaired' if impaired else 'not impaired'}")


def _graded_facts(f: dict[str, Any], scores: dict[str, Any], knowledge: dict[str, Any],
                  images: dict[str, Any]) -> None:
    grades = knowledge.get("grades", {})
    hip, vent, nwbv = _score(scores, "Hippocampus"), _score(scores, "Ventricles"), _score(scores, "nWBV")
    if hip is not None and "hippocampus" in images and isinstance(f.get("age"), int):
        f["hippocampus_ml"] = round(hip / 1000, 2)
        bands = next((b for upper, b in knowledge.get("hippocampus_ml_by_age", []) if f["age"] < upper), None)
        g = _grade(f["hippocampus_ml"], bands or [])
        if g:
            f["hippocampal_grade"] = g
            picture = _memory_picture(g, f.get("mmse"), knowledge)
            if picture:
                f["memory_picture"] = picture
                f["mmse_line"] = _fmt(knowledge["mmse_impaired_below"])
    if vent is not None and "ventricles" in images and isinstance(f.get("age"), int):
        f["ventricles_ml"] = round(vent / 1000, 1)
        bands = next((b for upper, b in knowledge.get("ventricles_ml_by_age", []) if f["age"] < upper), None)
        g = _grade(f["ventricles_ml"], bands or [])
        if g:
            f["ventricle_grade"] = g
    if nwbv is not None and "brain" in images:
        f["nwbv"] = round(nwbv, 3)
        g = _grade(f["nwbv"], grades.get("nwbv", []))
        if g:
            f["atrophy_grade"] = g


# ----------------------------------------------------------------------------- baseline and follow-up
def _pair_facts(case: Case, visits: list[Visit], common: dict[str, Any],
                knowledge: dict[str, Any]) -> dict[str, Any] | None:
    """Baseline and the last follow-up whose T1w was registered to the baseline's and rendered at the same
    position in mm; None when no such pair exists."""
    dated = [v for v in visits if v.days_from_baseline is not None and _first(v, TARGET_SEQUENCE) is not None]
    if len(dated) < 2:
        return None
    v0 = dated[0]
    s0 = _first(v0, TARGET_SEQUENCE)
    assert s0 is not None
    for v1 in reversed(dated[1:]):
        s1 = _first(v1, TARGET_SEQUENCE)
        if s1 is None or (v1.days_from_baseline or 0) <= (v0.days_from_baseline or 0):
            continue
        if not registered_to(s1, s0):
            continue
        images: dict[str, Any] = {}
        for name, target in (("ventricles", "lateral_ventricles"), ("hippocampus", "hippocampus")):
            r0, r1 = target_render(s0, target), paired_render(s1, s0, target)
            if r0 and r1 and r0.position_mm is not None and r1.position_mm is not None \
                    and abs(r0.position_mm - r1.position_mm) <= POSITION_TOLERANCE_MM and r0.plane == r1.plane:
                images[f"baseline_{name}"] = _evidence(r0, s0, v0, target).model_dump()
                images[f"followup_{name}"] = _evidence(r1, s1, v1, target).model_dump()
        if not images:
            continue
        f: dict[str, Any] = {**common, "kind": "pair", "visit_id": f"{v0.visit_id}+{v1.visit_id}", "image": images}
        days = (v1.days_from_baseline or 0) - (v0.days_from_baseline or 0)
        f["interval"] = f"{round(days / 30.44)} months" if days < 730 else f"{days / 365.25:.1f} years"
        if case.patient.age is not None:
            f["age_phrase"] = _age_phrase(case.patient.age + int((v0.days_from_baseline or 0) / 365.25),
                                          case.patient.age_90_plus)
        m0 = _score(v0.scores, "MMSE")
        if m0 is not None:
            f["mmse_baseline"] = _fmt(m0)
        order = knowledge.get("stage_order", [])
        if v0.diagnosis in order and v1.diagnosis in order:
            f["dx_baseline"], f["dx_followup"] = v0.diagnosis, v1.diagnosis
            step = order.index(v1.diagnosis) - order.index(v0.diagnosis)
            f["conversion"] = knowledge["conversions"]["progressed" if step > 0 else
                                                       ("improved" if step < 0 else "stable")]
        vent0, vent1 = _score(v0.scores, "Ventricles"), _score(v1.scores, "Ventricles")
        if vent0 and vent1 is not None and "baseline_ventricles" in images:
            f["ventricle_change"] = _grade(vent1 / vent0, knowledge.get("changes", {}).get("ventricles_ml", []))
            f["ventricles_ml_baseline"], f["ventricles_ml_followup"] = round(vent0 / 1000, 1), round(vent1 / 1000, 1)
        return f
    return None


def registered_to(series: Series, reference: Series) -> bool:
    """Whether ``series`` was registered onto ``reference`` (its provenance names it)."""
    return any(step.name.startswith("register") and step.args.get("reference") == reference.series_id
               for step in series.provenance)


# ----------------------------------------------------------------------------- figures and report findings
def _figure_facts(f: dict[str, Any], case: Case) -> None:
    figs = [fig for fig in case.figures if fig.renders and not fig.missing]
    if not figs:
        return
    labels = {x.label for x in case.findings if x.category == "finding" and not x.negated}
    # the figure whose caption names a finding, else the middle one (series are listed in order)
    named = [fig for fig in figs if any(lbl in fig.caption.lower() for lbl in labels)]
    fig = (named or figs)[len(named or figs) // 2]
    ev = Evidence(image=fig.renders[0].path, series_id=fig.figure_id, target="figure", plane="figure").model_dump()
    f["image"] = {"figure": ev, "lesion": ev}
    f["figure_id"] = fig.figure_id


def _finding_facts(f: dict[str, Any], case: Case, knowledge: dict[str, Any]) -> None:
    """The lesion a report describes, the deficit its presentation describes, and whether their sides agree."""
    deficits = knowledge.get("deficits", {})
    symptoms = set(deficits.get("contralateral", [])) | set(deficits.get("dominant_hemisphere", []))
    symptoms |= {"headache", "optic neuritis"}
    figure = f.get("figure_id")
    imaging = [x for x in case.findings if x.category == "finding" and not x.negated and x.label not in symptoms
               and (x.source_field != "presentation" or x.sequence)]
    # findings of the figure shown come first, then those of the report
    imaging.sort(key=lambda x: (x.source_field != f"figure:{figure}", not x.anatomy))
    if imaging and "lesion" in f.get("image", {}):
        x = imaging[0]
        # a structure names where the lesion is better than a vascular territory (asked on its own below)
        where = next((y for y in imaging if y.label == x.label and y.anatomy and not y.anatomy.endswith("territory")),
                     x)
        f["lesion"] = {"label": x.label, "anatomy": where.anatomy, "laterality": where.laterality or x.laterality,
                       "sequence": x.sequence or where.sequence, "small": _described_small(case, x)}
        shown = f["image"]["lesion"]
        if not shown.get("sequence") and figure:  # a figure's sequence: its caption's, else the lesion's in the report
            shown["sequence"] = next((y.sequence for y in case.findings
                                      if y.source_field == f"figure:{figure}" and y.sequence),
                                     f["lesion"]["sequence"])
        if shown.get("sequence"):
            f["image_sequence"] = shown["sequence"]
        seen: list[str] = []
        labels: set[str] = set()
        for y in imaging:  # each finding once, where the report puts it; what surrounds a lesion has no place
            if y.label in labels:
                continue
            labels.add(y.label)
            place = f" in the {y.anatomy}" if y.anatomy and y.label not in SURROUNDING else ""
            seen.append(y.label + place)
        f["findings_text"] = "; ".join(seen[:4])
        territory = next((y.anatomy for y in imaging if y.anatomy and y.anatomy.endswith("territory")), None)
        if territory:
            f["territory"] = territory
    pres = [x for x in case.findings if x.category == "finding" and not x.negated and x.source_field == "presentation"]
    deficit = next((x for x in pres if x.label in symptoms and x.label != "headache" and x.label != "optic neuritis"),
                   None)
    lesion = f.get("lesion")
    if deficit is not None and lesion and lesion.get("laterality") in ("left", "right"):
        right_handed = case.patient.handedness != "L" and not re.search(r"left-handed", case.presentation, re.I)
        kind = "contralateral" if deficit.label in deficits.get("contralateral", []) else "dominant"
        f["deficit"] = {"label": deficit.label, "side": deficit.laterality, "kind": kind}
        if kind == "contralateral":
            ok = deficit.laterality in ("left", "right") and deficit.laterality != lesion["laterality"]
        else:
            ok = right_handed and lesion["laterality"] == "left"
        if ok:  # a lesion on the wrong side does not explain the deficit; no item says that it does
            f["deficit_matches_lesion"] = True
    dx = f.get("dx")
    steps = keyed(knowledge.get("next_steps", {}), dx) or []
    if steps:
        f["next_step"] = steps[0]


# findings that describe what surrounds a lesion: the nearest structure a report names is not where they are ("mass
# effect on the lateral ventricle" is not mass effect in it)
SURROUNDING = frozenset({"vasogenic oedema", "mass effect", "dawson fingers", "enhancement"})

# what a report calls a small lesion: a size word just before the finding in its sentence, or a size up to 10 mm
_SMALL = re.compile(r"\b(small|tiny|punctate|dot-like|millimetric|lacunar|lacune|microbleeds?)\b"
                    r"|\b(?:[1-9]|10)(?:\.\d)?\s?mm\b", re.IGNORECASE)


def _described_small(case: Case, finding: Finding) -> bool:
    """Whether the report describes ``finding`` as small (the words of its sentence before it, or the finding's own
    words): how a report's figure, which has no measured lesion, can be an item about a small object."""
    text = case.text_fields().get(finding.source_field or "", "")
    if finding.start is None or not text:
        return bool(_SMALL.search(finding.text))
    before = re.split(r"[.;]\s", text[max(0, finding.start - 60):finding.start])[-1]
    return bool(_SMALL.search(before) or _SMALL.search(finding.text))


# ----------------------------------------------------------------------------- helpers
def keyed(table: dict[str, Any], key: str | None) -> Any:
    """A knowledge table's entry for ``key`` (a diagnosis, an anatomy), ignoring case: a source writes "Acute
    ischaemic stroke" where another writes "acute ischaemic stroke"."""
    if not key:
        return None
    if key in table:
        return table[key]
    folded = key.casefold()
    return next((v for k, v in table.items() if k.casefold() == folded), None)


def target_render(series: Series, target: str) -> Render | None:
    """The render the normalize stage placed on ``target`` (montage counts as the whole brain)."""
    for r in series.renders:
        if r.role == "target" and r.target == target:
            return r
    if target == "brain":
        return next((r for r in series.renders if r.role == "montage"), None)
    return None


def paired_render(series: Series, reference: Series, target: str) -> Render | None:
    """The render of a registered follow-up placed at the reference's position for ``target`` (the normalize stage
    renders it role "paired"); its own target render when that already lies at the reference's position."""
    for r in series.renders:
        if r.role == "paired" and r.target == target and r.located_by in (None, f"registered_to:{reference.series_id}"):
            return r
    return target_render(series, target)


def _mid(series: Series) -> Render | None:
    return next((r for r in series.renders if r.plane == "axial" and r.role == "mid"), None)


def _usable(series: Series) -> bool:
    return bool(series.renders) and series.qc.get("pass", True) is not False


def _first(visit: Visit, sequence: str) -> Series | None:
    return next((s for s in visit.series if s.sequence == sequence and _usable(s)), None)


def _evidence(r: Render, s: Series, visit: Visit | None, target: str | None) -> Evidence:
    return Evidence(image=r.path, series_id=s.series_id, visit_id=visit.visit_id if visit else None,
                    sequence=s.sequence, target=target, plane=r.plane, slice_index=r.slice_index,  # type: ignore[arg-type]
                    position_mm=r.position_mm, target_fraction=_fraction(s, target, r))


def _fraction(s: Series, target: str | None, r: Render) -> float | None:
    """How much of the brain the target covers in the shown slice, as the normalize stage measured it."""
    for placed in s.qc.get("targets") or []:
        if isinstance(placed, dict) and placed.get("target") == target and placed.get("plane") == r.plane \
                and placed.get("slice_index") == r.slice_index:
            value = placed.get("target_fraction")
            return float(value) if isinstance(value, int | float) else None
    return None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) else None


def _score(scores: dict[str, Any], *names: str) -> float | None:
    for n in names:
        v = scores.get(n)
        if isinstance(v, int | float):
            return float(v)
    return None


def _fmt(v: float | None) -> Any:
    if v is None:
        return None
    return int(v) if float(v).is_integer() else round(float(v), 1)


def _grade(value: float | None, bands: list[list[Any]]) -> str | None:
    """``bands`` is [[upper_bound, label], ...] in increasing order; the first bound above ``value`` wins."""
    if value is None:
        return None
    for bound, label in bands:
        if value < float(bound):
            return label
    return None


def lookup(facts: dict[str, Any], dotted: str) -> Any:
    cur: Any = facts
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur or cur[part] in (None, "", [], {}):
            return None
        cur = cur[part]
    return cur
