"""The facts a teaching case gives (a case whose figures say what they are: MedPix, and any source whose
ingest fills ``Figure.kind``): its diagnosis by its one name, the whole diagnoses its differential weighs, where the
disease lies, and the figures an item shows, chosen by what their captions say they show.

A figure is chosen for a finding only when its caption describes something abnormal (a lesion, a signal or density
change, a malformation) and is not a montage, a drawing, an angiogram (unless the disease is vascular) or a spine
image (unless the disease is spinal). The caption is then what the image shows, in its author's words: the
reference an open answer is graded against."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from curation.ingest.figure_kinds import all_kinds, figure_kind, kind_name
from curation.nlp.diagnoses import Diagnoses, fold
from curation.schema import Case, Evidence, Figure

# what a caption says when it shows an abnormality (one sentence at a time; a negated sentence says nothing)
ABNORMAL = re.compile(
    r"\b(lesions?|mass(es)?|tumou?rs?|hyperintens\w*|hypointens\w*|hyperdens\w*|hypodens\w*|hypoattenuat\w*|"
    r"hyperattenuat\w*|enhanc\w*|infarct\w*|ha?emorrhag\w*|ha?ematoma|o?edema|cyst\w*|restrict\w*|dilat\w*|"
    r"enlarge\w*|herniat\w*|fractur\w*|atroph\w*|calcifi\w*|abnormal\w*|thicken\w*|displac\w*|malformation|"
    r"ectopia|hydrocephalus|narrow\w*|stenosis|occlu\w*|aneurysm\w*|expansi\w*|destruct\w*|eros\w*|"
    r"agenesis|hypoplas\w*|absen\w*|signal|shortening|prolongation|collection|fluid|necro\w*|blood|focus|foci|"
    r"nodul\w*|deform\w*|compress\w*|effac\w*|shift|lucen\w*|sclero\w*)\b", re.I)
NEGATED = re.compile(r"\b(no|not|without|normal(ly)?|unremarkable|negative)\b", re.I)
SPINE = re.compile(r"\b(spine|spinal|cervical|thoracic|lumbar|sacral|vertebra\w*|cord|c\d|t\d{1,2}|l\d|s1)\b", re.I)
MR_KINDS = ("T1", "T1C", "T2", "FLAIR", "DWI", "ADC", "SWI", "MRA")
# of the sequences asked least so far, the rarer among teaching figures is asked first (keys spread over sequences)
KIND_RARITY = ("ADC", "SWI", "MRA", "DWI", "FLAIR", "T1C", "T1", "T2")
COMMON_KINDS = ("FLAIR", "T1C", "T1", "T2")


def teaching_case(case: Case) -> bool:
    """Whether the case's source says what its figures are (their modality at least)."""
    return any(fig.modality for fig in case.figures)


def caption_score(caption: str) -> int:
    """How many abnormality words a caption's sentences hold, leaving out sentences that negate."""
    n = 0
    for sentence in re.split(r"(?<=[.;])\s+|\n", caption):
        if NEGATED.search(sentence):
            continue
        n += len(ABNORMAL.findall(sentence))
    return n


def first_sentence(text: str, limit: int = 240) -> str:
    s = re.split(r"(?<=[.!?])\s+(?=[A-Z])", " ".join(text.split()))[0]
    return s if len(s) <= limit else s[:limit].rsplit(" ", 1)[0] + " ..."


def clip(text: str, limit: int = 700) -> str:
    """Whole sentences of ``text`` up to about ``limit`` characters."""
    out = ""
    for s in re.split(r"(?<=[.!?])\s+", " ".join(text.split())):
        if out and len(out) + len(s) > limit:
            break
        out = f"{out} {s}".strip()
    return out


def _structure(caption: str, dx_table: Diagnoses) -> str | None:
    """Where the first sentence of ``caption`` that describes an abnormality puts it."""
    for sentence in re.split(r"(?<=[.;])\s+|\n", caption):
        if ABNORMAL.search(sentence) and not NEGATED.search(sentence):
            return dx_table.structure(sentence)
    return None


def _usable(fig: Figure, site: str | None) -> bool:
    if fig.missing or not fig.renders or fig.kind is None or not _label_agrees(fig):
        return False
    if fig.kind in ("MRA", "CTA") and site != "vascular":
        return False
    where = f"{fig.caption} {fig.label or ''}"
    return not (SPINE.search(where) and site != "spine")


