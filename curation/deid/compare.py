"""The differential check: each DICOM output against its input. Every date, UID, name or id of the input that
survived unchanged, and every identity string of the input found anywhere in the output's header values, is a
finding. It shares the policy (``deid.policy``) and the element helpers (``deid.elements``) with the engine, never
the engine itself.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from curation.deid.elements import dictionary_vr, element_text, remap_uid
from curation.deid.policy import (
    METHOD_CODES,
    OPTION_COLUMNS,
    is_coded_value,
    is_safe_private,
    load_defaults,
    load_table,
)
from curation.deid.verify import DUMMIES, PSEUDONYM, Finding, container_findings
from curation.io.dicom import SERIES_ARCHIVE, archive_members, is_dicom

CHECKED_VRS = {"DA": "date", "DT": "date", "UI": "UID", "PN": "name"}
ID_VRS = frozenset(("SH", "LO", "UC", "ST", "LT", "UT"))
ID_KEYWORD = re.compile(r"(?:ID|IDs|Number|Numbers|Identifier)$")
SEARCHED_VRS = frozenset(("AE", "AS", "CS", "DA", "DT", "LO", "LT", "PN", "SH", "ST", "TM", "UC", "UR", "UT"))
BINARY_SEARCHED = frozenset(("OB", "UN"))
IDENTITY_KEYWORDS = ("PatientID", "OtherPatientIDs", "AccessionNumber", "PatientBirthDate", "InstitutionName",
                     "InstitutionalDepartmentName", "InstitutionAddress")
PIXEL_TAGS = frozenset((0x7FE00010, 0x7FE00008, 0x7FE00009))


@dataclass
class Comparison:
    """What the differential check looked at and what it found, for one pair or a whole folder."""

    checked: int = 0  # input values of a checked kind (dates, UIDs, names, ids) + identity strings searched
    findings: list[Finding] | None = None

    def __post_init__(self) -> None:
        if self.findings is None:
            self.findings = []

    def add(self, other: Comparison) -> None:
        self.checked += other.checked
        assert self.findings is not None and other.findings is not None
        self.findings += other.findings


def _enabled(out_ds: Any) -> list[str]:
    codes = {str(item.get("CodeValue", "")) for item in out_ds.get("DeidentificationMethodCodeSequence", [])}
    return [name for name in OPTION_COLUMNS if METHOD_CODES[name][0] in codes]


def _kept_by_option(tag: int, enabled: list[str]) -> bool:
    rule = load_table().rules.get(tag)
    return rule is not None and any(rule.options.get(o) == "K" for o in enabled)


@dataclass(frozen=True)
class _Item:
    tag: int
    vr: str
    keyword: str
    values: list[str]
    private: bool
    binary: bytes | None  # OB/UN values (searched as text), pixel data excepted


def _flat(ds: Any) -> list[_Item]:
    """Every element of ``ds`` at every depth (and its file meta). Only what the check reads is decoded: text as
    stored where it is plain ASCII, through pydicom otherwise; elements stored as UN (or with no VR) are decoded
    with their dictionary VR, sequences parsed into items; numbers and pixel data are never decoded."""
    out: list[_Item] = []
    meta = getattr(ds, "file_meta", None)
    if meta is not None:
        _flat_into(meta, out)
    _flat_into(ds, out)
    return out


def _flat_into(ds: Any, out: list[_Item]) -> None:
    for tag in list(ds.keys()):
        elem = ds.get_item(tag)
        t = int(tag)
        vr = elem.VR or dictionary_vr(t)
        if vr in (None, "UN", "SQ") or " or " in vr:
            elem = ds[tag]  # pydicom's decoding: the dictionary VR for UN, items for a sequence
            vr = elem.VR
        private = bool(t & 0x10000)
        if vr == "SQ":  # kept so that a private sequence counts as private; then its items
            out.append(_Item(t, vr, "", [], private, None))
            for item in elem.value or []:
                _flat_into(item, out)
            continue
        binary = None
        values: list[str] = []
        if vr in CHECKED_VRS or vr in SEARCHED_VRS or vr in ID_VRS:
            text = element_text(ds, tag, elem) if elem.value not in (None, b"", "") else ""
            values = [v.strip(" \x00") for v in text.split("\\") if v.strip(" \x00")]
        elif vr in BINARY_SEARCHED and t not in PIXEL_TAGS and isinstance(elem.value, bytes) and \
                len(elem.value) < 1 << 20:
            binary = elem.value
        out.append(_Item(t, vr, "" if private else _keyword(t), values, private, binary))


@lru_cache(maxsize=8192)
def _keyword(tag: int) -> str:
    from pydicom.datadict import keyword_for_tag

    return keyword_for_tag(tag) or ""


def _item_kind(item: _Item) -> str | None:
    if item.vr in CHECKED_VRS:
        return CHECKED_VRS[item.vr]
    if item.vr in ID_VRS and item.keyword and ID_KEYWORD.search(item.keyword):
        return "id"
    return None


def _identity_strings(items: list[_Item]) -> list[tuple[str, str]]:
    """(what, string) for each identity string of the input: name parts of every person name at any depth,
    patient and other ids, accession number, birth date, institution."""
    out: set[tuple[str, str]] = set()
    for item in items:
        if item.private:
            continue
        if item.vr == "PN":
            for v in item.values:
                for group in v.split("="):  # alphabetic, ideographic, phonetic
                    for part in group.split("^")[:3]:  # family, given, middle (not prefix/suffix: "Dr", "MD")
                        for word in re.split(r"[\s,]+", part):
                            if len(word.strip(".")) >= 2 and word.upper() not in DUMMIES:
                                out.add((f"name part of {item.keyword or 'PN'}", word))
        elif item.keyword in IDENTITY_KEYWORDS or (_item_kind(item) == "id" and item.keyword.startswith("Patient")):
            for v in item.values:
                if len(v) >= 3 and v.upper() not in DUMMIES:
                    out.add((item.keyword, v))
    return sorted(out)


MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")


def _date_renderings(day: str) -> list[str]:
    """A DA value (YYYYMMDD) as people type it into a description."""
    y, m, d = day[:4], day[4:6], day[6:8]
    mon = MONTH_NAMES[int(m) - 1] if "01" <= m <= "12" else "???"
    return [f"{y}{m}{d}", f"{y}-{m}-{d}", f"{y}/{m}/{d}", f"{y}.{m}.{d}", f"{d}.{m}.{y}", f"{d}/{m}/{y}",
            f"{m}/{d}/{y}", f"{d}-{m}-{y}", f"{m}-{d}-{y}", f"{d}-{mon}-{y}", f"{d} {mon} {y}", f"{mon} {d} {y}",
            f"{mon} {d}, {y}", f"{int(m)}/{int(d)}/{y}", f"{int(d)}.{int(m)}.{y}", f"{d}{mon}{y}"]


def _searchable(items: list[_Item]) -> str:
    """Every header value of the output as text (pixel data excepted), one a line. A CS value that is a valid value
    of its attribute (``coded_values.yaml``) is a code, not something a person typed: a patient named "HFS" is
    not found in Patient Position HFS, and still is in any other value."""
    parts: list[str] = []
    for item in items:
        if item.vr == "CS":
            parts += [v for v in item.values if item.private or not is_coded_value(item.tag, v)]
        elif item.vr in SEARCHED_VRS:
            parts += item.values
        elif item.binary is not None:
            parts.append(item.binary.decode("latin-1"))
    return "\n".join(parts)


def compare_datasets(src_ds: Any, out_ds: Any, rel: str) -> Comparison:
    """Every date, UID, name or id of the input that the output still holds unchanged, and every identity string
    of the input found anywhere in the output's header values (file meta included). Kept by design, so not
    findings: UIDs of the DICOM registry and class UIDs (``dicom_defaults.yaml``), what an enabled option keeps
    (K), dummies and pseudonyms."""
    defaults = load_defaults()
    enabled = _enabled(out_ds)
    res = Comparison()
    findings = res.findings
    assert findings is not None
    findings += container_findings(out_ds, rel)
    src_items, out_items = _flat(src_ds), _flat(out_ds)
    out_values: dict[str, set[tuple[int, str]]] = {}  # kind -> {(tag, value)} of the output
    out_any: dict[str, set[str]] = {}
    for item in out_items:
        kind = _item_kind(item)
        if kind:
            for v in item.values:
                out_values.setdefault(kind, set()).add((item.tag, v))
                out_any.setdefault(kind, set()).add(v)
    # a value the input itself gives as a class or implementation UID names software or a class, not an instance
    class_uids = {v for it in src_items if it.vr == "UI" and it.tag in defaults.keep_uid_tags for v in it.values}
    seen: set[tuple[str, int, str]] = set()
    for item in src_items:
        kind = _item_kind(item)
        if kind is None or (item.private and kind == "id"):
            continue  # retained private elements: their dates, UIDs and names are checked like public ones
        tag = item.tag
        for v in item.values:
            if (kind, tag, v) in seen:
                continue
            seen.add((kind, tag, v))
            res.checked += 1
            if kind == "UID" and (v.startswith(defaults.keep_uid_roots) or tag in defaults.keep_uid_tags
                                  or v in class_uids):
                continue
            if v.upper() in DUMMIES or PSEUDONYM.match(v) or _kept_by_option(tag, enabled):
                continue
            # a date is compared at its own tag (two dates of one file may lie the offset apart); a UID, name or id
            # anywhere in the output
            hit = (tag, v) in out_values.get(kind, set()) if kind == "date" else v in out_any.get(kind, set())
            if hit:
                findings.append(Finding(rel, f"({tag >> 16:04X},{tag & 0xFFFF:04X})",
                                        f"{kind} survived unchanged ({item.keyword or 'private'})"))
    idents = _identity_strings(src_items)
    if idents:
        text = _searchable(out_items)
        for what, s in idents:
            res.checked += 1
            if re.search(r"(?<![A-Za-z0-9_])" + re.escape(s) + r"(?![A-Za-z0-9_])", text, re.IGNORECASE):
                findings.append(Finding(rel, "header", f"identity string of the input found ({what})"))
    # a date of the input retyped into text ("MPRAGE 2006-04-20" beside a shifted StudyDate): any common style
    typed = [(it.keyword or "date", v[:8]) for it in src_items if _item_kind(it) == "date" and not it.private
             for v in it.values if re.fullmatch(r"(?:19|20)\d{6}", v[:8])]
    if typed:
        free = "\n".join(v for it in out_items if it.vr in SEARCHED_VRS - {"DA", "DT", "TM"} for v in it.values)
        for what, day in sorted(set(typed)):
            res.checked += 1
            if any(re.search(rf"(?<![0-9A-Za-z]){re.escape(r)}(?![0-9A-Za-z])", free, re.IGNORECASE)
                   for r in _date_renderings(day)):
                findings.append(Finding(rel, "header", f"date of the input found in text ({what})"))
    if "retain_safe_private" not in enabled:
        n_private = sum(1 for it in out_items if it.private)
        if n_private:
            findings.append(Finding(rel, "header", f"{n_private} private attribute(s) present"))
    else:
        n_unsafe = _unsafe_private(out_ds)
        if n_unsafe:
            findings.append(Finding(rel, "header", f"{n_unsafe} private attribute(s) not on the safe list"))
    src_px, out_px = src_ds.get_item(0x7FE00010), out_ds.get_item(0x7FE00010)
    if src_px is not None and (out_px is None or out_px.value != src_px.value):
        findings.append(Finding(rel, "(7FE0,0010)", "pixel data bytes changed"))
    return res


def _unsafe_private(ds: Any) -> int:
    """Private elements at any depth that the safe-private list does not name under their block's creator."""
    n = 0
    for tag in list(ds.keys()):
        elem = ds[tag]
        if elem.tag.is_private and not is_safe_private(ds, int(tag), elem.VR):
            n += 1
        elif elem.VR == "SQ":
            n += sum(_unsafe_private(item) for item in elem.value or [])
    return n


