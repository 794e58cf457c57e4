"""In a temp DVC project (the real dvc.yaml, placeholder data, the lock committed without running a stage): a change
to a shared module makes ``dvc status`` mark every stage that imports it and no other (issue 52); and what a fresh
interpreter loads for each stage's command is inside the closure that dvc.yaml lists."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from scripts import dvc_code_deps as deps

from .conftest import ROOT

pytestmark = pytest.mark.integration  # dvc and a fresh interpreter in subprocesses, git init
PROJECT_FILES = ["curation", "templates", "params.yaml", "dvc.yaml", ".dvc/config", ".dvc/.gitignore", ".dvcignore",
                 "data/review/annotations.json"]


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The project with a placeholder for each data dep and output, and a dvc.lock that ``dvc commit`` wrote: no stage
    runs, the lock records each code dep's hash as it is now."""
    from dvc.repo import Repo

    proj = tmp_path_factory.mktemp("project")
    for name in PROJECT_FILES:
        src, dst = ROOT / name, proj / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dst)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "DVC_NO_ANALYTICS": "1"}
    assert _run(["git", "init", "-q"], proj, env).returncode == 0
    with Repo(str(proj)) as repo:
        for stage in repo.index.stages:
            for entry in (*stage.deps, *stage.outs):
                path = Path(entry.fs_path)
                if path.exists() or not path.is_relative_to(proj):
                    continue
                if path.suffix in (".json", ".jsonl", ".md"):
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text("{}\n")
                else:
                    path.mkdir(parents=True)
                    (path / "placeholder").write_text("x\n")
    r = _run(["dvc", "commit", "--force", "--quiet"], proj, env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _status(proj, env) == {}
    return proj, env


def _status(proj: Path, env: dict[str, str]) -> dict[str, list[object]]:
    r = _run(["dvc", "status", "--json"], proj, env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout or "{}")


def _importers(proj: Path, rel: str) -> set[str]:
    """The stages whose closure holds ``rel``, computed from the imports, not from dvc.yaml's lists."""
    argv = deps.stage_argv(proj / "dvc.yaml")
    return {stage for stage, words in argv.items() if proj / rel in deps.closure(deps.command_of(words), proj)}


@pytest.mark.parametrize("rel", ["curation/io/dicom.py", "curation/schema.py"])
def test_a_changed_shared_module_marks_every_stage_that_imports_it(project: tuple[Path, dict[str, str]],
                                                                   rel: str) -> None:
    proj, env = project
    importers = _importers(proj, rel)
    assert {"deidentify", "normalize"} <= importers
    path = proj / rel
    original = path.read_bytes()
    try:
        path.write_bytes(original + b"\n# a change\n")
        changed = {key.split("@")[0] for key in _status(proj, env)}
    finally:
        path.write_bytes(original)
    assert changed == importers, f"marked changed {sorted(changed)}, import {rel}: {sorted(importers)}"
    if rel == "curation/schema.py":
        assert changed == set(deps.stage_argv(proj / "dvc.yaml")), "every stage reads records through schema.py"
    assert _status(proj, env) == {}


def test_bytecode_written_under_a_code_dep_is_no_change(project: tuple[Path, dict[str, str]]) -> None:
    """``curate`` run from the checkout writes __pycache__ into folders that stages list (a later stage importing one
    more module of curation/io would otherwise mark deidentify changed): curation/.dvcignore keeps them out."""
    proj, env = project
    cache = proj / "curation" / "io" / "__pycache__"
    cache.mkdir()
    try:
        (cache / "volumes.cpython-311.pyc").write_bytes(b"bytecode")
        assert _status(proj, env) == {}
    finally:
        shutil.rmtree(cache)


def test_what_a_fresh_interpreter_loads_for_a_stage_is_in_its_closure() -> None:
    """The import half of the closure, checked against Python itself: ``curate``'s own module and what the stage's
    command imports, loaded in a fresh interpreter; every curation module it ends with must be in the closure (which
    also holds what functions import lazily, so it is the larger)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for stage, words in deps.stage_argv(ROOT / "dvc.yaml").items():
        command = deps.command_of(words)
        fn = getattr(importlib.import_module(command.module), command.function)
        body = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        entry = sorted({n.module for n in ast.walk(body) if isinstance(n, ast.ImportFrom) and n.module})
        code = (f"import sys, curation.cli\nfor m in {entry!r}: __import__(m)\n"
                "print('\\n'.join(m.__file__ for n, m in list(sys.modules.items()) if n.split('.')[0] == 'curation'))")
        r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=300, check=False)
        assert r.returncode == 0, r.stderr[-2000:]
        loaded = {Path(line).resolve() for line in r.stdout.split()}
        missing = loaded - {p.resolve() for p in deps.closure(command, ROOT)}
        assert not missing, (stage, sorted(p.relative_to(ROOT).as_posix() for p in missing))
