"""Scan outputs for residual identifiers: DICOM headers at every depth, volume headers, sidecars, records. Each
output is read alone; comparing a DICOM output with its input is ``deid.compare``'s."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import IO, Any

from curation.deid.elements import PN_FORM, burned_in_risk
from curation.deid.files import HEADER_TEXT_FIELDS, SIDECAR_DEVICE, SIDECAR_KEEP
from curation.deid.policy import (
    META_KEEP,
    METHOD_CODES,
    OPTION_COLUMNS,
    effective_action,
    is_coded_value,
    is_safe_private,
    load_table,
)
from curation.deid.text import policy
from curation.io.dicom import SERIES_ARCHIVE, archive_members, is_dicom
from curation.io.volumes import VOLUME_SUFFIXES

PSEUDONYM = re.compile(r"^(?:[a-z0-9]{2,8}-[0-9a-f]{12}|ANON-[0-9a-f]{12}|ANONYMIZED)$")
DUMMIES = {"ANONYMIZED", "20000101", "000000", "20000101000000", "0", "000Y", "2.25.0"}
TEXT_KINDS = ("MRN", "RECORD_ID", "TITLED_NAME", "STREET_ADDRESS", "AGE_OVER_89")
EXTRA = {
    "EMAIL": r"\b[\w.+-]+@[\w-]+\.[\w.-]+\b",
    "PHONE": r"\b(?:\+?1[ -.]?)?\(?\d{3}\)?[ -.]\d{3}[ -.]\d{4}\b",
    "SSN": r"\b\d{3}-\d{2}-\d{4}\b",
}
TEXT_RECORD_FIELDS = {"history", "presentation", "notes", "caption", "question", "context", "reference_answer",
                      "rationale", "text", "options", "answer", "turns", "label", "title", "attribution",
                      "description", "primary", "differential"}


@dataclass(frozen=True)
class Finding:
    path: str
    where: str
    kind: str

    def line(self) -> str:
        return f"{self.path}: {self.where}: {self.kind}"


@lru_cache(maxsize=1)
def _text_patterns() -> list[tuple[str, Any]]:
    # the text policy's patterns are written for Presidio, which compiles them with the `regex` module (variable
    # width look-behind, ...): compile them the same way
    import regex

    pats = policy()["patterns"]
    out = [(k, regex.compile(rx, regex.IGNORECASE if k != "TITLED_NAME" else 0)) for k in TEXT_KINDS
           for rx, _ in pats[k]]
    out += [("DATE", regex.compile(rx)) for rx, _ in policy()["output_scan_dates"]]
    out += [(k, regex.compile(rx)) for k, rx in EXTRA.items()]
    return out


def scan_text(text: str) -> list[str]:
    return sorted({kind for kind, rx in _text_patterns() if rx.search(text)})


IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


def verify_dir(root: Path, pixels: bool = False) -> list[Finding]:
    """``pixels``: also read every PNG/JPEG, and every DICOM capture or image marked burned in, by OCR
    (``deid.pixels``) and report identifying text left in it; about 3 s an image, so the CLI asks for it and the
    release build does not."""
    root = Path(root)
    findings: list[Finding] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        name = path.name
        try:
            if pixels and name.lower().endswith(IMAGE_SUFFIXES):
                findings += _pixels(path, rel)
            elif name.endswith(VOLUME_SUFFIXES):
                findings += _volume(path, rel)
            elif name.endswith(".jsonl"):
                findings += _jsonl(path, rel)
            elif name.endswith(".json"):
                findings += _json(path, rel)
            elif name.endswith(".parquet"):
                findings += _parquet(path, rel)
            elif name.endswith((".txt", ".md")):
                for kind in scan_text(path.read_text(encoding="utf-8", errors="replace")):
                    findings.append(Finding(rel, "text", kind))
            elif name.endswith(SERIES_ARCHIVE):  # a packed series: every member is checked as a DICOM file
                for member, fh in archive_members(path):
                    findings += _dicom(fh, f"{rel}/{member}", pixels)
            elif is_dicom(path):
                findings += _dicom(path, rel, pixels)
        except Exception as exc:  # an unreadable output is itself a finding, never a crash
            findings.append(Finding(rel, "file", f"unreadable ({type(exc).__name__})"))
    return findings


def _pixels(path: Path, rel: str) -> list[Finding]:
    """Identifying text OCR still reads in an image (Tesseract at the file's own resolution, its text rows upscaled)."""
    from PIL import Image

    from curation.deid.pixels import residual_text, text_tool
    from curation.params import TextDeidParams

    with Image.open(path) as im:
        img = im.convert("RGB")
    return [Finding(rel, "pixels", f"identifying text read in pixels ({kind})")
            for kind in residual_text(img, text_tool(TextDeidParams(), b"verify"))]


def _dicom_pixels(ds: Any, rel: str) -> list[Finding]:
    """Identifying text OCR still reads in the frames of an image that may carry text in its pixels (a secondary
    capture, a photograph, a screen save, or one marked burned in), read as deidentify read it."""
    from curation.deid.pixels import frame_image, residual_text, text_tool
    from curation.params import TextDeidParams

    if burned_in_risk(ds) is None:  # an MR or CT slice, no capture: not read (every slice of a series costs hours)
        return []
    arr = ds.pixel_array
    frames = arr if int(ds.get("NumberOfFrames", 1) or 1) > 1 else [arr]
    tool = text_tool(TextDeidParams(), b"verify")
    photometric = str(ds.get("PhotometricInterpretation", "MONOCHROME2"))
    kinds = sorted({k for f in frames for k in residual_text(frame_image(f, photometric).convert("RGB"), tool)})
    return [Finding(rel, "pixels", f"identifying text read in pixels ({k})") for k in kinds]


def _dicom(path: Path | IO[bytes], rel: str, pixels: bool = False) -> list[Finding]:
    import pydicom

    ds = pydicom.dcmread(str(path) if isinstance(path, Path) else path)
    out: list[Finding] = container_findings(ds, rel)
    if pixels:
        out += _dicom_pixels(ds, rel)
    if str(ds.get("PatientIdentityRemoved", "")).upper() != "YES":
        out.append(Finding(rel, "(0012,0062)", "PatientIdentityRemoved is not YES"))
    codes = {str(item.get("CodeValue", "")) for item in ds.get("DeidentificationMethodCodeSequence", [])}
    enabled = [name for name in OPTION_COLUMNS if METHOD_CODES[name][0] in codes]
    table = load_table()

    def walk(d: Any, where: str) -> None:
        for elem in d:
            loc = f"{where}({elem.tag.group:04X},{elem.tag.element:04X})"
            if elem.tag.is_private:
                if "retain_safe_private" not in enabled:
                    out.append(Finding(rel, loc, "private attribute present"))
                elif not is_safe_private(d, int(elem.tag), elem.VR):
                    out.append(Finding(rel, loc, "private attribute not on the safe list"))
                continue
            if elem.VR == "SQ":
                for i, item in enumerate(elem.value):
                    walk(item, f"{loc}[{i}]>")
                continue
            value = elem.value
            if value in (None, "", b"") or elem.tag.group == 0x7FE0:
                continue
            text = str(value)
            rule = table.rules.get(int(elem.tag))
            group = elem.tag.group
            if 0x5000 <= group <= 0x50FF or 0x6000 <= group <= 0x60FF:
                out.append(Finding(rel, loc, "overlay/curve data present"))
                continue
            if elem.VR == "PN" and not PSEUDONYM.match(text):
                out.append(Finding(rel, loc, "person name present"))
                continue
            if rule is None and group == 0x0010 and not (elem.VR == "CS" and _coded(elem)):
                out.append(Finding(rel, loc, "patient attribute that no table row names present"))
                continue
            if rule is not None:
                action = effective_action(int(elem.tag), rule, enabled)
                if action == "K" and rule.basic != "K" and elem.VR == "CS" and not _coded(elem):
                    out.append(Finding(rel, loc, f"{rule.name} kept under an option is not a valid value"))
                    continue
                if "U" in action or action in ("K", "C"):
                    pass
                elif "D" in action and (text in DUMMIES or PSEUDONYM.match(text)):
                    pass
                elif not PSEUDONYM.match(text):
                    out.append(Finding(rel, loc, f"{rule.name} should be removed (action {action})"))
                    continue
            if elem.VR in ("LO", "SH", "LT", "ST", "UT", "UC"):
                if PN_FORM.search(text):
                    out.append(Finding(rel, loc, "person name in DICOM name form"))
                for kind in scan_text(text):
                    out.append(Finding(rel, loc, f"identifier-like text ({kind})"))

    walk(ds, "")
    return out


WRITER_NAME = re.compile(r"^PYDICOM \d+(?:\.\d+)*$")


def container_findings(ds: Any, rel: str) -> list[Finding]:
    """What lies outside the dataset: a preamble that is not zeros (text, an executable header), file meta elements
    other than those the de-identifier keeps, and a writer other than the de-identifier (its version name is free
    text the source chose)."""
    out = []
    preamble = getattr(ds, "preamble", None)
    if preamble is not None and any(preamble):
        out.append(Finding(rel, "preamble", "preamble not zeroed"))
    meta = getattr(ds, "file_meta", None)
    for elem in meta or []:
        t = int(elem.tag)
        if t in (0x00020012, 0x00020013):
            continue
        if t not in META_KEEP:
            out.append(Finding(rel, f"({elem.tag.group:04X},{elem.tag.element:04X})", "file meta element present"))
    if meta is not None:
        name = str(meta.get("ImplementationVersionName", "") or "")
        if name and not WRITER_NAME.match(name.strip()):
            out.append(Finding(rel, "(0002,0013)", "file meta names a writer other than the de-identifier"))
    return out


def _coded(elem: Any) -> bool:
    return all(is_coded_value(int(elem.tag), v) for v in _values(elem))


def _values(elem: Any) -> list[str]:
    value = elem.value
    if value in (None, "", b""):
        return []
    items = list(value) if type(value).__name__ == "MultiValue" or isinstance(value, list) else [value]
    return [str(v).strip(" \x00") for v in items if str(v).strip(" \x00")]


def _volume(path: Path, rel: str) -> list[Finding]:
    import nibabel as nib

    hdr = nib.load(str(path)).header
    out = []
    for field in HEADER_TEXT_FIELDS:
        if field in hdr and bytes(hdr[field]).strip(b"\x00 "):
            out.append(Finding(rel, f"header.{field}", "free text in volume header"))
    if getattr(hdr, "extensions", None):
        out.append(Finding(rel, "header.extensions", "header extensions present"))
    return out


def _json(path: Path, rel: str) -> list[Finding]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(doc, dict) and ("MagneticFieldStrength" in doc or "Modality" in doc and "EchoTime" in doc):
        bad = sorted(k for k in doc if k not in SIDECAR_KEEP | SIDECAR_DEVICE)
        return [Finding(rel, k, "sidecar key outside the acquisition allowlist") for k in bad]
    return [Finding(rel, where, kind) for where, kind in _walk_record(doc, "")]


def _jsonl(path: Path, rel: str) -> list[Finding]:
    out = []
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                out += [Finding(rel, f"line {n}: {w}", k) for w, k in _walk_record(json.loads(line), "")]
    return out


def _parquet(path: Path, rel: str) -> list[Finding]:
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=[c for c in pq.read_schema(path).names if c in TEXT_RECORD_FIELDS])
    out = []
    for col in table.column_names:
        for i, value in enumerate(table.column(col).to_pylist()):
            for w, k in _walk_record({col: value}, ""):
                out.append(Finding(rel, f"row {i}: {w}", k))
    return out


def _walk_record(obj: Any, where: str, key: str = "") -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            found += _walk_record(v, f"{where}.{k}" if where else k, k)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            found += _walk_record(v, f"{where}[{i}]", key)
    elif isinstance(obj, str) and key in TEXT_RECORD_FIELDS:
        found += [(where, kind) for kind in scan_text(obj)]
    return found
