"""Each stage's code deps in dvc.yaml are the import closure of the ``curate`` command it runs (issue 52): a change to a
shared module reruns every stage that imports it. ``python scripts/dvc_code_deps.py --write`` regenerates them."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from scripts import dvc_code_deps as deps

from .conftest import ROOT

FIX = "python scripts/dvc_code_deps.py --write"


@pytest.fixture(scope="module")
def expected() -> dict[str, list[str]]:
    return deps.expected(ROOT)


def _covers(entries: list[str], path: str) -> bool:
    return any(path == e or path.startswith(e + "/") for e in entries)


def test_dvc_yaml_code_deps_are_each_stage_import_closure(expected: dict[str, list[str]]) -> None:
    declared = deps.declared(ROOT / "dvc.yaml")
    assert declared.keys() == expected.keys()
    for stage, want in expected.items():
        have = declared[stage]
        assert have == want, (f"stage {stage}: dvc.yaml lists {sorted(set(have) - set(want))} that it does not run "
                              f"and misses {sorted(set(want) - set(have))}; run `{FIX}`")


def test_dvc_yaml_is_as_the_command_writes_it(expected: dict[str, list[str]]) -> None:
    """The generated lines are in place too (``--write`` leaves dvc.yaml byte for byte as it is)."""
    text = (ROOT / "dvc.yaml").read_text(encoding="utf-8")
    assert deps.rewrite(text, expected) == text, f"run `{FIX}`"


def test_shared_modules_are_deps_of_the_stages_that_import_them(expected: dict[str, list[str]]) -> None:
    """The issue's cases: curation/io under deidentify and normalize (not extract, which never reads an image);
    schema.py, params.py, records.py and the ingest specs params.py reads under every stage."""
    for stage in ("deidentify", "normalize"):
        assert _covers(expected[stage], "curation/io/dicom.py"), stage
    assert not any(e.startswith("curation/io") for e in expected["extract"])
    for stage, entries in expected.items():
        for shared in ("curation/__init__.py", "curation/schema.py", "curation/params.py", "curation/records.py",
                       "curation/ingest/specs/adni.yaml", "curation/cli/stages.py"):
            assert _covers(entries, shared), (stage, shared)


def test_every_source_in_params_is_in_the_ingest_closure(expected: dict[str, list[str]]) -> None:
    """The registry imports each ingestor lazily: each module of a source named in params.yaml is a dep of ingest."""
    sources = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))["sources"]
    for source in sources:
        module = f"curation/ingest/{source.replace('-', '_')}.py"
        assert _covers(expected["ingest"], module), module
        assert _covers(expected["ingest"], f"curation/ingest/specs/{source}.yaml"), source


def test_every_data_file_under_curation_is_named_by_a_module() -> None:
    """A data file is found by its name in a module's strings: one that no module names could be read some other
    way the closure does not see (a path built from parts, a glob); name it, or teach the script."""
    modules, trees, data = deps._parsed(ROOT.resolve())
    named = set().union(*(deps._strings(t) for t in trees.values())) & data.keys()
    covered = {p for name in named for p in data[name]}
    orphans = {p for paths in data.values() for p in paths} - covered
    assert not orphans, sorted(p.relative_to(ROOT).as_posix() for p in orphans)


def _package(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_closure_follows_lazy_imports_and_only_the_command_that_runs(tmp_path: Path) -> None:
    _package(tmp_path, {
        "curation/__init__.py": "",
        "curation/cli/__init__.py": "from curation.cli import cmds\n",
        "curation/cli/__main__.py": "from curation.cli import main\n",
        "curation/cli/cmds.py": """\
            from curation.cli.common import helper

            @app.command()
            def a():
                from curation.stage import run

            @app.command()
            def b():
                from curation.other import run
            """,
        "curation/cli/common.py": "def helper():\n    from curation import errors\n",
        "curation/errors.py": "",
        "curation/stage.py": """\
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from curation.hinted import T
            else:
                from . import shared
            def run():
                from curation.pkg.sub import thing
            """,
        "curation/shared.py": "",
        "curation/hinted.py": "",
        "curation/other.py": "",
        "curation/pkg/__init__.py": "",
        "curation/pkg/sub.py": "from pathlib import Path\nTABLE = Path(__file__).with_name('table.yaml')\n",
        "curation/pkg/table.yaml": "a: 1\n",
        "curation/pkg/unread.yaml": "b: 2\n",
    })
    files = deps.closure(deps.Command("curation.cli.cmds", "a"), tmp_path)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in files) == [
        "curation/__init__.py", "curation/cli/__init__.py", "curation/cli/cmds.py", "curation/cli/common.py",
        "curation/errors.py", "curation/pkg/__init__.py", "curation/pkg/sub.py", "curation/pkg/table.yaml",
        "curation/shared.py", "curation/stage.py"]
    # the cli folder whole (its __main__.py aside: curate never imports it); pkg file by file (unread.yaml is not read)
    assert deps.compact(files, tmp_path) == [
        "curation/__init__.py", "curation/cli", "curation/errors.py", "curation/pkg/__init__.py",
        "curation/pkg/sub.py", "curation/pkg/table.yaml", "curation/shared.py", "curation/stage.py"]


def test_rewrite_replaces_only_the_code_deps() -> None:
    text = textwrap.dedent("""\
        stages:
          one:
            cmd: curate one
            deps:
              - data/in   # what it reads
              - curation/one
              - templates/x.yaml
            outs:
              - data/out
          two:
            foreach: [a, b]
            do:
              cmd: curate two ${item}
              deps:
                - data/${item}
              outs:
                - data/two/${item}
        """)
    out = deps.rewrite(text, {"one": ["curation/a.py", "curation/one"], "two": ["curation/b.py"]})
    assert out == textwrap.dedent(f"""\
        stages:
          one:
            cmd: curate one
            deps:
              - data/in   # what it reads
              {deps.GENERATED}
              - curation/a.py
              - curation/one
              - templates/x.yaml
            outs:
              - data/out
          two:
            foreach: [a, b]
            do:
              cmd: curate two ${{item}}
              deps:
                - data/${{item}}
                {deps.GENERATED}
                - curation/b.py
              outs:
                - data/two/${{item}}
        """)
    assert deps.rewrite(out, {"one": ["curation/a.py", "curation/one"], "two": ["curation/b.py"]}) == out
