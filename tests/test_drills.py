"""Reliability drills: killed stages and a flaky LLM endpoint (a corpus full of malformed inputs is
tests/test_pipeline_dvc.py's, through `dvc repro`)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from curation.jsonio import read_jsonl
from curation.params import LlmParams, load_params
from curation.schema import Item
from curation.testing.openai_server import OpenAIServer, Reply

from .conftest import ROOT, demo_subset, ingest_subset
from .scripted_llm import generation_responder

CURATE = str(Path(sys.executable).with_name("curate"))


def tree_digest(root: Path) -> dict[str, str]:
    """Checksums of every file; record files have their own output path written as OUT (runs differ only there)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            if p.suffix in (".jsonl", ".json"):
                data = data.replace(str(root).encode(), b"OUT")
            out[p.relative_to(root).as_posix()] = hashlib.sha256(data).hexdigest()
    return out


def env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **extra}


def kill_midway(cmd: list[str], cwd: Path, out: Path, ready, e: dict[str, str], timeout: float = 300) -> None:
    """Start ``cmd``, SIGKILL it as soon as ``ready()`` says it is midway, and check nothing half-written shows."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and proc.poll() is None and not ready():
            time.sleep(0.05)
        assert proc.poll() is None, "the stage finished before it could be killed midway"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not out.exists(), "a killed stage must leave no output at its output path"


def building(out: Path, min_files: int = 1):
    def ready() -> bool:
        return any(sum(1 for _ in d.rglob("*")) >= min_files for d in out.parent.glob(f".{out.name}.*.building"))

    return ready


@pytest.mark.parametrize(("stage", "src"), [("normalize", "deid"), ("deid", "ingest")])
def test_sigkill_midway_then_rerun_matches_an_uninterrupted_run(pipeline, tmp_path, stage, src):
    params = str(ROOT / "params.yaml")
    e = env()
    a, b = tmp_path / "a" / "out", tmp_path / "b" / "out"

    def cmd(out: Path) -> list[str]:
        return [CURATE, *(["deid", "run"] if stage == "deid" else [stage]), src, str(out), "--params", params,
                *(["--workers", "2"] if stage == "normalize" else [])]

    # records hold paths relative to the project, so the stage runs in the project's folder, on a case of each kind
    # (the whole demo would take minutes three times over)
    subset = demo_subset(pipeline, src, tmp_path / "project") if stage == "normalize" else ingest_subset(
        pipeline, tmp_path / "project")
    project = subset.parent
    kill_midway(cmd(a), project, a, building(a, 3), e)
    for out in (a, b):
        r = subprocess.run(cmd(out), cwd=project, env=e, capture_output=True, text=True, check=False)
        assert r.returncode == 0, r.stderr
    assert not list(a.parent.glob(".out.*")), "leftovers of the killed run are cleaned up"
    assert tree_digest(a) == tree_digest(b)


def test_sigkill_generate_with_llm_then_rerun_is_identical(pipeline, tmp_path):
    slow = generation_responder()
    with OpenAIServer(lambda body, n: (lambda r: Reply(r.content, r.status, 0.05))(slow(body, n))) as server:
        e = env(CURATION_LLM_BASE_URL=server.base_url, CURATION_LLM_MODEL="local-test")
        prm = tmp_path / "params.yaml"
        p = load_params(ROOT / "params.yaml")
        p.generate.templates_dir = str(ROOT / p.generate.templates_dir)
        p.generate.knowledge = str(ROOT / p.generate.knowledge)
        p.generate.diagnoses = str(ROOT / p.generate.diagnoses)
        p.generate.prompts_dir = str(ROOT / p.generate.prompts_dir)
        p.llm.concurrency = 2
        prm.write_text(json.dumps({"generate": p.generate.model_dump(), "llm": p.llm.model_dump()}))
        cmd = [CURATE, "generate", str(pipeline / "extract"), "out", "--params", str(prm)]
        a, b = tmp_path / "a", tmp_path / "b"
        a.mkdir()
        b.mkdir()
        kill_midway(cmd, a, a / "out", lambda: server.calls >= 20, e)
        calls_before = server.calls
        r = subprocess.run(cmd, cwd=a, env=e, capture_output=True, text=True, check=False)
        assert r.returncode == 0, r.stderr
        resumed = server.calls - calls_before
        server.reset()
        r = subprocess.run(cmd, cwd=b, env=e, capture_output=True, text=True, check=False)
        assert r.returncode == 0, r.stderr
        full = server.calls
    assert (a / "out" / "items.jsonl").read_bytes() == (b / "out" / "items.jsonl").read_bytes()
    assert resumed < full, "answers cached before the kill are not asked again"


def test_flaky_llm_endpoint_stage_finishes_with_bounded_retries(pipeline, tmp_path, monkeypatch):
    from curation.generate.stage import run

    monkeypatch.chdir(pipeline)
    good = generation_responder()
    seen: dict[str, int] = {}

    def flaky(body, n):
        key = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).hexdigest()
        seen[key] = seen.get(key, 0) + 1
        bucket = int(key[:8], 16) % 20
        if bucket < 2:
            return Reply(status=500)  # always fails
        if bucket < 4:
            return Reply("Here you go: {definitely not json")  # garbage, not retried
        if bucket < 6 and seen[key] == 1:
            return Reply(status=429)  # recovers on retry
        if bucket < 7 and seen[key] == 1:
            # times out once, then recovers: late by six times the client's timeout, so that an event loop busy
            # with a batch's other replies cannot read it before its timeout fires (1 s against 0.5 s did, once)
            return Reply('{"late": true}', delay=3.0)
        return good(body, n)

    p = load_params(ROOT / "params.yaml").generate
    p.templates_dir, p.knowledge, p.prompts_dir, p.diagnoses = (
        str(ROOT / x) for x in (p.templates_dir, p.knowledge, p.prompts_dir, p.diagnoses))
    with OpenAIServer(flaky) as server:
        llm = LlmParams(base_url=server.base_url, model="local-test", max_retries=2, backoff_s=0.01, timeout_s=0.5,
                        cache_dir=str(tmp_path / "cache"))
        report = run(p, pipeline / "extract", tmp_path / "out", llm=llm)
        requests = len(seen)
        assert server.calls <= 3 * requests, "retries are bounded by max_retries"
        failures = list(read_jsonl(tmp_path / "out" / "llm_failures.jsonl"))
        kinds = {f["error"] for f in failures}
        assert kinds <= {"http_500", "malformed_json"} and "http_500" in kinds
        assert report.metrics["llm_retries"] > 0
        assert len(list(read_jsonl(tmp_path / "out" / "items.jsonl", Item))) >= len(
            list(read_jsonl(pipeline / "generate" / "items.jsonl", Item)))
        # with the endpoint healthy again, only the failed calls are made: every good answer was cached (at least one
        # call for each distinct failed request, at most one for each failed item: two items may ask the very same
        # thing, which one cache entry serves once it is answered)
        failed = {k for k in seen if int(k[:8], 16) % 20 < 4}
        server.set_responder(good)
        server.reset()
        run(p, pipeline / "extract", tmp_path / "again", llm=llm)
        assert len(failed) <= server.calls <= len(failures)
