"""The facts of an imaging visit (scores, volumes graded against the age band, and the images of its targets,
lesion and sequences), and of a baseline with a follow-up registered onto it."""

from __future__ import annotations

import hashlib
from typing import Any

from curation.generate.renders import (
    evidence_of,
    first_series,
    mid_render,
    paired_render,
    registered_to,
    target_render,
    usable,
)
from curation.generate.values import age_phrase, clear_grade_of, fmt, grade_of, score_of
from curation.schema import MASK_LOCATED, Case, Placement, Render, Series, Visit

LESION_SEQUENCES = ("FLAIR", "T2w", "DWI", "SWI")
TARGET_SEQUENCE = "T1w"  # the anatomy of dementia items is read on T1-weighted images
# where a visit has none, on its T2-weighted series (atrophy and ventricular size read as well on it)
ANATOMY_SEQUENCES = ("T1w", "T2w")
WEIGHTING = {"T1w": "T1-weighted", "T2w": "T2-weighted"}
POSITION_TOLERANCE_MM = 0.51


def visit_facts(f: dict[str, Any], case: Case, visit: Visit, knowledge: dict[str, Any]) -> None:
    days = visit.days_from_baseline or 0
    if case.patient.age is not None:
        age = case.patient.age + int(days / 365.25)  # age at the scan, not at baseline
        f["age"] = min(age, 90)
        f["age_phrase"] = age_phrase(age, case.patient.age_90_plus)
    dx = visit.diagnosis or (case.diagnosis.primary if len([v for v in case.visits if v.series]) == 1 else None)
    if dx:
        f["dx"] = dx
        scheme = knowledge.get("dementia_scheme_by_source", {}).get(case.source.value)
        if dx in knowledge.get("dementia_schemes", {}).get(scheme, []):
            f["dx_scheme"] = scheme  # the categories its items may offer
    scores = dict(visit.scores)
    for key, names in {"mmse": ("MMSE",), "cdr": ("CDR",), "cdrsb": ("CDRSB", "CDRSUM")}.items():
        v = score_of(scores, *names)
        if v is not None:
            f[key] = fmt(v)
    images: dict[str, dict[str, Any]] = {}
    t1 = next((s for q in ANATOMY_SEQUENCES if (s := first_series(visit, q)) is not None), None)
    if t1 is not None:
        f["weighting"] = WEIGHTING[t1.sequence or TARGET_SEQUENCE]
        for name, target in (("hippocampus", "hippocampus"), ("ventricles", "lateral_ventricles"),
                             ("brain", "brain")):
            r = target_render(t1, target)
            if r is not None:
                images[name] = evidence_of(r, t1, visit, target).model_dump()
        # a volume measure goes with an image of the visit it was measured at: its T1-weighted series, or where it
        # has none its T2-weighted one
        _graded_facts(f, scores, knowledge, images, t1)
    # a lesion the finder placed is shown on a sequence it stands out on; one the source's mask placed on whatever
    # series the mask goes with (a glioma's post-contrast T1), after those
    lesion = next(((s, r) for s in sorted(visit.series, key=lambda s: s.sequence not in LESION_SEQUENCES)
                   if usable(s) for r in [target_render(s, "lesion")] if r is not None
                   and (s.sequence in LESION_SEQUENCES or _mask_located(s, r))), None)
    if lesion is not None:
        images["lesion"] = evidence_of(lesion[1], lesion[0], visit, "lesion").model_dump()
        placed = _placed_lesion(*lesion)
        # the source's mask is the truth of where the lesion is
        if placed is not None and placed.located_by == MASK_LOCATED:
            f["mask_lesion"] = {"laterality": placed.laterality, "count": placed.count,
                                "largest_mm3": placed.largest_mm3, "lobe": placed.lobe,
                                "other_lobes": list(placed.lobes_ruled_out or [])}
            if lesion[0].sequence in LESION_SEQUENCES:  # the whole abnormality shows (not only its enhancing part)
                f["mask_lesion"].update(fov_mm=placed.fov_mm, diameter=clear_grade_of(
                    placed.diameter_mm, knowledge.get("lesion_diameters_mm", []),
                    float(knowledge.get("lesion_diameter_margin", 1.0))))
    known = [s for s in visit.series if s.sequence and usable(s) and mid_render(s) is not None]
    if known:
        # which series a sequence question shows is drawn per case, so the answer is not always the first sequence
        s = known[int(hashlib.sha256(case.case_id.encode()).hexdigest(), 16) % len(known)]
        images["sequence_known"] = evidence_of(mid_render(s), s, visit, None).model_dump()  # type: ignore[arg-type]
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


