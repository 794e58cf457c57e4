"""Hostile and real-world inputs (issue 22): each test builds its hostile input, runs the real stage, and checks
that the stage completes, the quarantine entry and its reason, and that nothing was written or read outside the
folders the stage may use."""

from __future__ import annotations

import gzip
import io
import json
import os
import struct
import uuid
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from curation.ingest import run as ingest
from curation.params import DeidentifyParams, IngestParams, NormalizeParams
from curation.records import read_jsonl
from curation.schema import Case

from .conftest import SHARED

SECRET = b"SECRET-OUTSIDE-THE-RAW-FOLDER"


# ------------------------------------------------------------------ builders
def _png(path: Path, size: int = 64, value: int = 128) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    arr = np.full((size, size), value, dtype=np.uint8)
    arr[size // 4: size // 2, size // 4: size // 2] = 255
    Image.fromarray(arr, mode="L").save(path)
    return path


def _jats(pmcid: str, figs: list[tuple[str, str]]) -> str:
    fig_xml = "".join(
        f'<fig id="{fid}"><label>Figure {n}.</label><caption><p>MRI of the brain.</p></caption>'
        f'<graphic xlink:href="{href}"/></fig>' for n, (fid, href) in enumerate(figs, 1))
    return (
        '<?xml version="1.0"?>\n<article xmlns:xlink="http://www.w3.org/1999/xlink" article-type="case-report">'
        f'<front><article-meta><article-id pub-id-type="pmcid">{pmcid}</article-id>'
        '<title-group><article-title>A case</article-title></title-group></article-meta></front>'
        '<body><sec><title>Case Report</title><p>A 60-year-old man had headaches.</p>'
        f'{fig_xml}</sec></body></article>\n')


def _radiopaedia(folder: Path, series: list[dict], **fields: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"id": folder.name, "title": "Glioma", "author": "A", "studies": [{"modality": "MRI", "series": series}]}
    doc.update(fields)
    (folder / "case.json").write_text(json.dumps(doc))
    return folder / "case.json"


def _tree(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


def _assert_only_under(before: set[Path], root: Path, allowed: list[Path]) -> None:
    """Every path that appeared under ``root`` lies inside one of ``allowed``."""
    new = _tree(root) - before
    stray = sorted(p for p in new if not any(p.is_relative_to(a) for a in allowed))
    assert not stray, f"written outside the stage folders: {stray}"


def _quarantine(out: Path) -> list[dict]:
    return list(read_jsonl(out / "quarantine.jsonl"))


def _ingest(source: str, raw: Path, out: Path, **kw: object) -> tuple[list[Case], list[dict], dict]:
    report = ingest(IngestParams(max_failure_rate=1.0, **kw), source, raw, out)
    return list(read_jsonl(out / "cases.jsonl", Case)), _quarantine(out), report.as_dict()


def _no_secret_under(root: Path) -> None:
    for p in root.rglob("*"):
        if p.is_file():
            assert SECRET not in p.read_bytes(), f"{p} holds bytes read from outside the raw folder"


# ------------------------------------------------------------------ containment: names from input are names
def test_jats_fig_id_traversal_stays_inside_every_stage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``<fig id>`` of ``../../../../x`` and one ending in ``/`` (graphic ``payload.bashrc``) through ingest, deid and
    normalize: every file lands under the stage's output folder, none is hidden or named by the input."""
    from curation.deid.stage import run as deid
    from curation.imaging.normalize import run as normalize

    monkeypatch.chdir(tmp_path)
    raw = tmp_path / "raw"
    _png(raw / "f1.png")
    _png(raw / "f2.png", value=60)
    (raw / "payload.bashrc").write_bytes(b"echo owned\n")
    far = f"medbench-hostile-{uuid.uuid4().hex}"
    (raw / "a.xml").write_text(_jats("PMC1", [("../../../../escaped", "f1.png"), ("../" * 12 + f"tmp/{far}", "f2.png"),
                                              ("evil/", "payload.bashrc")]))
    before = _tree(tmp_path)
    cases, quarantine, rep = _ingest("case-reports", raw, tmp_path / "ingest" / "case-reports")
    assert len(cases) == 1 and rep["failed"] == 0
    ids = [f.figure_id for f in cases[0].figures]
    assert all("/" not in i and not i.startswith(".") and ".." != i for i in ids), ids
    assert all(f.path and Path(f.path).resolve().is_relative_to(tmp_path / "ingest" / "case-reports")
               for f in cases[0].figures)
    deid(DeidentifyParams(max_failure_rate=1.0), tmp_path / "ingest", tmp_path / "deid")
    normalize(NormalizeParams(max_failure_rate=1.0), tmp_path / "deid", tmp_path / "normalize")
    _assert_only_under(before, tmp_path, [tmp_path / "ingest", tmp_path / "deid", tmp_path / "normalize",
                                          tmp_path / ".curation"])
    assert not Path(f"/tmp/{far}.png").exists() and not Path(f"/tmp/{far}").exists()
    assert not [p for p in tmp_path.rglob("*") if p.name.startswith(".") and "bashrc" in p.name]
    dq = _quarantine(tmp_path / "deid")
    # the .bashrc "figure" is not an image: de-identification quarantines it instead of copying it on
    assert [q["reason"] for q in dq] == ["image_unreadable"]
    assert not Path(dq[0]["path"]).is_absolute() and dq[0]["path"].startswith("case-reports/files/")


def test_radiopaedia_series_name_and_image_paths_are_contained(tmp_path: Path) -> None:
    """A series ``name`` holding ``../``, an image path ``../../secret``, an image symlinked out of the raw folder:
    the names become safe file names, the outside files are quarantined ``outside_raw`` and never read."""
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.png"
    secret.write_bytes(SECRET)
    raw = tmp_path / "raw"
    case = raw / "case-1"
    _png(case / "images" / "001.png")
    (case / "images" / "link.png").symlink_to(secret)
    (raw / "linked-folder").symlink_to(outside, target_is_directory=True)
    _radiopaedia(case, [{"name": "../../../../escaped", "images": ["images/001.png"]},
                        {"name": "T2", "images": ["../../outside/secret.png", "images/link.png",
                                                  str(secret)]}])
    before = _tree(tmp_path)
    cases, quarantine, rep = _ingest("radiopaedia", raw, tmp_path / "out")
    _assert_only_under(before, tmp_path, [tmp_path / "out"])
    _no_secret_under(tmp_path / "out")
    assert len(cases) == 1
    figs = cases[0].figures
    assert [f.missing for f in figs] == [False, True, True, True]
    assert "/" not in figs[0].figure_id and Path(figs[0].path).resolve().is_relative_to(tmp_path / "out")
    reasons = sorted((q["path"], q["reason"]) for q in quarantine)
    assert reasons == [
        ("case-1/case.json#s1-T2-001", "outside_raw"), ("case-1/case.json#s1-T2-002", "outside_raw"),
        ("case-1/case.json#s1-T2-003", "outside_raw"), ("case-1/images/link.png", "outside_raw"),
        ("linked-folder", "outside_raw")]
    assert rep["failures_by_reason"] == {"outside_raw": 5}


def test_jats_absolute_hrefs_outside_and_missing(tmp_path: Path) -> None:
    """An absolute href to a file outside the raw folder is quarantined ``outside_raw`` (not copied); one to a missing
    file is an incomplete figure, not a traceback."""
    outside = tmp_path / "elsewhere.png"
    outside.write_bytes(SECRET)
    raw = tmp_path / "raw"
    _png(raw / "ok.png")
    (raw / "a.xml").write_text(_jats("PMC2", [("f1", str(outside)), ("f2", "/nonexistent/dir/missing.png"),
                                              ("f3", "ok.png")]))
    before = _tree(tmp_path)
    cases, quarantine, rep = _ingest("case-reports", raw, tmp_path / "out")
    _assert_only_under(before, tmp_path, [tmp_path / "out"])
    _no_secret_under(tmp_path / "out")
    assert [f.missing for f in cases[0].figures] == [True, True, False]
    assert {(q["path"], q["reason"]) for q in quarantine} == {
        ("a.xml#f1", "outside_raw"), ("a.xml#f2", "incomplete:figure_missing")}


def test_non_utf8_file_names_are_quarantined(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    case = raw / "case-1"
    _png(case / "images" / "001.png")
    _radiopaedia(case, [{"name": "FLAIR", "images": ["images/001.png"]}])
    bad = os.fsencode(case / "images") + b"/caf\xe9-\xff.png"
    with open(bad, "wb") as fh:
        fh.write(b"not read")
    os.mkdir(os.fsencode(raw) + b"/dir-\xfe")
    cases, quarantine, rep = _ingest("radiopaedia", raw, tmp_path / "out")
    assert len(cases) == 1 and not cases[0].figures[0].missing
    text = (tmp_path / "out" / "quarantine.jsonl").read_bytes().decode("utf-8")  # the quarantine is valid UTF-8
    assert {(q["path"], q["reason"]) for q in quarantine} == {
        ("case-1/images/caf\\xe9-\\xff.png", "filename_not_utf8"), ("dir-\\xfe", "filename_not_utf8")}, text


def test_huge_fig_id_is_bounded(tmp_path: Path) -> None:
    """A 50 MB ``fig id``: the figure keeps its number as id, one quarantine line says why, the case is ingested."""
    raw = tmp_path / "raw"
    _png(raw / "f1.png")
    (raw / "a.xml").write_text(_jats("PMC3", [("A" * 50_000_000, "f1.png")]))
    cases, quarantine, rep = _ingest("case-reports", raw, tmp_path / "out")
    assert [f.figure_id for f in cases[0].figures] == ["fig1"] and cases[0].figures[0].path
    assert quarantine == [{"path": "a.xml#fig1", "reason": "incomplete:figure_id_too_long",
                           "detail": "fig id of 50000000 characters (bounds.max_id_chars 200); the figure is kept "
                                     "as fig1"}]
    assert (tmp_path / "out" / "cases.jsonl").stat().st_size < 100_000


# ------------------------------------------------------------------ one bad input never aborts a stage
@pytest.mark.parametrize(("field", "value", "detail"), [
    ("images", [1, 2], "study 1 series 1 images is not a list of file names"),
    ("series", ["FLAIR"], "study 1 series 1 is str, not an object"),
    ("title", ["x"], "title is list, not text"),
])
def test_radiopaedia_json_of_the_wrong_shape(tmp_path: Path, field: str, value: object, detail: str) -> None:
    raw = tmp_path / "raw"
    _png(raw / "good" / "001.png")
    _radiopaedia(raw / "good", [{"name": "FLAIR", "images": ["001.png"]}])
    if field == "images":
        _radiopaedia(raw / "bad", [{"name": "FLAIR", "images": value}])
    elif field == "series":
        (raw / "bad").mkdir()
        (raw / "bad" / "case.json").write_text(json.dumps({"title": "x", "studies": [{"series": value}]}))
    else:
        _radiopaedia(raw / "bad", [], title=value)
    cases, quarantine, rep = _ingest("radiopaedia", raw, tmp_path / "out")
    assert len(cases) == 1
    assert quarantine == [{"path": "bad/case.json", "reason": "case_malformed", "detail": detail}]
    assert rep["failures_by_reason"] == {"case_malformed": 1}


def test_radiopaedia_differential_as_text_is_one_diagnosis(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    _png(raw / "c" / "001.png")
    _radiopaedia(raw / "c", [{"name": "FLAIR", "images": ["001.png"]}], differential="metastasis")
    cases, _, _ = _ingest("radiopaedia", raw, tmp_path / "out")
    assert cases[0].diagnosis.differential == ["metastasis"]


def test_oasis3_sidecars_not_utf8_or_not_an_object(raw_copy: Path, tmp_path: Path) -> None:
    src = raw_copy / "oasis3"
    sidecars = sorted(src.rglob("*_T1w.json"))
    assert len(sidecars) >= 2
    sidecars[0].write_bytes(b'{"Manufacturer": "Caf\xe9"}')
    sidecars[1].write_text("[1, 2, 3]")
    cases, quarantine, rep = _ingest("oasis3", src, tmp_path / "out")
    reasons = {(q["path"], q["reason"]) for q in quarantine}
    assert (sidecars[0].relative_to(src).as_posix(), "sidecar_not_utf8") in reasons
    assert (sidecars[1].relative_to(src).as_posix(), "sidecar_not_object") in reasons
    series = [s for c in cases for s in c.all_series()]
    names = {Path(f).name for s in series for f in s.files}
    assert sidecars[0].name not in names and sidecars[1].name not in names  # the series stay, without the sidecar
    assert {sidecars[0].name.replace(".json", ".nii.gz"), sidecars[1].name.replace(".json", ".nii.gz")} <= names
