"""Test layers (a pytest plugin, loaded by conftest.py): which layer each test is in, and the unit layer's guard.

Three layers, one marker each (declared in pyproject.toml), set here at collection:
- e2e: builds the demo corpus, runs the whole pipeline or starts Label Studio: every test that requests one of
  E2E_FIXTURES (conftest.py), and those marked ``e2e`` (``dvc repro``, real heads through every stage);
- integration: marked ``integration`` by hand: crosses the process boundary (subprocesses, process pools, local HTTP
  servers, git) or runs a real image registration (ANTs, the defacing fit);
- unit: every other test. ``make test-fast`` runs ``-m unit``; ``make test`` runs all three.

A unit test runs in its own process and nowhere else: one that starts a process (``subprocess``, ``os.fork``,
``os.posix_spawn``, ``os.system``, ``multiprocessing``, a process pool), opens a socket (``connect``/``bind``) or runs
git fails with a line naming what it tried. The guard goes by what the test does, not by its name or its module's:
moving such a test to the integration layer takes an explicit ``@pytest.mark.integration``. The guard raises an
``IsolationError``, a ``BaseException``, so the library's ``except Exception`` (a stage counting a bad record and going
on) does not swallow it, and a test that catches it anyway still fails: every attempt is recorded and reported.
"""

from __future__ import annotations

import json
import multiprocessing.process
import os
import shlex
import socket
import subprocess
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest

LAYERS = ("unit", "integration", "e2e")
E2E_FIXTURES = {"demo_raw", "raw_copy", "pipeline", "label_studio"}  # conftest.py's demo corpus, pipeline and server


def layer(item: pytest.Item) -> str:
    marked = {m.name for m in item.iter_markers() if m.name in LAYERS}
    demo = sorted(E2E_FIXTURES & set(getattr(item, "fixturenames", ())))
    found = "e2e" if demo or "e2e" in marked else "integration" if "integration" in marked else "unit"
    if marked - {found}:
        why = f"uses {', '.join(demo)}" if demo else f"is marked {found}"
        raise pytest.UsageError(f"{item.nodeid} {why} but is also marked {', '.join(sorted(marked - {found}))}: a "
                                "test is in one layer (tests/testlayers.py)")
    return found


# Under pytest-xdist (``make test``: ``--dist loadgroup``) the e2e layer runs as two groups, each in one worker: the
# tests of the demo pipeline and its Label Studio (one build of each, ~10 minutes, shared by half the layer), and the
# rest (the corpus, ``dvc repro`` projects, real-data layouts). The unit and integration layers are spread over
# whatever worker is free, beside them. xdist's own loadgroup reads an ``xdist_group`` mark into the node id, which
# pytest 9.2's node ids no longer take; so each worker writes the groups it collected to a folder the controller
# names (GROUPS_ENV), and the controller's scheduler (E2EGroups) reads them.
PIPELINE_FIXTURES = {"pipeline", "label_studio"}
GROUPS_ENV = "MEDBENCH_TEST_GROUPS"


def e2e_group(item: pytest.Item) -> str:
    return "pipeline" if PIPELINE_FIXTURES & set(getattr(item, "fixturenames", ())) else "corpus"


@pytest.hookimpl(tryfirst=True)  # before pytest's -m deselection reads the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups = {}
    for item in items:
        name = layer(item)
        if not item.get_closest_marker(name):
            item.add_marker(getattr(pytest.mark, name))
        if name == "e2e":
            groups[item.nodeid] = e2e_group(item)
    worker = getattr(config, "workerinput", None)  # this session's own worker (not a pytester run inside one)
    folder = os.environ.get(GROUPS_ENV)
    if worker and folder:
        tmp = Path(folder) / f".{worker['workerid']}.json"
        tmp.write_text(json.dumps(groups), encoding="utf-8")
        tmp.replace(Path(folder) / f"{worker['workerid']}.json")


