"""The DICOM de-identification engine: the PS3.15 Annex E table (``annex_e.tsv``) plus option switches, applied to
one dataset.

The table is data: each attribute's Basic Profile action and its option columns. What no row names follows the
safe defaults in ``dicom_defaults.yaml`` (by VR: dates shifted, names replaced, UIDs remapped, free text removed
unless kept). Code only resolves an action for an element and applies it, recursing into sequences at every depth;
elements stored as UN are resolved to their dictionary VR first, so every encoding gives the same result. Reading
and writing files is ``deid.dicom``'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from curation.deid.elements import (
    BURNED_IN_MARKED,
    RAW_TEXT_VRS,
    burned_in_risk,
    date_offset_days,
    dictionary_vr,
    element_text,
    put_element,
    remap_uid,
    shift_da,
    shift_dt,
    tag_text,
)
from curation.deid.policy import (
    META_KEEP,
    METHOD_CODES,
    OPTION_COLUMNS,
    Rule,
    edition_id,
    effective_action,
    is_coded_value,
    is_safe_private,
    load_defaults,
    load_table,
    resolve_action,
)
from curation.deid.scrub import Scrubber, identity_tokens
from curation.params import DicomDeidParams
from curation.report import Outcome


def _dummy(vr: str) -> Any:
    return {
        "DA": "20000101", "TM": "000000", "DT": "20000101000000", "PN": "ANONYMIZED", "LO": "ANONYMIZED",
        "SH": "ANONYMIZED", "CS": "ANONYMIZED", "UI": "2.25.0", "IS": "0", "DS": "0", "AS": "000Y",
        "LT": "ANONYMIZED", "ST": "ANONYMIZED", "UT": "ANONYMIZED", "UC": "ANONYMIZED",
    }.get(vr, "")


@dataclass(frozen=True)
class Deidentified:
    """What de-identifying one DICOM file did: the action applied to each element (tag hex -> action code), and,
    when the file written was compared with its input, how many values that comparison checked."""

    actions: dict[str, str]
    values_checked: int | None = None


class Deidentifier:
    """Applies the table to one dataset with a fixed set of options and identities.

    Elements are handled in their raw (as read) form wherever the value is plain ASCII: an element whose action
    needs no value is never decoded, and a replaced value is encoded straight into a new raw element, so only
    what changed is re-encoded on write. Anything else (other character sets, decoded elements) takes pydicom's
    decoded path.
    """

    def __init__(self, params: DicomDeidParams, secret: bytes) -> None:
        self.params = params
        self.secret = secret
        self.table = load_table()
        self.defaults = load_defaults()
        self.enabled = [name for name in OPTION_COLUMNS if getattr(params, name)]
        self.actions = {tag: resolve_action(self.action_for(tag, rule)) for tag, rule in self.table.rules.items()}
        # kept only because an option says so: the value must still be a valid value of its attribute
        self.option_kept = frozenset(t for t, a in self.actions.items()
                                     if a == "K" and self.table.rules[t].basic != "K")
        labels = [METHOD_CODES["basic"][1]] + [METHOD_CODES[o][1] for o in self.enabled]
        # LO, one value per profile/option, and the table's edition (each value <= 64 characters)
        self.method = "\\".join(v[:64] for v in [*labels, f"PS3.15 Table E.1-1 edition {edition_id(self.table)}"])
        self._uids: dict[str, str] = {}
        d = self.defaults
        self.shift_dates = params.retain_longitudinal_modified_dates
        self.keep_roots = d.keep_uid_roots
        self.keep_uid_tags = d.keep_uid_tags
        self.keep_text = d.keep_text_tags
        self.by_vr = d.by_vr

    def action_for(self, tag: int, rule: Rule) -> str:
        return effective_action(tag, rule, self.enabled)

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

    def uid(self, value: str) -> str:
        value = value.strip(" \x00")
        if value.startswith(self.keep_roots) or not value:
            return value  # the DICOM UID registry (SOP classes, transfer syntaxes, coding schemes)
        out = self._uids.get(value)
        if out is None:
            if len(self._uids) >= UID_MEMO:  # study and series UIDs repeat; instance UIDs do not: stay bounded
                self._uids.clear()
            out = self._uids[value] = remap_uid(value, self.secret)
        return out

    def deidentify(self, ds: Any, patient_key: str, pseudonym: str,
                   pixels_cleaned: bool = False) -> Outcome[Deidentified]:
        """``pixels_cleaned``: the identifying text burned into its pixels was masked first (pixels.clean_dicom_pixels);
        otherwise an image marked or suspected as burned in is refused whole."""
        risk = None if pixels_cleaned else burned_in_risk(ds)
        if risk == BURNED_IN_MARKED:
            return Outcome.failure("burned_in_annotation", f"{risk}; no pixel-mask rule for this device")
        if risk:
            return Outcome.failure("burned_in_risk", risk)
        days = date_offset_days(patient_key, self.secret, self.params.max_date_shift_days)
        tokens = identity_tokens(ds)
        scrub = Scrubber(tokens)
        acts: dict[str, str] = {}  # tag hex -> action applied
        self._walk(ds, days, scrub, acts)
        meta = getattr(ds, "file_meta", None)
        if meta is not None and "MediaStorageSOPInstanceUID" in meta:
            # the instance's (remapped) UID; a file with no SOP Instance UID still has its meta UID remapped
            meta.MediaStorageSOPInstanceUID = tag_text(ds, SOP_INSTANCE_UID) if SOP_INSTANCE_UID in ds else \
                self.uid(str(meta.MediaStorageSOPInstanceUID))
        if meta is not None:
            _clean_meta(meta, acts)
        # the 128 bytes before "DICM" are free for any use (PS3.10 7.1): a name, or an executable header (the
        # PE/DICOM polyglot, CVE-2019-11687); every file written gets zeros
        ds.preamble = bytes(PREAMBLE_LEN)
        acts["preamble"] = "Z"
        put_element(ds, PATIENT_NAME, "PN", pseudonym)
        put_element(ds, PATIENT_ID, "LO", pseudonym)
        acts.setdefault("00100010", "D")
        acts.setdefault("00100020", "D")
        self._mark(ds)
        return Outcome.success(Deidentified(acts))

    def _walk(self, ds: Any, days: int, scrub: Scrubber, acts: dict[str, str]) -> None:
        """Apply the profile to every element of ``ds`` and its sequences, noting each action in ``acts``."""
        actions = self.actions
        keep_private = self.params.retain_safe_private
        for tag, elem in list(ds.items()):  # raw as read, or decoded if something read it already
            t = int(tag)
            key = f"{t:08X}"
            if t & 0x10000:  # odd group: private
                if keep_private and is_safe_private(ds, t, elem.VR):
                    acts[key] = "K(safe private)"
                    if elem.VR in PRIVATE_DEFAULT_VRS and t & 0xFF00:  # dates, names, UIDs: in any group
                        self._untabled(ds, tag, elem, elem.VR, days, scrub, acts, key)
                    elif elem.VR in RAW_TEXT_VRS and t & 0xFF00 and scrub.mentions(element_text(ds, tag, elem)):
                        del ds[tag]
                        acts[key] = "X(identity)"
                else:
                    del ds[tag]
                    acts[key] = "X" if not keep_private else "X(private, not on the safe list)"
                continue
            action = actions.get(t)
            if action == "X":
                del ds[tag]
                acts[key] = "X"
                continue
            vr = elem.VR or dictionary_vr(t)
            if vr == "UN":
                known = dictionary_vr(t)
                if known and known != "UN":
                    # stored as UN (some PACS and converters): pydicom decodes it with its dictionary VR, so the
                    # action is the one that VR gets in any other encoding (a sequence is parsed into items)
                    elem = ds[tag]
                    if " or " in elem.VR:  # "OB or OW", "US or SS": settled from the dataset, as pydicom does
                        from pydicom.filewriter import correct_ambiguous_vr_element

                        elem = correct_ambiguous_vr_element(elem, ds, ds.original_encoding[1] is not False)
                    vr = elem.VR
            if action is None:
                group = t >> 16
                if 0x5000 <= group <= 0x50FF or 0x6000 <= group <= 0x60FF:
                    rule = self.rule_for(t)
                    action = resolve_action(self.action_for(t, rule)) if rule else "X"
                    if action == "X":
                        del ds[tag]
                        acts[key] = "X"
                        continue
                else:
                    self._untabled(ds, tag, elem, vr, days, scrub, acts, key)
                    continue
            if vr == "SQ":
                if action in ("K", "U*", "C"):
                    acts[key] = "K"
                    for item in ds[tag].value:
                        self._walk(item, days, scrub, acts)
                else:  # D, Z: an empty sequence
                    put_element(ds, tag, "SQ", None)
                    acts[key] = action
                continue
            if action == "K" and t in self.option_kept and not _valid_kept(ds, tag, elem, vr, scrub):
                del ds[tag]  # kept under an option, but not a value of its attribute (or names this patient)
                acts[key] = "X(invalid value)"
                continue
            if action == "K" or action == "U*":
                acts[key] = action
                continue
            acts[key] = self._apply(ds, tag, elem, vr, action, days, scrub)

    def _untabled(self, ds: Any, tag: Any, elem: Any, vr: str | None, days: int, scrub: Scrubber,
                  acts: dict[str, str], key: str) -> None:
        """An element the table does not list: the safe default of its VR (``dicom_defaults.yaml``); sequences
        are walked."""
        t = int(tag)
        if t >> 16 == PATIENT_GROUP and not (vr == "CS" and _all_coded(ds, tag, elem)):
            del ds[tag]  # the patient's module: what no row names is not kept (a valid code of its attribute is)
            acts[key] = "X(patient, no row)"
            return
        if vr == "SQ":
            for item in ds[tag].value:
                self._walk(item, days, scrub, acts)
            return
        if (vr is None or vr == "UN") and not t & 0x10000:
            del ds[tag]  # a public tag no dictionary knows, of no known VR: nothing says what it holds
            acts[key] = "X(unknown)"
            return
        if vr == "CS" and not t & 0x10000:
            self._coded(ds, tag, elem, scrub, acts, key)
            return
        if vr in BINARY_VRS and t not in PIXEL_TAGS and not t & 0x10000 and isinstance(elem.value, bytes) and \
                scrub.mentions(elem.value.decode("latin-1")):
            del ds[tag]  # text of this patient's identity inside a binary value
            acts[key] = "X(identity in binary)"
            return
        default = self.by_vr.get(vr or "")
        if default is None or default == "keep" or not elem.value:
            return
        if default == "remove":
            if t in self.keep_text:  # kept by name, still cleaned of this patient's identity
                text = element_text(ds, tag, elem)
                if text and scrub.mentions(text):
                    put_element(ds, tag, vr, scrub.clean(text), elem)
                    acts[key] = "C(identity)"
                return
            del ds[tag]
            acts[key] = "X(default)"
        elif default == "remap":
            if t in self.keep_uid_tags:
                return
            text = element_text(ds, tag, elem)
            if text:
                new = "\\".join(self.uid(v) for v in text.split("\\"))
                if new != text:
                    put_element(ds, tag, "UI", new, elem)
                    acts[key] = "U(default)"
        elif default == "replace":
            put_element(ds, tag, vr, _dummy(vr or ""), elem)  # a person's name outside the table is still a name
            acts[key] = "D(default)"
        elif default == "shift":
            if self.shift_dates:
                text = element_text(ds, tag, elem)
                shift = shift_da if vr == "DA" else shift_dt
                new = "\\".join(shift(v, days) for v in text.split("\\")) if text else ""
                if new.strip("\\"):
                    put_element(ds, tag, vr, new, elem)
                    acts[key] = "C(shift,default)"
                    return
            del ds[tag]
            acts[key] = "X(default)"

    def _coded(self, ds: Any, tag: Any, elem: Any, scrub: Scrubber, acts: dict[str, str], key: str) -> None:
        """A CS element no row names: each value that is not a valid code of its attribute and names this patient
        is dropped (Image Type ORIGINAL\\PRIMARY\\<surname>); the element goes when no value is left."""
        text = element_text(ds, tag, elem)
        if not text:
            return
        values = text.split("\\")
        kept = [v for v in values if is_coded_value(int(tag), v) or not scrub.mentions(v)]
        if kept == values:
            return
        if any(v.strip() for v in kept):
            put_element(ds, tag, "CS", "\\".join(kept), elem)
            acts[key] = "C(identity)"
        else:
            del ds[tag]
            acts[key] = "X(identity)"

    def _apply(self, ds: Any, tag: Any, elem: Any, vr: str | None, action: str, days: int, scrub: Scrubber) -> str:
        if action == "Z":
            put_element(ds, tag, vr, None, elem)
            return "Z"
        if action == "U":
            if vr == "UI":
                text = element_text(ds, tag, elem)
                if text:
                    put_element(ds, tag, vr, "\\".join(self.uid(v) for v in text.split("\\")), elem)
                return "U"
            del ds[tag]  # not a UID (an unknown VR): nothing to remap, so nothing is kept
            return "X"
        if action == "C":
            if vr == "TM":
                return "C(keep-time)"
            if vr in ("DA", "DT"):
                text = element_text(ds, tag, elem)
                shift = shift_da if vr == "DA" else shift_dt
                put_element(ds, tag, vr, "\\".join(shift(v, days) for v in text.split("\\")) if text else None, elem)
                return "C(shift)"
            if vr in self.defaults.clean_removes_vrs:
                del ds[tag]
                return "X(free text)"
            if vr in FREE_TEXT or vr in ("PN", "CS"):
                put_element(ds, tag, vr, scrub.clean(element_text(ds, tag, elem)), elem)
                return "C(clean)"
            del ds[tag]
            return "X"
        if action == "D":
            if vr == "UI":
                text = element_text(ds, tag, elem)
                put_element(ds, tag, vr, "\\".join(self.uid(v) for v in text.split("\\")) if text else None, elem)
            else:
                put_element(ds, tag, vr, _dummy(vr or ""), elem)
            return "D"
        del ds[tag]
        return "X"

    def _mark(self, ds: Any) -> None:
        from pydicom.dataelem import RawDataElement
        from pydicom.tag import Tag

        put_element(ds, 0x00120062, "CS", "YES")  # PatientIdentityRemoved
        put_element(ds, 0x00120063, "LO", self.method)  # DeidentificationMethod
        if self.params.retain_longitudinal_modified_dates:
            put_element(ds, 0x00280303, "CS", "MODIFIED")  # LongitudinalTemporalInformationModified
        implicit, little = ds.original_encoding
        tag = Tag(0x00120064)  # DeidentificationMethodCodeSequence: the same items in every file, encoded once
        if implicit is None or little is None:
            ds[tag] = self._method_codes()
        else:
            data = self._method_code_bytes(implicit, little)
            ds[tag] = RawDataElement(tag, None if implicit else "SQ", len(data), data, 0, implicit, little)

    def _method_codes(self) -> Any:
        from pydicom.dataelem import DataElement
        from pydicom.dataset import Dataset
        from pydicom.sequence import Sequence

        seq = []
        for name in ["basic", *self.enabled]:
            code, meaning = METHOD_CODES[name]
            item = Dataset()
            item.CodeValue = code
            item.CodingSchemeDesignator = "DCM"
            item.CodeMeaning = meaning
            seq.append(item)
        return DataElement(0x00120064, "SQ", Sequence(seq))

    @lru_cache(maxsize=4)  # noqa: B019 - one Deidentifier per process
    def _method_code_bytes(self, implicit: bool, little: bool) -> bytes:
        from pydicom.filebase import DicomBytesIO
        from pydicom.filewriter import write_data_element

        fp = DicomBytesIO()
        fp.is_implicit_VR, fp.is_little_endian = implicit, little
        write_data_element(fp, self._method_codes())
        return fp.getvalue()[8 if implicit else 12:]  # the items, without the element's tag, VR and length


UID_MEMO = 100_000
FREE_TEXT = frozenset(("LO", "SH", "LT", "ST", "UT", "UC"))
SOP_CLASS_UID, SOP_INSTANCE_UID, IMAGE_TYPE, BURNED_IN = 0x00080016, 0x00080018, 0x00080008, 0x00280301
PATIENT_NAME, PATIENT_ID = 0x00100010, 0x00100020
PRIVATE_DEFAULT_VRS = frozenset(("SQ", "DA", "DT", "PN", "UI"))  # in retained private elements too
PREAMBLE_LEN = 128
PATIENT_GROUP = 0x0010
BINARY_VRS = frozenset(("OB", "OW"))
PIXEL_TAGS = frozenset((0x7FE00008, 0x7FE00009, 0x7FE00010))
AGE = re.compile(r"^\d{3}[DWMY]$")
NUMBER = re.compile(r"^\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*$")


def _all_coded(ds: Any, tag: Any, elem: Any) -> bool:
    text = element_text(ds, tag, elem)
    return bool(text) and all(is_coded_value(int(tag), v) for v in text.split("\\"))


def _valid_kept(ds: Any, tag: Any, elem: Any, vr: str | None, scrub: Scrubber) -> bool:
    """A value kept under an option is a valid value of its attribute: a listed code (CS), an age (AS), a number
    (DS, IS), binary numbers as they are; text that names this patient is not."""
    if vr in ("US", "UL", "SS", "SL", "FL", "FD", "SQ"):
        return True
    text = element_text(ds, tag, elem)
    if not text:
        return True
    values = text.split("\\")
    if vr == "CS":
        return all(is_coded_value(int(tag), v) for v in values)
    if vr == "AS":
        return all(AGE.match(v.strip()) for v in values)
    if vr in ("DS", "IS"):
        return all(NUMBER.match(v) for v in values)
    return not scrub.mentions(text)


def _clean_meta(meta: Any, acts: dict[str, str]) -> None:
    """File meta (group 0002): only what names the object and its encoding is kept; the implementation that wrote
    the file is the one writing it now (pydicom), not the source's (whose version name can carry anything)."""
    from pydicom import __version_info__
    from pydicom.uid import PYDICOM_IMPLEMENTATION_UID

    for tag in list(meta.keys()):
        if int(tag) not in META_KEEP:
            del meta[tag]
            acts[f"{int(tag):08X}"] = "X"
    meta.FileMetaInformationVersion = b"\x00\x01"
    meta.ImplementationClassUID = PYDICOM_IMPLEMENTATION_UID
    meta.ImplementationVersionName = f"PYDICOM {'.'.join(__version_info__)}"
    acts["00020001"] = acts["00020012"] = acts["00020013"] = "D(writer)"
