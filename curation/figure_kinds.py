"""What a figure is (modality, MR sequence, contrast, plane) from the words its source gives it: one table
(``figure_kinds.yaml``) for MedPix's "Modality" and "Plane" fields, Radiopaedia's series names and case-report
captions, so that every source's figures are described alike and a question can ask what the image is."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from curation.errors import ParamsError, validation_message

TABLE = Path(__file__).with_name("figure_kinds.yaml")


class KindRule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    pattern: str
    kind: str | None
    unless: str | None = None


class KindName(BaseModel):
    model_config = ConfigDict(extra="forbid")
    modality: str
    sequence: str | None = None
    contrast: bool = False
    name: str


class FigureKinds(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kinds: list[KindRule]
    names: dict[str, KindName]
    planes: dict[str, str]


class FigureKind(BaseModel):
    """What one figure is; ``kind`` None where its source does not say (a montage, a drawing)."""

    model_config = ConfigDict(extra="forbid")
    kind: str | None = None
    modality: str | None = None
    sequence: str | None = None
    contrast: bool = False
    plane: str | None = None


@functools.cache
def _table() -> tuple[FigureKinds, list[tuple[re.Pattern[str], str | None, re.Pattern[str] | None]]]:
    try:
        table = FigureKinds.model_validate(yaml.safe_load(TABLE.read_text(encoding="utf-8")))
    except yaml.YAMLError as exc:
        raise ParamsError(f"not valid YAML ({exc.__class__.__name__})", TABLE) from None
    except ValidationError as exc:
        raise ParamsError(validation_message(exc), TABLE) from None
    rules = []
    for rule in table.kinds:
        if rule.kind is not None and rule.kind not in table.names:
            raise ParamsError(f"kind {rule.kind!r} has no entry under names", TABLE)
        try:
            rules.append((re.compile(rule.pattern, re.I), rule.kind,
                          re.compile(rule.unless, re.I) if rule.unless else None))
        except re.error as exc:
            raise ParamsError(f"pattern {rule.pattern!r}: {exc}", TABLE) from None
    return table, rules


def kind_name(kind: str) -> str:
    """How a question names a kind ("T2-weighted MRI")."""
    return _table()[0].names[kind].name


def all_kinds() -> dict[str, KindName]:
    return dict(_table()[0].names)


def figure_kind(modality: str | None, plane: str | None = None) -> FigureKind:
    """The kind the words ``modality`` name (first rule that matches), and the plane ``plane`` names."""
    table, rules = _table()
    out = FigureKind(plane=table.planes.get((plane or "").strip().lower()))
    text = (modality or "").strip()
    if not text:
        return out
    for pattern, kind, unless in rules:
        if pattern.search(text) and not (unless and unless.search(text)):
            if kind is None:
                return out
            name = table.names[kind]
            return out.model_copy(update={"kind": kind, "modality": name.modality, "sequence": name.sequence,
                                          "contrast": name.contrast})
    return out


def kinds_named(text: str) -> set[str]:
    """Every kind ``text`` names, anywhere in it (a caption may describe "T1 and T2 weighted images")."""
    _, rules = _table()
    out = set()
    for pattern, kind, unless in rules:
        if kind is not None and pattern.search(text) and not (unless and unless.search(text)):
            out.add(kind)
    return out


# a journal figure's caption names what the image is before what it shows ("Axial diffusion-weighted MRI showing
# restricted diffusion ..."): the kind and the plane are read from those words only, so that a finding the caption
# goes on to name ("... which did not enhance", "... a sagittal synostosis") is not taken for the image's
_CAPTION_HEAD = re.compile(r"(?<!\b[a-z])(?<!\bi\.v)[.;]\s|\b(?:show\w*|demonstrat\w*|reveal\w*|depict\w*|display\w*|"
                           r"illustrat\w*|indicat\w*|confirm\w*|disclos\w*|highlight\w*|where|in which)\b", re.I)
# a figure of several panels or images (labelled "(A)", "a-c", "A:", "(left)", "left panel", an inset, two states
# or two kinds named together): what one of them is is not what the figure is, so such a figure names no kind
_PANELS = re.compile(r"\(\s*[A-La-l](?:\s*(?:[-–,]|and)\s*[A-La-l])*\s*\)|(?:^|[.;]\s+)[A-L][.),:]\s|"
                     r"(?<=\s)[A-L][:)]\s|\b[A-L]\s*[-–,]\s*[A-L]\b|\b[a-l]\s*[-–]\s*[a-l]\b|\b[A-L]\s*and\s*[A-L]\s*:|"
                     r"(?i:\((?:left|right|top|bottom|upper|lower|middle|inset)\))|"
                     r"(?i:\b(?:panels?|montage|composite|series of|inset)\b)|"
                     r"(?i:\b(?:upper|lower|top|bottom|middle|left|right)\s+(?:panels?|images?|rows?|columns?|figure)\b)|"
                     r"(?i:\b(?:before and after|pre-?\s?and post|with and without|without and with|and after|"
                     r"and follow-?up|day \d+ and (?:day )?\d+)\b)")
_PLURAL = re.compile(r"\b(?:images|scans|slices|sections|views|sequences|maps|levels)\b", re.I)
_PLANE_WORD = re.compile(r"\b(axial|transverse|coronal|sagittal)\b", re.I)
# a plane named for an image elsewhere in the caption ("... Coronal T2 shows the same lesion"): a second image
_IMAGE_PLANE = re.compile(r"\b(axial|transverse|coronal|sagittal)\s+(?:[\w-]+\s+){0,2}?(?:T1|T2|FLAIR|DWI|ADC|SWI|"
                          r"CT|MRI?|images?|views?|sections?|slices?|reformat\w*|reconstruct\w*|scans?|planes?)\b",
                          re.I)
# a finding, not a kind: "restricted diffusion" is seen on DWI, but a caption may say it of another image
_FINDING_WORDS = re.compile(r"\brestrict\w*\s+diffusion\b|\bdiffusion\s+restrict\w*", re.I)
# what is not one CT or MR image of the table's kinds (nuclear medicine fused with CT, perfusion maps, myelography)
_NOT_A_KIND = re.compile(r"\b(?:PET|SPECT|perfusion|myelogra\w*|cisternogra\w*|spectroscop\w*|DSA|digital subtraction|"
                         r"catheter|conventional angiogra\w*|ultraso\w*|x-?ray|radiograph\w*)\b", re.I)
_BOTH_MODALITIES = re.compile(r"\bCT\b.*\b(?:MRI?|magnetic)\b|\b(?:MRI?|magnetic)\b.*\bCT\b|"
                              r"\band\s+(?:[\w-]+\s+){0,2}?(?:CTA?|MRI?|MRA|T1|T2|FLAIR|DWI|ADC|SWI)\b", re.I)
# the contrast a caption states: said or denied, the kind must agree (the table reads "T1 ... post" in a MedPix
# label; in prose "posterior fossa" and "post-operative" are no contrast)
_CONTRAST_SAID = re.compile(r"contrast|gadolin|\bgd\b|\bgad\b|enhanc|\+\s?c\b|\bc\s?\+|\bCE\b|\bCE-|T1CE|"
                            r"\bT1\w*\s+post\b(?![-\s]?(?:op|surg|mortem|radiat|treat|chemo|therap))|\bpost\s+T1", re.I)
_NO_CONTRAST_SAID = re.compile(r"non-?\s?contrast|pre-?\s?contrast|pre-?\s?gad\w*|without (?:contrast|gadolin\w*)|"
                               r"(?:before|prior to) (?:contrast|gadolin\w*)|unenhanced|non-?\s?enhanced|plain", re.I)
_PLAIN = {"T1C": "T1", "CTC": "CT"}
_WITH_CONTRAST = {"T1": "T1C", "CT": "CTC"}
# patterns that match within another kind's words (a "T1 after gadolinium" also reads as T1; "CT angiography" as CT)
_WITHIN = {"T1C": {"T1"}, "CTC": {"CT"}, "CTA": {"CT"}}


def caption_kind(caption: str, panels: int = 1, title: str = "") -> FigureKind:
    """What a figure is, from its caption, where the caption describes one image of one kind in one plane (a case
    report's figure); none where it describes panels, several images, several kinds, planes or modalities, or names
    no kind. ``panels``: how many panels of a figure share this caption ("(A and B) Axial FLAIR images ..."), which
    may then speak of images; ``title``: the words the figure's caption gives all its panels ("Post-contrast MRI."),
    which the panel's kind must agree with."""
    text = " ".join(caption.split())
    if not text or _PANELS.search(text):
        return FigureKind()
    head = _FINDING_WORDS.sub(" ", _CAPTION_HEAD.split(text, maxsplit=1)[0])
    planes = {_table()[0].planes[p.lower()] for p in _PLANE_WORD.findall(head)}
    planes |= {_table()[0].planes[p.lower()] for p in _IMAGE_PLANE.findall(text)}
    if (panels == 1 and _PLURAL.search(head)) or len(planes) > 1 or _NOT_A_KIND.search(head) \
            or _BOTH_MODALITIES.search(head):
        return FigureKind()
    kind = figure_kind(head, planes.pop() if planes else None)
    if kind.kind is None or kinds_named(_FINDING_WORDS.sub(" ", text)) - {kind.kind} - _WITHIN.get(kind.kind, set()):
        return FigureKind()
    words = f"{title} {head}"
    said, denied = bool(_CONTRAST_SAID.search(words)), bool(_NO_CONTRAST_SAID.search(words))
    if said and denied and not _NO_CONTRAST_SAID.search(head):
        return FigureKind()  # a title of contrast images over a panel said to be without, or the reverse
    if kind.contrast and (denied or not said):
        return _named(_PLAIN[kind.kind], kind.plane) if kind.kind in _PLAIN else FigureKind()
    if not kind.contrast and said and not denied:
        return _named(_WITH_CONTRAST[kind.kind], kind.plane) if kind.kind in _WITH_CONTRAST else FigureKind()
    if title and (kinds_named(title) - {kind.kind} - _WITHIN.get(kind.kind, set())):
        return FigureKind()  # "CT angiography. (A) Axial CT shows ...": the title says what the panels are
    return kind


def _named(kind: str, plane: str | None) -> FigureKind:
    name = _table()[0].names[kind]
    return FigureKind(kind=kind, modality=name.modality, sequence=name.sequence, contrast=name.contrast, plane=plane)
