"""The ``deidentify`` stage and the plain-file commands built on the same engines."""

from __future__ import annotations

import functools
import json
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curation.deid.dicom import deidentify_file, uid_free_name
from curation.deid.elements import date_offset_days
from curation.deid.engine import Deidentified
from curation.deid.files import clean_sidecar, clean_volume
from curation.deid.pixels import FigureTask, deid_figure
from curation.deid.policy import edition_id, load_table
from curation.deid.text import TextDeidentifier
from curation.errors import InputError
from curation.io.dicom import SERIES_ARCHIVE, pack_series
from curation.io.volumes import VOLUME_SUFFIXES
from curation.jsonio import read_jsonl, write_jsonl
from curation.names import printable
from curation.parallel import pmap
from curation.params import DeidentifyParams, DicomDeidParams, PixelDeidParams, TextDeidParams, load_spec
from curation.paths import OUTSIDE_INPUT, input_rel, readable, safe_name, walk_files
from curation.pseudonyms import keyed_hash, project_secret
from curation.records import relpath, staged_dir, write_text, writing
from curation.report import Kind, Outcome, Report
from curation.schema import Case, PixelText, attribution_of

# Every string field of a case, in one of two lists (tests/test_deid_text.py fails when a field of the schema is in
# neither). Free text from a source goes through text de-identification; "[]" is every item of a list, "*" every
# value of a mapping (EHR text: multi-word values; a one-word value is a code).
CASE_TEXT_FIELDS = ("title", "history", "presentation", "notes", "attribution", "publication.title",
                    "figures[].caption", "figures[].label", "sections.*",
                    "ehr.*", "diagnosis.primary", "diagnosis.differential[]",
                    "visits[].series[].description")
# ids, pseudonyms, paths, hashes, codes and enumerations; article metadata a licence names (authors, journal, DOI);
# findings, which extract derives from the de-identified text after this stage; source flags (a field name, a rule
# name, a hash); the case's origin (a teaching file's case id, a public case URL, a DOI)
CASE_NOT_TEXT_FIELDS = (
    "schema_version", "case_id", "license", "origin", "publication.authors[]", "publication.doi", "publication.journal",
    "publication.pmcid", "publication.url", "patient.ethnicity", "diagnosis.certainty", "figures[].figure_id",
    "figures[].path", "figures[].kind", "figures[].modality", "figures[].sequence", "figures[].plane",
    "figures[].renders[].located_by", "figures[].renders[].path", "provenance.source_paths[]",
    "provenance.stages.*", "visits[].visit_id", "visits[].diagnosis", "visits[].scores.*",
    "visits[].series[].files[]", "visits[].series[].modality", "visits[].series[].nifti",
    "visits[].series[].lesion_mask",
    "visits[].series[].orientation", "visits[].series[].provenance[].name", "visits[].series[].provenance[].version",
    "visits[].series[].renders[].located_by", "visits[].series[].renders[].path", "visits[].series[].sequence",
    "visits[].series[].series_id", "findings[].anatomy", "findings[].label", "findings[].section",
    "findings[].sequence", "findings[].source_field", "findings[].temporal", "findings[].text", "flags[].field",
    "flags[].rule", "flags[].sha256",
    # the QC records (schema.SeriesQC, FigureQC): codes, reasons the code words, tool names, ids and paths, written
    # by normalize after this stage, by this stage (pixel_text) or by ingest (panel_of: a figure id and its letter)
    "figures[].qc.flags[]", "figures[].qc.panel_of.figure_id", "figures[].qc.panel_of.letter",
    "figures[].qc.pixel_text.masked[].tag", "figures[].qc.pixel_text.read_at", "figures[].qc.pixel_text.review[]",
    "figures[].qc.pixel_text.tool", "visits[].series[].qc.anatomy.fit_reason", "visits[].series[].qc.anatomy.library",
    "visits[].series[].qc.anatomy.measures.how", "visits[].series[].qc.anatomy.measures.not_measured.*",
    "visits[].series[].qc.anatomy.not_located.*", "visits[].series[].qc.anatomy.presets",
    "visits[].series[].qc.anatomy.registration", "visits[].series[].qc.anatomy.targets_from",
    "visits[].series[].qc.anatomy.template", "visits[].series[].qc.anatomy.version",
    "visits[].series[].qc.change.baseline_render", "visits[].series[].qc.change.reference",
    "visits[].series[].qc.change.reference_visit", "visits[].series[].qc.deface.reason", "visits[].series[].qc.flags[]",
    "visits[].series[].qc.paired_with", "visits[].series[].qc.planes_refused[]",
    "visits[].series[].qc.planes_refused_reason.*", "visits[].series[].qc.registered_to",
    "visits[].series[].qc.source_orientation", "visits[].series[].qc.targets[].instead_of.plane",
    "visits[].series[].qc.targets[].instead_of.reason", "visits[].series[].qc.targets[].lobe",
    "visits[].series[].qc.targets[].lobes_ruled_out[]", "visits[].series[].qc.targets[].located_by")


