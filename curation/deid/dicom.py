"""DICOM de-identification from the PS3.15 Annex E table (``annex_e.tsv``) plus option switches.

The table is data: each attribute's Basic Profile action and its option columns. Code only resolves
an action for an element and applies it, recursing into sequences at every depth.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from curation.params import DicomDeidParams

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
SECONDARY_CAPTURE = "1.2.840.10008.5.1.4.1.1.7"
VL_PHOTO = "1.2.840.10008.5.1.4.1.1.77.1"
KEEP_UIDS = {"SOPClassUID", "ReferencedSOPClassUID", "MediaStorageSOPClassUID", "TransferSyntaxUID",
             "ImplementationClassUID", "AffectedSOPClassUID", "RequestedSOPClassUID"}


@dataclass(frozen=True)
class Rule:
    tag: int
    name: str
    basic: str
    options: dict[str, str]


@dataclass
class Table:
    edition: str
    rules: dict[int, Rule]
    group_rules: dict[tuple[int, int], Rule]  # (group & 0xFF00, element or -1) for 50xx/60xx
    private: Rule | None


@lru_cache(maxsize=1)
def load_table() -> Table:
    text = resources.files("curation.deid").joinpath("annex_e.tsv").read_text()
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


def date_offset_days(patient_key: str, secret: bytes, max_days: int) -> int:
    """Per-patient keyed shift: every date of one patient moves by the same number of days."""
    digest = hmac.new(secret, f"date-shift\x1f{patient_key}".encode(), hashlib.sha256).digest()
    return 1 + int.from_bytes(digest[:4], "big") % max_days


def remap_uid(uid: str, secret: bytes) -> str:
    """Same input UID and secret -> same output UID, as a 2.25 UUID-derived UID (<= 64 chars)."""
    digest = hmac.new(secret, f"uid\x1f{uid}".encode(), hashlib.sha256).digest()
    return "2.25." + str(int.from_bytes(digest[:16], "big"))


@dataclass
class Outcome:
    ok: bool
    reason: str = ""
    detail: str = ""
    actions: dict[str, str] = field(default_factory=dict)  # tag hex -> action applied


def _shift_da(value: str, days: int) -> str:
    try:
        d = datetime.strptime(value[:8], "%Y%m%d").date()
    except ValueError:
        return ""
    return (d - timedelta(days=days)).strftime("%Y%m%d")


def _shift_dt(value: str, days: int) -> str:
    shifted = _shift_da(value[:8], days)
    return shifted + value[8:] if shifted else ""


def _dummy(vr: str) -> Any:
    return {
        "DA": "20000101", "TM": "000000", "DT": "20000101000000", "PN": "ANONYMIZED", "LO": "ANONYMIZED",
        "SH": "ANONYMIZED", "CS": "ANONYMIZED", "UI": "2.25.0", "IS": "0", "DS": "0", "AS": "000Y",
        "LT": "ANONYMIZED", "ST": "ANONYMIZED", "UT": "ANONYMIZED", "UC": "ANONYMIZED",
    }.get(vr, "")


class Deidentifier:
    """Applies the table to one dataset with a fixed set of options and identities."""

    def __init__(self, params: DicomDeidParams, secret: bytes) -> None:
        self.params = params
        self.secret = secret
        self.table = load_table()
        self.enabled = [name for name in OPTION_COLUMNS if getattr(params, name)]

    def action_for(self, tag: int, rule: Rule) -> str:
        # an enabled option overrides the basic action; Clean Descriptors applies only to what it names
        for name in self.enabled:
            opt = rule.options.get(name)
            if opt:
                return opt
        return rule.basic

    def rule_for(self, tag: int) -> Rule | None:
        r = self.table.rules.get(tag)
        if r is not None:
            return r
        group, elem = tag >> 16, tag & 0xFFFF
        if 0x5000 <= group <= 0x50FF or 0x6000 <= group <= 0x60FF:
            base = (group & 0xFF00) << 0
            return self.table.group_rules.get((base, elem)) or self.table.group_rules.get((base, -1)) or Rule(
                tag, "overlay/curve", "X", {})
        return None

    def deidentify(self, ds: Any, patient_key: str, pseudonym: str) -> Outcome:
        sop_class = str(ds.get("SOPClassUID", ""))
        image_type = "\\".join(str(v) for v in (ds.get("ImageType") or []))
        if str(ds.get("BurnedInAnnotation", "")).upper() == "YES":
            return Outcome(False, "burned_in_annotation", "BurnedInAnnotation=YES; no pixel-mask rule for this device")
        if sop_class.startswith(SECONDARY_CAPTURE) or sop_class == VL_PHOTO or "SCREEN SAVE" in image_type.upper():
            return Outcome(False, "burned_in_risk", f"secondary capture/photograph (SOP class {sop_class})")
        days = date_offset_days(patient_key, self.secret, self.params.max_date_shift_days)
        names = _identity_tokens(ds)
        out = Outcome(True)
        self._walk(ds, days, names, out, top=True)
        if "file_meta" in ds.__dict__ or getattr(ds, "file_meta", None) is not None:
            meta = ds.file_meta
            if "MediaStorageSOPInstanceUID" in meta and "SOPInstanceUID" in ds:
                meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID
        ds.PatientName = pseudonym
        ds.PatientID = pseudonym
        out.actions.setdefault("00100010", "D")
        out.actions.setdefault("00100020", "D")
        self._mark(ds)
        return out

    def _walk(self, ds: Any, days: int, names: list[str], out: Outcome, top: bool) -> None:
        """Apply the profile to every element of ``ds`` and its sequences. An element whose action needs no value
        (kept, removed, private) is never decoded, so it is written back byte for byte as it was read."""
        from pydicom.sequence import Sequence

        for tag in list(ds.keys()):
            raw = ds.get_item(tag)  # not decoded
            key = f"{int(tag):08X}"
            if tag.is_private:
                if self.params.retain_safe_private:
                    out.actions[key] = "K(private)"
                    continue
                del ds[tag]
                out.actions[key] = "X"
                continue
            vr = raw.VR or _dictionary_vr(int(tag))
            rule = self.rule_for(int(tag))
            if rule is None:
                if vr == "PN" and raw.value:
                    del ds[tag]  # a person's name outside the table is still a name
                    out.actions[key] = "X(name)"
                    continue
                if vr in ("LO", "SH", "LT", "ST", "UT", "UC") and raw.value:
                    elem = ds[tag]
                    if elem.value and _mentions(str(elem.value), names):
                        elem.value = _clean_text(str(elem.value), names)
                        out.actions[key] = "C(identity)"
                    continue
                if vr == "SQ":
                    for item in ds[tag].value:
                        self._walk(item, days, names, out, top=False)
                elif vr == "UI":
                    elem = ds[tag]
                    if elem.keyword not in KEEP_UIDS and _looks_instance_uid(elem):
                        elem.value = remap_uid(str(elem.value), self.secret)
                        out.actions[key] = "U"
                continue
            action = self.action_for(int(tag), rule)
            if action == "X":
                del ds[tag]
                out.actions[key] = "X"
                continue
            if action == "K" and vr != "SQ":
                out.actions[key] = "K"
                continue
            elem = ds[tag]
            applied = self._apply(ds, elem, action, days, names)
            out.actions[key] = applied
            if applied in ("K", "U*") and elem.VR == "SQ" and elem.tag in ds:
                for item in ds[elem.tag].value:
                    self._walk(item, days, names, out, top=False)
            elif applied == "Z" and elem.VR == "SQ" and elem.tag in ds:
                ds[elem.tag].value = Sequence([])

    def _apply(self, ds: Any, elem: Any, action: str, days: int, names: list[str]) -> str:
        vr = elem.VR
        # combined actions: choose the most conservative that keeps the dataset conformant
        if "/" in action:
            action = "U*" if "U*" in action else ("Z" if "Z" in action else "D")
        if action == "X":
            del ds[elem.tag]
            return "X"
        if action == "Z":
            if vr == "SQ":
                return "Z"
            elem.value = "" if vr not in ("US", "SS", "UL", "SL", "FL", "FD") else None
            return "Z"
        if action == "K" or action == "U*":
            return action
        if action == "U":
            if vr == "UI" and elem.value:
                if elem.VM > 1:
                    elem.value = [remap_uid(str(v), self.secret) for v in elem.value]
                else:
                    elem.value = remap_uid(str(elem.value), self.secret)
            return "U"
        if action == "C":
            if vr == "DA":
                elem.value = _shift_da(str(elem.value or ""), days)
                return "C(shift)"
            if vr == "DT":
                elem.value = _shift_dt(str(elem.value or ""), days)
                return "C(shift)"
            if vr == "TM":
                return "C(keep-time)"
            if vr in ("LO", "SH", "LT", "ST", "UT", "UC", "PN", "CS"):
                elem.value = _clean_text(str(elem.value or ""), names)
                return "C(clean)"
            if vr == "SQ":
                return "K"
            del ds[elem.tag]
            return "X"
        if action == "D":
            if vr == "SQ":
                from pydicom.sequence import Sequence

                ds[elem.tag].value = Sequence([])
            elif vr == "UI":
                elem.value = remap_uid(str(elem.value or ""), self.secret)
            else:
                elem.value = _dummy(vr)
            return "D"
        del ds[elem.tag]
        return "X"

    def _mark(self, ds: Any) -> None:
        from pydicom.dataset import Dataset
        from pydicom.sequence import Sequence

        ds.PatientIdentityRemoved = "YES"
        labels = [METHOD_CODES["basic"][1]] + [METHOD_CODES[o][1] for o in self.enabled]
        ds.DeidentificationMethod = ("; ".join(labels) + f" [{self.table.edition}]")[:64]
        seq = []
        for name in ["basic", *self.enabled]:
            code, meaning = METHOD_CODES[name]
            item = Dataset()
            item.CodeValue = code
            item.CodingSchemeDesignator = "DCM"
            item.CodeMeaning = meaning
            seq.append(item)
        ds.DeidentificationMethodCodeSequence = Sequence(seq)
        if self.params.retain_longitudinal_modified_dates:
            ds.LongitudinalTemporalInformationModified = "MODIFIED"


def _dictionary_vr(tag: int) -> str | None:
    """The VR the data dictionary gives ``tag`` (implicit VR files carry none); None when unknown."""
    from pydicom.datadict import dictionary_VR

    try:
        return str(dictionary_VR(tag))
    except KeyError:
        return None


def _looks_instance_uid(elem: Any) -> bool:
    value = str(elem.value or "")
    return bool(re.fullmatch(r"[0-9.]{8,64}", value)) and not value.startswith("1.2.840.10008.")


def _identity_tokens(ds: Any) -> list[str]:
    """Name parts, ids and birth date of this patient, removed wherever a descriptor repeats them."""
    tokens: list[str] = []
    for kw in ("PatientName", "OtherPatientNames", "PatientBirthName", "PatientMotherBirthName",
               "ReferringPhysicianName", "PerformingPhysicianName", "OperatorsName"):
        v = ds.get(kw)
        if v:
            for part in re.split(r"[\^\s\\,]+", str(v)):
                if len(part) >= 2:
                    tokens.append(part)
    for kw in ("PatientID", "OtherPatientIDs", "AccessionNumber", "PatientBirthDate"):
        v = ds.get(kw)
        if v:
            tokens.append(str(v))
    return sorted(set(tokens), key=len, reverse=True)


def _mentions(text: str, tokens: list[str]) -> bool:
    low = text.lower()
    return any(t.lower() in low for t in tokens if len(t) >= 3)


ID_LIKE = re.compile(r"\b(?:MRN|ID|ACC)?[-:# ]*\d{5,}\b", re.IGNORECASE)


def _clean_text(text: str, tokens: list[str]) -> str:
    for tok in tokens:
        text = re.sub(re.escape(tok), "", text, flags=re.IGNORECASE)
    text = ID_LIKE.sub("", text)
    text = re.sub(r"\b(MRN|DOB|scanned for|patient name)\b[:#]?", "", text, flags=re.IGNORECASE)
    text = re.sub(r"[\^,;:]+(\s*[\^,;:]+)*", lambda m: m.group(0)[0], text)
    return " ".join(text.strip(" ^,;:").split())[:64]


def deidentify_file(src: str, dst: str, params: DicomDeidParams, secret: bytes, patient_key: str | None,
                    pseudonym: str | None) -> dict[str, Any]:
    """De-identify one file to ``dst`` (atomically); never raises on a bad input."""
    from curation.ingest.dicomscan import read_checked
    from curation.records import atomic_open

    ds, info = read_checked(src)  # one read: the checks and the de-identification share the dataset
    if ds is None:
        return {"ok": False, "reason": info["reason"], "detail": info["detail"]}
    try:
        key = patient_key or str(ds.get("PatientID", "") or "unknown")
        pseud = pseudonym or "ANON-" + hmac.new(secret, key.encode(), hashlib.sha256).hexdigest()[:12]
        outcome = Deidentifier(params, secret).deidentify(ds, key, pseud)
        if not outcome.ok:
            return {"ok": False, "reason": outcome.reason, "detail": outcome.detail}
        Path(dst).parent.mkdir(parents=True, exist_ok=True)
        # atomic (temp + rename) without a per-file fsync: a killed run never leaves a partial file, and the
        # stage's output folder as a whole is swapped in only on success
        with atomic_open(dst, "wb", durable=False) as fh:
            ds.save_as(fh, enforce_file_format=True)
        return {"ok": True, "actions": outcome.actions}
    except Exception as exc:
        return {"ok": False, "reason": "dicom_deid_failed", "detail": f"{type(exc).__name__}: {exc}"}


def offset_for(patient_key: str, secret: bytes, params: DicomDeidParams) -> int:
    return date_offset_days(patient_key, secret, params.max_date_shift_days)


def shift_date(d: date, days: int) -> date:
    return d - timedelta(days=days)
