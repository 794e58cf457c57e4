"""The PS3.15 policy as data: the Annex E table and its option columns, the safe defaults for what no row names,
the valid codes of CS attributes and the safe private list, each loaded from ``curation.deid`` data files and
validated against a closed vocabulary; and the action an element gets with a set of options on. The engine and its
verifier both read it.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from curation.deid.elements import NUMERIC_VRS, RAW_TEXT_VRS, dictionary_vr, element_text, private_creator

EDITION_LINE = 0
OPTION_COLUMNS = {
    "retain_safe_private": "rtnSafePrivOpt",
    "retain_device_identity": "rtnDevIdOpt",
    "retain_patient_characteristics": "rtnPatCharsOpt",
    "retain_longitudinal_modified_dates": "rtnLongModifDatesOpt",
    "clean_descriptors": "cleanDescOpt",
}
# DCM coded concepts for the profile and options (PS3.16 CID 7050)
METHOD_CODES = {
    "basic": ("113100", "Basic Application Confidentiality Profile"),
    "retain_safe_private": ("113111", "Retain Safe Private Option"),
    "retain_device_identity": ("113109", "Retain Device Identity Option"),
    "retain_patient_characteristics": ("113108", "Retain Patient Characteristics Option"),
    "retain_longitudinal_modified_dates": ("113107", "Retain Longitudinal Temporal Information Modified Dates Option"),
    "clean_descriptors": ("113105", "Clean Descriptors Option"),
}
# file meta kept: group length, version, SOP class and (remapped) instance UID, transfer syntax; everything else
# (AE titles, presentation addresses, private information, the writer's name and any element no standard names)
# is removed, and the writer is this file's writer
META_KEEP = frozenset((0x00020000, 0x00020001, 0x00020002, 0x00020003, 0x00020010))


@dataclass(frozen=True)
class Rule:
    tag: int
    name: str
    basic: str
    options: dict[str, str]


@dataclass
class Table:
    edition: str  # the title line: "DICOM PS3.15 Annex E Table E.1-1 (...), edition 2026c"
    rules: dict[int, Rule]
    group_rules: dict[tuple[int, int], Rule]  # (group & 0xFF00, element or -1) for 50xx/60xx
    private: Rule | None


@lru_cache(maxsize=1)
def load_table() -> Table:
    text = resources.files("curation.deid").joinpath("annex_e.tsv").read_text(encoding="utf-8")
    lines = text.splitlines()
    edition = lines[EDITION_LINE].lstrip("# ").strip()
    body = [ln for ln in lines if not ln.startswith("#")]
    reader = csv.DictReader(io.StringIO("\n".join(body)), delimiter="\t")
    rules: dict[int, Rule] = {}
    group_rules: dict[tuple[int, int], Rule] = {}
    private = None
    for row in reader:
        tag_text = row["tag"].strip("()")
        opts = {k: row[v] for k, v in OPTION_COLUMNS.items() if row.get(v)}
        g, e = tag_text.split(",")
        if g == "GGGG":
            private = Rule(-1, row["name"], row["basicProfile"], opts)
            continue
        rule = Rule(0, row["name"], row["basicProfile"], opts)
        if "X" in g.upper()[2:] or "X" in e.upper():
            key = (int(g[:2], 16) << 8, -1 if "X" in e.upper() else int(e, 16))
            group_rules[key] = rule
            continue
        tag = (int(g, 16) << 16) | int(e, 16)
        rules[tag] = Rule(tag, row["name"], row["basicProfile"], opts)
    return Table(edition=edition, rules=rules, group_rules=group_rules, private=private)


def edition_id(table: Table | None = None) -> str:
    """The edition alone ("2026c"), as recorded in DeidentificationMethod and the audit."""
    text = (table or load_table()).edition
    m = re.search(r"edition\s+(\S+)", text)
    return m.group(1) if m else text


DEFAULT_ACTIONS = frozenset(("shift", "replace", "remap", "remove", "keep"))
DEFAULT_TEXT_VRS = frozenset(("SH", "LO", "ST", "LT", "UT", "UC"))


@dataclass(frozen=True)
class Defaults:
    """What no table row names (``dicom_defaults.yaml``), validated against a closed vocabulary and the
    dictionary when loaded."""

    by_vr: dict[str, str]
    keep_uid_roots: tuple[str, ...]
    keep_uid_tags: frozenset[int]
    keep_text_tags: frozenset[int]
    longitudinal_except_tags: frozenset[int]
    clean_removes_vrs: frozenset[str]
    non_image: str  # objects without pixel data (SR, presentation states, RT plans/structures): deidentify | skip


@lru_cache(maxsize=1)
def load_defaults() -> Defaults:
    import yaml
    from pydicom.datadict import dictionary_VR, tag_for_keyword

    doc = yaml.safe_load(resources.files("curation.deid").joinpath("dicom_defaults.yaml").read_text(encoding="utf-8"))
    unknown = set(doc) - {"by_vr", "keep_uid_roots", "keep_uid_keywords", "keep_text", "longitudinal_except_keywords",
                          "clean_removes_vrs", "non_image"}
    if unknown:
        raise ValueError(f"dicom_defaults.yaml: unknown keys {sorted(unknown)}")
    by_vr = {str(k): str(v) for k, v in doc["by_vr"].items()}
    non_image = str(doc.get("non_image", "skip"))
    if non_image not in ("deidentify", "skip"):
        raise ValueError(f"dicom_defaults.yaml: non_image must be deidentify or skip, not {non_image!r}")
    bad = {k: v for k, v in by_vr.items() if v not in DEFAULT_ACTIONS}
    if bad:
        raise ValueError(f"dicom_defaults.yaml: by_vr actions outside {sorted(DEFAULT_ACTIONS)}: {bad}")

    def tags(key: str, vrs: frozenset[str] | None) -> frozenset[int]:
        out = set()
        for kw in doc.get(key) or []:
            tag = tag_for_keyword(kw)
            if tag is None:
                raise ValueError(f"dicom_defaults.yaml: {key}: {kw} is not a DICOM keyword")
            if vrs is not None and dictionary_VR(tag) not in vrs:
                raise ValueError(f"dicom_defaults.yaml: {key}: {kw} has VR {dictionary_VR(tag)}, not {sorted(vrs)}")
            out.add(int(tag))
        return frozenset(out)

    return Defaults(by_vr=by_vr, keep_uid_roots=tuple(doc.get("keep_uid_roots") or ()),
                    keep_uid_tags=tags("keep_uid_keywords", frozenset(("UI",))),
                    keep_text_tags=tags("keep_text", DEFAULT_TEXT_VRS),
                    longitudinal_except_tags=tags("longitudinal_except_keywords", frozenset(("DA", "DT"))),
                    clean_removes_vrs=frozenset(doc.get("clean_removes_vrs") or ()) & DEFAULT_TEXT_VRS,
                    non_image=non_image)


@lru_cache(maxsize=1)
def load_coded_values() -> dict[int, frozenset[str]]:
    """Tag -> the valid values of that CS attribute (``coded_values.yaml``: PS3.3 enumerated values and defined
    terms), validated against the dictionary when loaded."""
    import yaml
    from pydicom.datadict import dictionary_VR, tag_for_keyword

    doc = yaml.safe_load(resources.files("curation.deid").joinpath("coded_values.yaml").read_text(encoding="utf-8"))
    out: dict[int, frozenset[str]] = {}
    for kw, entry in doc.items():
        tag = tag_for_keyword(kw)
        if tag is None or dictionary_VR(tag) != "CS":
            raise ValueError(f"coded_values.yaml: {kw} is not a DICOM keyword of VR CS")
        if set(entry) != {"section", "values"} or not entry["values"]:
            raise ValueError(f"coded_values.yaml: {kw} needs exactly a section and a non-empty list of values")
        values = [str(v) for v in entry["values"]]
        bad = [v for v in values if v != v.upper() or len(v) > 16]
        if bad:
            raise ValueError(f"coded_values.yaml: {kw}: not a CS value (upper case, <= 16 characters): {bad}")
        out[int(tag)] = frozenset(values)
    return out


@lru_cache(maxsize=1)
def load_safe_private() -> dict[tuple[int, str], dict[int, str]]:
    """(group, creator upper-cased) -> {element in block: VR} from ``safe_private.yaml``, validated when loaded."""
    import yaml

    doc = yaml.safe_load(resources.files("curation.deid").joinpath("safe_private.yaml").read_text(encoding="utf-8"))
    out: dict[tuple[int, str], dict[int, str]] = {}
    for entry in doc:
        if set(entry) != {"creator", "group", "elements"}:
            raise ValueError(f"safe_private.yaml: an entry needs exactly creator, group, elements: {entry}")
        group = int(str(entry["group"]), 16)
        if not group & 1 or not 0x0009 <= group <= 0xFFFF:
            raise ValueError(f"safe_private.yaml: {entry['creator']}: group {entry['group']} is not a private group")
        elements: dict[int, str] = {}
        for elem, (vr, _name) in entry["elements"].items():
            if str(vr) not in RAW_TEXT_VRS | NUMERIC_VRS:
                raise ValueError(f"safe_private.yaml: {entry['creator']} {elem}: VR {vr} is not a value VR")
            elements[int(str(elem), 16)] = str(vr)
        out[(group, str(entry["creator"]).strip().upper())] = elements
    return out


def is_safe_private(ds: Any, tag: int, vr: str | None) -> bool:
    """A private creator that the safe list names, or an element the list names under its block's creator, of the
    listed VR (or stored as UN, whose bytes are the listed VR's)."""
    safe = load_safe_private()
    group, element = tag >> 16, tag & 0xFFFF
    if 0x0010 <= element <= 0x00FF:
        creator = ds.get_item(tag)
        return creator is not None and (group, element_text(ds, tag, creator).strip().upper()) in safe
    creator_name = private_creator(ds, tag)
    listed = safe.get((group, creator_name or ""), {}).get(element & 0xFF)
    return listed is not None and vr in (listed, "UN", None)


def is_coded_value(tag: int, value: str) -> bool:
    """``value`` (one value of a CS element) is an enumerated value or defined term of its attribute."""
    return value.strip(" \x00") in load_coded_values().get(tag, ())


def effective_action(tag: int, rule: Rule, enabled: list[str]) -> str:
    """The action for ``tag`` with these options on: an enabled option overrides the basic action (Clean
    Descriptors applies only to what it names)."""
    for name in enabled:
        opt = rule.options.get(name)
        if opt:
            return opt
    if "retain_longitudinal_modified_dates" in enabled and "retain_longitudinal_modified_dates" not in \
            rule.options and tag not in load_defaults().longitudinal_except_tags and dictionary_vr(tag) in (
            "DA", "DT"):
        return "C"  # a date row newer than the option columns: the option modifies all dates (E.3.6)
    return rule.basic


def resolve_action(action: str) -> str:
    """Combined actions: the most conservative that keeps the dataset conformant."""
    if "/" in action:
        return "U*" if "U*" in action else ("Z" if "Z" in action else "D")
    return action
