"""Scan outputs for residual identifiers: DICOM headers at every depth, volume headers, sidecars, records."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from curation.deid.dicom import METHOD_CODES, OPTION_COLUMNS, load_table
from curation.deid.files import HEADER_TEXT_FIELDS, SIDECAR_DEVICE, SIDECAR_KEEP
from curation.deid.text import policy

PSEUDONYM = re.compile(r"^(?:[a-z0-9]{2,8}-[0-9a-f]{12}|ANON-[0-9a-f]{12}|ANONYMIZED)$")
DUMMIES = {"ANONYMIZED", "20000101", "000000", "20000101000000", "0", "000Y", "2.25.0"}
TEXT_KINDS = ("MRN", "RECORD_ID", "TITLED_NAME", "STREET_ADDRESS", "AGE_OVER_89")
NON_ISO_DATES = [0, 2, 3, 4]  # SPECIFIC_DATE patterns other than ISO yyyy-mm-dd (what de-identification writes)
EXTRA = {
    "EMAIL": r"\b[\w.+-]+@[\w-]+\.[\w.-]+\b",
    "PHONE": r"\b(?:\+?1[ -.]?)?\(?\d{3}\)?[ -.]\d{3}[ -.]\d{4}\b",
    "SSN": r"\b\d{3}-\d{2}-\d{4}\b",
}
TEXT_RECORD_FIELDS = {"history", "presentation", "notes", "caption", "question", "context", "reference_answer",
                      "rationale", "text", "options", "answer", "turns", "label", "title"}


@dataclass(frozen=True)
class Finding:
    path: str
    where: str
    kind: str

    def line(self) -> str:
        return f"{self.path}: {self.where}: {self.kind}"


@lru_cache(maxsize=1)
def _text_patterns() -> list[tuple[str, re.Pattern[str]]]:
    pats = policy()["patterns"]
    out = [(k, re.compile(rx, re.IGNORECASE if k != "TITLED_NAME" else 0)) for k in TEXT_KINDS for rx, _ in pats[k]]
    out += [("DATE", re.compile(pats["SPECIFIC_DATE"][i][0])) for i in NON_ISO_DATES]
    out += [(k, re.compile(rx)) for k, rx in EXTRA.items()]
    return out


def scan_text(text: str) -> list[str]:
    return sorted({kind for kind, rx in _text_patterns() if rx.search(text)})


def verify_dir(root: Path) -> list[Finding]:
    root = Path(root)
    findings: list[Finding] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        name = path.name
        try:
            if name.endswith((".nii", ".nii.gz", ".hdr")):
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
            elif _is_dicom(path):
                findings += _dicom(path, rel)
        except Exception as exc:  # an unreadable output is itself a finding, never a crash
            findings.append(Finding(rel, "file", f"unreadable ({type(exc).__name__})"))
    return findings


def _is_dicom(path: Path) -> bool:
    with path.open("rb") as fh:
        head = fh.read(132)
    return len(head) == 132 and head[128:] == b"DICM"


def _dicom(path: Path, rel: str) -> list[Finding]:
    import pydicom

    ds = pydicom.dcmread(str(path))
    out: list[Finding] = []
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
            if rule is not None:
                action = next((rule.options[o] for o in enabled if o in rule.options), rule.basic)
                if "U" in action or action in ("K", "C"):
                    pass
                elif "D" in action and (text in DUMMIES or PSEUDONYM.match(text)):
                    pass
                elif not PSEUDONYM.match(text):
                    out.append(Finding(rel, loc, f"{rule.name} should be removed (action {action})"))
                    continue
            if elem.VR in ("LO", "SH", "LT", "ST", "UT", "UC"):
                for kind in scan_text(text):
                    out.append(Finding(rel, loc, f"identifier-like text ({kind})"))

    walk(ds, "")
    return out


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