def text_slots(case: Case) -> list[tuple[str, Any, Any]]:
    """(label, container, key) of every non-empty free-text value of ``case`` (``CASE_TEXT_FIELDS``): the container
    is a model, a dict or a list, the key an attribute, a dict key or an index."""
    out: list[tuple[str, Any, Any]] = []
    for path in CASE_TEXT_FIELDS:
        _slots(case, path.split("."), "", out, path.startswith("ehr."))
    return out


def _slots(obj: Any, parts: list[str], label: str, out: list[tuple[str, Any, Any]], words: bool) -> None:
    head, rest = parts[0], parts[1:]
    name, is_list = head.removesuffix("[]"), head.endswith("[]")
    if name == "*":
        items = list(obj.items()) if isinstance(obj, dict) else []
        for k, v in items:
            _slot_value(obj, k, v, f"{label}.{k}", rest, out, words)
        return
    value = obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)
    where = f"{label}.{name}" if label else name
    if is_list:
        for i, item in enumerate(value or []):
            _slot_value(value, i, item, f"{where}[{i}]", rest, out, words)
    else:
        _slot_value(obj, name, value, where, rest, out, words)


def _slot_value(container: Any, key: Any, value: Any, label: str, rest: list[str], out: list[tuple[str, Any, Any]],
                words: bool) -> None:
    if rest:
        if value is not None:
            _slots(value, rest, label, out, words)
    elif isinstance(value, str) and value and (not words or len(value.split()) > 1):
        out.append((label, container, key))


def _get(container: Any, key: Any) -> Any:
    return container[key] if isinstance(container, (dict, list)) else getattr(container, key)


def _set(container: Any, key: Any, value: str) -> None:
    if isinstance(container, (dict, list)):
        container[key] = value
    else:
        setattr(container, key, value)


def declared_attribution(case: Case) -> bool:
    """The attribution is exactly what the licence asks for, built from declared metadata only: a case report's
    authors, journal and DOI, or the source's attribution template filled with its declared fields."""
    if case.attribution is None:
        return True
    if case.publication is not None:
        pub = case.publication
        return case.attribution == attribution_of(pub.authors, pub.journal or "", pub.doi)
    spec = load_spec(case.source.value)
    # the source's own template, or that of the site a case in its layout comes from (radiopaedia.yaml ``origins``)
    sites = [*(spec.get("origins") or {}).values(), spec.get("unknown_origin") or {}]
    templates = [spec.get("attribution"), *(site.get("attribution") for site in sites)]
    for template in (str(t) for t in templates if t):
        fields = re.split(r"(\{\w+\})", template)
        pattern = "".join(r"[^,]{1,200}?" if re.fullmatch(r"\{\w+\}", f) else re.escape(f) for f in fields)
        if re.fullmatch(pattern, case.attribution) is not None:
            return True
    return False


def _source_ids(id_map: Path) -> dict[str, list[str]]:
    """The participant ids of each case (ingest's private map): masked wherever a case's text repeats them."""
    out: dict[str, list[str]] = {}
    if id_map.is_file():
        for line in id_map.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                out.setdefault(row["case_id"], []).append(str(row["source_id"]))
    return out