def _label_agrees(fig: Figure) -> bool:
    """Whether what the caption calls the image agrees with the source's label: a caption that says "CT" under a
    figure labelled T1 MRI (or "T2" under T1 with gadolinium) means one of them is wrong, and neither is told."""
    said = figure_kind(fig.caption).kind
    if said is None or said == fig.kind:
        return True
    both = {said, fig.kind}
    return both in ({"T1", "T1C"}, {"DWI", "ADC"}) and fig.modality == "MR"  # a pre/post pair's caption names both


def _own_caption(fig: Figure, case: Case) -> bool:
    """Whether the caption describes this figure alone: a caption shared with another figure of the case describes
    a series, or several sequences, and names findings that the slice shown need not hold."""
    return sum(1 for g in case.figures if fold(g.caption) == fold(fig.caption)) == 1


def _evidence(fig: Figure) -> dict[str, Any]:
    return Evidence(image=fig.renders[0].path, series_id=fig.figure_id, sequence=fig.sequence, target="figure",
                    plane=fig.plane or "figure").model_dump()


def teaching_facts(f: dict[str, Any], case: Case, dx_table: Diagnoses, kinds_asked: Counter[str]) -> None:
    """Fill ``f`` (a fact set of a figure case) with what its figures and its report give. ``kinds_asked``: how
    often each sequence was asked of the cases before this one (updated here), so that keys spread over them."""
    dx = dx_table.name(case.diagnosis.primary) or dx_table.name(case.title)
    entry = dx_table.entry(dx)
    site = entry.site if entry else None
    if dx and dx_table.given_by(dx, case.presentation):
        f["dx_in_history"] = True  # the history alone names it: no item asks the diagnosis
        dx = None
    if dx:
        f["dx"] = dx
        options = [d for d in dx_table.differential(case.diagnosis.differential) if d != dx]
        options += [dx_table.canonical(m) for m in entry.mimics] if entry else []
        broader = set(entry.within) if entry else set()
        f["dx_options"] = [d for d in dict.fromkeys(options) if d != dx and d not in broader]
    findings = case.sections.get("findings", "")
    if findings:
        f["findings_report"] = clip(findings)
    treatment = case.sections.get("treatment", "")
    if len(treatment.split()) >= 4:
        f["treatment"] = clip(treatment, 500)
        f["treatment_first"] = first_sentence(treatment)
    usable = [fig for fig in case.figures if _usable(fig, site)]
    scored = sorted(((caption_score(fig.caption), -n, fig) for n, fig in enumerate(usable)),
                    key=lambda x: (x[0], x[1]), reverse=True)
    # the caption is the reference an answer is graded against: it must describe this slice (its own caption),
    # describe an abnormality in more than a word, and not be a quiz prompt ("Can you detect the abnormality?")
    shown = [fig for score, _, fig in scored
             if score >= 2 and len(fig.caption.split()) >= 6 and "?" not in fig.caption and _own_caption(fig, case)]
    if shown:
        key = shown[0]
        f["image"]["key_figure"] = _evidence(key)
        f["key_caption"] = clip(key.caption, 600)
        f["key_caption_first"] = first_sentence(key.caption)
        f["key_kind_name"] = kind_name(key.kind) if key.kind else None
        where = _structure(key.caption, dx_table)
        if where and dx_table.near(where):
            f["structure"] = where
            f["structure_options"] = dx_table.near(where)
        other = next((fig for fig in shown[1:] if fig.kind != key.kind), None)
        if other is not None and other.kind:
            f["image"]["second_figure"] = _evidence(other)
            f["second_kind_name"] = kind_name(other.kind)
            # one caption written for both images describes both
            f["pair_reference"] = (f"Both images: {f['key_caption']}" if fold(other.caption) == fold(key.caption)
                                   else f"First image: {f['key_caption']} Second image: {clip(other.caption, 600)}")
    mr = [fig for fig in case.figures if fig.kind in MR_KINDS and fig.renders and not fig.missing]
    key_kind = shown[0].kind if shown else None
    # the key figure's sequence is told in its items' context: asking it would ask what a sibling states
    ask = sorted((fig for fig in mr if fig.kind != key_kind),
                 key=lambda fig: (kinds_asked[fig.kind or ""], KIND_RARITY.index(fig.kind or "T2")))
    # a sequence is asked only while it is at most two ahead of the least asked of the common ones: where cases
    # have only T1 or T2 images, asking each would make those the answer most of the time
    floor = min(kinds_asked[k] for k in COMMON_KINDS)
    if ask and kinds_asked[ask[0].kind or ""] <= floor + 2:
        fig = ask[0]
        kinds_asked[fig.kind or ""] += 1
        f["image"]["kind_figure"] = _evidence(fig)
        f["kind_asked"] = kind_name(fig.kind or "")
        f["kind_options"] = [kind_name(k) for k in MR_KINDS if k != fig.kind and k in all_kinds()]
