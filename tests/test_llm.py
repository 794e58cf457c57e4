"""The shared LLM client against a real local HTTP server, through the real ``openai`` client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from curation.errors import ParamsError
from curation.llm import LLMClient, Request, load_prompt, not_configured
from curation.params import LlmParams
from curation.testing.openai_server import OpenAIServer, Reply, fixed

SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}


@pytest.fixture
def server():
    with OpenAIServer(fixed('{"x": 1}')) as s:
        yield s


def client(server: OpenAIServer, tmp_path: Path, **kw) -> LLMClient:
    p = LlmParams(base_url=server.base_url, model="local-test", backoff_s=0.01, backoff_max_s=0.05, **kw)
    return LLMClient(p, cache_dir=tmp_path / "cache")


def req(i: int) -> Request:
    return Request(messages=[{"role": "user", "content": f"question {i}"}], schema=SCHEMA, prompt_id="t",
                   prompt_version=1)


@pytest.mark.integration  # a local HTTP server
def test_success_then_cache_makes_zero_calls(server, tmp_path):
    c = client(server, tmp_path)
    first = c.run([req(i) for i in range(10)])
    assert all(r.ok and r.value == {"x": 1} and not r.cached for r in first)
    assert server.calls == 10 and c.usage.calls == 10
    assert c.usage.prompt_tokens > 0 and c.usage.completion_tokens > 0
    again = client(server, tmp_path)  # a fresh process would see the same on-disk cache
    second = again.run([req(i) for i in range(10)])
    assert server.calls == 10, "a re-run must not call the endpoint"
    assert all(r.cached and r.value == {"x": 1} for r in second)
    assert again.usage.cache_hits == 10 and again.usage.calls == 0


@pytest.mark.integration  # a local HTTP server
def test_cache_key_covers_model_prompt_version_and_parameters(server, tmp_path):
    c = client(server, tmp_path)
    base = req(0)
    keys = {c.key(base)}
    keys.add(c.key(Request(messages=base.messages, schema=SCHEMA, prompt_id="t", prompt_version=2)))
    keys.add(c.key(Request(messages=base.messages, schema=SCHEMA, prompt_id="t", prompt_version=1, temperature=0.7)))
    keys.add(c.key(Request(messages=base.messages, schema=SCHEMA, prompt_id="t", prompt_version=1, model="other")))
    assert len(keys) == 4


@pytest.mark.integration  # a local HTTP server
def test_malformed_json_is_recorded_with_raw_text_and_not_cached(server, tmp_path):
    server.set_responder(fixed("this is not JSON {"))
    c = client(server, tmp_path)
    [r] = c.run([req(0)])
    assert not r.ok and r.error == "malformed_json" and r.text == "this is not JSON {"
    assert c.usage.failures["malformed_json"] == 1
    [r2] = client(server, tmp_path).run([req(0)])
    assert not r2.cached and server.calls == 2, "a bad answer is asked again, never served from the cache"


@pytest.mark.integration  # a local HTTP server
def test_schema_violation_and_check_rejection(server, tmp_path):
    server.set_responder(fixed('{"x": "one"}'))
    c = client(server, tmp_path)
    [r] = c.run([req(0)])
    assert (r.error, r.error_detail) == ("schema_violation", "x")
    server.set_responder(fixed('{"x": 3}'))
    odd = Request(messages=[{"role": "user", "content": "q"}], schema=SCHEMA,
                  check=lambda v: "odd" if v["x"] % 2 else None)
    [r] = c.run([odd])
    assert not r.ok and (r.error, r.error_detail) == ("rejected", "odd")


@pytest.mark.integration  # a local HTTP server
def test_429_and_500_are_retried_with_backoff(server, tmp_path):
    server.set_responder(lambda body, n: Reply(status=429) if n <= 2
                         else (Reply(status=503) if n == 3 else Reply('{"x": 2}')))
    c = client(server, tmp_path)
    [r] = c.run([req(0)])
    assert r.ok and r.value == {"x": 2}
    assert server.calls == 4 and c.usage.retries == 3


@pytest.mark.integration  # a local HTTP server
def test_retries_are_bounded(server, tmp_path):
    server.set_responder(lambda body, n: Reply(status=500))
    c = client(server, tmp_path, max_retries=2)
    [r] = c.run([req(0)])
    assert not r.ok and r.error == "http_500"
    assert server.calls == 3 and c.usage.failures["http_500"] == 1


@pytest.mark.integration  # a local HTTP server
def test_timeout_is_retried(server, tmp_path):
    server.set_responder(lambda body, n: Reply('{"x": 5}', delay=1.0 if n == 1 else 0))
    c = client(server, tmp_path, timeout_s=0.3)
    [r] = c.run([req(0)])
    assert r.ok and r.value == {"x": 5} and c.usage.retries == 1


@pytest.mark.integration  # a local HTTP server
def test_dropped_connection_is_retried(server, tmp_path):
    server.set_responder(lambda body, n: Reply(drop=True) if n == 1 else Reply('{"x": 6}'))
    c = client(server, tmp_path)
    [r] = c.run([req(0)])
    assert r.ok and r.value == {"x": 6}


@pytest.mark.integration  # a local HTTP server
def test_corrupted_cache_entry_is_detected_and_refetched(server, tmp_path):
    c = client(server, tmp_path)
    [r] = c.run([req(0)])
    path = c.cache.path(r.key)
    entry = json.loads(path.read_text())
    entry["body"]["choices"][0]["message"]["content"] = '{"x": 999}'  # tampered, checksum no longer matches
    path.write_text(json.dumps(entry))
    c2 = client(server, tmp_path)
    [r2] = c2.run([req(0)])
    assert r2.value == {"x": 1} and not r2.cached and c2.cache.corrupt == 1
    path.write_text(path.read_text()[:20])  # truncated
    c3 = client(server, tmp_path)
    [r3] = c3.run([req(0)])
    assert r3.ok and c3.cache.corrupt == 1 and server.calls == 3


@pytest.mark.integration  # a local HTTP server
def test_cost_accounting(server, tmp_path):
    c = client(server, tmp_path, price_per_1k_prompt=1.0, price_per_1k_completion=2.0)
    c.run([req(0)])
    m = c.usage.as_metrics()
    assert m["llm_cost_usd"] == pytest.approx(m["llm_prompt_tokens"] / 1000 + 2 * m["llm_completion_tokens"] / 1000)


@pytest.mark.integration  # a local HTTP server
def test_concurrency_is_bounded(server, tmp_path):
    import threading

    lock, live, peak = threading.Lock(), [0], [0]

    def slow(body, n):
        with lock:
            live[0] += 1
            peak[0] = max(peak[0], live[0])
        import time

        time.sleep(0.05)
        with lock:
            live[0] -= 1
        return Reply('{"x": 1}')

    server.set_responder(slow)
    c = client(server, tmp_path, concurrency=4)
    assert all(r.ok for r in c.run([req(i) for i in range(24)]))
    assert peak[0] == 4


def test_not_configured_says_why(monkeypatch):
    monkeypatch.delenv("CURATION_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("CURATION_LLM_MODEL", raising=False)
    assert "llm.base_url" in not_configured(LlmParams())
    assert "llm.model" in not_configured(LlmParams(base_url="http://127.0.0.1:1/v1"))
    with pytest.raises(ParamsError):
        LLMClient(LlmParams())


def test_every_shipped_prompt_loads_and_renders():
    root = Path(__file__).resolve().parents[1] / "templates" / "prompts"
    names = sorted(p.stem for p in root.glob("*.yaml"))
    assert names == ["caption_questions", "dialogue", "distractors", "eval_answer", "eval_judge", "paraphrase",
                     "rationale", "verify_item"]
    for n in names:
        p = load_prompt(n, root)
        assert p.messages(context="c", question="q", options=["a", "b"], answer="a", n=2, distractors=["b"],
                          facts={}, presentation="p", caption="c", diagnosis="d", reference="r", response="x")
        if n != "eval_answer":
            assert p.response_schema and p.response_schema["type"] == "object"