def _clean_texts(case: Case, text: TextDeidentifier, shift: int, known: list[str], report: Report,
                 audit: list[dict[str, Any]]) -> None:
    """Every free text of a case in one pass (title, history, presentation, notes, figure captions, EHR free text),
    so that a name or id found in one is masked in all; dates move by the case's offset, the images' offset."""
    if case.publication is not None and not declared_attribution(case):
        # a case report's attribution rebuilt from its authors, journal and DOI: whatever else it held (a title
        # naming the patient, markup) goes, and the names the licence asks for stay
        pub = case.publication
        case.attribution = attribution_of(pub.authors, pub.journal or "", pub.doi)
        audit.append({"case_id": case.case_id, "field": "attribution", "replaced": [],
                      "rebuilt_from": ["authors", "journal", "doi"]})
    fields = [f for f in text_slots(case) if f[0] != "attribution" or not declared_attribution(case)]
    texts = [_get(obj, key) for _, obj, key in fields]
    for (label, obj, key), (cleaned, spans) in zip(fields, text.deidentify_all(texts, shift, case.case_id, known),
                                                   strict=True):
        _set(obj, key, cleaned)
        if spans:
            audit.append({"case_id": case.case_id, "field": label,
                          "replaced": [{"tag": s.tag, "start": s.start, "end": s.end} for s in spans]})
            report.counts["text_phi_spans"] += len(spans)


def _out_name(n: int) -> str:
    return f"{n:05d}.dcm"


def _dicom_task(task: tuple[str, str, DeidentifyParams, bytes, str, str]) -> Outcome[Deidentified]:
    src, dst, params, secret, key, pseud = task
    # every file the stage writes is compared with its input; a finding fails the file (deid_verify_failed)
    return deidentify_file(src, dst, params.dicom, secret, key, pseud, verify=True, pixels=params.pixels,
                           text=params.text)


def run(params: DeidentifyParams, src: Path, dst: Path, *, workers: int = 1, scheduler: str | None = None,
        report_path: Path | None = None, secret: bytes | None = None) -> Report:
    """``secret``: the project's key for date shifts, UID remapping and text surrogates (the CLI passes it; None
    reads ``CURATION_SECRET``)."""
    src, dst = Path(src), Path(dst)
    case_files = sorted(src.glob("*/cases.jsonl")) or sorted(src.glob("cases.jsonl"))
    if not case_files:
        raise InputError("no cases.jsonl under this folder (run the ingest stages first)", src)
    secret = project_secret() if secret is None else secret
    report = Report(stage="deidentify")
    text = TextDeidentifier(params.text, secret)
    out_cases: list[Case] = []
    with staged_dir(dst) as staging:
        job = _Job(params, secret, src, staging, dst, report, workers=workers, scheduler=scheduler)
        for cf in case_files:
            known = _source_ids(cf.parent / "private" / "id_map.jsonl")
            for case in read_jsonl(cf, Case):
                report.counts["cases"] += 1
                _clean_texts(case, text, date_offset_days(case.case_id, secret, params.dicom.max_date_shift_days),
                             known.get(case.case_id, []), report, job.audit)
                out_cases.append(_case(job, case, known.get(case.case_id, [])))
        _figures(job)
        out_cases.sort(key=lambda c: c.case_id)
        report.inputs = sum(report.counts[k] for k in ("dicom_files_in", "volumes_in", "figures_in"))
        write_jsonl(staging / "cases.jsonl", out_cases)
        report.outputs = report.inputs - sum(report.failures.values())
        write_jsonl(staging / "audit.jsonl", job.audit)
        report.write_quarantine(staging / "quarantine.jsonl")
        report.metrics["annex_e_edition"] = load_table().edition
        report.check_failure_rate(params.max_failure_rate, report_path, dst)
    report.write(report_path)
    return report


