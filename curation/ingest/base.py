"""What every ingestor shares: its spec file, CSV reading with row quarantine, file copying."""

from __future__ import annotations

import contextlib
import csv
import fnmatch
import hashlib
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curation.errors import InputError
from curation.names import printable
from curation.params import Bounds
from curation.paths import inside, safe_name, walk_files
from curation.pseudonyms import pseudonym
from curation.records import copy_file, relpath, write_bytes
from curation.report import Kind, Outcome, Report


def path_digest(rel: str) -> str:
    return hashlib.sha256(rel.encode()).hexdigest()[:16]


@dataclass
class IngestContext:
    """One ingest run: raw folder, the staging folder being written, and where it will live."""

    source: str
    raw: Path
    staging: Path
    final: Path
    report: Report
    spec: dict[str, Any]
    secret: bytes = field(repr=False)  # the project's key for pseudonymous case ids; never printed
    workers: int = 1
    scheduler: str | None = None
    copy_files: bool = True
    bounds: Bounds = field(default_factory=Bounds)
    id_map: list[dict[str, str]] = field(default_factory=list)
    _files: list[Path] | None = field(default=None, repr=False)
    _flagged: set[Path] = field(default_factory=set, repr=False)

    def case_id(self, source_id: str) -> str:
        cid = pseudonym(self.source, source_id, secret=self.secret)
        self.id_map.append({"case_id": cid, "source": self.source, "source_id": source_id})
        return cid

    def rel_raw(self, path: Path) -> str:
        return printable(path.relative_to(self.raw).as_posix())

    def inside_raw(self, path: Path) -> bool:
        """Whether a file that input points at (an href, a listed image) resolves inside the raw folder."""
        return inside(path, self.raw)

    def walk(self, top: Path | None = None) -> Iterator[Path]:
        """Usable files under ``top`` (default: the raw folder), sorted by folder. Files that must not be read
        (symlinks out of the raw folder, names that are not UTF-8) are quarantined, once, with their reason."""
        for p, refused in walk_files(top or self.raw, self.raw):
            if refused is None:
                yield p
                continue
            if p in self._flagged:
                continue
            self._flagged.add(p)
            if refused.kind is Kind.failed:
                self.report.inputs += 1
            self.report.record(self.rel_raw(p), refused)

    def read_document(self, path: Path) -> bytes | None:
        """An XML/JSON document's bytes, or None with the file quarantined (over ``bounds.max_document_bytes``,
        unreadable). Read whole so the parser sees it in one pass: expat fed in small chunks rescans a long token
        (a 50 MB attribute) quadratically."""
        rel = self.rel_raw(path)
        try:
            size = path.stat().st_size
            if size > self.bounds.max_document_bytes:
                self.report.fail(rel, "file_too_large", f"{size} bytes (bounds.max_document_bytes "
                                                        f"{self.bounds.max_document_bytes})")
                return None
            return path.read_bytes()
        except OSError as exc:
            self.report.fail(rel, "unreadable", f"{type(exc).__name__}: {exc}")
            return None

    def read_xml(self, path: Path) -> ET.Element | None:
        """An XML document's root element, counted as an input; None with the file quarantined (too large,
        unreadable, not well-formed)."""
        self.report.inputs += 1
        data = self.read_document(path)
        if data is None:
            return None
        try:
            return ET.fromstring(data)
        except ET.ParseError as exc:
            self.report.fail(self.rel_raw(path), "xml_invalid", str(exc))
            return None

    def files(self) -> list[Path]:
        """Every usable file under the raw folder, sorted (listed once a run)."""
        if self._files is None:
            self._files = sorted(self.walk())
        return self._files

    @staticmethod
    def _dst(case_id: str, name: str) -> Path:
        """Where a case's file lands in the stage output: each part of ``name`` (from input) one safe name."""
        return Path("files") / safe_name(case_id) / Path(*[safe_name(part) for part in Path(name).parts])

    def write(self, data: bytes, case_id: str, name: str) -> str:
        """Write a file made from input (a figure's panel) into the stage output; returns its project-relative
        final path under ``files/<case>/``."""
        dst_rel = self._dst(case_id, name)
        write_bytes(self.staging / dst_rel, data)
        return relpath(self.final / dst_rel)

    def store(self, src: Path, case_id: str, name: str) -> str:
        """Copy a source file into the stage output; returns its project-relative final path.

        ``name`` comes from input: each of its parts becomes a safe name, so it lands under ``files/<case>/``;
        ``src`` must resolve inside the raw folder (callers check first; this is the last line)."""
        if not self.inside_raw(src):
            raise InputError("refusing to read a file outside the raw folder", printable(str(src)))
        dst_rel = self._dst(case_id, name)
        if self.copy_files:
            copy_file(src, self.staging / dst_rel)
            return relpath(self.final / dst_rel)
        return relpath(src)

    def find(self, pattern: str | list[str]) -> list[Path]:
        """Files whose name matches ``pattern``; given a list, the first pattern that matches anything wins."""
        for pat in [pattern] if isinstance(pattern, str) else pattern:
            found = [p for p in self.files() if fnmatch.fnmatch(p.name, pat)]
            if found:
                return found
        return []


