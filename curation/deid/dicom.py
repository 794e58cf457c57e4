"""De-identify one DICOM file: read it (with the I/O layer's checks), refuse what cannot be written safely, run the
engine (``deid.engine``) and write the result atomically; optionally compare the file written with its input
(``deid.compare``) and refuse it on any finding.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from curation.deid.compare import compare_files
from curation.deid.elements import burned_in_risk, remap_uid, tag_text
from curation.deid.engine import PATIENT_ID, Deidentified, Deidentifier
from curation.deid.pixels import TOOL, clean_dicom_pixels, text_tool
from curation.deid.policy import load_defaults
from curation.params import DicomDeidParams, PixelDeidParams, TextDeidParams
from curation.report import Outcome

UID_IN_NAME = re.compile(r"(?<![0-9.])[0-9]+(?:\.[0-9]+){3,}(?![0-9])")


def uid_free_name(name: str, secret: bytes) -> str:
    """A file or folder name with every UID in it (scanners name files by SOP Instance UID) replaced by its
    remapped UID, the one the header gets: the name no longer carries the input's UID and still pairs with it."""
    return UID_IN_NAME.sub(lambda m: remap_uid(m.group(0), secret), name)


def deidentify_file(src: str, dst: str, params: DicomDeidParams, secret: bytes, patient_key: str | None,
                    pseudonym: str | None, verify: bool = False, pixels: PixelDeidParams | None = None,
                    text: TextDeidParams | None = None) -> Outcome[Deidentified]:
    """De-identify one file to ``dst`` (atomically); never raises on a bad input; a failure keeps ``src`` as its raw
    input. An ok outcome carries the actions applied (and, verified, the values checked). ``verify``: compare the
    file written with its input (``compare.compare_files``) and fail it, removed, on any finding. ``pixels`` (with
    OCR on) and ``text``: an image marked or suspected as burned in has its identifying pixel text masked
    (``pixels.clean_dicom_pixels``, recorded as the action ``pixel_text``) instead of being refused whole."""
    from curation.io.dicom import read_checked
    from curation.records import atomic_open

    # one read: the checks and the de-identification share the dataset
    ds, info = read_checked(src)
    if ds is None and info.code == "no_pixel_data" and load_defaults().non_image == "deidentify":
        ds = _read_non_image(src)  # a structured report, presentation state, RT plan...: the same rules apply
    if ds is None:
        return info.passed_on(src)
    bad = _impossible_length(ds, Path(src).stat().st_size)
    if bad:
        return Outcome.failure("impossible_length", bad, src)
    try:
        key = patient_key or tag_text(ds, PATIENT_ID) or "unknown"
        pseud = pseudonym or "ANON-" + hmac.new(secret, key.encode(), hashlib.sha256).hexdigest()[:12]
        cleaned = None
        if pixels is not None and pixels.ocr and burned_in_risk(ds):
            tool = text_tool(text, secret) if text is not None else None
            cleaned = clean_dicom_pixels(ds, tool, (), pixels)
            if not cleaned.ok:
                return cleaned.passed_on(src)  # type: ignore[return-value]
        outcome = _deidentifier(params, secret).deidentify(ds, key, pseud, pixels_cleaned=cleaned is not None)
        if not outcome.ok:
            return outcome.passed_on(src)
        if cleaned is not None:
            res = cleaned.value
            outcome = Outcome.success(replace(outcome.value, actions={
                **outcome.value.actions, "pixel_text": json.dumps(
                    {"tool": TOOL, "masked_fraction": round(res.masked_fraction, 5), "masked": res.masked,
                     "words_read": res.words_read}, sort_keys=True)}))
        Path(dst).parent.mkdir(parents=True, exist_ok=True)
        # atomic (temp + rename) without a per-file fsync: a killed run never leaves a partial file, and the
        # stage's output folder as a whole is swapped in only on success
        with atomic_open(dst, "wb", durable=False) as fh:
            ds.save_as(fh, enforce_file_format=not _conformant_meta(ds))
    except Exception as exc:
        return Outcome.failure("dicom_deid_failed", f"{type(exc).__name__}: {exc}", src)
    if not verify:
        return outcome
    check = compare_files(src, dst, Path(dst).name)
    if check.findings:
        Path(dst).unlink(missing_ok=True)
        kinds = sorted({f"{f.where} {f.kind}" for f in check.findings})  # tags and keywords, never values
        return Outcome.failure("deid_verify_failed",
                               f"{len(check.findings)} finding(s): " + "; ".join(kinds)[:400], src)
    return Outcome.success(replace(outcome.value, values_checked=check.checked))


def _impossible_length(ds: Any, size: int) -> str | None:
    """An element whose declared length runs past the end of the file (a private element declaring 3 GB swallows
    the pixel data after it, and what is left reads as an object without pixels): refused, never written."""
    for tag in list(ds._dict.keys()):
        elem = ds._dict[tag]
        length = getattr(elem, "length", 0)
        if getattr(elem, "is_raw", False) and length != 0xFFFFFFFF and length > len(elem.value or b""):
            return f"({tag >> 16:04X},{tag & 0xFFFF:04X}) declares {length} bytes; the file has {size}"
    return None


def _read_non_image(src: str) -> Any:
    """A file ``read_checked`` set aside only for having no pixel data, read for de-identification (None if it is
    not a usable file after all)."""
    import pydicom

    try:
        ds = pydicom.dcmread(src)
    except Exception:
        return None
    meta = getattr(ds, "file_meta", None)
    return ds if meta is not None and "TransferSyntaxUID" in meta and "SOPClassUID" in ds else None


META_REQUIRED = (0x00020000, 0x00020001, 0x00020002, 0x00020003, 0x00020010, 0x00020012)


def _conformant_meta(ds: Any) -> bool:
    """The file has a preamble and every Type 1 file meta element (PS3.10 7.1), so pydicom writes the meta as it
    stands with its group length recomputed; otherwise it is told to complete and check the meta."""
    meta = getattr(ds, "file_meta", None)
    return (meta is not None and getattr(ds, "preamble", None) is not None
            and all(meta.get_item(t) is not None and meta.get_item(t).value for t in META_REQUIRED))


_CACHED: dict[bytes, Deidentifier] = {}


def _deidentifier(params: DicomDeidParams, secret: bytes) -> Deidentifier:
    """One per settings and secret in a process: the resolved table and the UID map are reused across files.
    Matched by value: a worker process receives a new (unpickled) params object with every file."""
    tool = _CACHED.get(secret)
    if tool is None or tool.params != params:
        _CACHED.clear()
        tool = _CACHED[secret] = Deidentifier(params.model_copy(), secret)
    return tool