@dataclass
class _Job:
    """One deidentify run: files are read inside ``src``, written under ``staging`` and named in records by where
    they will be (``final``); every file is counted in ``report`` and its actions listed in ``audit``."""

    params: DeidentifyParams
    secret: bytes
    src: Path
    staging: Path
    final: Path
    report: Report
    audit: list[dict[str, Any]] = field(default_factory=list)
    # figures wait here until every case is read, then go through OCR together (one worker pool for all)
    figures: list[tuple[Case, Any, FigureTask, Path]] = field(default_factory=list)
    workers: int = 1
    scheduler: str | None = None

    def record(self, path: str, res: Outcome[Any]) -> bool:
        """Count ``res`` for the input ``path`` (shown relative to the input folder); True when it succeeded."""
        return self.report.record(input_rel(path, self.src), res)

    def readable(self, path: str) -> bool:
        return readable(path, self.src)

    def written(self, rel: Path) -> str:
        """The record path of an output at ``rel`` under the stage folder."""
        return relpath(self.final / rel)


def _case(job: _Job, case: Case, known: list[str]) -> Case:
    case = case.model_copy(deep=True)
    if _series_ids_identify(case.source.value):
        for series in case.all_series():
            series.series_id = series_pseudonym(case.case_id, series.series_id, job.secret)
    for fig in case.figures:
        if fig.path:
            _figure(job, case, fig, known)
    for visit in case.visits:
        kept = []
        for series in visit.series:
            if _series(job, case, series):
                kept.append(series)
            else:
                job.report.counts["series_dropped_all_files_quarantined"] += 1
        visit.series = kept
    case.provenance.stages["deidentify"] = f"{load_table().edition}; options=" + ",".join(
        k for k, v in job.params.dicom.model_dump().items() if v is True)
    return case


def series_pseudonym(case_id: str, series_id: str, secret: bytes) -> str:
    """The series id deidentify gives a series whose source id identifies (``img-`` and a keyed hash)."""
    return "img-" + keyed_hash("series", case_id, series_id, secret=secret, length=10)


@functools.cache
def _series_ids_identify(source: str) -> bool:
    """Whether a source's series ids are its own image ids (ADNI's IDA ids, which its database links to the
    participant): its ingest spec says so, and deidentify then replaces them with keyed pseudonyms."""
    return bool(load_spec(source).get("series_ids_identify"))


def _figure(job: _Job, case: Case, fig: Any, known: list[str]) -> None:
    """A figure queued for ``_figures``, or marked missing when it lies outside the input."""
    job.report.counts["figures_in"] += 1
    if not job.readable(fig.path):
        job.record(fig.path, OUTSIDE_INPUT)
        fig.path, fig.missing = None, True
        return
    out_rel = Path("files") / safe_name(case.case_id) / f"{safe_name(fig.figure_id)}.png"
    task = FigureTask(fig.path, str(job.staging / out_rel), job.params.bounds.max_image_pixels, job.params.pixels,
                      job.params.text, job.secret, tuple(known))
    job.figures.append((case, fig, task, out_rel))


def _figures(job: _Job) -> None:
    """Every queued figure re-encoded from its pixels only (EXIF, XMP and text chunks do not survive), its burned-in
    identifying text masked at its original resolution (``deid.pixels``; here, before normalize downscales it, and
    so before any render or release copy exists). The masking goes into the figure's qc (boxes and tags, never the
    text); a figure whose text could not be read with confidence is flagged for review (``qc.pixel_text.review``)
    and normalize does not render it."""
    tasks = [t for _, _, t, _ in job.figures]
    for (case, fig, task, out_rel), res in zip(job.figures, pmap(deid_figure, tasks, workers=job.workers,
                                                                 scheduler=job.scheduler), strict=True):
        if not job.record(task.src, res):
            fig.path, fig.missing = None, True
            continue
        fig.path = job.written(out_rel)
        actions: dict[str, Any] = {"metadata": "X"}
        pix = res.value.pixels
        if pix is not None:
            fig.qc.pixel_text = PixelText.model_validate(pix.qc())
            actions["pixels"] = {"masked": len(pix.masked), "tags": sorted({m["tag"] for m in pix.masked}),
                                 "review": pix.review}
            job.report.counts["figures_ocr_read"] += 1
            job.report.counts["figures_pixels_masked"] += int(bool(pix.masked))
            job.report.counts["pixel_masks"] += len(pix.masked)
            if pix.review:
                job.report.counts["figures_held_for_pixel_review"] += 1
                job.report.skip(input_rel(task.src, job.src), "pixel_text_review", ", ".join(pix.review))
        job.audit.append({"case_id": case.case_id, "file": fig.path, "actions": actions})
    job.figures.clear()


