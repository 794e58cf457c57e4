from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# tests/testlayers.py puts each test in one layer (unit, integration, e2e) and keeps the unit layer isolated
pytest_plugins = ["pytester", "tests.testlayers"]

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("DVC_NO_ANALYTICS", "1")
os.environ.setdefault("CURATION_SECRET", "test-secret-not-for-production")
# One anatomy-fit store for the session (its subprocesses too): the demo's series are fitted once, not once for each
# test that runs normalize on them; a fresh store each session, removed at its end.
_FIT_CACHE = None if "CURATION_FIT_CACHE" in os.environ else tempfile.mkdtemp(prefix="medbench-fit-cache-")
if _FIT_CACHE:
    os.environ["CURATION_FIT_CACHE"] = _FIT_CACHE
# One OCR store for the session, likewise: the demo's figures are read by Tesseract once, not in every pipeline run
_OCR_CACHE = None if "CURATION_OCR_CACHE" in os.environ else tempfile.mkdtemp(prefix="medbench-ocr-cache-")
if _OCR_CACHE:
    os.environ["CURATION_OCR_CACHE"] = _OCR_CACHE


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _FIT_CACHE and not hasattr(session.config, "workerinput"):  # the xdist controller, or a plain run
        shutil.rmtree(_FIT_CACHE, ignore_errors=True)
    if _OCR_CACHE and not hasattr(session.config, "workerinput"):
        shutil.rmtree(_OCR_CACHE, ignore_errors=True)


@pytest.fixture(scope="session")
def demo_raw(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Path:
    """The demo corpus, written once a session by the command a curator runs (``curate demo-data``); under
    pytest-xdist once for all workers (the first to need it writes it, the others wait for it). Read only: a test
    that changes it takes ``raw_copy``."""
    import subprocess
    import sys

    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if hasattr(pytestconfig, "workerinput") else base  # the session's folder, all workers'
    raw, done = shared / "demo-corpus" / "raw", shared / "demo-corpus" / "written"
    with FileLock(str(shared / "demo-corpus.lock")):
        if not done.exists():
            shutil.rmtree(raw.parent, ignore_errors=True)
            r = subprocess.run([str(Path(sys.executable).with_name("curate")), "demo-data", str(raw)],
                               capture_output=True, text=True, timeout=1200, check=False)
            assert r.returncode == 0, r.stderr[-3000:]
            done.touch()
    return raw


@pytest.fixture
def raw_copy(demo_raw: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "raw"
    shutil.copytree(demo_raw, dst)
    return dst


@pytest.fixture(scope="session")
def pipeline(tmp_path_factory: pytest.TempPathFactory, demo_raw: Path) -> Path:
    """Every stage through the library on the demo corpus, once per session; returns the work dir."""
    from curation.deid.stage import run as deid
    from curation.generate.stage import run as generate
    from curation.imaging.normalize import run as normalize
    from curation.ingest import run as ingest
    from curation.nlp.extract import run as extract
    from curation.params import load_params
    from curation.quality.filter import run as filt
    from curation.release.build import run as release
    from curation.review.merge import run as review

    work = tmp_path_factory.mktemp("work")
    old = Path.cwd()
    os.chdir(ROOT)
    p = load_params(ROOT / "params.yaml")
    p.ingest.copy_files = True  # the demo raw folder lies outside the work folder: copied, not pointed into
    p.generate.templates_dir = str(ROOT / p.generate.templates_dir)
    p.generate.knowledge = str(ROOT / p.generate.knowledge)
    p.generate.diagnoses = str(ROOT / p.generate.diagnoses)
    p.extract.lexicon = str(ROOT / p.extract.lexicon)
    os.chdir(work)
    try:
        for s in p.sources:
            ingest(p.ingest, s, demo_raw / s, work / "ingest" / s)
        deid(p.deidentify, work / "ingest", work / "deid", workers=min(2, os.cpu_count() or 1))
        normalize(p.normalize, work / "deid", work / "normalize", workers=min(2, os.cpu_count() or 1))
        extract(p.extract, work / "normalize", work / "extract")
        generate(p.generate, work / "extract", work / "generate")
        filt(p.filter, work / "generate", work / "filter")
        review(p.review, work / "filter", work / "none.json", work / "review")
        release(p.release, work / "review", work / "releases", params_file=ROOT / "params.yaml")
    finally:
        os.chdir(old)
    return work


def demo_subset(pipeline: Path, stage: str, project: Path) -> Path:
    """``stage``'s output for one case of each kind, records and files, in a project folder of its own: an ADNI
    participant (T1w and FLAIR at two visits: deface, anatomy, carried targets, follow-up pairing), an OASIS-1
    subject scanned twice and a Radiopaedia case with two series of figures. For tests that run a heavy stage again
    to compare two ways of running it: they need its variety, not its 37 volumes. Records' paths are relative to the
    project folder, so the stage runs with ``project`` as its working folder. Returns ``project / stage``."""

    lines = (pipeline / stage / "cases.jsonl").read_text(encoding="utf-8").splitlines()
    cases = [json.loads(line) for line in lines]

    def first(source: str, visits: int, figures: int = 0) -> str:
        return next(c["case_id"] for c in cases if c["source"] == source and len(c["visits"]) == visits
                    and len(c["figures"]) >= figures)

    keep = {first("adni", 2), first("oasis1", 2), first("radiopaedia", 0, figures=6)}
    out = project / stage
    (out / "files").mkdir(parents=True)
    for case_id in sorted(keep):
        shutil.copytree(pipeline / stage / "files" / case_id, out / "files" / case_id)
    (out / "cases.jsonl").write_text("".join(line + "\n" for line, c in zip(lines, cases, strict=True)
                                             if c["case_id"] in keep), encoding="utf-8")
    return out


def ingest_subset(pipeline: Path, project: Path) -> Path:
    """Ingest's output cut to the first case of each source, records, files and id maps, in a project folder of its
    own: every source's kind of input for a test that runs de-identification again to compare two ways of running
    it. Returns ``project / "ingest"``."""
    out = project / "ingest"
    for src in sorted(d for d in (pipeline / "ingest").iterdir() if d.is_dir()):
        first = (src / "cases.jsonl").read_text(encoding="utf-8").splitlines()[0]
        case_id = json.loads(first)["case_id"]
        shutil.copytree(src / "files" / case_id, out / src.name / "files" / case_id)
        if (src / "private").is_dir():
            shutil.copytree(src / "private", out / src.name / "private")
        (out / src.name / "cases.jsonl").write_text(first + "\n", encoding="utf-8")
    return out


@pytest.fixture(scope="session")
def label_studio(pipeline: Path, tmp_path_factory: pytest.TempPathFactory):
    """A real Label Studio server on 127.0.0.1 serving the pipeline's images; stopped at the end."""
    from curation.testing.labelstudio import LabelStudioServer

    exe = ROOT / ".venv-labelstudio" / "bin" / "label-studio"
    if not exe.exists():
        pytest.fail(f"{exe} is missing: `make test` installs Label Studio into .venv-labelstudio")
    server = LabelStudioServer(tmp_path_factory.mktemp("labelstudio"), document_root=pipeline, exe=exe)
    server.start()
    yield server
    server.stop()