GROUPS_FOLDER = pytest.StashKey[tuple[Path, "str | None"]]()  # the folder, and GROUPS_ENV's value before it


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("dist", None) == "loadgroup" and not hasattr(config, "workerinput"):
        import tempfile

        folder = Path(tempfile.mkdtemp(prefix="medbench-test-groups-"))
        config.stash[GROUPS_FOLDER] = (folder, os.environ.get(GROUPS_ENV))
        os.environ[GROUPS_ENV] = str(folder)  # the workers, started after this, inherit it


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup" or GROUPS_FOLDER not in config.stash:
        return None
    from xdist.scheduler import LoadGroupScheduling

    folder = config.stash[GROUPS_FOLDER][0]

    class E2EGroups(LoadGroupScheduling):
        """loadgroup with the groups the workers collected: an e2e test goes with its group, any other test alone.
        xdist schedules the largest groups first, one to a worker."""

        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # read once, when every worker has collected (xdist schedules only then)
                self.groups = {}
                for f in sorted(folder.glob("gw*.json")):
                    self.groups.update(json.loads(f.read_text(encoding="utf-8")))
            return f"@{self.groups[nodeid]}" if nodeid in self.groups else super()._split_scope(nodeid)

    return E2EGroups(config, log)


def pytest_unconfigure(config: pytest.Config) -> None:
    if GROUPS_FOLDER in config.stash:
        import shutil

        folder, before = config.stash[GROUPS_FOLDER]
        shutil.rmtree(folder, ignore_errors=True)
        if before is None:
            os.environ.pop(GROUPS_ENV, None)
        else:
            os.environ[GROUPS_ENV] = before


HINT = "unit tests touch no subprocess, socket or git; mark the test `@pytest.mark.integration` if it must"


class IsolationError(BaseException):
    """A unit test reached outside its process."""


class Guard:
    """Patches the ways out of the process while active and records every attempt."""

    def __init__(self) -> None:
        self.attempts: list[str] = []

    def refuse(self, what: str) -> IsolationError:
        self.attempts.append(what)
        return IsolationError(f"unit test {what}: {HINT}")

    def take(self) -> list[str]:
        attempts, self.attempts = self.attempts, []
        return attempts

    def install(self, mp: pytest.MonkeyPatch) -> None:
        guard = self

        def popen_init(self: subprocess.Popen[Any], args: Any, *a: Any, **kw: Any) -> None:
            raise guard.refuse(_describe_command(args))

        def refusing(what: str) -> Callable[..., Any]:
            def refused(*a: Any, **kw: Any) -> Any:
                raise guard.refuse(what)

            return refused

        def socket_call(verb: str) -> Callable[..., Any]:
            def refused(self: socket.socket, address: Any, *a: Any, **kw: Any) -> Any:
                raise guard.refuse(f"opens a socket ({verb} {address!r})")

            return refused

        mp.setattr(subprocess.Popen, "__init__", popen_init)
        for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
            if hasattr(os, name):
                mp.setattr(os, name, refusing(f"starts a process (os.{name})"))
        mp.setattr(multiprocessing.process.BaseProcess, "start", refusing("starts a process (multiprocessing)"))
        for verb in ("connect", "connect_ex", "bind"):
            mp.setattr(socket.socket, verb, socket_call(verb))


def _describe_command(args: Any) -> str:
    argv = [args] if isinstance(args, str | bytes | os.PathLike) else list(args)
    shown = " ".join(shlex.quote(os.fsdecode(a)) for a in argv)[:200]
    first = os.fsdecode(argv[0]).split()[0] if argv else ""
    if Path(first).name == "git":
        return f"runs git (`{shown}`)"
    return f"starts a subprocess (`{shown}`)"


GUARD = pytest.StashKey[Guard]()


def _guarded(item: pytest.Item) -> Generator[None, Any, Any]:
    """Around a unit test's setup and call rather than in an autouse fixture: a function-scoped fixture starts after
    the module- and session-scoped ones, so a module fixture building a release (which runs git) would escape it.
    Teardown is left alone: the last test of a module or session also tears down what other layers' tests set up
    (stopping a server, a database cluster), which is not this test's doing."""
    if item.get_closest_marker("unit") is None:
        return (yield)
    guard = item.stash.setdefault(GUARD, Guard())
    with pytest.MonkeyPatch.context() as mp:
        guard.install(mp)
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, Any, Any]:
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """A phase that passed although the guard refused something (the test caught the ``IsolationError``) fails."""
    report = yield
    guard = item.stash.get(GUARD, None)
    attempts = guard.take() if guard is not None else []
    if attempts and report.passed:
        report.outcome = "failed"
        report.longrepr = "\n".join(f"unit test {a} (and caught the IsolationError): {HINT}" for a in attempts)
    return report
