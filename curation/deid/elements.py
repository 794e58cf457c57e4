"""The element helpers that the engine and its verifier share: an element's value as text, its dictionary VR,
a value written back in the dataset's encoding, a private element's creator; the keyed UID remapping and per-patient
date shift; and the VR sets and the name pattern both read values by.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

NUMERIC_VRS = frozenset(("US", "UL", "SS", "SL", "FL", "FD", "UV", "SV"))
RAW_TEXT_VRS = frozenset(("AE", "AS", "CS", "DA", "DS", "DT", "IS", "LO", "LT", "PN", "SH", "ST", "TM", "UC", "UI",
                          "UR", "UT"))
# a person's name written in DICOM name form inside a descriptor ("Rorden^Rorden_Prisma", "DOE^JANE"): words joined
# by carets (family^given^middle); a caret is not how protocols or sequences are named
PN_FORM = re.compile(r"(?<![\w^])[A-Za-z][A-Za-z'.-]*(?:\^[A-Za-z][A-Za-z'.-]*)+(?:_\w+)?(?![\w^])")


def private_creator(ds: Any, tag: int) -> str | None:
    """The creator of the private block holding ``tag`` (None for a creator element or one with no creator)."""
    element = tag & 0xFFFF
    if element < 0x1000:
        return None
    creator = ds.get_item(((tag >> 16) << 16) | (element >> 8))
    return None if creator is None else element_text(ds, creator.tag, creator).strip().upper()


def element_text(ds: Any, tag: Any, elem: Any) -> str:
    """An element's value as text: straight from the raw bytes when they are plain ASCII, else decoded by pydicom
    (ISO 2022 text is ASCII bytes with escape sequences: it is decoded too)."""
    if elem.is_raw and elem.value is not None and elem.value.isascii() and b"\x1b" not in elem.value:
        return elem.value.decode("ascii").rstrip(" \x00")
    value = ds[tag].value
    if value is None:
        return ""
    if isinstance(value, (list, tuple)) or type(value).__name__ == "MultiValue":
        return "\\".join(str(v) for v in value)
    return str(value)


def dictionary_vr(tag: int) -> str | None:
    """The VR the data dictionary gives ``tag`` (implicit VR files carry none); None when unknown."""
    from pydicom.datadict import dictionary_VR

    try:
        return str(dictionary_VR(tag))
    except KeyError:
        return None


def remap_uid(uid: str, secret: bytes) -> str:
    """Same input UID and secret -> same output UID, as a 2.25 UUID-derived UID (<= 64 chars). Padding (spaces,
    NULs) is not part of a UID: "1.2.3" and "1.2.3\\0" are the same UID and map to the same output."""
    uid = uid.strip(" \x00")
    digest = hmac.new(secret, f"uid\x1f{uid}".encode(), hashlib.sha256).digest()
    return "2.25." + str(int.from_bytes(digest[:16], "big"))


def date_offset_days(patient_key: str, secret: bytes, max_days: int) -> int:
    """Per-patient keyed shift: every date of one patient moves by the same number of days."""
    digest = hmac.new(secret, f"date-shift\x1f{patient_key}".encode(), hashlib.sha256).digest()
    return 1 + int.from_bytes(digest[:4], "big") % max_days


def shift_da(value: str, days: int) -> str:
    try:
        d = datetime.strptime(value[:8], "%Y%m%d").date()
    except ValueError:
        return ""
    return (d - timedelta(days=days)).strftime("%Y%m%d")


def shift_dt(value: str, days: int) -> str:
    shifted = shift_da(value[:8], days)
    return shifted + value[8:] if shifted else ""


def tag_text(ds: Any, tag: int) -> str:
    elem = ds.get_item(tag)
    return "" if elem is None else element_text(ds, tag, elem)


def put_element(ds: Any, tag: Any, vr: str | None, value: str | None, old: Any = False) -> None:
    """Replace (or add) an element. ASCII text becomes a raw element encoded the way the dataset was read, so it
    is written as it stands; anything else is set through pydicom, which encodes it in the dataset's character
    set. ``old``: the element as it is now, when the caller has it."""
    from pydicom.dataelem import DataElement, RawDataElement

    if old is False:
        old = ds.get_item(tag)
    if vr is None:
        # a tag the dictionary does not know, read without a VR: its value is bytes (UN)
        vr = old.VR if old is not None and old.VR else (dictionary_vr(int(tag)) or "UN")
    if vr == "SQ":
        from pydicom.sequence import Sequence

        ds[tag] = DataElement(tag, "SQ", Sequence([]))
        return
    if value is None or value == "":
        data = b""
    elif value.isascii() and vr in RAW_TEXT_VRS:
        data = value.encode("ascii")
        if len(data) % 2:
            data += b"\x00" if vr == "UI" else b" "
    else:
        ds[tag] = DataElement(tag, vr, value.encode("utf-8") if vr == "UN" else value)
        return
    if old is not None and old.is_raw:
        implicit, little = old.is_implicit_VR, old.is_little_endian
        tag = old.tag
    else:
        implicit, little = ds.original_encoding
        if implicit is None or little is None:  # a dataset built in memory: pydicom encodes it on write
            ds[tag] = DataElement(tag, vr, data.decode("ascii").rstrip(" \x00") if data else None)
            return
        tag = _tag(tag)
    # a plain, public (non-private) element: stored as is, as pydicom stores what it reads
    ds._dict[tag] = RawDataElement(tag, None if implicit else vr, len(data), data, 0, implicit, little)


@lru_cache(maxsize=256)
def _tag(tag: int) -> Any:
    from pydicom.tag import Tag

    return Tag(tag)


SECONDARY_CAPTURE = "1.2.840.10008.5.1.4.1.1.7"  # every Secondary Capture SOP class starts so
VL_PHOTO = "1.2.840.10008.5.1.4.1.1.77.1"
BURNED_IN_MARKED = "BurnedInAnnotation=YES"


def burned_in_risk(ds: Any) -> str | None:
    """Why a DICOM image may carry text in its pixels (BurnedInAnnotation YES; a secondary capture, a photograph
    or a screen save), or None."""
    sop_class = tag_text(ds, 0x00080016)
    if tag_text(ds, 0x00280301).upper() == "YES":
        return BURNED_IN_MARKED
    if sop_class.startswith(SECONDARY_CAPTURE) or sop_class == VL_PHOTO or "SCREEN SAVE" in \
            tag_text(ds, 0x00080008).upper():
        return f"secondary capture/photograph (SOP class {sop_class})"
    return None
