"""Licence terms of a released item: the SPDX id its licence text names (else the source's own named terms) and its
licence class, from ``licences.yaml`` (data, validated when loaded)."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import Literal, get_args

import yaml

from curation.errors import ParamsError

LicenceClass = Literal["commercial", "non_commercial", "reference_only", "no_licence_stated"]
CLASSES: tuple[str, ...] = get_args(LicenceClass)
_CC = re.compile(r"^\s*CC[ -]?(0|BY(?:-(?:NC|SA|ND))*)[ -]?(\d\.\d)?\s*$", re.I)


@cache
def _table() -> dict[str, object]:
    path = resources.files("curation.release").joinpath("licences.yaml")
    table = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(table, dict) or sorted(table.get("classes") or {}) != sorted(CLASSES):
        raise ParamsError(f"classes must be exactly {', '.join(CLASSES)}", str(path))
    return table


def spdx_of(licence: str) -> str | None:
    """``CC BY-NC-SA 3.0`` -> ``CC-BY-NC-SA-3.0`` where that is a listed SPDX id; None for named terms."""
    m = _CC.match(licence or "")
    if not m:
        return None
    kind, version = m.group(1).upper(), m.group(2) or ("1.0" if m.group(1) == "0" else "")
    spdx = f"CC{kind}-{version}" if kind == "0" else f"CC-{kind}-{version}"
    return spdx if spdx in _table()["spdx"] else None  # type: ignore[operator]


def licence_class(spdx: str | None, redistribution: str) -> LicenceClass:
    """Reference-only where the images ship as references; else from the SPDX id; no SPDX id: its own class."""
    if redistribution == "reference":
        return "reference_only"
    if spdx is None:
        return "no_licence_stated"
    return "non_commercial" if "-NC" in spdx else "commercial"


def class_description(name: str) -> str:
    return str(_table()["classes"][name])  # type: ignore[index]