def compare_files(src: Path | str, out: Path | str | bytes, rel: str) -> Comparison:
    """``out``: a file, or the bytes of a packed series' member."""
    import pydicom

    try:
        src_ds = pydicom.dcmread(str(src))
    except Exception as exc:
        return Comparison(0, [Finding(rel, "input", f"unreadable ({type(exc).__name__})")])
    try:
        out_ds = pydicom.dcmread(_source(out))
    except Exception as exc:
        return Comparison(0, [Finding(rel, "file", f"unreadable ({type(exc).__name__})")])
    return compare_datasets(src_ds, out_ds, rel)


def verify_against(out_dir: Path, in_dir: Path, secret: bytes | None = None) -> Comparison:
    """Pair every DICOM output with its input and compare them. Pairs by relative path (what `curate deid dicom`
    writes); an output with no input at its path is paired by its SOP Instance UID, the remapped UID of one input
    (``secret``: the project secret; the layout of the deidentify stage). An output that pairs with nothing is a
    finding: it cannot be checked."""
    import pydicom

    out_dir, in_dir = Path(out_dir), Path(in_dir)
    total = Comparison()
    by_uid: dict[str, Path] | None = None
    for rel, out in _dicom_outputs(out_dir):
        src = in_dir / rel
        if not src.is_file():
            if by_uid is None:
                by_uid = {}
                if secret is not None:
                    for p in sorted(q for q in in_dir.rglob("*") if q.is_file() and is_dicom(q)):
                        try:
                            uid = pydicom.dcmread(str(p), stop_before_pixels=True,
                                                  specific_tags=["SOPInstanceUID"]).get("SOPInstanceUID")
                        except Exception:
                            continue
                        if uid:
                            by_uid[remap_uid(str(uid), secret)] = p
            try:
                uid = str(pydicom.dcmread(_source(out), stop_before_pixels=True,
                                          specific_tags=["SOPInstanceUID"]).get("SOPInstanceUID", ""))
            except Exception:
                uid = ""
            found = by_uid.get(uid)
            if found is None:
                assert total.findings is not None
                total.findings.append(Finding(rel, "file", "no input pairs with this output"))
                continue
            src = found
        total.add(compare_files(src, out, rel))
    return total


def _dicom_outputs(out_dir: Path) -> Iterator[tuple[str, Path | bytes]]:
    """(path relative to ``out_dir``, the file) of every DICOM output, a packed series' members as
    ``<archive>/<member>`` with their bytes."""
    for p in sorted(q for q in out_dir.rglob("*") if q.is_file()):
        rel = p.relative_to(out_dir).as_posix()
        if p.name.endswith(SERIES_ARCHIVE):
            for member, fh in archive_members(p):
                yield f"{rel}/{member}", fh.read()
        elif is_dicom(p):
            yield rel, p


def _source(out: Path | str | bytes) -> str | io.BytesIO:
    """What pydicom reads an output from: its path, or a packed series' member's bytes."""
    return io.BytesIO(out) if isinstance(out, bytes) else str(out)
