"""Adding a source is adding two files, its ingest module and its spec (issue 52): in a copy of the project, a new
source written as those two files is read by ``curate ingest`` and de-identified by ``curate deid run``, and git
shows no file edited, only the two added."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from .conftest import ROOT

pytestmark = pytest.mark.integration  # git, and the copy's own curate in a subprocess

MODULE = '''"""A folder per case (its name is the case's id in the source): history.txt, and PNG figures each with its
caption in a .txt file of the same name."""

from __future__ import annotations

from curation.ingest.base import IngestContext
from curation.schema import Case, Figure, SourceName


def ingest(ctx: IngestContext) -> list[Case]:
    cases = []
    for folder in sorted(p for p in ctx.raw.iterdir() if p.is_dir()):
        ctx.report.inputs += 1
        case_id = ctx.case_id(folder.name)
        figures = [Figure(figure_id=png.stem, path=ctx.store(png, case_id, png.name),
                          caption=png.with_suffix(".txt").read_text(encoding="utf-8"))
                   for png in sorted(folder.glob("*.png"))]
        cases.append(Case(case_id=case_id, source=SourceName("teaching-folder"), license=ctx.spec["license"],
                          attribution=ctx.spec["attribution"], figures=figures,
                          history=(folder / "history.txt").read_text(encoding="utf-8")))
    return cases
'''
SPEC = '''# A teaching file kept as a folder per case (curation/ingest/teaching_folder.py).
license: "CC BY 4.0"
attribution: "Teaching folder of the test"
'''


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(cwd)}  # the copy's curation package, not the one installed
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)


def test_a_new_source_is_its_module_and_its_spec(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    tracked = subprocess.run(["git", "ls-files", "curation", "templates", "params.yaml"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    for name in tracked:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, repo / name)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@localhost"]
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], [*git, "commit", "-qm", "project"]):
        assert _run(cmd, repo).returncode == 0

    (repo / "curation/ingest/teaching_folder.py").write_text(MODULE, encoding="utf-8")
    (repo / "curation/ingest/specs/teaching-folder.yaml").write_text(SPEC, encoding="utf-8")
    raw = repo / "data/raw/teaching-folder"
    for case in ("case-17", "case-18"):
        (raw / case).mkdir(parents=True)
        (raw / case / "history.txt").write_text("A 61-year-old with a first seizure.", encoding="utf-8")
        Image.fromarray((np.arange(64 * 64).reshape(64, 64) % 251).astype(np.uint8)).save(raw / case / "f1.png")
        (raw / case / "f1.txt").write_text("Axial FLAIR: a right frontal lesion.", encoding="utf-8")

    py = [sys.executable, "-m", "curation.cli"]
    r = _run([*py, "ingest", "teaching-folder", "data/raw/teaching-folder", "data/interim/ingest/teaching-folder"],
             repo)
    assert r.returncode == 0, r.stderr[-2000:]
    cases = [json.loads(line) for line in (repo / "data/interim/ingest/teaching-folder/cases.jsonl").read_text(
        encoding="utf-8").splitlines()]
    assert [c["source"] for c in cases] == ["teaching-folder"] * 2
    assert all(c["figures"][0]["caption"] and c["license"] == "CC BY 4.0" for c in cases)
    r = _run([*py, "deid", "run", "data/interim/ingest", "data/interim/deid"], repo)
    assert r.returncode == 0, r.stderr[-2000:]
    assert len((repo / "data/interim/deid/cases.jsonl").read_text(encoding="utf-8").splitlines()) == 2

    r = _run(["git", "status", "--porcelain", "--untracked-files=all", "curation", "templates", "params.yaml"], repo)
    assert sorted(r.stdout.splitlines()) == ["?? curation/ingest/specs/teaching-folder.yaml",
                                             "?? curation/ingest/teaching_folder.py"], r.stdout
