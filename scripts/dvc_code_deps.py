"""The code deps of each DVC stage: every module under curation/ that its ``curate`` command runs, and the data files
those modules read there, so that a change to a shared module (``curation/io``, ``schema.py``) reruns each stage
that imports it, and no other.

    python scripts/dvc_code_deps.py           # check: exit 1 naming each stage whose curation/ deps differ
    python scripts/dvc_code_deps.py --write   # rewrite the curation/ entries of each stage's deps in dvc.yaml

Run ``--write`` after adding, moving or importing a module, or adding a data file under curation/. The closure is
read from the source with ``ast``, not by importing it: an import inside a function counts (it runs when the function
does), one under ``if TYPE_CHECKING:`` does not. The command is the one the stage's ``cmd`` names, found in the
``curate`` app; in the CLI's modules only that command's body counts, not the other commands beside it. A data file
(any file under curation/ that is not Python, or a folder holding no Python) counts when a module of the closure
names it in a string (``with_name("leak_rules.yaml")``, ``joinpath("ingest", "specs", ...)``). A package that walks
its own folder (its ``__init__`` hands on its ``__path__``, to ``pkgutil.iter_modules`` or to a helper that walks it:
a registry, such as ``quality/item_gates``) imports every module in it. A
folder whose every file is in the closure is listed as the folder, which DVC hashes as one dependency.

The unit is the module: all its imports count, those in a function the stage never calls too (release build lists
deid, imaging and ingest because release.rebuild, which it imports, imports them in its own ``run``). A superset is
safe, a stage reruns at worst for nothing; following calls would need a call graph that dynamic code defeats.
"""

from __future__ import annotations

import argparse
import ast
import functools
import inspect
import re
import shlex
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import typer
import typer.main
import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
PACKAGE = "curation"
CLI = "curation.cli"  # what the ``curate`` script imports (pyproject.toml: curate = "curation.cli:main")
# never a dependency: what Python writes as it imports (curation/.dvcignore keeps them out of DVC's folder hashes),
# and that ignore file itself
SKIPPED = ("__pycache__", ".dvcignore")
# ``python -m curation.cli``'s entry, which ``curate`` never imports: a folder may be listed whole without it
ENTRY_ONLY = "__main__.py"
GENERATED = "# curation/ deps: the code the stage runs (python scripts/dvc_code_deps.py --write)"


@dataclass(frozen=True)
class Command:
    """A ``curate`` command: the module that defines it and the function's name there."""

    module: str
    function: str


def _files(root: Path) -> list[Path]:
    """Every file under ``root`` that DVC would hash in a folder dependency."""
    return sorted(p for p in root.rglob("*") if p.is_file() and not set(p.relative_to(root).parts) & set(SKIPPED)
                  and p.suffix not in (".pyc", ".pyo"))


def _modules(root: Path) -> dict[str, Path]:
    """Module name -> its file, for every module of the package."""
    found = {}
    for path in _files(root / PACKAGE):
        if path.suffix == ".py":
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk(node: ast.AST, skip: set[str]) -> Iterator[ast.AST]:
    """Every node under ``node`` that runs at some point: not the bodies of ``if TYPE_CHECKING:``, nor the top-level
    functions named in ``skip`` (the CLI's other commands)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            yield from (n for stmt in child.orelse for n in (stmt, *_walk(stmt, skip)))
            continue
        if isinstance(node, ast.Module) and isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) \
                and child.name in skip:
            continue
        yield child
        yield from _walk(child, skip)


def _imported(name: str, path: Path, tree: ast.Module, skip: set[str], modules: dict[str, Path]) -> set[str]:
    """The package's modules that the module ``name`` imports (with the packages above each, whose __init__ runs)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in _walk(tree, skip):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in node.names)
    if path.name == "__init__.py" and any(isinstance(n, ast.Name) and n.id == "__path__" for n in ast.walk(tree)):
        # a registry (quality/item_gates): the package imports each module beside it by walking its own folder
        out.update(m for m in modules if m.rpartition(".")[0] == name)
    closed: set[str] = set()
    for mod in out:
        parts = mod.split(".")
        closed.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return {m for m in closed if m in modules}


