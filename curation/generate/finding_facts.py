"""The facts a report and its figures give: the figure an item shows, the lesion the report describes (where, on
which sequence, whether small), the deficit the presentation describes, whether their sides agree, and the next
step for the diagnosis."""

from __future__ import annotations

import re
from typing import Any

from curation.generate.values import keyed
from curation.schema import Case, Evidence, Figure, Finding


def figure_facts(f: dict[str, Any], case: Case) -> None:
    figs = [fig for fig in case.figures if fig.renders and not fig.missing]
    if not figs:
        return
    labels = {x.label for x in case.findings if x.category == "finding" and not x.negated}
    # the figure whose caption names a finding, else the middle one (series are listed in order)
    named = [fig for fig in figs if any(lbl in fig.caption.lower() for lbl in labels)] or figs
    # of the first study (caption) among them: a second series of the same lesion is not the key figure
    named = [fig for fig in named if fig.caption == named[0].caption]
    fig = named[len(named) // 2]
    ev = _figure_evidence(fig)
    f["image"] = {"figure": ev, "lesion": ev}
    f["figure_id"] = fig.figure_id
    figure_sequence_facts(f, case, figs, fig)


def figure_sequence_facts(f: dict[str, Any], case: Case, figs: list[Figure], shown: Figure) -> None:
    """A sequence question from a report's figures: the middle image of a series (the figures of one study
    caption) whose caption names exactly one sequence, other than the key figure's. The key figure's sequence is told
    in its siblings' context ("The sequence shown is DWI"), so asking it would ask what a sibling states; a report
    with one sequence gives no question (its answer would be a constant)."""
    series: dict[str, list[Figure]] = {}
    for fig in figs:
        series.setdefault(fig.caption, []).append(fig)
    named: dict[str, str] = {}
    for caption, members in series.items():
        seqs = {x.label for x in case.findings
                if x.category == "sequence" and x.source_field == f"figure:{members[0].figure_id}"}
        if len(seqs) == 1:
            named[caption] = seqs.pop()
    told = named.get(shown.caption)
    other = [c for c, seq in named.items() if c != shown.caption and seq != told]
    if len(set(named.values())) < 2 or not other:
        return
    members = series[other[-1]]
    f["image"]["sequence_known"] = _figure_evidence(members[len(members) // 2])
    f["sequence"] = named[other[-1]]
    f["sequence_choices"] = sorted(set(named.values()))


def _figure_evidence(fig: Figure) -> dict[str, Any]:
    return Evidence(image=fig.renders[0].path, series_id=fig.figure_id, target="figure", plane="figure").model_dump()


# a patient who is not right-handed: language may lie in either hemisphere
LEFT_HANDED = re.compile(r"\bleft[- ]handed(?:ness)?\b|\bleft[- ]hand[- ]dominant\b|\bambidextr\w*", re.I)


def history_deficit(case: Case, knowledge: dict[str, Any]) -> dict[str, Any] | None:
    """The presentation's lateralising deficit and the hemisphere it points to, where its deficits agree on one: a
    one-sided motor or sensory deficit points opposite ("side": the body's side), aphasia in a right-handed patient
    to the left; None where they point nowhere or both ways."""
    deficits = knowledge.get("deficits", {})
    right_handed = case.patient.handedness != "L" and not LEFT_HANDED.search(case.presentation)
    found: list[dict[str, Any]] = []
    for x in case.findings:
        if x.category != "finding" or not x.affirmed or x.source_field != "presentation":
            continue
        structures = list(deficits.get("structures", {}).get(x.label, []))
        if x.label in deficits.get("contralateral", []) and x.laterality in ("left", "right"):
            found.append({"label": x.label, "side": x.laterality, "kind": "contralateral",
                          "hemisphere": "right" if x.laterality == "left" else "left", "structures": structures})
        elif x.label in deficits.get("dominant_hemisphere", []) and right_handed:
            found.append({"label": x.label, "side": None, "kind": "dominant", "hemisphere": "left",
                          "structures": structures})
    if len({d["hemisphere"] for d in found}) != 1:
        return None
    return next((d for d in found if d["kind"] == "contralateral"), found[0])


def finding_facts(f: dict[str, Any], case: Case, knowledge: dict[str, Any]) -> None:
    """The lesion a report describes, the deficit its presentation describes, and whether their sides agree."""
    deficits = knowledge.get("deficits", {})
    symptoms = set(deficits.get("contralateral", [])) | set(deficits.get("dominant_hemisphere", []))
    symptoms |= {"headache", "optic neuritis"}
    figure = f.get("figure_id")
    # what the report says is there now: not "no haemorrhage", "possible abscess" or "history of stroke"
    imaging = [x for x in case.findings if x.category == "finding" and x.affirmed and x.label not in symptoms
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
    pres = [x for x in case.findings if x.category == "finding" and x.affirmed and x.source_field == "presentation"]
    deficit = next((x for x in pres if x.label in symptoms and x.label != "headache" and x.label != "optic neuritis"),
                   None)
    lesion = f.get("lesion")
    if deficit is not None and lesion and lesion.get("laterality") in ("left", "right"):
        right_handed = case.patient.handedness != "L" and not LEFT_HANDED.search(case.presentation)
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

