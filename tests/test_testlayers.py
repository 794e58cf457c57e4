"""The test layers (tests/testlayers.py) on tests written here and run by pytester in this process: a unit test that
starts a process, opens a socket or runs git fails with a line naming it, whatever the test is called and even when it
catches the error; a test is in one layer; an integration test may cross the process boundary."""

from __future__ import annotations

import re

import pytest

PLUGIN = ("-p", "tests.testlayers", "-p", "no:cacheprovider")

# Named as if they were integration tests, and not marked: they are unit tests all the same. A fork the guard missed
# would be a copy of this pytest; its child ends at once.
REACHING_OUT = '''
import os, socket, subprocess, sys
from concurrent.futures import ProcessPoolExecutor

import pytest


def test_integration_python():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_integration_git():
    subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True)


def test_integration_connect():
    socket.create_connection(("127.0.0.1", 9), timeout=1)


def test_integration_bind():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))


def test_integration_fork():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def test_integration_pool():
    with ProcessPoolExecutor(1) as pool:
        assert pool.submit(abs, -1).result() == 1


def test_integration_shell():
    os.system("true")


def test_git_caught_and_ignored():
    try:
        subprocess.run(["git", "status"], capture_output=True)
    except BaseException:
        pass


@pytest.fixture(scope="module")
def built():
    subprocess.run(["git", "init", "-q", "elsewhere"])


def test_module_fixture_that_runs_git(built):
    pass


def test_pure(tmp_path):
    (tmp_path / "a").write_text("in one process")
'''


def test_a_unit_test_that_reaches_out_fails_naming_what_it_tried(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_integration_named=REACHING_OUT)
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(passed=1, failed=8, errors=1)
    result.stdout.fnmatch_lines_random([
        "*IsolationError: unit test starts a subprocess (`*python* -c pass`): unit tests touch no subprocess*",
        "*IsolationError: unit test runs git (`git rev-parse HEAD`)*",
        "*IsolationError: unit test opens a socket (connect ('127.0.0.1', 9))*",
        "*IsolationError: unit test opens a socket (bind ('127.0.0.1', 0))*",
        "*IsolationError: unit test starts a process (os.fork)*",
        "*IsolationError: unit test starts a process (multiprocessing)*",
        "*IsolationError: unit test starts a process (os.system)*",
        "*unit test runs git (`git status`) (and caught the IsolationError)*",
        "*IsolationError: unit test runs git (`git init -q elsewhere`)*",
        "*mark the test `@pytest.mark.integration` if it must*",
    ])
    assert not (pytester.path / "elsewhere").exists()


def test_every_test_is_in_exactly_one_layer(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("import pytest\n\n@pytest.fixture\ndef pipeline():\n    return None\n")
    pytester.makepyfile(test_layers_of='''
import pytest

def test_plain():
    pass

@pytest.mark.integration
def test_marked():
    pass

def test_on_the_pipeline(pipeline):
    pass
''')
    for marker, selected in (("unit", "test_plain"), ("integration", "test_marked"), ("e2e", "test_on_the_pipeline")):
        result = pytester.runpytest(*PLUGIN, "--collect-only", "-q", "-m", marker)
        result.stdout.fnmatch_lines([f"test_layers_of.py::{selected}", "1/3 tests collected (2 deselected)*"])
    pytester.makepyfile(test_two='import pytest\n\n@pytest.mark.integration\ndef test_both(pipeline):\n    pass\n')
    result = pytester.runpytest(*PLUGIN, "--collect-only", "-q", "test_two.py")
    result.stderr.fnmatch_lines(["*test_both uses pipeline but is also marked integration: a test is in one layer*"])


@pytest.mark.integration  # it starts a process, as the integration test it runs does
def test_an_integration_test_may_start_a_process(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_spawning='''
import subprocess, sys

import pytest

@pytest.mark.integration
def test_spawn():
    subprocess.run([sys.executable, "-c", "pass"], check=True)
''')
    pytester.runpytest(*PLUGIN).assert_outcomes(passed=1)


@pytest.mark.integration  # it starts xdist's worker processes
def test_the_e2e_layer_runs_as_two_groups_each_in_one_worker(pytester: pytest.Pytester) -> None:
    """``make test`` (``--dist loadgroup``): the tests on the demo pipeline share one worker, so the pipeline is built
    once; the rest of the e2e layer shares another; unit tests go wherever a worker is free."""
    pytester.makeconftest("import pytest\n\n@pytest.fixture(scope='session')\ndef pipeline():\n    return None\n")
    pytester.makepyfile(test_groups='''
import pytest

@pytest.mark.parametrize("n", range(4))
def test_on_the_pipeline(pipeline, n):
    pass

@pytest.mark.e2e
@pytest.mark.parametrize("n", range(3))
def test_on_the_corpus(n):
    pass

@pytest.mark.parametrize("n", range(6))
def test_unit(n):
    pass
''')
    result = pytester.runpytest(*PLUGIN, "-n", "2", "--dist", "loadgroup", "-v")
    result.assert_outcomes(passed=13)
    workers: dict[str, set[str]] = {}
    for line in result.stdout.lines:
        m = re.search(r"\[(gw\d)\] .*PASSED test_groups\.py::(test_on_the_\w+)", line)
        if m:
            workers.setdefault(m.group(2), set()).add(m.group(1))
    assert len(workers["test_on_the_pipeline"]) == 1 and len(workers["test_on_the_corpus"]) == 1, workers
    assert workers["test_on_the_pipeline"] != workers["test_on_the_corpus"], workers