def _strings(tree: ast.Module) -> set[str]:
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def _data_entries(root: Path) -> dict[str, list[Path]]:
    """A name a module may use for data it reads -> the files it covers: each file that is not Python, and each
    folder that holds no Python (a folder of specs read by a name built at run time)."""
    entries: dict[str, list[Path]] = {}
    files = _files(root / PACKAGE)
    for path in files:
        if path.suffix != ".py":
            entries.setdefault(path.name, []).append(path)
    for folder in {p.parent for p in files}:
        inside = [p for p in files if folder in p.parents]
        if not any(p.suffix == ".py" for p in inside):
            entries.setdefault(folder.name, []).extend(inside)
    return entries


def command_of(argv: list[str]) -> Command:
    """The function that ``curate <argv...>`` runs, looked up in the ``curate`` app: its commands, then its groups
    (a group added without a name lends its commands to the level above)."""
    from curation.cli import app

    found = _find(app, list(argv))
    if found is None:
        raise LookupError(f"no curate command for {' '.join(argv)!r}")
    return found


def _find(group: typer.Typer, rest: list[str]) -> Command | None:
    for info in group.registered_commands:
        assert info.callback is not None
        if rest and (info.name or typer.main.get_command_name(info.callback.__name__)) == rest[0]:
            fn = inspect.unwrap(info.callback)
            return Command(fn.__module__, fn.__name__)
    for sub in group.registered_groups:
        named = isinstance(sub.name, str)  # unnamed, typer keeps a placeholder there
        if sub.typer_instance is not None and (not named or (rest and sub.name == rest[0])):
            found = _find(sub.typer_instance, rest[1:] if named else rest)
            if found is not None:
                return found
    return None


def _skipped(name: str, tree: ast.Module, command: Command) -> set[str]:
    """In the CLI's modules, the commands other than ``command`` (decorated top-level functions): they do not run."""
    if name != CLI and not name.startswith(CLI + "."):
        return set()
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.decorator_list
            and not (name == command.module and n.name == command.function)}


@functools.cache
def _parsed(root: Path) -> tuple[dict[str, Path], dict[str, ast.Module], dict[str, list[Path]]]:
    modules = _modules(root)
    trees = {name: ast.parse(path.read_text(encoding="utf-8"), str(path)) for name, path in modules.items()}
    return modules, trees, _data_entries(root)


