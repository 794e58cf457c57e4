"""The facts a template may ask for, derived from one case; a missing fact is simply absent."""

from __future__ import annotations

from typing import Any

from curation.schema import Case, Series

SEX_WORD = {"F": "woman", "M": "man"}


def _render(series: Series, role: str = "mid", plane: str = "axial") -> str | None:
    for r in series.renders:
        if r.plane == plane and r.role == role:
            return r.path
    for r in series.renders:
        if r.plane == plane:
            return r.path
    return None


def _score(scores: dict[str, Any], *names: str) -> float | None:
    for n in names:
        v = scores.get(n)
        if isinstance(v, int | float):
            return v
    return None


def _fmt(v: float | None) -> Any:
    if v is None:
        return None
    return int(v) if float(v).is_integer() else round(float(v), 1)


def case_facts(case: Case, knowledge: dict[str, Any]) -> dict[str, Any]:
    f: dict[str, Any] = {"source": case.source.value}
    dx = case.diagnosis.primary
    if dx:
        f["dx"] = dx
    if case.diagnosis.differential:
        f["differential"] = list(case.diagnosis.differential)
    if case.patient.age is not None:
        f["age"] = f"{case.patient.age}+" if case.patient.age_90_plus else case.patient.age
    if case.patient.sex in SEX_WORD:
        f["sex_word"] = SEX_WORD[case.patient.sex]
    if case.presentation.strip():
        f["presentation"] = case.presentation.strip()
    ehr = case.ehr
    for key, names in {"mmse": ("MMSE",), "cdrsb": ("CDRSB", "CDRSUM"), "cdr": ("CDR",), "apoe4": ("APOE4",)}.items():
        v = _fmt(_score(ehr, *names))
        f[key] = v
    if f.get("mmse") is None:
        f.pop("mmse")
    images: dict[str, str] = {}
    visits = [v for v in case.visits if v.series]
    for visit in visits:  # latest visit wins
        for s in visit.series:
            path = _render(s)
            if path and s.sequence:
                images[s.sequence] = path
                images.setdefault("sequence_known", path)
                f.setdefault("sequence", s.sequence)
                if images["sequence_known"] == path:
                    f["sequence"] = s.sequence
    lesion_series = [s for v in visits for s in v.series if s.sequence in ("FLAIR", "T2w", "DWI")]
    if lesion_series:
        key = _render(lesion_series[-1], role="key") or _render(lesion_series[-1])
        if key:
            images["lesion"] = key
    figs = [fig for fig in case.figures if fig.renders]
    if figs:
        f["figure"] = figs[len(figs) // 2].renders[0].path
        images["figure"] = f["figure"]
        images.setdefault("lesion", f["figure"])
    any_img = images.get("lesion") or images.get("FLAIR") or images.get("T1w") or images.get("figure")
    if any_img:
        images["any"] = any_img
    t1_visits = [(v, s) for v in visits for s in v.series if s.sequence == "T1w" and _render(s)]
    if len(t1_visits) >= 2 and t1_visits[0][0].visit_id != t1_visits[-1][0].visit_id:
        (v0, s0), (v1, s1) = t1_visits[0], t1_visits[-1]
        images["baseline_T1w"], images["followup_T1w"] = _render(s0), _render(s1)
        dated = v0.days_from_baseline is not None and v1.days_from_baseline is not None
        if dated and not v1.scores.get("reliability_rescan"):
            f["interval_days"] = v1.days_from_baseline - v0.days_from_baseline
        m0, m1 = _score(v0.scores, "MMSE"), _score(v1.scores, "MMSE")
        if m0 is not None and m1 is not None and "interval_days" in f:
            f["mmse_baseline"], f["mmse_followup"] = _fmt(m0), _fmt(m1)
            f["trend"] = "worsened" if m1 <= m0 - 2 else ("improved" if m1 >= m0 + 2 else "stable")
        if v0.diagnosis and v1.diagnosis and "interval_days" in f:
            f["dx_baseline"], f["dx_followup"] = v0.diagnosis, v1.diagnosis
    f["image"] = images
    positives = [x for x in case.findings if x.category == "finding" and not x.negated]
    located = [x for x in positives if x.anatomy]
    lesion = located[0] if located else (positives[0] if positives else None)
    if lesion is not None and "lesion" in images:
        f["lesion"] = {"label": lesion.label, "anatomy": lesion.anatomy, "laterality": lesion.laterality,
                       "sequence": lesion.sequence}
    if positives:
        seen: list[str] = []
        for x in positives:
            text = x.label + (f" in the {x.anatomy}" if x.anatomy else "") + (f" on {x.sequence}" if x.sequence else "")
            if text not in seen:
                seen.append(text)
        f["findings_text"] = "; ".join(seen[:4])
    _graded_facts(f, case, knowledge)
    excluded = [x for x in case.findings if x.category == "finding" and x.negated and x.sequence]
    if excluded and "any" in images:
        f["excluded"] = {"label": excluded[0].label, "sequence": excluded[0].sequence}
    if f.get("ventricle_grade", "").endswith("enlarged") and f.get("dx") in knowledge.get("stage_order", []):
        f["ventriculomegaly_cause"] = knowledge["discriminating_features"]["ex vacuo ventriculomegaly"][0]
    territories = [x.anatomy for x in positives if x.anatomy and x.anatomy.endswith("territory")]
    if territories and "lesion" in images:
        f["territory"] = territories[0]
    if lesion is not None and lesion.sequence and "lesion" in images:
        f["lesion_sequence"] = lesion.sequence
    if dx and dx in knowledge.get("discriminating_features", {}):
        f["discriminator"] = knowledge["discriminating_features"][dx][0]
    order = knowledge.get("stage_order", [])
    if f.get("dx_baseline") in order and f.get("dx_followup") in order:
        step = order.index(f["dx_followup"]) - order.index(f["dx_baseline"])
        f["conversion"] = knowledge["conversions"]["progressed" if step > 0 else ("improved" if step < 0 else "stable")]
    steps = knowledge.get("next_steps", {}).get(dx or "", [])
    if steps:
        f["next_step"] = steps[0]
    return f


def _grade(value: float | None, bands: list[list[Any]]) -> str | None:
    """``bands`` is [[upper_bound, label], ...] in increasing order; the first bound above ``value`` wins."""
    if value is None:
        return None
    for bound, label in bands:
        if value < float(bound):
            return label
    return None


def _graded_facts(f: dict[str, Any], case: Case, knowledge: dict[str, Any]) -> None:
    """Quantitative EHR values and the grades the knowledge table assigns them (thresholds are data)."""
    ehr, grades = case.ehr, knowledge.get("grades", {})
    for key, name, scale in (("hippocampus_ml", "Hippocampus", 1e-3), ("ventricles_ml", "Ventricles", 1e-3),
                             ("nwbv", "nWBV", 1.0), ("moca", "MOCA", 1.0), ("adas13", "ADAS13", 1.0),
                             ("faq", "FAQ", 1.0)):
        v = _score(ehr, name)
        if v is not None:
            f[key] = round(v * scale, 3) if key == "nwbv" else _fmt(v * scale)
    for key, src in (("hippocampal_grade", "hippocampus_ml"), ("ventricle_grade", "ventricles_ml"),
                     ("atrophy_grade", "nwbv")):
        g = _grade(f.get(src), grades.get(src, []))
        if g:
            f[key] = g
    cdr = _score(ehr, "CDR")
    if cdr is not None:
        f["cdr_stage"] = knowledge.get("cdr_stages", {}).get(str(_fmt(cdr)))
    if f.get("apoe4") is not None:
        f["apoe_risk"] = knowledge.get("apoe_risk", {}).get(int(f["apoe4"]))


def lookup(facts: dict[str, Any], dotted: str) -> Any:
    cur: Any = facts
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur or cur[part] in (None, "", [], {}):
            return None
        cur = cur[part]
    return cur