def image_ventricles_ml(series: Series) -> float | None:
    """The lateral ventricles' volume normalize measured on the series itself (imaging/ventricles.py), or None."""
    measures = series.qc.anatomy.measures
    ml = measures.lateral_ventricles_ml if measures is not None else None
    return ml if ml is not None and ml > 0 else None


def disagreement(table: str | None, image: str | None, grades: list[str]) -> str | None:
    """Why a table's grade is refused: the image gave none, or one two or more grades away; None where the image
    gives the same grade or the next one (one grade is within a measure's noise)."""
    if table is None:
        return None
    if image is None:
        return "image_unmeasured"
    if table in grades and image in grades and abs(grades.index(table) - grades.index(image)) >= 2:
        return "image_disagrees"
    return None


def refuse(f: dict[str, Any], fact: str, why: str) -> None:
    """Record that ``fact`` was refused (the engine skips a template that needs it with this reason)."""
    f.setdefault("refused", {})[fact] = why


def _graded_facts(f: dict[str, Any], scores: dict[str, Any], knowledge: dict[str, Any],
                  images: dict[str, Any], series: Series) -> None:
    grades = knowledge.get("grades", {})
    hip, vent, nwbv = score_of(scores, "Hippocampus"), score_of(scores, "Ventricles"), score_of(scores, "nWBV")
    # the row's ventricles, checked against the ventricles measured on the series, confirm that the row is this
    # image's: a wrong join, another visit's row or another processing's table gives a contradiction or nothing
    row = _row_disagreement(f, vent, knowledge, series)
    if hip is not None and "hippocampus" in images and isinstance(f.get("age"), int):
        f["hippocampus_ml"] = round(hip / 1000, 2)
        bands = next((b for upper, b in knowledge.get("hippocampus_ml_by_age", []) if f["age"] < upper), None)
        g = grade_of(f["hippocampus_ml"], bands or [])
        # no measure of the hippocampi on the image is precise enough to grade them (no segmentation), so their
        # grade is a key only from a row the image confirms
        if g and row:
            refuse(f, "hippocampal_grade", f"row_{row}")
        elif g:
            f["hippocampal_grade"] = g
            picture = _memory_picture(g, f.get("mmse"), knowledge)
            if picture:
                f["memory_picture"] = picture
                f["mmse_line"] = fmt(knowledge["mmse_impaired_below"])
    if vent is not None and "ventricles" in images and isinstance(f.get("age"), int):
        f["ventricles_ml"] = round(vent / 1000, 1)
        bands = next((b for upper, b in knowledge.get("ventricles_ml_by_age", []) if f["age"] < upper), None)
        g = grade_of(f["ventricles_ml"], bands or [])
        if g and row:
            refuse(f, "ventricle_grade", row)
        elif g:
            f["ventricle_grade"] = g
    if nwbv is not None and "brain" in images:
        f["nwbv"] = round(nwbv, 3)
        g = grade_of(f["nwbv"], grades.get("nwbv", []))
        if g:
            f["atrophy_grade"] = g


def _row_disagreement(f: dict[str, Any], vent: float | None, knowledge: dict[str, Any], series: Series) -> str | None:
    """Why a row of volumes is not confirmed by the image: the ventricles measured on ``series`` are two or more
    grades from the row's (``image_disagrees``), or the row or the image has none (``unconfirmed``,
    ``image_unmeasured``); None where they give the same grade or the next one."""
    if vent is None or not isinstance(f.get("age"), int):
        return "unconfirmed"
    bands = next((b for upper, b in knowledge.get("ventricles_ml_by_age", []) if f["age"] < upper), None) or []
    table = grade_of(round(vent / 1000, 1), bands)
    if table is None:
        return "unconfirmed"
    return disagreement(table, grade_of(image_ventricles_ml(series), bands), [label for _, label in bands])


