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