def closure(command: Command, root: Path = ROOT) -> set[Path]:
    """The files under curation/ that running ``command`` through ``curate`` executes or reads: the modules it imports,
    transitively, from the ``curate`` script's own module, and the data files they name."""
    modules, trees, data = _parsed(root.resolve())
    seen: set[str] = set()
    todo = [CLI, command.module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(_imported(name, modules[name], trees[name], _skipped(name, trees[name], command), modules))
    files = {modules[name] for name in seen}
    for name in seen:
        for text in _strings(trees[name]) & data.keys():
            files.update(data[text])
    return files


def compact(files: Iterable[Path], root: Path = ROOT) -> list[str]:
    """``files`` as dvc.yaml deps, relative to ``root``: a folder in place of its files where all of them are there
    (but for a ``__main__.py``)."""
    root = root.resolve()
    chosen = set(files)
    covered: dict[Path, bool] = {}
    top = root / PACKAGE

    def full(folder: Path) -> bool:
        if folder not in covered:
            kids = [k for k in folder.iterdir() if k.name not in (*SKIPPED, ENTRY_ONLY)
                    and k.suffix not in (".pyc", ".pyo")]
            covered[folder] = all(full(k) if k.is_dir() else k in chosen for k in kids) and bool(kids)
        return covered[folder]

    out = set()
    for path in chosen:
        entry = path
        while entry.parent != top.parent and full(entry.parent):
            entry = entry.parent
        out.add(entry.relative_to(root).as_posix())
    return sorted(out)


def stage_argv(dvc_yaml: Path) -> dict[str, list[str]]:
    """Stage name -> the arguments after ``curate`` in its cmd (a ``foreach`` stage once, under its own name)."""
    stages = yaml.safe_load(dvc_yaml.read_text(encoding="utf-8"))["stages"]
    out = {}
    for name, stage in stages.items():
        words = shlex.split(" ".join((stage.get("do") or stage)["cmd"].split()))
        if words[0] != "curate":
            raise ValueError(f"stage {name}: its cmd does not start with curate: {words[0]!r}")
        out[name] = words[1:]
    return out


def expected(root: Path = ROOT) -> dict[str, list[str]]:
    """Stage name -> its curation/ deps as they should be: the compact closure of the command its cmd runs."""
    argv = stage_argv(root / "dvc.yaml")
    return {name: compact(closure(command_of(words), root), root) for name, words in argv.items()}


def declared(dvc_yaml: Path) -> dict[str, list[str]]:
    """Stage name -> the curation/ deps dvc.yaml lists for it."""
    stages = yaml.safe_load(dvc_yaml.read_text(encoding="utf-8"))["stages"]
    return {name: sorted(d for d in (stage.get("do") or stage).get("deps", []) if _is_code(d))
            for name, stage in stages.items()}


def _is_code(dep: str) -> bool:
    return dep == PACKAGE or dep.startswith(PACKAGE + "/")


_STAGE = re.compile(r"^  (?P<name>[A-Za-z0-9_-]+):\s*$")
_DEPS = re.compile(r"^(?P<indent>\s+)deps:\s*$")


def rewrite(text: str, deps: dict[str, list[str]]) -> str:
    """dvc.yaml's text with each stage's curation/ deps replaced by ``deps[stage]`` (one line each, after a comment
    saying where they come from, where the old ones were or else at the end of the list); every other line kept."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    stage: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if (m := _STAGE.match(line)) is not None:
            stage = m["name"]
        m = _DEPS.match(line)
        if m is None or stage not in deps:
            out.append(line)
            i += 1
            continue
        out.append(line)
        i += 1
        body: list[str] = []
        while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > len(m["indent"])):
            body.append(lines[i])
            i += 1
        item = " " * (len(m["indent"]) + 2)
        new = [f"{item}{GENERATED}\n", *(f"{item}- {d}\n" for d in deps[stage])]
        kept: list[str] = []
        for row in body:
            value = row.strip()
            if value == GENERATED or (value.startswith("- ") and _is_code(value[2:].split("#")[0].strip())):
                if new:
                    kept.extend(new)
                    new = []
                continue
            kept.append(row)
        if new:
            tail = len(kept)
            while tail and not kept[tail - 1].strip():
                tail -= 1
            kept[tail:tail] = new
        out.extend(kept)
        stage = None
    return "".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite dvc.yaml's curation/ deps")
    parser.add_argument("--root", type=Path, default=ROOT, help="the project (default: this checkout)")
    args = parser.parse_args(argv)
    dvc_yaml = args.root / "dvc.yaml"
    want, have = expected(args.root), declared(dvc_yaml)
    stale = sorted(name for name in want if want[name] != have.get(name))
    if args.write:
        dvc_yaml.write_text(rewrite(dvc_yaml.read_text(encoding="utf-8"), want), encoding="utf-8")
        print(f"{dvc_yaml}: rewrote the code deps of {', '.join(stale) or 'no stage'}")
        return 0
    for name in stale:
        print(f"{name}: missing {sorted(set(want[name]) - set(have.get(name, [])))}, "
              f"extra {sorted(set(have.get(name, [])) - set(want[name]))}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
