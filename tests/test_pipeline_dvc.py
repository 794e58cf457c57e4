"""End to end: the demo corpus through `dvc repro` in a temp git repo, the way a curator runs it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import ROOT

pytestmark = pytest.mark.e2e  # the whole pipeline, through `dvc repro`
PROJECT_FILES = ["curation", "templates", "annotation", "params.yaml", "dvc.yaml", "pyproject.toml", ".dvc/config",
                 ".dvc/.gitignore", ".dvcignore", "data/review/annotations.json", ".gitignore"]


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=1200, check=False)


# The project's ADNI participants: these tests are about `dvc repro` (its stages' wiring, what reruns, quarantine and
# a killed run), not about the demo's breadth, which the session's library pipeline (conftest.pipeline) runs whole.
# Two of the six: the one with a lesion and the one the bad-inputs test corrupts; every other source is whole.
PROJECT_ADNI = ("027_S_0074", "126_S_0605")


def _copy_demo(demo: Path, raw: Path) -> None:
    """The demo corpus with the ADNI download cut to PROJECT_ADNI: their image folders, IDA metadata and ADNIMERGE
    rows, as a download of those participants would hold."""
    def others(folder: str, names: list[str]) -> set[str]:
        if Path(folder) == demo / "adni" / "ADNI":
            return {n for n in names if n not in PROJECT_ADNI and n != "README.txt"}
        if Path(folder) == demo / "adni":
            return {n for n in names if n.startswith("ADNI_") and n[5:15] not in PROJECT_ADNI}
        return set()

    shutil.copytree(demo, raw, ignore=others)
    merge = raw / "adni" / "ADNIMERGE.csv"
    lines = merge.read_text(encoding="utf-8").splitlines(keepends=True)
    merge.write_text("".join([lines[0], *(line for line in lines[1:] if line.split(",")[1] in PROJECT_ADNI)]),
                     encoding="utf-8")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, demo_raw: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """The demo (the session's ``curate demo-data`` output, ADNI cut to PROJECT_ADNI) through `dvc repro` in a temp git
    repo; removed after the module (it and its DVC cache are the suite's largest folder)."""
    proj = tmp_path_factory.mktemp("project")
    for name in PROJECT_FILES:
        src = ROOT / name
        if not src.exists():
            continue
        dst = proj / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dst)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "DVC_NO_ANALYTICS": "1", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@localhost",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@localhost"}
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "init"]):
        r = _run(cmd, proj, env)
        assert r.returncode == 0, r.stderr
    _copy_demo(demo_raw, proj / "data" / "raw")
    r = _run(["dvc", "repro"], proj, env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    yield proj, env
    shutil.rmtree(proj, ignore_errors=True)


def test_release_is_built_and_verified(project: tuple[Path, dict[str, str]]) -> None:
    proj, env = project
    release = proj / "data" / "releases" / "neuro-bench-0.1.0"
    assert (release / "manifest.json").exists()
    assert list((release / "images").glob("*.png"))
    r = _run(["curate", "release", "verify"], proj, env)
    assert r.returncode == 0 and "verified" in r.stdout, r.stderr
    # headers and records; the pixels' OCR (3 s an image) is tests/test_deid_pixels.py's
    r = _run(["curate", "deid", "verify", "--no-pixels", "data/releases/neuro-bench-0.1.0"], proj, env)
    assert r.returncode == 0, r.stdout
    for stage in ("deidentify", "normalize", "extract", "generate", "filter", "review", "release"):
        assert (proj / "reports" / f"{stage}.json").exists(), stage
    assert (proj / "reports" / "ingest" / "adni.json").exists()


def test_second_repro_is_a_no_op(project: tuple[Path, dict[str, str]]) -> None:
    proj, env = project
    r = _run(["dvc", "status"], proj, env)
    assert r.returncode == 0
    assert "up to date" in r.stdout.lower(), r.stdout
    before = (proj / "dvc.lock").read_bytes()
    r = _run(["dvc", "repro"], proj, env)
    assert r.returncode == 0, r.stderr
    assert "Running stage" not in r.stdout, r.stdout
    assert (proj / "dvc.lock").read_bytes() == before


def test_a_changed_render_alone_is_a_change_of_the_release(project: tuple[Path, dict[str, str]]) -> None:
    """The release copies the images its items name under data/interim/normalize: a render that changes while the
    items stay the same must rebuild it, so that stage declares the folder (it had not)."""
    proj, env = project
    png = sorted((proj / "data" / "interim" / "normalize").rglob("*.png"))[0]
    original = png.read_bytes()
    try:
        png.write_bytes(original + b"\0")
        r = _run(["dvc", "status", "release"], proj, env)
        assert r.returncode == 0 and "data/interim/normalize" in r.stdout, r.stdout
    finally:
        png.write_bytes(original)
    r = _run(["dvc", "status"], proj, env)
    assert "up to date" in r.stdout.lower(), r.stdout


def _digest(root: Path) -> dict[str, str]:
    import hashlib

    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_dvc_repro_killed_midway_then_rerun_gives_identical_outputs(project: tuple[Path, dict[str, str]]) -> None:
    import signal
    import time

    proj, env = project
    out = proj / "data" / "interim" / "normalize"
    before = _digest(out)
    params = proj / "params.yaml"
    text = params.read_text()
    # a params change that re-runs the normalize stage without changing what it produces
    params.write_text(text.replace("normalize:\n  max_failure_rate: 0.2", "normalize:\n  max_failure_rate: 0.25"))
    assert params.read_text() != text
    proc = subprocess.Popen(["dvc", "repro"], cwd=proj, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 300
    staging: list[Path] = []
    while time.monotonic() < deadline and proc.poll() is None:
        staging = [d for d in out.parent.glob(".normalize.*.building") if sum(1 for _ in d.rglob("*.png")) >= 5]
        if staging:
            break
        time.sleep(0.05)
    assert staging and proc.poll() is None, "dvc repro should be midway through normalize"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    # nothing half-written at the output path: the old output or none at all
    assert not out.exists() or _digest(out) == before
    r = _run(["dvc", "repro"], proj, env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert _digest(out) == before, "the rerun gives exactly what an uninterrupted run gives"
    assert not list(out.parent.glob(".normalize.*")), "leftovers of the killed run are gone"
    r = _run(["dvc", "status"], proj, env)
    assert "up to date" in r.stdout.lower(), r.stdout


def test_bad_inputs_dropped_into_raw_are_quarantined(project: tuple[Path, dict[str, str]]) -> None:
    """A corpus full of malformed files, dropped into a repro'd project: each is quarantined with its reason, and
    every good case still comes out of the whole pipeline (the OASIS-1 session whose only volume is unreadable is the
    one loss)."""
    import json

    import pydicom

    from curation.jsonio import read_jsonl

    proj, env = project
    raw = proj / "data" / "raw"
    clean = {c["case_id"] for c in read_jsonl(proj / "data/interim/extract/cases.jsonl")}
    dcm = sorted((raw / "adni/ADNI/027_S_0074").rglob("*.dcm"))
    dcm[2].write_bytes(dcm[2].read_bytes()[:-5000])  # truncated
    dcm[5].write_bytes(dcm[5].read_bytes()[132:])  # no preamble: not a DICOM Part 10 file
    (dcm[7].parent / "notes.dcm").write_bytes(b"\x00" * 128 + b"DICM" + b"garbage")  # preamble, no meta
    ds = pydicom.dcmread(dcm[9])
    ds.StudyDate = "2019-13-45"  # wrong value for its VR (DA)
    ds.save_as(dcm[9])
    (raw / "case-reports/broken.xml").write_text("<article><front>")
    csv = raw / "adni/ADNIMERGE.csv"
    csv.write_text(csv.read_text() + "oops,not,enough\n")
    (raw / "oasis3/OASIS3_extra_cdr.csv").write_text("OASISID,MMSE\nOAS30001,29\n")
    img = next((raw / "oasis1").rglob("*.img"))
    img.write_bytes(img.read_bytes()[:1000])
    # the demo has only three case-report files: one broken file is a third of the inputs
    params = proj / "params.yaml"
    params.write_text(params.read_text().replace("max_failure_rate: 0.2", "max_failure_rate: 0.5"))
    r = _run(["dvc", "repro"], proj, env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]

    def reasons(source: str) -> set[str]:
        report = json.loads((proj / f"reports/ingest/{source}.json").read_text())
        return set(report["failures_by_reason"]) | set(report.get("skipped_by_reason", {}))

    assert {"dicom_truncated", "dicom_no_meta", "skipped:not_dicom", "csv_bad_row"} <= reasons("adni")
    assert "xml_invalid" in reasons("case-reports")
    assert reasons("oasis1") & {"volume_unreadable", "analyze_truncated"}
    assert "csv_missing_column" in reasons("oasis3")
    q = (proj / "data/interim/ingest/oasis3/quarantine.jsonl").read_text()
    assert "OASIS3_extra_cdr.csv" in q and "days_to_visit" in q
    for q in read_jsonl(proj / "data/interim/ingest/adni/quarantine.jsonl"):
        assert q["reason"] and q["path"]
    dirty = {c["case_id"] for c in read_jsonl(proj / "data/interim/extract/cases.jsonl")}
    assert dirty <= clean and len(clean - dirty) <= 1
    adni = [c for c in read_jsonl(proj / "data/interim/extract/cases.jsonl") if c["source"] == "adni"]
    assert len(adni) == len(PROJECT_ADNI) and all(v["series"] for c in adni for v in c["visits"])