def _series(job: _Job, case: Case, series: Any) -> bool:
    """A series de-identified in place (its files now the stage's outputs); False when nothing of it is left."""
    base = Path("files") / safe_name(case.case_id) / safe_name(series.series_id)
    if series.format == "dicom":
        return _dicom_series(job, case, series, base)
    if series.format in ("analyze", "nifti"):
        return _volume_series(job, case, series, base)
    job.report.fail(series.series_id, "unsupported_format", series.format)
    return False


def _dicom_series(job: _Job, case: Case, series: Any, base: Path) -> bool:
    inside = [f for f in series.files if job.readable(f)]
    for f in series.files:
        if f not in inside:
            job.report.counts["dicom_files_in"] += 1
            job.record(f, OUTSIDE_INPUT)
    # outputs named by position: an input's own name can carry the participant id, dates or UIDs (ADNI and
    # scanner exports do)
    tasks = [(f, str(job.staging / base / _out_name(n)), job.params, job.secret, case.case_id, case.case_id)
             for n, f in enumerate(inside, 1)]
    _folders([job.staging / base] if inside else [])
    archive = base.with_name(base.name + SERIES_ARCHIVE)
    written = []
    for (f, out, *_), res in zip(tasks, pmap(_dicom_task, tasks, workers=job.workers, scheduler=job.scheduler),
                                strict=True):
        job.report.counts["dicom_files_in"] += 1
        if job.record(f, res):
            written.append(Path(out).name)
            job.report.counts["dicom_values_verified"] += res.value.values_checked or 0
            job.audit.append({"case_id": case.case_id, "file": job.written(archive), "member": written[-1],
                              "annex_e": edition_id(), "actions": res.value.actions})
    if inside:
        # one stored zip per series (what every file of it became; a refused file's output never is): thousands of
        # slice files would each be hashed by every dvc status and repro
        with writing(job.staging / archive):
            if written:
                pack_series(job.staging / base, written, job.staging / archive)
            else:
                shutil.rmtree(job.staging / base)
    if not written:
        series.files = []
        return False
    series.files = [job.written(archive)]
    return True


def _volume_series(job: _Job, case: Case, series: Any, base: Path) -> bool:
    vol = next((f for f in series.files if f.endswith(VOLUME_SUFFIXES)), None)
    if vol is None:
        job.report.fail(input_rel(series.files[0], job.src) if series.files else series.series_id,
                        "volume_missing", "series lists no volume file")
        return False
    # named by format, like the DICOM outputs by position: a volume's own name carries the participant and
    # session ids (OAS1_0042_MR1_mpr-1_anon.hdr, sub-OAS30001_ses-d0129_T1w.nii.gz)
    name = "volume" + next(ext for ext in VOLUME_SUFFIXES if vol.endswith(ext))
    res = (clean_volume(vol, str(job.staging / base / name), job.params.bounds.max_volume_bytes)
           if job.readable(vol) else OUTSIDE_INPUT)
    job.report.counts["volumes_in"] += 1
    if not job.record(vol, res):
        return False
    files = [job.written(base / name)]
    if name.endswith(".hdr"):
        files.append(job.written(base / name.replace(".hdr", ".img")))
    actions = {f: "X" for f in res.value.removed}
    if series.sidecar:
        series.sidecar, dropped = clean_sidecar(series.sidecar, job.params.dicom.retain_device_identity)
        actions.update({f"sidecar.{k}": "X" for k in dropped})
    series.files = files
    job.audit.append({"case_id": case.case_id, "file": files[0], "actions": actions})
    if series.lesion_mask:  # the source's lesion mask: a volume like the image, its header text removed alike
        ext = next((e for e in VOLUME_SUFFIXES if series.lesion_mask.endswith(e)), ".nii.gz")
        mask = (clean_volume(series.lesion_mask, str(job.staging / base / f"lesion_mask{ext}"),
                             job.params.bounds.max_volume_bytes)
                if job.readable(series.lesion_mask) else OUTSIDE_INPUT)
        series.lesion_mask = job.written(base / f"lesion_mask{ext}") if job.record(series.lesion_mask, mask) else None
        if series.lesion_mask:
            job.audit.append({"case_id": case.case_id, "file": series.lesion_mask,
                              "actions": {f: "X" for f in mask.value.removed}})
    return True