@contextlib.contextmanager
def _csv_table(path: Path) -> Iterator[tuple[list[str], Iterator[dict[str, str]], str | None]]:
    with path.open(newline="", encoding="utf-8-sig") as fh:
        try:
            reader = csv.DictReader(fh)
            header = list(reader.fieldnames or [])
        except (csv.Error, UnicodeDecodeError) as exc:
            yield [], iter(()), str(exc)
            return
        yield header, reader, None


@contextlib.contextmanager
def _xlsx_table(path: Path) -> Iterator[tuple[list[str], Iterator[dict[str, str]], str | None]]:
    """The first sheet of a spreadsheet (e.g. oasis_cross-sectional.xlsx) as rows of text, like a CSV."""
    import openpyxl

    try:
        wb = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:  # zip, XML and value errors from a damaged file
        yield [], iter(()), f"{type(exc).__name__}: {exc}"
        return
    try:
        rows = wb.worksheets[0].iter_rows(values_only=True)
        header = [str(v).strip() if v is not None else "" for v in next(rows, ())]

        def text(v: Any) -> str:
            if v is None:
                return ""
            if isinstance(v, float) and v.is_integer():
                return str(int(v))
            return str(v)

        yield header, ({h: text(v) for h, v in zip(header, r, strict=False)} for r in rows), None
    finally:
        wb.close()


def read_csv_rows(
    ctx: IngestContext,
    path: Path,
    columns: dict[str, str],
    required: list[str],
    validators: dict[str, Callable[[str], Any]] | None = None,
) -> Iterator[dict[str, Any]]:
    """Yield rows renamed to field names; rows with missing/malformed required fields are quarantined.

    A file that lacks a required column is quarantined whole (reason ``csv_missing_column``).
    """
    rel = ctx.rel_raw(path)
    validators = validators or {}
    if path.suffix.lower() in (".xlsx", ".xlsm"):
        opened = _xlsx_table(path)
    else:
        try:
            opened = _csv_table(path)
        except OSError as exc:
            ctx.report.fail(rel, "unreadable", str(exc))
            return
    with opened as (header, reader, error):
        if error:
            ctx.report.fail(rel, "csv_malformed" if path.suffix.lower() == ".csv" else "spreadsheet_malformed", error)
            return
        missing = [columns[f] for f in required if columns.get(f) not in header]
        if missing:
            ctx.report.fail(rel, "csv_missing_column", f"missing required column(s): {', '.join(missing)}")
            return
        line = 1
        try:
            for raw_row in reader:
                line += 1
                row: dict[str, Any] = {"_raw": raw_row, "_line": line}
                problem = None
                for fname, col in columns.items():
                    value = (raw_row.get(col) or "").strip()
                    if value in ("", "NA", "N/A", "nan", "-4", "-1") and fname != "visit":
                        value = ""
                    if not value:
                        if fname in required:
                            problem = f"column {col} is empty"
                            break
                        row[fname] = None
                        continue
                    conv = validators.get(fname)
                    if conv is not None:
                        try:
                            row[fname] = conv(value)
                        except (ValueError, TypeError):
                            if fname in required:
                                problem = f"column {col} has malformed value {value[:30]!r}"
                                break
                            row[fname] = None
                            ctx.report.counts["csv_malformed_optional_values"] += 1
                            continue
                    else:
                        row[fname] = value
                if problem:
                    ctx.report.fail(f"{rel}:{line}", "csv_bad_row", problem)
                    continue
                yield row
        except (csv.Error, UnicodeDecodeError) as exc:
            ctx.report.fail(f"{rel}:{line}", "csv_malformed", str(exc))


def to_float(value: str) -> float:
    f = float(value)
    if f != f:  # NaN
        raise ValueError("nan")
    return f


def numeric_scores(raw_row: dict[str, str], names: list[str]) -> dict[str, float | str | None]:
    out: dict[str, float | str | None] = {}
    for name in names:
        value = (raw_row.get(name) or "").strip()
        if not value:
            continue
        try:
            out[name] = to_float(value)
        except ValueError:
            continue
    return out


def read_sidecar(ctx: IngestContext, path: Path) -> Outcome[dict[str, Any]]:
    """A BIDS JSON sidecar as an object, or why not; the series is kept without it."""
    if not ctx.inside_raw(path):
        return Outcome.failure("outside_raw", "a symlink that resolves outside the raw folder; not read")
    if not path.is_file():  # a FIFO or a device would block or never end
        return Outcome.failure("not_a_regular_file", "the sidecar is not a regular file; not read")
    try:
        if path.stat().st_size > ctx.bounds.max_field_chars:
            return Outcome.failure("sidecar_too_large", f"{path.stat().st_size} bytes (bounds.max_field_chars "
                                                        f"{ctx.bounds.max_field_chars})")
        doc = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        return Outcome.failure("sidecar_not_utf8", str(exc))
    except json.JSONDecodeError as exc:
        return Outcome.failure("sidecar_invalid_json", exc.msg)
    except ValueError as exc:  # an integer of thousands of digits
        return Outcome.failure("sidecar_invalid_json", str(exc)[:200])
    except (OSError, RecursionError) as exc:
        return Outcome.failure("unreadable", f"{type(exc).__name__}: {exc}")
    if not isinstance(doc, dict):
        return Outcome.failure("sidecar_not_object", f"top level is {type(doc).__name__}, not an object")
    return Outcome.success(doc)