# ----------------------------------------------------------------------------- baseline and follow-up
def pair_facts(case: Case, visits: list[Visit], common: dict[str, Any],
                knowledge: dict[str, Any]) -> dict[str, Any] | None:
    """Baseline and the last follow-up whose T1w was registered to the baseline's and rendered at the same
    position in mm; None when no such pair exists."""
    dated = [v for v in visits if v.days_from_baseline is not None and first_series(v, TARGET_SEQUENCE) is not None]
    if len(dated) < 2:
        return None
    v0 = dated[0]
    s0 = first_series(v0, TARGET_SEQUENCE)
    assert s0 is not None
    for v1 in reversed(dated[1:]):
        s1 = first_series(v1, TARGET_SEQUENCE)
        if s1 is None or (v1.days_from_baseline or 0) <= (v0.days_from_baseline or 0):
            continue
        if not registered_to(s1, s0):
            continue
        images: dict[str, Any] = {}
        for name, target in (("ventricles", "lateral_ventricles"), ("hippocampus", "hippocampus")):
            r0, r1 = target_render(s0, target), paired_render(s1, s0, target)
            if r0 and r1 and r0.position_mm is not None and r1.position_mm is not None \
                    and abs(r0.position_mm - r1.position_mm) <= POSITION_TOLERANCE_MM and r0.plane == r1.plane:
                images[f"baseline_{name}"] = evidence_of(r0, s0, v0, target).model_dump()
                images[f"followup_{name}"] = evidence_of(r1, s1, v1, target).model_dump()
        if not images:
            continue
        f: dict[str, Any] = {**common, "kind": "pair", "visit_id": f"{v0.visit_id}+{v1.visit_id}", "image": images}
        days = (v1.days_from_baseline or 0) - (v0.days_from_baseline or 0)
        f["interval"] = interval_phrase(days)
        if case.patient.age is not None:
            f["age_phrase"] = age_phrase(case.patient.age + int((v0.days_from_baseline or 0) / 365.25),
                                          case.patient.age_90_plus)
        m0 = score_of(v0.scores, "MMSE")
        if m0 is not None:
            f["mmse_baseline"] = fmt(m0)
        order = knowledge.get("stage_order", [])
        if v0.diagnosis in order and v1.diagnosis in order:
            f["dx_baseline"], f["dx_followup"] = v0.diagnosis, v1.diagnosis
            step = order.index(v1.diagnosis) - order.index(v0.diagnosis)
            f["conversion"] = knowledge["conversions"]["progressed" if step > 0 else
                                                       ("improved" if step < 0 else "stable")]
        vent0, vent1 = score_of(v0.scores, "Ventricles"), score_of(v1.scores, "Ventricles")
        if vent0 and vent1 is not None and "baseline_ventricles" in images:
            bands = knowledge.get("changes", {}).get("ventricles_ml", [])
            change = grade_of(vent1 / vent0, bands)
            seen0, seen1 = image_ventricles_ml(s0), image_ventricles_ml(s1)
            seen = grade_of(seen1 / seen0, bands) if seen0 and seen1 else None
            why = disagreement(change, seen, [label for _, label in bands])
            if why:
                refuse(f, "ventricle_change", why)
            else:
                f["ventricle_change"] = change
                f["ventricles_ml_baseline"] = round(vent0 / 1000, 1)
                f["ventricles_ml_followup"] = round(vent1 / 1000, 1)
        return f
    return None


def interval_phrase(days: int) -> str:
    """How an item tells the time between two visits: months under two years, else years."""
    return f"{round(days / 30.44)} months" if days < 730 else f"{days / 365.25:.1f} years"


def change_facts(case: Case, visits: list[Visit], common: dict[str, Any],
                 knowledge: dict[str, Any]) -> dict[str, Any] | None:
    """A follow-up FLAIR whose normalize stage found a new or enlarging lesion against the baseline FLAIR (its
    ``qc.change``), with the baseline and the registered follow-up rendered at it: the change and the interval;
    None where no follow-up has one."""
    for v1 in reversed(visits[1:]):
        for s1 in v1.series:
            change = s1.qc.change
            if s1.sequence != "FLAIR" or change is None or not change.found:
                continue
            r1 = next((r for r in s1.renders if r.role == "change"), None)
            v0 = next((v for v in visits if v.visit_id == change.reference_visit), None)
            s0 = next((s for s in v0.series if s.series_id == change.reference), None) if v0 else None
            r0 = next((r for r in s0.renders if r.path == change.baseline_render), None) if s0 else None
            if r0 is None or r1 is None or v0 is None or s0 is None:
                continue
            phrase = (knowledge.get("lesion_changes") or {}).get(change.found)
            if phrase is None:
                continue
            f: dict[str, Any] = {**common, "kind": "pair", "visit_id": f"{v0.visit_id}+{v1.visit_id}",
                                 "image": {"baseline_change": evidence_of(r0, s0, v0, "lesion").model_dump(),
                                           "followup_change": evidence_of(r1, s1, v1, "lesion").model_dump()}}
            days = (v1.days_from_baseline or 0) - (v0.days_from_baseline or 0)
            f["interval"] = interval_phrase(days)
            f["lesion_change"] = phrase
            f["lesion_change_mm3"] = change.volume_mm3
            return f
    return None


def _placed_lesion(series: Series, render: Render) -> Placement | None:
    """The lesion placement (normalize's qc.targets) a series' lesion render was made from; None if none."""
    return next((t for t in series.qc.targets if t.target == "lesion" and t.slice_index == render.slice_index), None)


def _mask_located(series: Series, render: Render) -> bool:
    placed = _placed_lesion(series, render)
    return placed is not None and placed.located_by == MASK_LOCATED