# ------------------------------------------------------------------ plain-file commands
def deid_dicom_dir(params: DicomDeidParams, src: Path, dst: Path, *, workers: int = 1,
                   scheduler: str | None = None, secret: bytes | None = None, pixels: PixelDeidParams | None = None,
                   text: TextDeidParams | None = None) -> Report:
    """Every file under ``src`` -> ``dst`` at the same relative path (UIDs in names remapped), or a quarantine
    entry. With ``pixels`` and ``text``, an image marked or suspected as burned in has its identifying pixel text
    masked; without, it is refused whole."""
    src, dst = Path(src), Path(dst)
    if not src.is_dir():
        raise InputError("input folder does not exist", src)
    secret = project_secret() if secret is None else secret
    report = Report(stage="deid dicom")
    files = []
    for p, refused in walk_files(src):  # symlinks out of src and names that are not UTF-8 are listed, never read
        if refused is None:
            files.append(p)
        elif refused.kind is Kind.failed:
            report.inputs += 1
            report.fail(printable(p.relative_to(src).as_posix()), refused.code, refused.code.replace("_", " "))
    files.sort()
    # same relative path, with the UIDs in names (scanners name files by SOP Instance UID) remapped as in headers
    tasks = [(str(f), str(dst / uid_free_name(f.relative_to(src).as_posix(), secret)), params, secret, pixels, text)
             for f in files]
    audit = []
    _folders(Path(out).parent for _, out, *_ in tasks)
    for (f, out, *_), res in zip(tasks, pmap(_plain_dicom_task, tasks, workers=workers, scheduler=scheduler),
                                strict=True):
        report.inputs += 1
        if report.record(Path(f).relative_to(src).as_posix(), res):
            report.outputs += 1
            audit.append({"file": Path(out).relative_to(dst).as_posix(), "annex_e": edition_id(),
                          "actions": res.value.actions})
    write_jsonl(dst / "audit.jsonl", audit)
    report.write_quarantine(dst / "quarantine.jsonl")
    return report


def _folders(folders: Iterable[Path]) -> None:
    """Output folders made before the per-file tasks, so that a full disk or a read-only output stops the run as a
    ResourceError instead of failing each file (whose handler would quarantine it)."""
    for folder in sorted(set(folders)):
        with writing(folder):
            folder.mkdir(parents=True, exist_ok=True)


def _plain_dicom_task(task: tuple[str, str, DicomDeidParams, bytes, PixelDeidParams | None, TextDeidParams | None]
                      ) -> Outcome[Deidentified]:
    src, dst, params, secret, pixels, text = task
    return deidentify_file(src, dst, params, secret, None, None, pixels=pixels, text=text)


def deid_text_path(params: TextDeidParams, src: Path, dst: Path, secret: bytes | None = None) -> Report:
    src, dst = Path(src), Path(dst)
    if not src.exists():
        raise InputError("input does not exist", src)
    report = Report(stage="deid text")
    tool = TextDeidentifier(params, project_secret() if secret is None else secret)
    texts = sorted(q for q, bad in walk_files(src) if bad is None and q.suffix == ".txt") if src.is_dir() else []
    pairs = [(src, dst)] if src.is_file() else [(p, dst / p.relative_to(src)) for p in texts]
    for inp, out in pairs:
        report.inputs += 1
        try:
            content = inp.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            report.fail(inp.name if src.is_file() else inp.relative_to(src).as_posix(), "unreadable", str(exc))
            continue
        cleaned, spans = tool.deidentify(content, None)
        report.counts["phi_spans"] += len(spans)
        write_text(out, cleaned)
        report.outputs += 1
    return report
