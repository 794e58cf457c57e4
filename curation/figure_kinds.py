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
# restricted diffusion ..."): the kind is read from those words only, so that a finding the caption goes on to
# compare ("... which did not enhance", "... with restricted diffusion") is not taken for the image's kind
_CAPTION_HEAD = re.compile(r"[.;]\s|\b(?:show\w*|demonstrat\w*|reveal\w*|depict\w*|display\w*|illustrat\w*|"
                           r"indicat\w*|confirm\w*|disclos\w*|highlight\w*|where|in which|obtained)\b", re.I)
# a figure of several panels (labelled "(A)", "a-c", "left panel", or described image by image): what one panel is
# is not what the figure is, so such a figure names no kind
_PANELS = re.compile(r"\(\s*[A-Ha-h](?:\s*(?:[-–,]|and)\s*[A-Ha-h])*\s*\)|(?:^|[.;]\s+)[A-H][.),:]\s|"
                     r"\b[A-H]\s*[-–,]\s*[A-H]\b|\b[A-H]\s*and\s*[A-H]\s*:|"
                     r"(?i:\b(?:panels?|montage|composite|series of)\b)|"
                     r"(?i:\b(?:upper|lower|top|bottom|middle|left|right)\s+(?:panels?|images?|rows?|columns?|figure)\b)")
_PLURAL = re.compile(r"\b(?:images|scans|slices|sections|views|sequences)\b", re.I)
_PLANE_WORD = re.compile(r"\b(axial|transverse|coronal|sagittal)\b(?!\s+(?:sinus|suture|band))", re.I)
# a finding, not a kind: "restricted diffusion" is seen on DWI, but a caption may say it of another image
_FINDING_WORDS = re.compile(r"\brestrict\w*\s+diffusion\b|\bdiffusion\s+restrict\w*", re.I)
# a contrast the table's patterns did not read ("CT performed with intravenous contrast"): not a plain kind
_CONTRAST_SAID = re.compile(r"contrast|gadolin|\bgd\b|enhanced|\bpost\b|\+\s?c\b", re.I)
_NO_CONTRAST_SAID = re.compile(r"non-?\s?contrast|pre-?contrast|without contrast|unenhanced|non-?enhanced", re.I)
# patterns that match within another kind's words (a "T1 after gadolinium" also reads as T1; "CT angiography" as CT)
_WITHIN = {"T1C": {"T1"}, "CTC": {"CT"}, "CTA": {"CT"}}


def caption_kind(caption: str, panels: int = 1) -> FigureKind:
    """What a figure is, from its caption, where the caption describes one image of one kind in one plane (a case
    report's figure); none where it describes panels, several images, several kinds or planes, or names no kind.
    ``panels``: how many panels of a figure share this caption ("(A and B) Axial FLAIR images ..."), which may then
    speak of images."""
    text = " ".join(caption.split())
    if not text or _PANELS.search(text):
        return FigureKind()
    head = _FINDING_WORDS.sub(" ", _CAPTION_HEAD.split(text, maxsplit=1)[0])
    planes = {_table()[0].planes[p.lower()] for p in _PLANE_WORD.findall(text)}
    if (panels == 1 and _PLURAL.search(head)) or len(planes) > 1:
        return FigureKind()
    kind = figure_kind(head, planes.pop() if planes else None)
    if kind.kind is None or kinds_named(_FINDING_WORDS.sub(" ", text)) - {kind.kind} - _WITHIN.get(kind.kind, set()):
        return FigureKind()
    if not kind.contrast and kind.kind != "CTA" and _CONTRAST_SAID.search(head) \
            and not _NO_CONTRAST_SAID.search(head):
        return FigureKind()
    return kind
